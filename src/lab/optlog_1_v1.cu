// Origin: block-level optimisation log, v1 (written for a 32-wide AMD wavefront).
// Change: the log's baseline. One element per thread; each warp adds its 32 values with
//   __shfl_down_sync; lane 0 of each warp stores the warp's sum in shared memory; after a barrier
//   thread 0 adds the block's warp sums and writes the block partial; the same kernel is relaunched
//   on the partials until one value is left.
// Flaw: one element per thread: every thread is scheduled to do a single load and a few shuffles,
//   so launch and scheduling overhead dominate a memory-bound job; thread 0 adds the warp sums alone.
// Enforced: block a multiple of 32 (whole warps for the full-mask shuffle), 32..1024.
// Generalised: 64-bit element index (any n whose grid fits in 2^31 - 1 blocks).
#include <algorithm>

#include "lab/common.cuh"

namespace tally::lab {
namespace {

template <class T>
__global__ void block_reduce_v1(const T* x, std::uint64_t n, T* out) {
  __shared__ T warp_sums[32];  // at most 1024 / 32 warps
  const std::uint64_t i = static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  T v = i < n ? x[i] : T(0);  // threads past the end bring 0 so every lane joins the shuffle
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_down_sync(0xffffffffu, v, offset);
  const unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0) warp_sums[warp] = v;
  __syncthreads();
  if (threadIdx.x == 0) {
    T s = T(0);
    for (unsigned w = 0; w < blockDim.x / 32; ++w) s += warp_sums[w];
    out[blockIdx.x] = s;
  }
}

template <class T>
class optlog_v1 : public variant {
 public:
  void prepare(const run_args& a) override {
    require_range(a, "block", 32, 1024, "a CUDA block holds 32 to 1024 threads");
    if (p(a, "block") % 32 != 0) throw config_error("--block must be a multiple of 32: each warp shuffles a full 32 lanes");
    if (blocks_for(a.n, static_cast<std::uint64_t>(p(a, "block"))) > 0x7fffffffu)
      throw config_error("n too large: one element per thread needs more than 2^31 - 1 blocks");
  }
  void launch(const run_args& a) override {
    const unsigned block = static_cast<unsigned>(p(a, "block"));
    if (a.n == 0) {  // nothing to launch: the sum is 0
      result_ = empty_.as<T>(1);
      check(cudaMemsetAsync(result_, 0, sizeof(T), a.stream), "cudaMemsetAsync(result)");
      return;
    }
    result_ = reduce_passes<T>(a, s0_, s1_, block, [&](const T* in, std::uint64_t count, T* out, unsigned grid) {
      block_reduce_v1<T><<<grid, block, 0, a.stream>>>(in, count, out);
      check_launch("block_reduce_v1");
    });
  }
  lab_value fetch(const run_args& a) override { return fetch_device(result_, a.stream); }
  // Per pass: 5 shuffle levels, then thread 0's chain over block/32 warp sums.
  std::uint64_t error_height(const run_args& a) const override {
    const std::uint64_t block = static_cast<std::uint64_t>(p(a, "block"));
    std::uint64_t h = 0;
    std::uint64_t count = a.n;
    do {
      h += 5 + block / 32;
      count = blocks_for(count, block);
    } while (count > 1);
    return std::max(h, variant::error_height(a));
  }

 private:
  scratch s0_, s1_, empty_;
  T* result_ = nullptr;
};

variant_meta meta() {
  variant_meta m;
  m.id = "optlog-v1";
  m.group = "optlog";
  m.order = 1;
  m.title = "warp shuffle per warp, thread 0 adds the warp sums, relaunch";
  m.origin = "block-level optimisation log, v1";
  m.change = "baseline: one element per thread, shuffle per warp, warp sums via shared memory, relaunch on the partials";
  m.flaw = "one element per thread: scheduling overhead dominates a memory-bound kernel; many launches";
  m.requirements = "block a multiple of 32, 32..1024 (enforced); 64-bit index";
  m.params = {{"block", 256, "threads per block (multiple of 32)"}};
  return m;
}
TALLY_LAB_REGISTER(optlog_v1, meta);

}  // namespace
}  // namespace tally::lab
