// Origin: CUDA tutorial, reduction 3.
// Change: the stride starts at half the block and halves: thread tx adds tx + stride, so a
//   warp reads 32 consecutive words (no bank conflicts).
// Flaw: half of the threads do nothing from the first step on: they only loaded one element.
// Generalised: any n < 2^32 (the original's 32-bit index); block size must be a power of two
//   (enforced: the tree halves it).
#include "lab/common.cuh"

namespace tally::lab {
namespace {

template <class T>
__global__ void reduction3(const T* x, std::uint32_t n, T* y) {
  extern __shared__ unsigned char smem[];
  T* partial = reinterpret_cast<T*>(smem);
  const std::uint32_t tx = threadIdx.x;
  const std::uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  partial[tx] = i < n ? x[i] : T(0);
  __syncthreads();
  for (std::uint32_t stride = blockDim.x / 2; stride > 0; stride >>= 1) {
    if (tx < stride) partial[tx] += partial[tx + stride];
    __syncthreads();
  }
  if (tx == 0) y[blockIdx.x] = partial[0];
}

template <class T>
using cuda3 = tree_passes_variant<T, reduction3<T>, 1, 32>;

variant_meta meta() {
  variant_meta m;
  m.id = "cuda-3";
  m.group = "cuda";
  m.order = 3;
  m.title = "sequential addressing";
  m.origin = "CUDA tutorial, reduction 3";
  m.change = "stride starts at blockDim/2 and halves; thread tx adds tx + stride (conflict-free)";
  m.flaw = "half the threads are idle from the first step: each thread loaded only one element";
  m.requirements = "block a power of two, 32..1024 (enforced); n < 2^32";
  m.params = {{"block", 256, "threads per block (power of two)"}};
  return m;
}
TALLY_LAB_REGISTER(cuda3, meta);

}  // namespace
}  // namespace tally::lab
