// Origin: CUDA tutorial, reduction 4.
// Change: each thread loads two elements a block apart and adds them before the tree, so a
//   block covers 2*blockDim elements and half as many blocks are launched.
// Flaw: the last steps of the tree (stride <= 32) still pay a full __syncthreads each while
//   only one warp works.
// Generalised: any n < 2^32 (the original's 32-bit index); block size must be a power of two
//   (enforced: the tree halves it).
#include "lab/common.cuh"

namespace tally::lab {
namespace {

template <class T>
__global__ void reduction4(const T* x, std::uint32_t n, T* y) {
  extern __shared__ unsigned char smem[];
  T* partial = reinterpret_cast<T*>(smem);
  const std::uint32_t tx = threadIdx.x;
  const std::uint32_t i = blockIdx.x * (blockDim.x * 2) + threadIdx.x;
  T v = i < n ? x[i] : T(0);
  if (i + blockDim.x < n) v += x[i + blockDim.x];
  partial[tx] = v;
  __syncthreads();
  for (std::uint32_t stride = blockDim.x / 2; stride > 0; stride >>= 1) {
    if (tx < stride) partial[tx] += partial[tx + stride];
    __syncthreads();
  }
  if (tx == 0) y[blockIdx.x] = partial[0];
}

template <class T>
using cuda4 = tree_passes_variant<T, reduction4<T>, 2, 32>;

variant_meta meta() {
  variant_meta m;
  m.id = "cuda-4";
  m.group = "cuda";
  m.order = 4;
  m.title = "first add during load";
  m.origin = "CUDA tutorial, reduction 4";
  m.change = "each thread adds two elements (a block apart) while loading: half the blocks";
  m.flaw = "the last six tree steps run in one warp but still pay a block-wide barrier each";
  m.requirements = "block a power of two, 32..1024 (enforced); n < 2^32";
  m.params = {{"block", 256, "threads per block (power of two)"}};
  return m;
}
TALLY_LAB_REGISTER(cuda4, meta);

}  // namespace
}  // namespace tally::lab
