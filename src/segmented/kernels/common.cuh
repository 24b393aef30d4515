// The segmented kernels' common parts: the kernel arguments, the ragged workspace, the
// status words of the offset check, the asynchronous copies and the warps' segmented scan.
#pragma once

#include <cstdint>
#include "core/device.cuh"
#include "core/device_exact.cuh"
#include "../problem.hpp"

namespace tally::seg {

using core::vec16;

inline constexpr unsigned long long kStatusOk = ~0ull;  // ragged offsets all valid
// The status area's words (core::workspace::d_seg_status, 64 bytes): 0 and 1 the offset check's
// (set by a memset before each check), from this one the one-launch kernel's (once.cuh: four
// 32-bit words, zero between calls).
inline constexpr int kOnceStatusWord = 2;

// Every segmented kernel starts here: wait for the previous launch's writes (offset check, chunk
// marks) under programmatic dependent launch, and let the next launch start launching.
__device__ __forceinline__ void kernel_entry() {
  core::pdl_wait();
  core::pdl_launch_dependents();
}

template <class T, class Op>
struct seg_args {
  const T* d_in;
  const T* d_in2;  // binary ops (dot of matching rows): row s of it starts at s * p.outer_stride2
  typename Op::out_type* d_out;
  problem p;
  int group;
  unsigned per_seg;
  int col_vecs;
  bool vec;
  typename Op::acc_type* d_partials;         // split / columns with per_seg > 1
  unsigned int* d_counters;                  // one per segment or tile, zero between calls
  const unsigned long long* d_status;        // ragged: {kStatusOk or the first bad segment, kSorted or 0}
  std::uint64_t short_max;                   // group: longest segment for the group's lanes
  std::uint64_t chunk, chunks;               // ragged: chunk length (elements) and count
  std::uint64_t tiles;                       // ragged: tiles of the tile kernel (0: lane groups)
  std::uint64_t span;                        // ragged spans: window bytes a warp (0: none)
  int span_segs;                             // and segments a warp takes at a time (1-32)
  bool span_mid;                             // and the warp folds its middle segments from the window
  std::uint64_t stripe, stripes;             // ragged stripes: a warp's elements and the count (0: none)
  unsigned int* d_once;                      // ragged, one launch: its words (once.cuh), zero between calls
};

// Ragged: the second status word says whether the segments are in order (end[s] <= begin[s+1]);
// only then do long segments go to chunks (a chunk's covering segment is then unique).
inline constexpr unsigned long long kSorted = ~0ull;

// The ragged plan's workspace (in the segmented partials buffer): per chunk, the segment covering
// its first element that began before it (A), the long segment that begins in it (B), and the
// partials of both; per tile (tile plans), the first segment beginning in it or later (written by
// the offset check), the segment begun in it that runs past its end (or -1) and the partials of
// the segment entering it and of that one. The chunks' entries are only trusted once checked
// against the offsets, so stale ones from earlier calls are harmless: at most one segment in
// order can cover a given element; the tiles' are all written every call before they are read
// (the partition by the offset check, the rest by the tile kernel). The 8-byte arrays come first
// (the partials' alignment).
template <class Acc>
struct ragged_ws {
  std::int64_t* cover_a;
  std::int64_t* cover_b;
  std::int64_t* first;
  std::int64_t* tail_seg;
  Acc* part_a;
  Acc* part_b;
  Acc* head_part;
  Acc* tail_part;
  __host__ __device__ __forceinline__ ragged_ws(void* base, std::uint64_t chunks, std::uint64_t tiles) {
    cover_a = static_cast<std::int64_t*>(base);
    cover_b = cover_a + chunks;
    first = cover_b + chunks;
    tail_seg = first + tiles;
    part_a = reinterpret_cast<Acc*>(tail_seg + tiles);
    part_b = part_a + chunks;
    head_part = part_b + chunks;
    tail_part = head_part + tiles;
  }
};

// Segment s of a contiguous problem: its first element and its length.
__device__ __forceinline__ void segment_range(const problem& p, std::uint64_t s, std::uint64_t& off,
                                              std::uint64_t& len) {
  if (p.d_begin != nullptr) {
    const std::int64_t b = p.d_begin[s], e = p.d_end[s];
    off = static_cast<std::uint64_t>(b);
    len = static_cast<std::uint64_t>(e - b);
  } else {
    off = s * p.outer_stride;
    len = p.length;
  }
}

// Ragged offsets are checked on the device first; a bad one stops every kernel before it writes.
__device__ __forceinline__ bool status_bad(const unsigned long long* d_status) {
  return d_status != nullptr && *d_status != kStatusOk;
}

using core::shfl_down_group;  // core/block.cuh: the word-wise warp shuffles
using core::shfl_idx;

// One 16-byte cp.async, global to shared, and the wait for all of this thread's copies.
__device__ __forceinline__ void copy16_async(void* smem, const void* gmem) {
  const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(gmem) : "memory");
}
__device__ __forceinline__ void copy_async_wait() { asm volatile("cp.async.wait_all;\n" ::: "memory"); }

// A commit of this thread's cp.async copies so far; the wait for all but the last N commits.
__device__ __forceinline__ void copy_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void copy_async_wait_group() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// The segmented scan across a warp's lanes (inclusive, in lane order, the same tree every time):
// a lane whose f is false continues the run of the lanes before it (val becomes their partial,
// then its own), one whose f is true restarts it; on return f says whether any lane up to this
// one restarts. The tile and stripe kernels carry runs across their lanes with it.
template <class Op>
__device__ __forceinline__ void warp_segmented_scan(typename Op::acc_type& val, bool& f, unsigned lane) {
  using Acc = typename Op::acc_type;
#pragma unroll
  for (int d = 1; d < 32; d *= 2) {
    const int src = static_cast<int>(lane) - d < 0 ? 0 : static_cast<int>(lane) - d;
    const Acc pv = core::shfl_idx(val, src);
    const bool pf = __shfl_sync(0xffffffffu, f, src);
    if (static_cast<int>(lane) >= d) {
      if (!f) val = Op::combine(pv, val);
      f = f || pf;
    }
  }
}

}  // namespace tally::seg
