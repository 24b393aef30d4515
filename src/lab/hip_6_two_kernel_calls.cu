// Origin: HIP training examples, reduction_two_kernel_calls ("reduction with two kernel calls").
// Change: the host step moves to the GPU: the same kernel (dynamic shared memory, tree over
//   blockDim.x) is launched twice, first as grid x block writing grid partials, then as one block
//   of grid threads folding those partials into the result.
// Flaw: the second launch is a single block that does almost no work yet costs a launch, and the
//   grid is capped at 1024 because it becomes the second launch's block.
// Enforced: block and grid powers of two (both launches run the halving tree), block in 32..1024,
//   grid in 1..1024 (one block of grid threads). Generalised: 64-bit indices, any n (the stride
//   loop covers it); the result goes to its own buffer, not over the input.
#include "lab/common.cuh"

namespace tally::lab {
namespace {

template <class T>
__global__ void reduction_to_array(const T* input, T* output, std::uint64_t size) {
  extern __shared__ unsigned char smem[];
  T* local_sum = reinterpret_cast<T*>(smem);
  const std::uint64_t idx = std::uint64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::uint64_t grid_size = std::uint64_t(blockDim.x) * gridDim.x;
  local_sum[threadIdx.x] = T(0);
  for (std::uint64_t i = idx; i < size; i += grid_size) local_sum[threadIdx.x] += input[i];
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s /= 2) {  // blockDim, not a constant: two launch shapes
    if (threadIdx.x < s) local_sum[threadIdx.x] += local_sum[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) output[blockIdx.x] = local_sum[0];
}

unsigned log2_ceil(std::uint64_t v) {
  unsigned h = 0;
  while ((std::uint64_t(1) << h) < v) ++h;
  return h;
}

template <class T>
class hip6 : public variant {
 public:
  void prepare(const run_args& a) override {
    require_pow2(a, "block", "the tree halves the block at every step");
    require_range(a, "block", 32, 1024, "a CUDA block holds 32 to 1024 threads");
    require_pow2(a, "grid", "the second launch runs the halving tree over grid threads");
    require_range(a, "grid", 1, 1024, "the second launch is one block of grid threads");
    partials_.as<T>(static_cast<std::uint64_t>(p(a, "grid")));
    result_.as<T>(1);
  }
  void launch(const run_args& a) override {
    const unsigned block = static_cast<unsigned>(p(a, "block"));
    const unsigned grid = static_cast<unsigned>(p(a, "grid"));
    T* partials = partials_.as<T>(grid);
    T* out = result_.as<T>(1);
    reduction_to_array<T><<<grid, block, block * sizeof(T), a.stream>>>(static_cast<const T*>(a.d_x), partials, a.n);
    check_launch("reduction_to_array (grid partials)");
    reduction_to_array<T><<<1, grid, grid * sizeof(T), a.stream>>>(partials, out, grid);
    check_launch("reduction_to_array (one block)");
  }
  lab_value fetch(const run_args& a) override { return fetch_device(result_.as<T>(1), a.stream); }
  // Per-thread stride loop, the block tree, then the one-block tree over the grid partials.
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
  m.id = "hip-6";
  m.group = "hip";
  m.order = 6;
  m.title = "two kernel calls";
  m.origin = "HIP training examples, reduction_two_kernel_calls";
  m.change = "the host loop is replaced by a second launch of the same kernel: one block of grid threads";
  m.flaw = "an extra launch for a single mostly idle block; grid is capped at 1024 and the per-thread "
           "loop still accumulates in shared memory";
  m.requirements = "block a power of two, 32..1024; grid a power of two, 1..1024 (enforced)";
  m.params = {{"block", 256, "threads per block (power of two)"},
              {"grid", 256, "blocks in the first launch = threads in the second (power of two, <= 1024)"}};
  return m;
}
TALLY_LAB_REGISTER(hip6, meta);

}  // namespace
}  // namespace tally::lab
