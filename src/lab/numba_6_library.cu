// Origin: Numba chapter on reductions, the built-in reduction (Listing 7.6, @cuda.reduce).
// Change: the library does the work: thrust::inner_product over the device pointers on a.stream
//   (the CUDA C++ counterpart of Numba's built-in reduce; it fuses the map into the reduction).
// Flaw: none in the result; it returns the value to the host, so every call ends with a copy back
//   and a synchronisation, and its temporary storage is allocated per call.
// Choice: called in launch() (its kernels run on a.stream and are timed there); it blocks until the
//   value is on the host, which is kept in a member for fetch().
#include <thrust/execution_policy.h>
#include <thrust/inner_product.h>

#include <algorithm>

#include "lab/common.cuh"

namespace tally::lab {
namespace {

template <class T>
class numba6 : public variant {
 public:
  void prepare(const run_args& a) override {
    if (a.d_y == nullptr) throw config_error("numba-6 is a dot product: it needs a second vector y");
  }
  void launch(const run_args& a) override {
    const T* x = static_cast<const T*>(a.d_x);
    const T* y = static_cast<const T*>(a.d_y);
    // Returns to the host: synchronises a.stream internally; accumulates in T from T(0).
    result_ = thrust::inner_product(thrust::cuda::par.on(a.stream), x, x + a.n, y, T(0));
  }
  lab_value fetch(const run_args& /*a*/) override { return to_value(result_); }
  // CUB's reduce: each thread walks about n / (grid * 256) items with grid >= sm_count blocks of 256,
  // then short trees and a second pass; the default's margin covers those.
  std::uint64_t error_height(const run_args& a) const override {
    const std::uint64_t threads = static_cast<std::uint64_t>(std::max(a.sm_count, 1)) * 256;
    return blocks_for(a.n, threads) + variant::error_height(a);
  }

 private:
  T result_ = T(0);
};

variant_meta meta() {
  variant_meta m;
  m.id = "numba-6";
  m.group = "numba";
  m.order = 6;
  m.title = "library reduce";
  m.origin = "Numba chapter, built-in reduction (Listing 7.6)";
  m.change = "the library call: thrust::inner_product on the stream, map and reduction fused";
  m.flaw = "returns to the host: a copy back and a synchronisation per call, temporary storage per call";
  m.dot = true;
  m.requirements = "none (any n the library takes)";
  m.params = {};
  return m;
}
TALLY_LAB_REGISTER(numba6, meta);

}  // namespace
}  // namespace tally::lab
