// Origin: CUDA tutorial, reduction 5.
// Change: once 32 threads remain, the last six steps run without __syncthreads, unrolled.
//   The tutorial relies on `volatile` and the warp executing in lockstep; since Volta,
//   independent thread scheduling makes that a race (a lane may read a neighbour's slot
//   before it is written). This version keeps `volatile` and adds __syncwarp() between the
//   steps, the correct form: it orders the shared-memory accesses of the warp.
// Flaw: still one element pair per thread and one block per 2*blockDim elements: many
//   blocks, each with a short life; and each warp step still round-trips shared memory.
// Generalised: any n < 2^32 (the original's 32-bit index); block size must be a power of two
//   (enforced: the tree halves it).
#include "lab/common.cuh"

namespace tally::lab {
namespace {

// The last warp: each step reads a neighbour's slot, then all lanes write, with __syncwarp()
// between the read and the write so no lane reads a slot another lane already overwrote.
template <class T>
__device__ void warp_reduce_volatile(volatile T* partial, std::uint32_t tx) {
  T v = partial[tx];
#pragma unroll
  for (int offset = 32; offset > 0; offset >>= 1) {
    v += partial[tx + offset];
    __syncwarp();
    partial[tx] = v;
    __syncwarp();
  }
}

template <class T>
__global__ void reduction5(const T* x, std::uint32_t n, T* y) {
  extern __shared__ unsigned char smem[];
  T* partial = reinterpret_cast<T*>(smem);
  const std::uint32_t tx = threadIdx.x;
  const std::uint32_t i = blockIdx.x * (blockDim.x * 2) + threadIdx.x;
  T v = i < n ? x[i] : T(0);
  if (i + blockDim.x < n) v += x[i + blockDim.x];
  partial[tx] = v;
  __syncthreads();
  for (std::uint32_t stride = blockDim.x / 2; stride > 32; stride >>= 1) {
    if (tx < stride) partial[tx] += partial[tx + stride];
    __syncthreads();
  }
  if (tx < 32) warp_reduce_volatile(partial, tx);
  if (tx == 0) y[blockIdx.x] = partial[0];
}

template <class T>
using cuda5 = tree_passes_variant<T, reduction5<T>, 2, 64>;

variant_meta meta() {
  variant_meta m;
  m.id = "cuda-5";
  m.group = "cuda";
  m.order = 5;
  m.title = "unroll the last warp";
  m.origin = "CUDA tutorial, reduction 5";
  m.change = "the last warp unrolled without block barriers (volatile + __syncwarp between steps)";
  m.flaw = "the volatile lockstep trick alone is a race since Volta; __syncwarp makes it correct; still many short-lived blocks";
  m.requirements = "block a power of two, 64..1024 (enforced); n < 2^32";
  m.params = {{"block", 256, "threads per block (power of two)"}};
  return m;
}
TALLY_LAB_REGISTER(cuda5, meta);

}  // namespace
}  // namespace tally::lab
