// Origin: Numba chapter on reductions, the naive dot product (tpb = 32).
// Change: the group's baseline. One thread per element computes x[i] * y[i] and adds it to a single
//   global accumulator with a plain (non-atomic) read, add and write.
// Flaw: a data race: threads read the accumulator at the same time and overwrite each other's
//   updates, so most products are lost and the result changes from run to run (deliberately wrong).
// Enforced: tpb 1..1024 (a CUDA block). Generalised: 64-bit element index.
#include "lab/common.cuh"

namespace tally::lab {
namespace {

template <class T>
__global__ void dot_naive(T* accum, const T* u, const T* v, std::uint64_t n) {
  const std::uint64_t i = static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const T w = u[i] * v[i];
  accum[0] += w;  // load, add, store: updates from other threads in between are overwritten
}

template <class T>
class numba1 : public variant {
 public:
  void prepare(const run_args& a) override {
    require_range(a, "tpb", 1, 1024, "a CUDA block holds 1 to 1024 threads");
    if (a.d_y == nullptr) throw config_error("numba-1 is a dot product: it needs a second vector y");
    if (blocks_for(a.n, static_cast<std::uint64_t>(p(a, "tpb"))) > 0x7fffffffu)
      throw config_error("n too large: one element per thread needs more than 2^31 - 1 blocks");
    result_ = s_.as<T>(1);
  }
  void launch(const run_args& a) override {
    const unsigned tpb = static_cast<unsigned>(p(a, "tpb"));
    check(cudaMemsetAsync(result_, 0, sizeof(T), a.stream), "cudaMemsetAsync(accum)");
    const unsigned grid = blocks_for(a.n, tpb);
    if (grid == 0) return;  // n == 0: the zeroed accumulator is the result
    dot_naive<T><<<grid, tpb, 0, a.stream>>>(result_, static_cast<const T*>(a.d_x), static_cast<const T*>(a.d_y), a.n);
    check_launch("dot_naive");
  }
  lab_value fetch(const run_args& a) override { return fetch_device(result_, a.stream); }
  // error_height keeps the default: lost updates are no rounding error, and a chain-of-n bound
  // (gamma_n) would be too loose in f32 for the check to see them.

 private:
  scratch s_;
  T* result_ = nullptr;
};

variant_meta meta() {
  variant_meta m;
  m.id = "numba-1";
  m.group = "numba";
  m.order = 1;
  m.title = "naive: every thread does accum += x[i]*y[i]";
  m.origin = "Numba chapter, naive dot product (Listing 7.2)";
  m.change = "baseline: one thread per element adds its product to one global value with a plain read-modify-write";
  m.flaw = "data race: concurrent read-modify-writes overwrite each other, products are lost (wrong, varies per run)";
  m.expected_correct = false;
  m.racy = true;
  m.dot = true;
  m.requirements = "tpb 1..1024 (enforced); 64-bit index";
  m.params = {{"tpb", 32, "threads per block (the chapter's 32)"}};
  return m;
}
TALLY_LAB_REGISTER(numba1, meta);

}  // namespace
}  // namespace tally::lab
