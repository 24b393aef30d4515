// Origin: anchor: the classic single-pass "last block finishes" reduction (threadfence sample).
// Change: one launch: each block writes its partial, bumps a counter after a fence, and the block
//   that arrives last adds all partials in block order; the counter returns to zero.
// Flaw: scalar loads, one element per thread per step, and a fixed grid of 2 blocks per SM:
//   correct and deterministic, but slower than a tuned kernel (see tally's core).
// Generalised: any n (64-bit indices); block must be a power of two (enforced: the tree halves it).
#include "lab/common.cuh"

namespace tally::lab {
namespace {

template <class T>
__device__ T block_tree(T v, T* partial) {
  const unsigned tx = threadIdx.x;
  partial[tx] = v;
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
    if (tx < s) partial[tx] += partial[tx + s];
    __syncthreads();
  }
  return partial[0];
}

template <class T>
__global__ void single_pass(const T* x, std::uint64_t n, T* partials, unsigned* counter, T* out) {
  extern __shared__ unsigned char smem[];
  T* partial = reinterpret_cast<T*>(smem);
  __shared__ bool last;
  T v = T(0);
  const std::uint64_t stride = std::uint64_t(gridDim.x) * blockDim.x;
  for (std::uint64_t i = std::uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) v += x[i];
  const T block_sum = block_tree(v, partial);
  if (threadIdx.x == 0) {
    partials[blockIdx.x] = block_sum;
    __threadfence();  // the partial is visible device-wide before the counter moves
    last = atomicInc(counter, gridDim.x - 1) == gridDim.x - 1;  // wraps to 0 for the next call
  }
  __syncthreads();
  if (!last) return;
  __threadfence();
  T s = T(0);
  for (unsigned b = threadIdx.x; b < gridDim.x; b += blockDim.x) s += __ldcg(partials + b);
  __syncthreads();  // block_tree's shared array is reused
  const T total = block_tree(s, partial);
  if (threadIdx.x == 0) *out = total;
}

template <class T>
class anchor_single_pass : public variant {
 public:
  void prepare(const run_args& a) override {
    require_pow2(a, "block", "the tree halves the block at every step");
    require_range(a, "block", 32, 1024, "a CUDA block holds 32 to 1024 threads");
    if (!counter_) {
      counter_ = counter_buf_.as<unsigned>(1);
      check(cudaMemsetAsync(counter_, 0, sizeof(unsigned), a.stream), "cudaMemsetAsync(counter)");
    }
  }
  unsigned grid_of(const run_args& a) const {
    const unsigned block = static_cast<unsigned>(p(a, "block"));
    return std::max(1u, std::min(unsigned(2 * a.sm_count), blocks_for(a.n, block)));
  }
  void launch(const run_args& a) override {
    const unsigned block = static_cast<unsigned>(p(a, "block"));
    const unsigned grid = grid_of(a);
    single_pass<T><<<grid, block, block * sizeof(T), a.stream>>>(static_cast<const T*>(a.d_x), a.n,
                                                                 parts_.as<T>(grid), counter_, out_.as<T>(1));
    check_launch("single_pass");
  }
  lab_value fetch(const run_args& a) override { return fetch_device(out_.as<T>(1), a.stream); }
  std::uint64_t error_height(const run_args& a) const override {
    const std::uint64_t threads = std::uint64_t(grid_of(a)) * p(a, "block");
    return a.n / threads + 2 * 1024 / p(a, "block") + variant::error_height(a);
  }

 private:
  scratch parts_, out_, counter_buf_;
  unsigned* counter_ = nullptr;
};

variant_meta meta() {
  variant_meta m;
  m.id = "anchor-single-pass";
  m.group = "anchor";
  m.order = 2;
  m.title = "single pass, last block finishes";
  m.origin = "anchor: the threadfence reduction (one launch, a counter, the last block combines)";
  m.change = "one launch: partials plus a device-wide counter; the last block adds the partials in order";
  m.flaw = "scalar loads and a plain tree: deterministic and one launch, but far from the read ceiling";
  m.requirements = "block a power of two, 32..1024 (enforced)";
  m.params = {{"block", 512, "threads per block (power of two)"}};
  return m;
}
TALLY_LAB_REGISTER(anchor_single_pass, meta);

}  // namespace
}  // namespace tally::lab
