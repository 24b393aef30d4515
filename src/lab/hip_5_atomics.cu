// Origin: HIP training examples, reduction_atomic ("reduction with atomics").
// Change: the fix for reduction_to_fix: each thread's grid-strided sum is added to the single
//   result with one atomicAdd, so no share is lost and nothing is left to the host.
// Flaw: grid*block atomics serialise on one address; for floats the order of the additions
//   (and so the rounding) changes from run to run, and the chain through the result is as long
//   as the number of threads.
// Generalised: 64-bit indices, any n (the stride loop covers it); no power-of-two requirement.
//   The result is zeroed on the stream before every launch (atomics add onto it).
#include "lab/common.cuh"

namespace tally::lab {
namespace {

template <class T>
__global__ void atomic_reduction(const T* input, T* output, std::uint64_t size) {
  const std::uint64_t idx = std::uint64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::uint64_t global_size = std::uint64_t(gridDim.x) * blockDim.x;
  T local_sum = T(0);
  for (std::uint64_t i = idx; i < size; i += global_size) local_sum += input[i];
  atomicAdd(output, local_sum);  // float, double (sm_60+) and int overloads
}

template <class T>
class hip5 : public variant {
 public:
  void prepare(const run_args& a) override {
    require_range(a, "block", 1, 1024, "a CUDA block holds 1 to 1024 threads");
    require_range(a, "grid", 1, 0x7fffffff, "a CUDA grid holds 1 to 2^31-1 blocks");
    result_.as<T>(1);
  }
  void launch(const run_args& a) override {
    const unsigned block = static_cast<unsigned>(p(a, "block"));
    const unsigned grid = static_cast<unsigned>(p(a, "grid"));
    T* out = result_.as<T>(1);
    check(cudaMemsetAsync(out, 0, sizeof(T), a.stream), "cudaMemsetAsync(result)");  // atomics add onto it
    atomic_reduction<T><<<grid, block, 0, a.stream>>>(static_cast<const T*>(a.d_x), out, a.n);
    check_launch("atomic_reduction");
  }
  lab_value fetch(const run_args& a) override { return fetch_device(result_.as<T>(1), a.stream); }
  // Per-thread stride loop, then one atomic per thread into the same address.
  std::uint64_t error_height(const run_args& a) const override {
    const std::uint64_t threads = static_cast<std::uint64_t>(p(a, "grid")) * static_cast<std::uint64_t>(p(a, "block"));
    return threads + (a.n + threads - 1) / threads;
  }

 private:
  scratch result_;
};

variant_meta meta() {
  variant_meta m;
  m.id = "hip-5";
  m.group = "hip";
  m.order = 5;
  m.title = "atomics";
  m.origin = "HIP training examples, reduction_atomic";
  m.change = "each thread adds its strided sum to the one result with atomicAdd";
  m.flaw = "grid*block atomics contend on one address; float results depend on their order";
  m.racy = true;
  m.requirements = "any block in 1..1024, any grid, any n";
  m.params = {{"block", 256, "threads per block"}, {"grid", 1024, "blocks in the grid"}};
  return m;
}
TALLY_LAB_REGISTER(hip5, meta);

}  // namespace
}  // namespace tally::lab
