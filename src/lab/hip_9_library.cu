// Origin: HIP training examples, reduction_prim ("reduction using rocPRIM call").
// Change: no hand-written kernel: the vendor library's device-wide sum does the work. On CUDA the
//   counterpart of rocPRIM's reduce is CUB's cub::DeviceReduce::Sum (temporary-storage query,
//   then the call, result left in device memory).
// Flaw: none in speed (the library's tuned kernels are the bar the hand-written steps aim at); the
//   cost is a temporary buffer and no control over the order of the additions.
// Generalised: any n (64-bit item count); no block or grid parameters.
#include <cub/device/device_reduce.cuh>

#include "lab/common.cuh"

namespace tally::lab {
namespace {

template <class T>
class hip9 : public variant {
 public:
  void prepare(const run_args& a) override { query(a); }
  void launch(const run_args& a) override {
    if (a.n != queried_n_) query(a);  // temp size depends on n
    check(cub::DeviceReduce::Sum(temp_.get(temp_bytes_), temp_bytes_, static_cast<const T*>(a.d_x),
                                 result_.as<T>(1), a.n, a.stream),
          "cub::DeviceReduce::Sum");
    check_launch("cub::DeviceReduce::Sum");
  }
  lab_value fetch(const run_args& a) override { return fetch_device(result_.as<T>(1), a.stream); }
  // CUB's grid holds at least min(tiles, SM count) blocks and each thread keeps a running sum over
  // its block's tiles: bound that chain with one-element-per-thread tiles of 256 threads, plus the
  // items of a tile, the block reduction and the same again for the second pass.
  std::uint64_t error_height(const run_args& a) const override {
    const std::uint64_t sm = a.sm_count > 0 ? static_cast<std::uint64_t>(a.sm_count) : 1;
    const std::uint64_t tiles_per_block = (a.n + 256 * sm - 1) / (256 * sm);
    return tiles_per_block + 2 * (32 + 10) + 64;
  }

 private:
  void query(const run_args& a) {
    std::size_t bytes = 0;
    check(cub::DeviceReduce::Sum(nullptr, bytes, static_cast<const T*>(a.d_x), result_.as<T>(1), a.n, a.stream),
          "cub::DeviceReduce::Sum (temp size)");
    temp_bytes_ = bytes > 0 ? bytes : 1;  // a null temp pointer would mean "query" again
    temp_.get(temp_bytes_);
    queried_n_ = a.n;
  }

  scratch temp_, result_;
  std::size_t temp_bytes_ = 0;
  std::uint64_t queried_n_ = ~std::uint64_t(0);
};

variant_meta meta() {
  variant_meta m;
  m.id = "hip-9";
  m.group = "hip";
  m.order = 9;
  m.title = "vendor library call";
  m.origin = "HIP training examples, reduction_prim (rocPRIM); CUDA counterpart CUB";
  m.change = "the hand-written kernels are replaced by cub::DeviceReduce::Sum";
  m.flaw = "needs a temporary buffer; the order of the additions is the library's";
  m.requirements = "none: any n";
  return m;
}
TALLY_LAB_REGISTER(hip9, meta);

}  // namespace
}  // namespace tally::lab
