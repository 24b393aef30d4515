// Origin: SYCL lecture (ENCCS GPU programming), reduction kernel, ported to CUDA.
// Change: the group's baseline. Each thread loads two elements, x[i] and x[i + N/2], into a shared
//   array of 2 * tpb (0 where out of range), so one block covers 2 * tpb inputs; a tree starting at
//   s = tpb halves the active threads until thread 0 holds the block's sum, written to a partials
//   array. The lecture leaves the partials to the caller; here the same kernel is relaunched on them
//   until one value is left.
// Flaw: only two elements per thread, so the grid is huge and many partials are left; the tree
//   keeps a block-wide barrier per level even when fewer than 32 threads are still adding.
// Enforced: tpb a power of two (the tree halves it), 1..1024.
// Generalised: for odd N the last element is loaded by thread N/2, which the lecture's grid only
//   has with N/2 + 1 threads: here the grid is ceil(ceil(N/2) / tpb) blocks; 64-bit index.
#include "lab/common.cuh"

namespace tally::lab {
namespace {

template <class T>
__global__ void two_loads(const T* x, std::uint64_t N, T* sum) {
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
  if (tid == 0) sum[blockIdx.x] = shtmp[0];
}

template <class T>
class sycl1 : public variant {
 public:
  void prepare(const run_args& a) override {
    require_pow2(a, "tpb", "the tree halves the block at every step");
    require_range(a, "tpb", 1, 1024, "a CUDA block holds at most 1024 threads");
    if (blocks_for(a.n, 2 * static_cast<std::uint64_t>(p(a, "tpb"))) > 0x7fffffffu)
      throw config_error("n too large: two elements per thread need more than 2^31 - 1 blocks");
  }
  void launch(const run_args& a) override {
    const unsigned tpb = static_cast<unsigned>(p(a, "tpb"));
    if (a.n == 0) {  // nothing to launch: the sum is 0
      result_ = empty_.as<T>(1);
      check(cudaMemsetAsync(result_, 0, sizeof(T), a.stream), "cudaMemsetAsync(result)");
      return;
    }
    // ceil(count / (2 tpb)) blocks == ceil(ceil(count / 2) / tpb): every element has a thread.
    result_ = reduce_passes<T>(a, s0_, s1_, 2 * std::uint64_t(tpb), [&](const T* in, std::uint64_t count, T* out, unsigned grid) {
      two_loads<T><<<grid, tpb, 2 * tpb * sizeof(T), a.stream>>>(in, count, out);
      check_launch("two_loads");
    });
  }
  lab_value fetch(const run_args& a) override { return fetch_device(result_, a.stream); }

 private:
  scratch s0_, s1_, empty_;
  T* result_ = nullptr;
};

variant_meta meta() {
  variant_meta m;
  m.id = "sycl-1";
  m.group = "sycl";
  m.order = 1;
  m.title = "two loads per thread into 2*tpb shared, tree from s = tpb";
  m.origin = "SYCL lecture (ENCCS), reduction kernel";
  m.change = "baseline: each thread loads x[i] and x[i + N/2]; shared tree from s = tpb; partials reduced by relaunching";
  m.flaw = "the lecture leaves the block partials to the caller; a barrier per tree level down to one thread";
  m.requirements = "tpb a power of two, 1..1024 (enforced); grid covers ceil(N/2) threads so odd N keeps its last element (generalised)";
  m.params = {{"tpb", 256, "threads per block (power of two)"}};
  return m;
}
TALLY_LAB_REGISTER(sycl1, meta);

}  // namespace
}  // namespace tally::lab
