// The launcher table of the segmented layer, the ragged-offset check and the plan record.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "core/device.cuh"
#include "core/half.hpp"
#include "segmented.hpp"

namespace tally::seg {

// The partition's entries for tiles k with k * tile in (bp, b], where the segment before is
// [bp, ep) (none: bp = ep = 0) and the next begins at b: the first segment at or after the tile,
// s, or -1 where the tile lies inside that segment and it is long, or inside the gap [ep, b).
// Every lane of the warp calls it (count 0: nothing to write); long runs are written by the
// whole warp. The block's writes are counted first (one shared-memory atomic a warp), and not
// made past the partition's size: in order, the segments make one write a tile in all; out of
// order (the tile kernel then reads none) they could write every tile many times over. A global
// count (one word for the grid, an atomic for each lane with writes) took 78 of the check's 112
// us at 2^28 elements in 2^22 segments (H200, ncu, 2026-11-26): 65536 atomics on one word.
__device__ void write_partition(const tile_partition& t, unsigned long long* block_count, std::int64_t bp,
                                std::int64_t ep, std::int64_t b, std::int64_t s, unsigned lane) {
  const std::int64_t tile = static_cast<std::int64_t>(t.tile), tiles = static_cast<std::int64_t>(t.tiles);
  const std::int64_t k_lo = bp < 0 ? 0 : bp / tile + 1;
  std::int64_t k_hi = b < 0 ? -1 : b / tile;  // b < 0: nothing (a lane past the segments)
  if (k_hi > tiles - 1) k_hi = tiles - 1;
  std::int64_t count = k_hi >= k_lo ? k_hi - k_lo + 1 : 0;
  if (__ballot_sync(0xffffffffu, count > 0) != 0) {
    unsigned long long upto = static_cast<unsigned long long>(count);  // this lane's and the lanes' below
#pragma unroll
    for (int d = 1; d < 32; d *= 2) {
      const unsigned long long below = __shfl_up_sync(0xffffffffu, upto, d);
      if (static_cast<int>(lane) >= d) upto += below;
    }
    unsigned long long base = 0;
    if (lane == 31) base = atomicAdd(block_count, upto);
    base = __shfl_sync(0xffffffffu, base, 31);
    const unsigned long long before = base + upto - static_cast<unsigned long long>(count);
    if (before + static_cast<unsigned long long>(count) > t.tiles) count = 0;  // out of order
  }
  // The last tile is never left out: it also holds the empty segments at n.
  auto entry = [tile, tiles, &t](std::int64_t k, std::int64_t bp, std::int64_t ep, std::int64_t b, std::int64_t s) {
    const std::int64_t lo = k * tile, hi = lo + tile;
    const bool long_prev = ep - bp > static_cast<std::int64_t>(t.chunk);
    const bool inside = k != tiles - 1 && ((long_prev && lo >= bp && hi <= ep) || (lo >= ep && hi <= b));
    return inside ? std::int64_t(-1) : s;
  };
  constexpr std::int64_t kAlone = 8;  // runs up to this long: the lane alone
  for (std::int64_t k = 0; k < count && count <= kAlone; ++k) t.d_first[k_lo + k] = entry(k_lo + k, bp, ep, b, s);
  unsigned longer = __ballot_sync(0xffffffffu, count > kAlone);
  while (longer != 0) {
    const int src = __ffs(longer) - 1;
    longer &= longer - 1;
    const std::int64_t lk = __shfl_sync(0xffffffffu, k_lo, src), lc = __shfl_sync(0xffffffffu, count, src);
    const std::int64_t lbp = __shfl_sync(0xffffffffu, bp, src), lep = __shfl_sync(0xffffffffu, ep, src);
    const std::int64_t lb = __shfl_sync(0xffffffffu, b, src), ls = __shfl_sync(0xffffffffu, s, src);
    for (std::int64_t k = lk + lane; k < lk + lc; k += 32) t.d_first[k] = entry(k, lbp, lep, lb, ls);
  }
}

__global__ void seg_validate_kernel(const std::int64_t* d_begin, const std::int64_t* d_end, std::uint64_t segments,
                                    std::uint64_t n, unsigned long long* d_status, tile_partition part) {
  core::pdl_wait();
  core::pdl_launch_dependents();
  const std::uint64_t stride = std::uint64_t(gridDim.x) * blockDim.x;  // a multiple of 32
  const unsigned lane = threadIdx.x & 31u;
  const std::int64_t nn = static_cast<std::int64_t>(n);
  auto clamp = [nn](std::int64_t v) { return v < 0 ? std::int64_t(0) : v > nn ? nn : v; };
  bool sorted = true;
  __shared__ unsigned long long block_writes;  // the partition's writes of this block
  if (threadIdx.x == 0) block_writes = 0;
  __syncthreads();
  if (part.d_first == nullptr) {
    // No partition: four segments a thread in flight at a time (one load each waited for in turn
    // took 35 us at 2^22 segments on the H100 under ncu, 2026-11-27).
    constexpr int kU = 4;
    for (std::uint64_t s0 = std::uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; s0 < segments; s0 += kU * stride) {
      std::int64_t b[kU], e[kU], nx[kU];
#pragma unroll
      for (int u = 0; u < kU; ++u) {
        const std::uint64_t s = s0 + u * stride;
        b[u] = 0, e[u] = 0, nx[u] = INT64_MAX;
        if (s < segments) {
          b[u] = d_begin[s], e[u] = d_end[s];
          if (s + 1 < segments) nx[u] = d_begin[s + 1];
        }
      }
#pragma unroll
      for (int u = 0; u < kU; ++u) {
        const std::uint64_t s = s0 + u * stride;
        if (s >= segments) continue;
        if (b[u] < 0 || b[u] > e[u] || static_cast<std::uint64_t>(e[u]) > n) atomicMin(d_status, static_cast<unsigned long long>(s));
        if (e[u] > nx[u]) sorted = false;
      }
    }
  }
  // Warp-uniform trips (the partition's writes are the warp's).
  for (std::uint64_t s = std::uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; part.d_first != nullptr && s - lane < segments;
       s += stride) {
    const bool valid = s < segments;
    std::int64_t b = 0, e = 0;
    if (valid) {
      b = d_begin[s], e = d_end[s];
      if (b < 0 || b > e || static_cast<std::uint64_t>(e) > n) atomicMin(d_status, static_cast<unsigned long long>(s));
      if (s + 1 < segments && e > d_begin[s + 1]) sorted = false;
    }
    if (part.d_first != nullptr) {
      // Out of order or bad offsets may write wrong entries, clamped inside the partition; the
      // tile kernel reads none of them then.
      const std::int64_t bp = valid && s > 0 ? clamp(d_begin[s - 1]) : -1;
      const std::int64_t ep = valid && s > 0 ? clamp(d_end[s - 1]) : 0;
      write_partition(part, &block_writes, bp, bp < 0 ? 0 : ep, valid ? clamp(b) : -1, static_cast<std::int64_t>(s), lane);
      // After the last begin: the tiles up to the end, the last segment before them.
      const bool last = s + 1 == segments;
      write_partition(part, &block_writes, last ? clamp(b) : 0, last ? clamp(e) : 0, last ? nn + static_cast<std::int64_t>(part.tile) : -1,
                      static_cast<std::int64_t>(segments), lane);
    }
  }
  // Word 1: whether the segments are in order and apart (end[s] <= begin[s + 1]); overlapping or
  // unordered segments are valid too, and run without the chunked path for long ones.
  if (__syncthreads_or(!sorted) && threadIdx.x == 0) d_status[1] = 0;
}

void validate_offsets(const problem& p, unsigned long long* d_status, cudaStream_t stream, const tile_partition& part) {
  core::check_cuda(cudaMemsetAsync(d_status, 0xff, 2 * sizeof(unsigned long long), stream),
                   "cudaMemsetAsync(segment check words)");
  if (p.outer == 0) return;
  const unsigned blocks = static_cast<unsigned>(std::min<std::uint64_t>((p.outer + 255) / 256, 1024));
  seg_validate_kernel<<<blocks, 256, 0, stream>>>(p.d_begin, p.d_end, p.outer, p.n, d_status, part);
  core::check_cuda(cudaGetLastError(), "launching the segment offset check");
}

namespace {
template <class T>
struct type_tag {
  using type = T;
};
// f(type_tag<T>{}) for dtype t's element type (b8 reads as u8), or `none`.
template <class R, class F>
R on_dtype(dtype t, R none, F&& f) {
  switch (t) {
    case dtype::b8:
    case dtype::u8: return f(type_tag<std::uint8_t>{});
    case dtype::i8: return f(type_tag<std::int8_t>{});
    case dtype::i16: return f(type_tag<std::int16_t>{});
    case dtype::u16: return f(type_tag<std::uint16_t>{});
    case dtype::i32: return f(type_tag<std::int32_t>{});
    case dtype::u32: return f(type_tag<std::uint32_t>{});
    case dtype::i64: return f(type_tag<std::int64_t>{});
    case dtype::u64: return f(type_tag<std::uint64_t>{});
    case dtype::f32: return f(type_tag<float>{});
    case dtype::f64: return f(type_tag<double>{});
    case dtype::f16: return f(type_tag<core::f16_t>{});
    case dtype::bf16: return f(type_tag<core::bf16_t>{});
  }
  return none;
}
}  // namespace

seg_launch_fn find_launcher(dtype t, core::kind k) {
  return on_dtype(t, seg_launch_fn{}, [k](auto e) { return launcher<typename decltype(e)::type>(k); });
}

bool lean_available(dtype t, core::kind k, lean_kernel which, const core::device_context& dev) {
  return on_dtype(t, false,
                  [k, which, &dev](auto e) { return lean_available<typename decltype(e)::type>(k, which, dev.ordinal); });
}

namespace {
thread_local plan g_last;
thread_local const plan* g_forced = nullptr;
thread_local const char* g_kernel = "";
}
void record_plan(const plan& pl) { g_last = pl; }
plan last_plan() { return g_last; }
void record_kernel(const char* what) { g_kernel = what; }
const char* last_kernel() { return g_kernel; }
void force_plan(const plan* pl) { g_forced = pl; }
const plan* forced_plan() { return g_forced; }

device_limits limits_for(const core::device_context& dev) {
  device_limits d;
  d.sm_count = dev.sm_count;
  d.max_threads_per_sm = dev.max_threads_per_sm;
  d.partial_bytes = core::kSegScratchBytes;
  d.max_tiles = core::kSegCounters;
  return d;
}



}  // namespace tally::seg
