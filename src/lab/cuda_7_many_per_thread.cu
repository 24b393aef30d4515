// Origin: CUDA tutorial progression, step 7 ("multiple elements per thread"), after step 6.
// Change: a fixed grid (a few blocks per SM) and a grid-stride loop: each thread adds many
//   element pairs in registers before the unrolled tree, so a block's fixed costs (launch,
//   barriers, its tree) are paid once per many elements. A second launch of one block
//   reduces the grid's partials.
// Flaw: scalar loads (4 or 8 bytes per request, not 16) and two launches per reduction.
// Enforced: block one of 64..1024 in powers of two (compiled per size); grid <= 2048 so one block
//   can finish the partials; n < 2^32.
#include "lab/common.cuh"

namespace tally::lab {
namespace {

template <unsigned BLOCK, class T>
__device__ void warp_tail7(volatile T* partial, std::uint32_t tx) {
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
__global__ void __launch_bounds__(BLOCK) reduction7(const T* x, std::uint32_t n, T* y) {
  __shared__ T partial[BLOCK];
  const std::uint32_t tx = threadIdx.x;
  const std::uint32_t step = BLOCK * 2 * gridDim.x;
  T v = T(0);
  // Each thread adds pairs (i, i + BLOCK), then jumps a whole grid's worth of pairs
  // (n < 2^31 and step <= 2^22, so i never wraps).
  for (std::uint32_t i = blockIdx.x * (BLOCK * 2) + tx; i < n; i += step) {
    v += x[i];
    if (i + BLOCK < n) v += x[i + BLOCK];
  }
  partial[tx] = v;
  __syncthreads();
  if (BLOCK >= 1024) { if (tx < 512) partial[tx] += partial[tx + 512]; __syncthreads(); }
  if (BLOCK >= 512) { if (tx < 256) partial[tx] += partial[tx + 256]; __syncthreads(); }
  if (BLOCK >= 256) { if (tx < 128) partial[tx] += partial[tx + 128]; __syncthreads(); }
  if (BLOCK >= 128) { if (tx < 64) partial[tx] += partial[tx + 64]; __syncthreads(); }
  if (tx < 32) warp_tail7<BLOCK>(partial, tx);
  if (tx == 0) y[blockIdx.x] = partial[0];
}

template <unsigned BLOCK, class T>
void launch7(unsigned grid, cudaStream_t s, const T* in, std::uint32_t n, T* out) {
  reduction7<BLOCK><<<grid, BLOCK, 0, s>>>(in, n, out);
}

template <class T>
void launch_any(unsigned block, unsigned grid, cudaStream_t s, const T* in, std::uint32_t n, T* out) {
  switch (block) {
    case 64: launch7<64>(grid, s, in, n, out); break;
    case 128: launch7<128>(grid, s, in, n, out); break;
    case 256: launch7<256>(grid, s, in, n, out); break;
    case 512: launch7<512>(grid, s, in, n, out); break;
    default: launch7<1024>(grid, s, in, n, out); break;
  }
  check_launch("reduction7");
}

template <class T>
class cuda7 : public variant {
 public:
  void prepare(const run_args& a) override {
    const int b = p(a, "block");
    if (b != 64 && b != 128 && b != 256 && b != 512 && b != 1024)
      throw config_error("--block " + std::to_string(b) + " is not one of 64, 128, 256, 512, 1024: one kernel is compiled per block size");
    require_range(a, "grid", 0, 2048, "0 picks 4 blocks per SM; one block must finish the partials");
    if (a.n >= (std::uint64_t(1) << 31)) throw config_error("n must be below 2^31: the original indexes with 32-bit integers");
  }
  unsigned grid_of(const run_args& a) const {
    const int g = p(a, "grid");
    const unsigned want = g > 0 ? unsigned(g) : unsigned(4 * a.sm_count);
    const unsigned block = static_cast<unsigned>(p(a, "block"));
    return std::max(1u, std::min(want, blocks_for(a.n, 2 * std::uint64_t(block))));
  }
  void launch(const run_args& a) override {
    const unsigned block = static_cast<unsigned>(p(a, "block"));
    const unsigned grid = grid_of(a);
    T* partials = parts_.as<T>(grid);
    result_ = res_.as<T>(1);
    launch_any<T>(block, grid, a.stream, static_cast<const T*>(a.d_x), static_cast<std::uint32_t>(a.n), partials);
    launch_any<T>(block, 1, a.stream, partials, grid, result_);
  }
  lab_value fetch(const run_args& a) override { return fetch_device(result_, a.stream); }
  std::uint64_t error_height(const run_args& a) const override {
    const std::uint64_t threads = std::uint64_t(grid_of(a)) * p(a, "block");
    return a.n / threads + 2 + variant::error_height(a);
  }

 private:
  scratch parts_, res_;
  T* result_ = nullptr;
};

variant_meta meta() {
  variant_meta m;
  m.id = "cuda-7";
  m.group = "cuda";
  m.order = 7;
  m.title = "many elements per thread (grid-stride)";
  m.origin = "CUDA tutorial progression, step 7 (after step 6)";
  m.change = "a fixed grid and a grid-stride loop: each thread adds many pairs before the tree";
  m.flaw = "scalar loads and a second launch for the partials";
  m.requirements = "block one of 64..1024 in powers of two (enforced); grid <= 2048; n < 2^31";
  m.params = {{"block", 256, "threads per block: 64, 128, 256, 512 or 1024"},
              {"grid", 0, "blocks; 0 = 4 per SM"}};
  return m;
}
TALLY_LAB_REGISTER(cuda7, meta);

}  // namespace
}  // namespace tally::lab
