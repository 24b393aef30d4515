// Origin: block-level optimisation log, v2.
// Change: a fixed grid (sm_count * 4 blocks unless --grid is given) walks the input with a
//   grid-stride loop, so each thread adds many elements before the same warp-shuffle block
//   reduction; the block partials are copied back and added on the host.
// Flaw: the host finish (a copy back, a synchronisation and a serial loop) costs system time that
//   the faster kernel does not win back; each thread's running sum is a long sequential chain.
// Enforced: block a multiple of 32 (whole warps for the full-mask shuffle), 32..1024; grid >= 0.
// Generalised: 64-bit element index and stride.
#include <algorithm>
#include <climits>

#include "lab/common.cuh"

namespace tally::lab {
namespace {

template <class T>
__global__ void block_reduce_v2(const T* x, std::uint64_t n, T* out) {
  __shared__ T warp_sums[32];  // at most 1024 / 32 warps
  const std::uint64_t stride = static_cast<std::uint64_t>(gridDim.x) * blockDim.x;
  T v = T(0);
  for (std::uint64_t i = static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) v += x[i];
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

// --grid 0 means four blocks per SM.
unsigned grid_of(const run_args& a) {
  const int g = p(a, "grid");
  return static_cast<unsigned>(g > 0 ? g : std::max(a.sm_count, 1) * 4);
}

template <class T>
class optlog_v2 : public variant {
 public:
  void prepare(const run_args& a) override {
    require_range(a, "block", 32, 1024, "a CUDA block holds 32 to 1024 threads");
    if (p(a, "block") % 32 != 0) throw config_error("--block must be a multiple of 32: each warp shuffles a full 32 lanes");
    require_range(a, "grid", 0, INT_MAX, "0 picks sm_count * 4 blocks");
  }
  void launch(const run_args& a) override {
    grid_ = grid_of(a);
    partials_ = s_.as<T>(grid_);
    block_reduce_v2<T><<<grid_, static_cast<unsigned>(p(a, "block")), 0, a.stream>>>(static_cast<const T*>(a.d_x), a.n, partials_);
    check_launch("block_reduce_v2");
  }
  void finish(const run_args& a) override { result_ = host_sum<T>(partials_, grid_, a.stream); }
  lab_value fetch(const run_args& /*a*/) override { return to_value(result_); }
  // Grid-stride chain per thread, 5 shuffle levels, thread 0 over the warp sums, host loop over grid.
  std::uint64_t error_height(const run_args& a) const override {
    const std::uint64_t block = static_cast<std::uint64_t>(p(a, "block"));
    const std::uint64_t grid = grid_of(a);
    return blocks_for(a.n, grid * block) + 5 + block / 32 + grid;
  }

 private:
  scratch s_;
  unsigned grid_ = 0;
  T* partials_ = nullptr;
  T result_ = T(0);
};

variant_meta meta() {
  variant_meta m;
  m.id = "optlog-v2";
  m.group = "optlog";
  m.order = 2;
  m.title = "fixed grid, grid-stride loop, host adds the block partials";
  m.origin = "block-level optimisation log, v2";
  m.change = "a fixed grid with a grid-stride loop instead of one element per thread; the host adds the partials";
  m.flaw = "host finish (copy back, synchronise, serial loop) eats the kernel gain in system time; long per-thread chains";
  m.requirements = "block a multiple of 32, 32..1024 (enforced); grid 0 = sm_count * 4; 64-bit index";
  m.params = {{"block", 256, "threads per block (multiple of 32)"}, {"grid", 0, "blocks (0: sm_count * 4)"}};
  return m;
}
TALLY_LAB_REGISTER(optlog_v2, meta);

}  // namespace
}  // namespace tally::lab
