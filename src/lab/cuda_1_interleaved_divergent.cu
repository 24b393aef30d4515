// Origin: CUDA tutorial, reduction 1 ("interleaved addressing, divergent warps").
// Change: the baseline. Each thread loads one element into shared memory; at step s the threads
//   whose index is a multiple of 2s add the element s to their right, until thread 0 holds the
//   block's sum; the block partials are reduced by relaunching the kernel until one value is left.
// Flaw: `tx % (2 * stride) == 0` keeps only every 2s-th thread busy, so every warp stays active
//   (divergent) while doing 1/2, 1/4, ... of the work, and `%` is a slow integer operation.
// Generalised: any n < 2^32 (the original's 32-bit index); block size must be a power of two
//   (enforced: the tree halves it).
#include "lab/common.cuh"

namespace tally::lab {
namespace {

template <class T>
__global__ void reduction1(const T* x, std::uint32_t n, T* y) {
  extern __shared__ unsigned char smem[];
  T* partial = reinterpret_cast<T*>(smem);
  const std::uint32_t tx = threadIdx.x;
  const std::uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  partial[tx] = i < n ? x[i] : T(0);
  __syncthreads();
  for (std::uint32_t stride = 1; stride < blockDim.x; stride <<= 1) {
    if (tx % (2 * stride) == 0) partial[tx] += partial[tx + stride];
    __syncthreads();
  }
  if (tx == 0) y[blockIdx.x] = partial[0];
}

template <class T>
using cuda1 = tree_passes_variant<T, reduction1<T>, 1, 32>;

variant_meta meta() {
  variant_meta m;
  m.id = "cuda-1";
  m.group = "cuda";
  m.order = 1;
  m.title = "interleaved addressing, divergent warps";
  m.origin = "CUDA tutorial, reduction 1";
  m.change = "baseline: one element per thread, shared-memory tree with stride 1, 2, 4, ...";
  m.flaw = "tx % (2*stride) leaves every warp active but mostly idle (divergence), and % is slow";
  m.requirements = "block a power of two, 32..1024 (enforced); n < 2^32";
  m.params = {{"block", 256, "threads per block (power of two)"}};
  return m;
}
TALLY_LAB_REGISTER(cuda1, meta);

}  // namespace
}  // namespace tally::lab
