// Origin: Numba chapter on reductions, the simple shared-memory dot product as printed
//   (Listing 7.4, tpb = 512).
// Change: each thread stores its product in a shared array of tpb entries; after a barrier thread 0
//   adds the block's entries and makes one atomicAdd per block instead of one per element.
// Flaw: reproduced as printed: the loop adds sh_w[tIdx] (thread 0's own entry) blockDim times
//   instead of sh_w[j], so each block contributes tpb times its first product (deliberately wrong;
//   with the chapter's all-ones input and n a multiple of tpb it looks right). Besides, thread 0
//   loops alone over the block while the others wait, and the atomics' float order varies.
// Enforced: tpb 1..1024 (a CUDA block). Generalised: 64-bit element index.
#include "lab/common.cuh"

namespace tally::lab {
namespace {

template <class T>
__global__ void dot_shared_printed(T* accum, const T* u, const T* v, std::uint64_t n) {
  extern __shared__ __align__(16) unsigned char smem[];
  T* sh_w = reinterpret_cast<T*>(smem);  // tpb entries
  const std::uint64_t i = static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const unsigned tIdx = threadIdx.x;
  sh_w[tIdx] = T(0);
  if (i < n) sh_w[tIdx] = u[i] * v[i];
  __syncthreads();  // every product stored before thread 0 reads them
  if (tIdx == 0) {
    T block_sum = T(0);
    for (unsigned j = 0; j < blockDim.x; ++j) block_sum += sh_w[tIdx];  // the printed bug: tIdx, not j
    atomicAdd(accum, block_sum);
  }
}

template <class T>
class numba3 : public variant {
 public:
  void prepare(const run_args& a) override {
    require_range(a, "tpb", 1, 1024, "a CUDA block holds 1 to 1024 threads");
    if (a.d_y == nullptr) throw config_error("numba-3 is a dot product: it needs a second vector y");
    if (blocks_for(a.n, static_cast<std::uint64_t>(p(a, "tpb"))) > 0x7fffffffu)
      throw config_error("n too large: one element per thread needs more than 2^31 - 1 blocks");
    result_ = s_.as<T>(1);
  }
  void launch(const run_args& a) override {
    const unsigned tpb = static_cast<unsigned>(p(a, "tpb"));
    check(cudaMemsetAsync(result_, 0, sizeof(T), a.stream), "cudaMemsetAsync(accum)");
    const unsigned grid = blocks_for(a.n, tpb);
    if (grid == 0) return;  // n == 0: the zeroed accumulator is the result
    dot_shared_printed<T><<<grid, tpb, tpb * sizeof(T), a.stream>>>(result_, static_cast<const T*>(a.d_x),
                                                                    static_cast<const T*>(a.d_y), a.n);
    check_launch("dot_shared_printed");
  }
  lab_value fetch(const run_args& a) override { return fetch_device(result_, a.stream); }
  // error_height keeps the default: the printed bug is no rounding error, and the loose bound of the
  // fixed loop (tpb + blocks) could hide it in f32.

 private:
  scratch s_;
  T* result_ = nullptr;
};

variant_meta meta() {
  variant_meta m;
  m.id = "numba-3";
  m.group = "numba";
  m.order = 3;
  m.title = "shared array, thread 0 sums the block (as printed: adds its own entry)";
  m.origin = "Numba chapter, simple shared-memory dot product (Listing 7.4, as printed)";
  m.change = "products in shared memory; thread 0 sums the block and makes one atomicAdd per block";
  m.flaw = "printed bug: thread 0 adds sh_w[tIdx] blockDim times, not sh_w[j] (result = tpb * each block's first product)";
  m.expected_correct = false;
  m.racy = true;
  m.dot = true;
  m.requirements = "tpb 1..1024 (enforced); 64-bit index";
  m.params = {{"tpb", 512, "threads per block (the chapter's 512)"}};
  return m;
}
TALLY_LAB_REGISTER(numba3, meta);

}  // namespace
}  // namespace tally::lab
