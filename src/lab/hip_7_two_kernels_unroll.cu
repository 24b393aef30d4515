// Origin: HIP training examples, reduction_two_kernels_unroll ("two different kernels and
//   unrolling").
// Change: the grid is sized from n again, ceil(n / block / unroll), so the unroll factor only
//   sets how many elements each thread's stride loop takes; a second kernel (one block) folds the
//   partials, which may now be many more than 1024.
// Flaw: small unroll factors leave little work per thread and write n/(block*unroll) partials,
//   which one block must then reduce alone.
// Generalised: the grid is a true ceiling (capped at 2^31-1 blocks; the stride loop covers the
//   rest), 64-bit indices, any n; the second kernel is one block of 1024 threads (the original's
//   block size) with a stride loop over the partials, so any partial count works; unroll need not
//   be a power of two. Enforced: block a power of two in 32..1024 (the tree halves it).
#include "lab/common.cuh"

namespace tally::lab {
namespace {

constexpr unsigned final_block = 1024;

template <class T>
__global__ void get_partial_sums(const T* input, T* output, std::uint64_t size) {
  extern __shared__ unsigned char smem[];
  T* local_sum = reinterpret_cast<T*>(smem);
  const std::uint64_t idx = std::uint64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::uint64_t grid_size = std::uint64_t(blockDim.x) * gridDim.x;
  local_sum[threadIdx.x] = T(0);
  for (std::uint64_t i = idx; i < size; i += grid_size) local_sum[threadIdx.x] += input[i];  // ~unroll steps
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s /= 2) {
    if (threadIdx.x < s) local_sum[threadIdx.x] += local_sum[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) output[blockIdx.x] = local_sum[0];
}

template <class T>
__global__ void remaining_sum(const T* input, T* output, std::uint64_t size) {
  extern __shared__ unsigned char smem[];
  T* local_sum = reinterpret_cast<T*>(smem);
  const std::uint64_t idx = std::uint64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::uint64_t grid_size = std::uint64_t(blockDim.x) * gridDim.x;
  local_sum[threadIdx.x] = T(0);
  for (std::uint64_t i = idx; i < size; i += grid_size) local_sum[threadIdx.x] += input[i];
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s /= 2) {
    if (threadIdx.x < s) local_sum[threadIdx.x] += local_sum[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) output[0] = local_sum[0];
}

std::uint64_t nblocks_for(const run_args& a) {
  const std::uint64_t per_block = static_cast<std::uint64_t>(p(a, "block")) * static_cast<std::uint64_t>(p(a, "unroll"));
  std::uint64_t g = (a.n + per_block - 1) / per_block;
  if (g == 0) g = 1;                    // n == 0 still writes a 0 partial
  if (g > 0x7fffffffu) g = 0x7fffffffu;  // CUDA grid limit; the stride loop takes the rest
  return g;
}

unsigned log2_ceil(std::uint64_t v) {
  unsigned h = 0;
  while ((std::uint64_t(1) << h) < v) ++h;
  return h;
}

template <class T>
class hip7 : public variant {
 public:
  void prepare(const run_args& a) override {
    require_pow2(a, "block", "the tree halves the block at every step");
    require_range(a, "block", 32, 1024, "a CUDA block holds 32 to 1024 threads");
    require_range(a, "unroll", 1, 1 << 20, "elements per thread must be at least 1");
    partials_.as<T>(nblocks_for(a));
    result_.as<T>(1);
  }
  void launch(const run_args& a) override {
    const unsigned block = static_cast<unsigned>(p(a, "block"));
    const std::uint64_t nblocks = nblocks_for(a);
    T* partials = partials_.as<T>(nblocks);
    get_partial_sums<T><<<static_cast<unsigned>(nblocks), block, block * sizeof(T), a.stream>>>(
        static_cast<const T*>(a.d_x), partials, a.n);
    check_launch("get_partial_sums");
    out_ = partials;  // one block: its partial is already the sum (the original skips the 2nd kernel)
    if (nblocks > 1) {
      out_ = result_.as<T>(1);
      remaining_sum<T><<<1, final_block, final_block * sizeof(T), a.stream>>>(partials, out_, nblocks);
      check_launch("remaining_sum");
    }
  }
  lab_value fetch(const run_args& a) override { return fetch_device(out_, a.stream); }
  // First kernel: stride loop (~unroll) + block tree; second: stride loop over partials + tree.
  std::uint64_t error_height(const run_args& a) const override {
    const std::uint64_t block = static_cast<std::uint64_t>(p(a, "block"));
    const std::uint64_t nblocks = nblocks_for(a);
    std::uint64_t h = (a.n + nblocks * block - 1) / (nblocks * block) + log2_ceil(block);
    if (nblocks > 1) h += (nblocks + final_block - 1) / final_block + log2_ceil(final_block);
    return h;
  }

 private:
  scratch partials_, result_;
  T* out_ = nullptr;
};

variant_meta meta() {
  variant_meta m;
  m.id = "hip-7";
  m.group = "hip";
  m.order = 7;
  m.title = "two kernels, unroll";
  m.origin = "HIP training examples, reduction_two_kernels_unroll";
  m.change = "grid = ceil(n / block / unroll) instead of a fixed grid; a separate one-block kernel "
             "reduces the partials";
  m.flaw = "small unroll writes many partials that one block of 1024 threads must fold alone";
  m.requirements = "block a power of two, 32..1024 (enforced); any unroll >= 1; any partial count "
                   "(second kernel strides over them, generalised)";
  m.params = {{"block", 256, "threads per block (power of two)"},
              {"unroll", 1, "elements per thread; the grid is ceil(n / block / unroll)"}};
  return m;
}
TALLY_LAB_REGISTER(hip7, meta);

}  // namespace
}  // namespace tally::lab
