// Origin: SYCL lecture (ENCCS), the commented-out alternative in the reduction kernel.
// Change: the same two-load kernel, but thread 0 adds the block's sum to one result with one
//   atomicAdd per block instead of writing a partial, so a single launch finishes the job.
// Flaw: the atomics into one address are serialised, and their order (so the float rounding)
//   changes from run to run; the lecture itself says it only pays when few partials are left.
// Enforced: tpb a power of two (the tree halves it), 1..1024.
// Generalised: for odd N the last element is loaded by thread N/2, which the lecture's grid only
//   has with N/2 + 1 threads: here the grid is ceil(ceil(N/2) / tpb) blocks; 64-bit index.
#include <cstdint>

#include "lab/common.cuh"

namespace tally::lab {
namespace {

template <class T>
__global__ void two_loads_atomic(const T* x, std::uint64_t N, T* sum) {
  extern __shared__ __align__(16) unsigned char smem[];
  T* shtmp = reinterpret_cast<T*>(smem);  // 2 * tpb entries
  const unsigned tpb = blockDim.x;
  const unsigned tid = threadIdx.x;
  const std::uint64_t ind = static_cast<std::uint64_t>(blockIdx.x) * tpb + tid;
  const std::uint64_t half = N / 2;
  shtmp[tid] = T(0);
  shtmp[tid + tpb] = T(0);
  if (ind < half) shtmp[tid] = x[ind];
  if (ind + half < N) shtmp[tid + tpb] = x[ind + half];  // thread `half` takes the odd last element
  __syncthreads();
  for (unsigned s = tpb; s > 0; s >>= 1) {
    if (tid < s) shtmp[tid] += shtmp[tid + s];
    __syncthreads();
  }
  if (tid == 0) atomicAdd(sum, shtmp[0]);  // one atomic per block into the single result
}

unsigned grid_of(const run_args& a) { return blocks_for(a.n, 2 * static_cast<std::uint64_t>(p(a, "tpb"))); }

template <class T>
class sycl2 : public variant {
 public:
  void prepare(const run_args& a) override {
    require_pow2(a, "tpb", "the tree halves the block at every step");
    require_range(a, "tpb", 1, 1024, "a CUDA block holds at most 1024 threads");
    if (blocks_for(a.n, 2 * static_cast<std::uint64_t>(p(a, "tpb"))) > 0x7fffffffu)
      throw config_error("n too large: two elements per thread need more than 2^31 - 1 blocks");
    result_ = s_.as<T>(1);
  }
  void launch(const run_args& a) override {
    const unsigned tpb = static_cast<unsigned>(p(a, "tpb"));
    check(cudaMemsetAsync(result_, 0, sizeof(T), a.stream), "cudaMemsetAsync(result)");
    const unsigned grid = grid_of(a);
    if (grid == 0) return;  // n == 0: the zeroed result is the sum
    two_loads_atomic<T><<<grid, tpb, 2 * tpb * sizeof(T), a.stream>>>(static_cast<const T*>(a.d_x), a.n, result_);
    check_launch("two_loads_atomic");
  }
  lab_value fetch(const run_args& a) override { return fetch_device(result_, a.stream); }
  // The block tree (log2(tpb) + 1 levels), then one atomic per block into the same address.
  std::uint64_t error_height(const run_args& a) const override {
    std::uint64_t levels = 0;
    for (int t = p(a, "tpb"); t > 1; t >>= 1) ++levels;
    return grid_of(a) + levels + 2;
  }

 private:
  scratch s_;
  T* result_ = nullptr;
};

variant_meta meta() {
  variant_meta m;
  m.id = "sycl-2";
  m.group = "sycl";
  m.order = 2;
  m.title = "two loads per thread, one atomicAdd per block";
  m.origin = "SYCL lecture (ENCCS), the commented atomic alternative";
  m.change = "thread 0 atomically adds the block's sum to one result instead of writing a partial";
  m.flaw = "atomics into one address serialise, and their order varies (float results differ run to run)";
  m.racy = true;
  m.requirements = "tpb a power of two, 1..1024 (enforced); grid covers ceil(N/2) threads so odd N keeps its last element (generalised)";
  m.params = {{"tpb", 256, "threads per block (power of two)"}};
  return m;
}
TALLY_LAB_REGISTER(sycl2, meta);

}  // namespace
}  // namespace tally::lab
