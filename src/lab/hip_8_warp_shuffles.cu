// Origin: HIP training examples, reduction_shfl ("reduction with warp shuffles").
// Change: the shared-memory tree becomes shuffles: each thread keeps its grid-strided sum in a
//   register, each warp folds its lanes with __shfl_down_sync, lane 0 of every warp stores one
//   value in shared memory, and the first warp folds those into the block's partial; the same
//   kernel, launched again as one block of grid threads, folds the partials into the result.
// Flaw: still two launches, the second a single block; the grid is capped at 1024 threads.
// Enforced: block and grid powers of two in 32..1024 (as the original checks; full warps for the
//   full-mask shuffles, and the second launch is one block of grid threads). Generalised: 64-bit
//   indices, any n (the stride loop covers it); the result goes to its own buffer.
#include "lab/common.cuh"

namespace tally::lab {
namespace {

constexpr unsigned warp = 32;

template <class T>
__global__ void reduction_to_array(const T* __restrict__ input, T* __restrict__ output, std::uint64_t size) {
  __shared__ T warp_sums[1024 / warp];  // one value per warp of the largest block
  const std::uint64_t idx = std::uint64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::uint64_t grid_size = std::uint64_t(blockDim.x) * gridDim.x;
  const unsigned lane = threadIdx.x % warp;
  const unsigned warp_id = threadIdx.x / warp;

  T thread_sum = T(0);
  for (std::uint64_t i = idx; i < size; i += grid_size) thread_sum += input[i];
  for (unsigned offset = warp / 2; offset > 0; offset /= 2)
    thread_sum += __shfl_down_sync(0xffffffffu, thread_sum, offset);
  if (lane == 0) warp_sums[warp_id] = thread_sum;
  __syncthreads();  // every warp's sum is stored before warp 0 reads them

  if (warp_id == 0) {  // whole warp 0 takes this branch, so the full-mask shuffles are safe
    T block_sum = lane < blockDim.x / warp ? warp_sums[lane] : T(0);
    for (unsigned offset = warp / 2; offset > 0; offset /= 2)
      block_sum += __shfl_down_sync(0xffffffffu, block_sum, offset);
    if (lane == 0) output[blockIdx.x] = block_sum;
  }
}

unsigned log2_ceil(std::uint64_t v) {
  unsigned h = 0;
  while ((std::uint64_t(1) << h) < v) ++h;
  return h;
}

template <class T>
class hip8 : public variant {
 public:
  void prepare(const run_args& a) override {
    require_pow2(a, "block", "the original requires it (and full warps for the shuffles)");
    require_range(a, "block", 32, 1024, "a block of whole warps holds 32 to 1024 threads");
    require_pow2(a, "grid", "the original requires it (and full warps in the second launch)");
    require_range(a, "grid", 32, 1024, "the second launch is one block of grid threads, whole warps");
    partials_.as<T>(static_cast<std::uint64_t>(p(a, "grid")));
    result_.as<T>(1);
  }
  void launch(const run_args& a) override {
    const unsigned block = static_cast<unsigned>(p(a, "block"));
    const unsigned grid = static_cast<unsigned>(p(a, "grid"));
    T* partials = partials_.as<T>(grid);
    T* out = result_.as<T>(1);
    reduction_to_array<T><<<grid, block, 0, a.stream>>>(static_cast<const T*>(a.d_x), partials, a.n);
    check_launch("reduction_to_array (grid partials)");
    reduction_to_array<T><<<1, grid, 0, a.stream>>>(partials, out, grid);
    check_launch("reduction_to_array (one block)");
  }
  lab_value fetch(const run_args& a) override { return fetch_device(result_.as<T>(1), a.stream); }
  // Stride loop, warp + first-warp shuffles (log2 block), then the same over the grid partials.
  std::uint64_t error_height(const run_args& a) const override {
    const std::uint64_t block = static_cast<std::uint64_t>(p(a, "block"));
    const std::uint64_t grid = static_cast<std::uint64_t>(p(a, "grid"));
    return (a.n + grid * block - 1) / (grid * block) + log2_ceil(block) + 1 + log2_ceil(grid);
  }

 private:
  scratch partials_, result_;
};

variant_meta meta() {
  variant_meta m;
  m.id = "hip-8";
  m.group = "hip";
  m.order = 8;
  m.title = "warp shuffles";
  m.origin = "HIP training examples, reduction_shfl";
  m.change = "register accumulation and __shfl_down_sync warp folds replace the shared-memory tree";
  m.flaw = "still a second launch of a single block; grid capped at 1024";
  m.requirements = "block and grid powers of two in 32..1024 (enforced)";
  m.params = {{"block", 256, "threads per block (power of two)"},
              {"grid", 1024, "blocks in the first launch = threads in the second (power of two, 32..1024)"}};
  return m;
}
TALLY_LAB_REGISTER(hip8, meta);

}  // namespace
}  // namespace tally::lab
