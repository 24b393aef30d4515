// Origin: anchor: tally's own core (src/core), through the public API.
// Change: one launch at every size; 16-byte loads, several accumulators per thread, a grid sized
//   from n and the SM count, last-block combine in block order, programmatic dependent launch.
// Flaw: none known; see docs/tuning.md for the measurements behind its constants.
#include "lab/common.cuh"

namespace tally::lab {
namespace {

template <class T>
class anchor_tally : public variant {
 public:
  static constexpr dtype kType = std::is_same_v<T, float> ? dtype::f32 : std::is_same_v<T, double> ? dtype::f64 : dtype::i32;
  // An i32 sum returns int64 in tally; the lab compares in the tutorials' 32-bit arithmetic.
  using Out = std::conditional_t<std::is_integral_v<T>, std::int64_t, T>;
  void prepare(const run_args&) override {}
  void launch(const run_args& a) override {
    tally::reduce(a.d_x, a.n, kType, op::sum, out_.as<Out>(1), reinterpret_cast<stream_t>(a.stream));
  }
  lab_value fetch(const run_args& a) override {
    lab_value v = fetch_device(out_.as<Out>(1), a.stream);
    if (v.is_int) v.i = static_cast<std::int32_t>(static_cast<std::uint32_t>(v.i));  // modulo 2^32
    return v;
  }

 private:
  scratch out_;
};

variant_meta meta() {
  variant_meta m;
  m.id = "anchor-tally";
  m.group = "anchor";
  m.order = 3;
  m.title = "tally core";
  m.origin = "anchor: tally::reduce (src/core)";
  m.change = "one tuned launch: 16-byte loads, several accumulators, last-block combine, PDL";
  m.flaw = "none known";
  m.requirements = "none";
  return m;
}
TALLY_LAB_REGISTER(anchor_tally, meta);

}  // namespace
}  // namespace tally::lab
