// Origin: HIP training examples, reduction_to_fix with the tutorial's patch
//   (output[blockIdx.x] = local_sum * BLOCKSIZE).
// Change: the slot value is multiplied by the block size, standing in for the threads whose
//   writes were lost.
// Flaw: the patch only guesses: it is right only when every thread's share equals the winner's
//   (every element equal and every thread summing the same count, i.e. n a multiple of
//   grid*block); on random data the result is wrong, and which thread wins varies run to run.
// Generalised: 64-bit indices, any n (the stride loop covers it); no power-of-two requirement.
#include "lab/common.cuh"

namespace tally::lab {
namespace {

template <class T>
__global__ void get_partial_sums_times_block(const T* input, T* output, std::uint64_t size) {
  const std::uint64_t idx = std::uint64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::uint64_t global_size = std::uint64_t(gridDim.x) * blockDim.x;
  T local_sum = T(0);
  for (std::uint64_t i = idx; i < size; i += global_size) local_sum += input[i];
  output[blockIdx.x] = local_sum * static_cast<T>(blockDim.x);  // still one slot per block: last writer wins
}

template <class T>
class hip4 : public variant {
 public:
  void prepare(const run_args& a) override {
    require_range(a, "block", 1, 1024, "a CUDA block holds 1 to 1024 threads");
    require_range(a, "grid", 1, 0x7fffffff, "a CUDA grid holds 1 to 2^31-1 blocks");
    partials_.as<T>(static_cast<std::uint64_t>(p(a, "grid")));
  }
  void launch(const run_args& a) override {
    const unsigned block = static_cast<unsigned>(p(a, "block"));
    const unsigned grid = static_cast<unsigned>(p(a, "grid"));
    get_partial_sums_times_block<T><<<grid, block, 0, a.stream>>>(static_cast<const T*>(a.d_x),
                                                                   partials_.as<T>(grid), a.n);
    check_launch("get_partial_sums_times_block");
  }
  void finish(const run_args& a) override {
    const std::uint64_t grid = static_cast<std::uint64_t>(p(a, "grid"));
    sum_ = host_sum<T>(partials_.as<T>(grid), grid, a.stream);
  }
  lab_value fetch(const run_args& /*a*/) override { return to_value(sum_); }
  // Per-thread stride loop, one multiplication, then the host loop over the grid slots.
  std::uint64_t error_height(const run_args& a) const override {
    const std::uint64_t threads = static_cast<std::uint64_t>(p(a, "grid")) * static_cast<std::uint64_t>(p(a, "block"));
    return (a.n + threads - 1) / threads + 1 + static_cast<std::uint64_t>(p(a, "grid"));
  }

 private:
  scratch partials_;
  T sum_{};
};

variant_meta meta() {
  variant_meta m;
  m.id = "hip-4";
  m.group = "hip";
  m.order = 4;
  m.title = "to fix, times block size";
  m.origin = "HIP training examples, reduction_to_fix with the README's patch";
  m.change = "the surviving slot value is multiplied by the block size";
  m.flaw = "right only when every element is equal and every thread sums the same count; wrong on "
           "random data, and the winning thread can change from run to run";
  m.expected_correct = false;
  m.racy = true;
  m.constant_demo = true;
  m.requirements = "any block in 1..1024, any grid; the constant demo needs n a multiple of grid*block "
                   "(equal per-thread counts)";
  m.params = {{"block", 256, "threads per block"}, {"grid", 1024, "blocks in the grid"}};
  return m;
}
TALLY_LAB_REGISTER(hip4, meta);

}  // namespace
}  // namespace tally::lab
