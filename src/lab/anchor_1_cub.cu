// Origin: anchor: CUB DeviceReduce::Sum, the vendor library tally measures itself against.
// Change: the library call (a tuned single-tile kernel for small n; two kernels for larger n).
// Flaw: none in the result; two launches and a temporary-storage query per size.
#include <cub/device/device_reduce.cuh>

#include "lab/common.cuh"

namespace tally::lab {
namespace {

template <class T>
class anchor_cub : public variant {
 public:
  void prepare(const run_args& a) override {
    bytes_ = 0;
    check(cub::DeviceReduce::Sum(nullptr, bytes_, static_cast<const T*>(a.d_x), out_.as<T>(1),
                                 static_cast<long long>(a.n), a.stream),
          "cub::DeviceReduce::Sum (temporary size)");
    temp_.get(bytes_ + 16);
  }
  void launch(const run_args& a) override {
    std::size_t bytes = bytes_;
    check(cub::DeviceReduce::Sum(temp_.get(bytes_ + 16), bytes, static_cast<const T*>(a.d_x), out_.as<T>(1),
                                 static_cast<long long>(a.n), a.stream),
          "cub::DeviceReduce::Sum");
  }
  lab_value fetch(const run_args& a) override { return fetch_device(out_.as<T>(1), a.stream); }

 private:
  scratch temp_, out_;
  std::size_t bytes_ = 0;
};

variant_meta meta() {
  variant_meta m;
  m.id = "anchor-cub";
  m.group = "anchor";
  m.order = 1;
  m.title = "CUB DeviceReduce::Sum";
  m.origin = "anchor: the vendor library (CCCL)";
  m.change = "the library call";
  m.flaw = "none in the result; two launches for all but the smallest inputs";
  m.requirements = "none";
  return m;
}
TALLY_LAB_REGISTER(anchor_cub, meta);

}  // namespace
}  // namespace tally::lab
