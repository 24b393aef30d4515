// Origin: HIP training examples, reduction_striding ("reduction with striding").
// Change: a fixed grid instead of one thread per element: each thread walks the input with a
//   stride of the whole grid, adding into its own shared-memory slot, then the block tree and
//   the host finish as before.
// Flaw: each thread's slot is a sequential chain of n/(grid*block) additions kept in shared
//   memory, and the grid partials are still copied back and added on the host.
// Generalised: 64-bit indices, any n (the stride loop covers it). Enforced: block a power of
//   two in 32..1024 (the tree halves it; the shared array holds 1024 values at most).
#include "lab/common.cuh"

namespace tally::lab {
namespace {

constexpr unsigned max_block = 1024;

template <class T>
__global__ void get_partial_sums(const T* input, T* output, std::uint64_t size) {
  __shared__ T local_sum[max_block];
  const std::uint64_t idx = std::uint64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::uint64_t grid_size = std::uint64_t(blockDim.x) * gridDim.x;
  local_sum[threadIdx.x] = T(0);
  for (std::uint64_t i = idx; i < size; i += grid_size) local_sum[threadIdx.x] += input[i];
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s /= 2) {
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
class hip2 : public variant {
 public:
  void prepare(const run_args& a) override {
    require_pow2(a, "block", "the tree halves the block at every step");
    require_range(a, "block", 32, static_cast<int>(max_block), "the shared array holds 1024 values");
    require_range(a, "grid", 1, 0x7fffffff, "a CUDA grid holds 1 to 2^31-1 blocks");
    partials_.as<T>(static_cast<std::uint64_t>(p(a, "grid")));
  }
  void launch(const run_args& a) override {
    const unsigned block = static_cast<unsigned>(p(a, "block"));
    const unsigned grid = static_cast<unsigned>(p(a, "grid"));
    get_partial_sums<T><<<grid, block, 0, a.stream>>>(static_cast<const T*>(a.d_x), partials_.as<T>(grid), a.n);
    check_launch("get_partial_sums");
  }
  void finish(const run_args& a) override {
    const std::uint64_t grid = static_cast<std::uint64_t>(p(a, "grid"));
    sum_ = host_sum<T>(partials_.as<T>(grid), grid, a.stream);
  }
  lab_value fetch(const run_args& /*a*/) override { return to_value(sum_); }
  // Per-thread stride loop, the block tree, then the host loop over the grid partials.
  std::uint64_t error_height(const run_args& a) const override {
    const std::uint64_t block = static_cast<std::uint64_t>(p(a, "block"));
    const std::uint64_t grid = static_cast<std::uint64_t>(p(a, "grid"));
    return (a.n + grid * block - 1) / (grid * block) + log2_ceil(block) + grid;
  }

 private:
  scratch partials_;
  T sum_{};
};

variant_meta meta() {
  variant_meta m;
  m.id = "hip-2";
  m.group = "hip";
  m.order = 2;
  m.title = "striding (host finishes)";
  m.origin = "HIP training examples, reduction_striding";
  m.change = "fixed grid; each thread adds a grid-strided slice into its shared-memory slot before the tree";
  m.flaw = "long per-thread chains accumulated in shared memory; grid partials still added on the host";
  m.requirements = "block a power of two, 32..1024 (enforced); any n via the grid-stride loop";
  m.params = {{"block", 256, "threads per block (power of two)"}, {"grid", 1024, "blocks in the grid"}};
  return m;
}
TALLY_LAB_REGISTER(hip2, meta);

}  // namespace
}  // namespace tally::lab
