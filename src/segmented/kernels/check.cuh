// The ragged offsets' check: the offset check kernel's (dispatch.cu) and the one-launch kernel's
// (once.cuh) share it. Each segment's begin and end against [0, n] and each other, whether the
// segments are in order (end[s] <= begin[s + 1]), and, for tile plans, the partition: each tile's
// first segment.
#pragma once

#include <cstdint>

#include "../segmented.hpp"

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
__device__ inline void write_partition(const tile_partition& t, unsigned long long* block_count, std::int64_t bp,
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

// The check of segments s = first, first + stride, ... (stride a multiple of 32, every lane of a
// warp calling: the trips are warp-uniform) with the partition's writes they make (`part`, whose
// d_first may be null: no partition; `block_count` the block's count of writes, zero before the
// block's first call). Returns the smallest bad segment this thread met (UINT64_MAX: none);
// `sorted` becomes false where one of its segments ends past the next one's begin.
__device__ inline std::uint64_t check_segments_share(const std::int64_t* d_begin, const std::int64_t* d_end,
                                                     std::uint64_t segments, std::uint64_t n,
                                                     const tile_partition& part, unsigned long long* block_count,
                                                     std::uint64_t first, std::uint64_t stride, bool& sorted) {
  const unsigned lane = threadIdx.x & 31u;
  const std::int64_t nn = static_cast<std::int64_t>(n);
  auto clamp = [nn](std::int64_t v) { return v < 0 ? std::int64_t(0) : v > nn ? nn : v; };
  std::uint64_t bad = UINT64_MAX;
  if (part.d_first == nullptr) {
    // No partition: four segments a thread in flight at a time (one load each waited for in turn
    // took 35 us at 2^22 segments on the H100 under ncu, 2026-11-27).
    constexpr int kU = 4;
    for (std::uint64_t s0 = first; s0 < segments; s0 += kU * stride) {
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
        if ((b[u] < 0 || b[u] > e[u] || static_cast<std::uint64_t>(e[u]) > n) && s < bad) bad = s;
        if (e[u] > nx[u]) sorted = false;
      }
    }
    return bad;
  }
  for (std::uint64_t s = first; s - lane < segments; s += stride) {  // warp-uniform trips
    const bool valid = s < segments;
    std::int64_t b = 0, e = 0;
    if (valid) {
      b = d_begin[s], e = d_end[s];
      if ((b < 0 || b > e || static_cast<std::uint64_t>(e) > n) && s < bad) bad = s;
      if (s + 1 < segments && e > d_begin[s + 1]) sorted = false;
    }
    // Out of order or bad offsets may write wrong entries, clamped inside the partition; the
    // tile kernel reads none of them then.
    const std::int64_t bp = valid && s > 0 ? clamp(d_begin[s - 1]) : -1;
    const std::int64_t ep = valid && s > 0 ? clamp(d_end[s - 1]) : 0;
    write_partition(part, block_count, bp, bp < 0 ? 0 : ep, valid ? clamp(b) : -1, static_cast<std::int64_t>(s), lane);
    // After the last begin: the tiles up to the end, the last segment before them.
    const bool last = s + 1 == segments;
    write_partition(part, block_count, last ? clamp(b) : 0, last ? clamp(e) : 0,
                    last ? nn + static_cast<std::int64_t>(part.tile) : -1, static_cast<std::int64_t>(segments), lane);
  }
  return bad;
}

}  // namespace tally::seg
