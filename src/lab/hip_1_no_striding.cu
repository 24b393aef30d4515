// Origin: HIP training examples, reduction_no_striding ("reduction with no striding").
// Change: the group's baseline. Each thread loads one element into a shared array; a tree with
//   stride blockDim/2, blockDim/4, ... folds the block into its first slot; thread 0 writes the
//   block's partial, and the host copies the partials back and adds them.
// Flaw: one element per thread means n/block partials travel back to the host, which adds them
//   one after another (a long sequential chain, and the copy is on the critical path).
// Generalised: the grid is computed from n (ceil(n / block)) with 64-bit indices, so any n is
//   covered. Enforced: block a power of two in 32..1024 (the tree halves it; the shared array
//   holds 1024 values at most).
#include "lab/common.cuh"

namespace tally::lab {
namespace {

constexpr unsigned max_block = 1024;

template <class T>
__global__ void get_partial_sums(const T* input, T* output, std::uint64_t size) {
  __shared__ T shared_mem[max_block];
  const unsigned lid = threadIdx.x;
  const std::uint64_t gid = std::uint64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  shared_mem[lid] = gid < size ? input[gid] : T(0);  // the last block may overhang n
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s /= 2) {
    if (lid < s) shared_mem[lid] += shared_mem[lid + s];
    __syncthreads();
  }
  if (lid == 0) output[blockIdx.x] = shared_mem[0];
}

std::uint64_t grid_for(const run_args& a) {
  const std::uint64_t block = static_cast<std::uint64_t>(p(a, "block"));
  const std::uint64_t g = (a.n + block - 1) / block;
  return g == 0 ? 1 : g;  // n == 0 still launches one block writing 0
}

unsigned log2_ceil(std::uint64_t v) {
  unsigned h = 0;
  while ((std::uint64_t(1) << h) < v) ++h;
  return h;
}

template <class T>
class hip1 : public variant {
 public:
  void prepare(const run_args& a) override {
    require_pow2(a, "block", "the tree halves the block at every step");
    require_range(a, "block", 32, static_cast<int>(max_block), "the shared array holds 1024 values");
    if (grid_for(a) > 0x7fffffffu) throw config_error("n / block exceeds the 2^31-1 block limit of a CUDA grid");
    partials_.as<T>(grid_for(a));
  }
  void launch(const run_args& a) override {
    const unsigned block = static_cast<unsigned>(p(a, "block"));
    const std::uint64_t grid = grid_for(a);
    get_partial_sums<T><<<static_cast<unsigned>(grid), block, 0, a.stream>>>(static_cast<const T*>(a.d_x),
                                                                              partials_.as<T>(grid), a.n);
    check_launch("get_partial_sums");
  }
  void finish(const run_args& a) override { sum_ = host_sum<T>(partials_.as<T>(grid_for(a)), grid_for(a), a.stream); }
  lab_value fetch(const run_args& /*a*/) override { return to_value(sum_); }
  // The block tree, then the host adds the partials one after another.
  std::uint64_t error_height(const run_args& a) const override {
    return log2_ceil(static_cast<std::uint64_t>(p(a, "block"))) + grid_for(a);
  }

 private:
  scratch partials_;
  T sum_{};
};

variant_meta meta() {
  variant_meta m;
  m.id = "hip-1";
  m.group = "hip";
  m.order = 1;
  m.title = "no striding (host finishes)";
  m.origin = "HIP training examples, reduction_no_striding";
  m.change = "baseline: one element per thread, shared-memory tree, block partials summed on the host";
  m.flaw = "n/block partials are copied back and added sequentially on the host";
  m.requirements = "block a power of two, 32..1024 (enforced); grid = ceil(n/block) (generalised)";
  m.params = {{"block", 256, "threads per block (power of two)"}};
  return m;
}
TALLY_LAB_REGISTER(hip1, meta);

}  // namespace
}  // namespace tally::lab
