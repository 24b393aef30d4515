// Origin: HIP training examples, reduction_to_fix ("reduction to fix"), deliberately broken.
// Change: the shared array and the tree are dropped: each thread keeps its grid-strided sum in a
//   register and writes it straight to output[blockIdx.x]; the host adds the grid slots.
// Flaw: all threads of a block write the same slot, so the last writer wins and the block keeps
//   one thread's share (about 1/blockDim of its data); which thread wins may change run to run.
// Generalised: 64-bit indices, any n (the stride loop covers it); no power-of-two requirement
//   (there is no tree).
#include "lab/common.cuh"

namespace tally::lab {
namespace {

template <class T>
__global__ void get_partial_sums_to_fix(const T* input, T* output, std::uint64_t size) {
  const std::uint64_t idx = std::uint64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::uint64_t global_size = std::uint64_t(gridDim.x) * blockDim.x;
  T local_sum = T(0);
  for (std::uint64_t i = idx; i < size; i += global_size) local_sum += input[i];
  output[blockIdx.x] = local_sum;  // the bug: every thread of the block stores here
}

template <class T>
class hip3 : public variant {
 public:
  void prepare(const run_args& a) override {
    require_range(a, "block", 1, 1024, "a CUDA block holds 1 to 1024 threads");
    require_range(a, "grid", 1, 0x7fffffff, "a CUDA grid holds 1 to 2^31-1 blocks");
    partials_.as<T>(static_cast<std::uint64_t>(p(a, "grid")));
  }
  void launch(const run_args& a) override {
    const unsigned block = static_cast<unsigned>(p(a, "block"));
    const unsigned grid = static_cast<unsigned>(p(a, "grid"));
    get_partial_sums_to_fix<T><<<grid, block, 0, a.stream>>>(static_cast<const T*>(a.d_x), partials_.as<T>(grid), a.n);
    check_launch("get_partial_sums_to_fix");
  }
  void finish(const run_args& a) override {
    const std::uint64_t grid = static_cast<std::uint64_t>(p(a, "grid"));
    sum_ = host_sum<T>(partials_.as<T>(grid), grid, a.stream);
  }
  lab_value fetch(const run_args& /*a*/) override { return to_value(sum_); }
  // Per-thread stride loop, then the host loop over the grid slots.
  std::uint64_t error_height(const run_args& a) const override {
    const std::uint64_t threads = static_cast<std::uint64_t>(p(a, "grid")) * static_cast<std::uint64_t>(p(a, "block"));
    return (a.n + threads - 1) / threads + static_cast<std::uint64_t>(p(a, "grid"));
  }

 private:
  scratch partials_;
  T sum_{};
};

variant_meta meta() {
  variant_meta m;
  m.id = "hip-3";
  m.group = "hip";
  m.order = 3;
  m.title = "to fix";
  m.origin = "HIP training examples, reduction_to_fix";
  m.change = "no shared memory or tree: every thread writes its strided sum to output[blockIdx.x]";
  m.flaw = "all threads of a block overwrite one slot, so a block keeps one thread's share (about "
           "1/blockDim of its data); which thread wins can change from run to run";
  m.expected_correct = false;
  m.racy = true;
  m.requirements = "any block in 1..1024, any grid, any n (no power of two needed)";
  m.params = {{"block", 256, "threads per block"}, {"grid", 1024, "blocks in the grid"}};
  return m;
}
TALLY_LAB_REGISTER(hip3, meta);

}  // namespace
}  // namespace tally::lab
