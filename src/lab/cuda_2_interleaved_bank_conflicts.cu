// Origin: CUDA tutorial, reduction 2.
// Change: the active threads are now consecutive: thread tx works on index 2*stride*tx, so
//   whole warps retire early instead of every warp idling on `%`.
// Flaw: index 2*stride*tx makes the threads of a warp hit the same shared-memory banks
//   (a 2-, 4-, 8-...-way bank conflict that grows with the stride).
// Generalised: any n < 2^32 (the original's 32-bit index); block size must be a power of two
//   (enforced: the tree halves it).
#include "lab/common.cuh"

namespace tally::lab {
namespace {

template <class T>
__global__ void reduction2(const T* x, std::uint32_t n, T* y) {
  extern __shared__ unsigned char smem[];
  T* partial = reinterpret_cast<T*>(smem);
  const std::uint32_t tx = threadIdx.x;
  const std::uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  partial[tx] = i < n ? x[i] : T(0);
  __syncthreads();
  for (std::uint32_t stride = 1; stride < blockDim.x; stride <<= 1) {
    const std::uint32_t index = 2 * stride * tx;
    if (index < blockDim.x) partial[index] += partial[index + stride];
    __syncthreads();
  }
  if (tx == 0) y[blockIdx.x] = partial[0];
}

template <class T>
using cuda2 = tree_passes_variant<T, reduction2<T>, 1, 32>;

variant_meta meta() {
  variant_meta m;
  m.id = "cuda-2";
  m.group = "cuda";
  m.order = 2;
  m.title = "interleaved addressing, bank conflicts";
  m.origin = "CUDA tutorial, reduction 2";
  m.change = "consecutive threads do the work: thread tx adds at index 2*stride*tx (no divergence)";
  m.flaw = "strided shared-memory indices cause bank conflicts that grow with the stride";
  m.requirements = "block a power of two, 32..1024 (enforced); n < 2^32";
  m.params = {{"block", 256, "threads per block (power of two)"}};
  return m;
}
TALLY_LAB_REGISTER(cuda2, meta);

}  // namespace
}  // namespace tally::lab
