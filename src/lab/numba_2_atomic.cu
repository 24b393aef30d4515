// Origin: Numba chapter on reductions, the atomic dot product (tpb = 32).
// Change: the plain `accum += w` becomes one atomicAdd per element, so no update is lost.
// Flaw: every element is an atomic on the same address: they are serialised, so the parallel
//   machine does one addition at a time; the float order (and rounding) varies from run to run.
// Enforced: tpb 1..1024 (a CUDA block). Generalised: 64-bit element index.
#include "lab/common.cuh"

namespace tally::lab {
namespace {

template <class T>
__global__ void dot_atomic(T* accum, const T* u, const T* v, std::uint64_t n) {
  const std::uint64_t i = static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const T w = u[i] * v[i];
  atomicAdd(accum, w);  // one indivisible read-add-write per element
}

template <class T>
class numba2 : public variant {
 public:
  void prepare(const run_args& a) override {
    require_range(a, "tpb", 1, 1024, "a CUDA block holds 1 to 1024 threads");
    if (a.d_y == nullptr) throw config_error("numba-2 is a dot product: it needs a second vector y");
    if (blocks_for(a.n, static_cast<std::uint64_t>(p(a, "tpb"))) > 0x7fffffffu)
      throw config_error("n too large: one element per thread needs more than 2^31 - 1 blocks");
    result_ = s_.as<T>(1);
  }
  void launch(const run_args& a) override {
    const unsigned tpb = static_cast<unsigned>(p(a, "tpb"));
    check(cudaMemsetAsync(result_, 0, sizeof(T), a.stream), "cudaMemsetAsync(accum)");
    const unsigned grid = blocks_for(a.n, tpb);
    if (grid == 0) return;  // n == 0: the zeroed accumulator is the result
    dot_atomic<T><<<grid, tpb, 0, a.stream>>>(result_, static_cast<const T*>(a.d_x), static_cast<const T*>(a.d_y), a.n);
    check_launch("dot_atomic");
  }
  lab_value fetch(const run_args& a) override { return fetch_device(result_, a.stream); }
  // Every product joins one chain of atomics: up to n roundings, the product's included.
  std::uint64_t error_height(const run_args& a) const override { return a.n; }

 private:
  scratch s_;
  T* result_ = nullptr;
};

variant_meta meta() {
  variant_meta m;
  m.id = "numba-2";
  m.group = "numba";
  m.order = 2;
  m.title = "one atomicAdd per element";
  m.origin = "Numba chapter, atomic dot product (Listing 7.3)";
  m.change = "the plain accum += w becomes atomicAdd: no update is lost";
  m.flaw = "n atomics on one address are serialised; float order varies run to run";
  m.racy = true;
  m.dot = true;
  m.requirements = "tpb 1..1024 (enforced); 64-bit index";
  m.params = {{"tpb", 32, "threads per block (the chapter's 32)"}};
  return m;
}
TALLY_LAB_REGISTER(numba2, meta);

}  // namespace
}  // namespace tally::lab
