// Origin: CUDA tutorial progression, step 6 ("complete unrolling"), the step after reduction 5.
// Change: the block size becomes a template parameter, so every tree step's `if (BLOCK >= ...)`
//   is decided at compile time and the whole tree, not only the last warp, is unrolled.
// Flaw: still one pair of elements per thread: the grid has n / (2*block) short-lived blocks,
//   and the partials need further passes.
// Enforced: block is one of 64, 128, 256, 512, 1024 (one kernel is compiled for each); n < 2^32.
#include "lab/common.cuh"

namespace tally::lab {
namespace {

template <unsigned BLOCK, class T>
__device__ void warp_tail(volatile T* partial, std::uint32_t tx) {
  // Same correct form as reduction 5: __syncwarp() between each read and write.
  T v = partial[tx];
#pragma unroll
  for (unsigned offset = 32; offset > 0; offset >>= 1) {
    if (BLOCK >= 2 * offset) v += partial[tx + offset];
    __syncwarp();
    partial[tx] = v;
    __syncwarp();
  }
}

template <unsigned BLOCK, class T>
__global__ void __launch_bounds__(BLOCK) reduction6(const T* x, std::uint32_t n, T* y) {
  __shared__ T partial[BLOCK];
  const std::uint32_t tx = threadIdx.x;
  const std::uint32_t i = blockIdx.x * (BLOCK * 2) + threadIdx.x;
  T v = i < n ? x[i] : T(0);
  if (i + BLOCK < n) v += x[i + BLOCK];
  partial[tx] = v;
  __syncthreads();
  if (BLOCK >= 1024) { if (tx < 512) partial[tx] += partial[tx + 512]; __syncthreads(); }
  if (BLOCK >= 512) { if (tx < 256) partial[tx] += partial[tx + 256]; __syncthreads(); }
  if (BLOCK >= 256) { if (tx < 128) partial[tx] += partial[tx + 128]; __syncthreads(); }
  if (BLOCK >= 128) { if (tx < 64) partial[tx] += partial[tx + 64]; __syncthreads(); }
  if (tx < 32) warp_tail<BLOCK>(partial, tx);
  if (tx == 0) y[blockIdx.x] = partial[0];
}

template <class T>
class cuda6 : public variant {
 public:
  void prepare(const run_args& a) override {
    const int b = p(a, "block");
    if (b != 64 && b != 128 && b != 256 && b != 512 && b != 1024)
      throw config_error("--block " + std::to_string(b) + " is not one of 64, 128, 256, 512, 1024: one kernel is compiled per block size");
    if (a.n >= (std::uint64_t(1) << 32)) throw config_error("n must be below 2^32: the original indexes with 32-bit integers");
  }
  void launch(const run_args& a) override {
    const unsigned block = static_cast<unsigned>(p(a, "block"));
    result_ = reduce_passes<T>(a, s0_, s1_, 2 * std::uint64_t(block), [&](const T* in, std::uint64_t count, T* out, unsigned grid) {
      const auto n32 = static_cast<std::uint32_t>(count);
      switch (block) {
        case 64: reduction6<64><<<grid, 64, 0, a.stream>>>(in, n32, out); break;
        case 128: reduction6<128><<<grid, 128, 0, a.stream>>>(in, n32, out); break;
        case 256: reduction6<256><<<grid, 256, 0, a.stream>>>(in, n32, out); break;
        case 512: reduction6<512><<<grid, 512, 0, a.stream>>>(in, n32, out); break;
        default: reduction6<1024><<<grid, 1024, 0, a.stream>>>(in, n32, out); break;
      }
      check_launch("reduction6");
    });
  }
  lab_value fetch(const run_args& a) override { return fetch_device(result_, a.stream); }

 private:
  scratch s0_, s1_;
  T* result_ = nullptr;
};

variant_meta meta() {
  variant_meta m;
  m.id = "cuda-6";
  m.group = "cuda";
  m.order = 6;
  m.title = "complete unroll, compile-time block size";
  m.origin = "CUDA tutorial progression, step 6 (after reduction 5)";
  m.change = "block size as a template parameter: the whole tree unrolled, its branches decided at compile time";
  m.flaw = "still one element pair per thread: many short-lived blocks and several passes";
  m.requirements = "block one of 64, 128, 256, 512, 1024 (enforced); n < 2^32";
  m.params = {{"block", 256, "threads per block: 64, 128, 256, 512 or 1024"}};
  return m;
}
TALLY_LAB_REGISTER(cuda6, meta);

}  // namespace
}  // namespace tally::lab
