// Origin: Numba chapter on reductions, the simple shared-memory dot product (Listing 7.4) with its
//   loop index fixed (tpb = 512).
// Change: thread 0 adds sh_w[j] instead of sh_w[tIdx]: the block sum is now right, still one
//   atomicAdd per block.
// Flaw: thread 0 adds the whole block alone (tpb serial additions) while the other threads wait,
//   and the per-block atomics into one address serialise, with a float order that varies per run.
// Enforced: tpb 1..1024 (a CUDA block). Generalised: 64-bit element index.
#include "lab/common.cuh"

namespace tally::lab {
namespace {

template <class T>
__global__ void dot_shared_fixed(T* accum, const T* u, const T* v, std::uint64_t n) {
  extern __shared__ __align__(16) unsigned char smem[];
  T* sh_w = reinterpret_cast<T*>(smem);  // tpb entries
  const std::uint64_t i = static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const unsigned tIdx = threadIdx.x;
  sh_w[tIdx] = T(0);
  if (i < n) sh_w[tIdx] = u[i] * v[i];
  __syncthreads();  // every product stored before thread 0 reads them
  if (tIdx == 0) {
    T block_sum = T(0);
    for (unsigned j = 0; j < blockDim.x; ++j) block_sum += sh_w[j];
    atomicAdd(accum, block_sum);
  }
}

template <class T>
class numba4 : public variant {
 public:
  void prepare(const run_args& a) override {
    require_range(a, "tpb", 1, 1024, "a CUDA block holds 1 to 1024 threads");
    if (a.d_y == nullptr) throw config_error("numba-4 is a dot product: it needs a second vector y");
    if (blocks_for(a.n, static_cast<std::uint64_t>(p(a, "tpb"))) > 0x7fffffffu)
      throw config_error("n too large: one element per thread needs more than 2^31 - 1 blocks");
    result_ = s_.as<T>(1);
  }
  void launch(const run_args& a) override {
    const unsigned tpb = static_cast<unsigned>(p(a, "tpb"));
    check(cudaMemsetAsync(result_, 0, sizeof(T), a.stream), "cudaMemsetAsync(accum)");
    const unsigned grid = blocks_for(a.n, tpb);
    if (grid == 0) return;  // n == 0: the zeroed accumulator is the result
    dot_shared_fixed<T><<<grid, tpb, tpb * sizeof(T), a.stream>>>(result_, static_cast<const T*>(a.d_x),
                                                                  static_cast<const T*>(a.d_y), a.n);
    check_launch("dot_shared_fixed");
  }
  lab_value fetch(const run_args& a) override { return fetch_device(result_, a.stream); }
  // Thread 0's loop over the block (tpb roundings, the product's included), then one atomic per block.
  std::uint64_t error_height(const run_args& a) const override {
    const std::uint64_t tpb = static_cast<std::uint64_t>(p(a, "tpb"));
    return tpb + blocks_for(a.n, tpb);
  }

 private:
  scratch s_;
  T* result_ = nullptr;
};

variant_meta meta() {
  variant_meta m;
  m.id = "numba-4";
  m.group = "numba";
  m.order = 4;
  m.title = "shared array, thread 0 sums the block (loop fixed), atomicAdd per block";
  m.origin = "Numba chapter, simple shared-memory dot product (Listing 7.4, index fixed)";
  m.change = "the loop adds sh_w[j], not sh_w[tIdx]: the block sum is right";
  m.flaw = "thread 0 adds tpb values alone while the block waits; per-block atomics serialise, float order varies";
  m.racy = true;
  m.dot = true;
  m.requirements = "tpb 1..1024 (enforced); 64-bit index";
  m.params = {{"tpb", 512, "threads per block (the chapter's 512)"}};
  return m;
}
TALLY_LAB_REGISTER(numba4, meta);

}  // namespace
}  // namespace tally::lab
