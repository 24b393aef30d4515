// Few ragged segments in one launch: pieces of a fixed size and their in-order combine.
#pragma once

#include "groups.cuh"

namespace tally::seg {

// Few ragged segments (at most kPiecesMaxSegments), one launch, offsets in any order. Every
// block reads all the offsets: a bad one stops every block before anything is written (the
// check_segments call names it). Segment s is cut into pieces of `chunk` elements from its
// start, max(1, ceil(len / chunk)) of them (an empty segment is one empty piece), numbered in
// segment order by a scan in shared memory (thread t counts segments t*K .. t*K + K-1; where
// overlapping segments would make more pieces than the workspace's partials, longer ones). Block b
// takes pieces b, b + grid, ...: it finds the piece's segment by a binary search of the scan,
// reads the piece with the whole block (16-byte vectors, four loads in flight) and folds it with
// the block tree. A segment of one piece is written there; the pieces of a longer one leave
// partials, and the block that finishes its last one (the segment's counter, which wraps back to
// zero) combines them in order (lane l takes every 32nd, then the warp's tree): the same bits
// every run, whichever block finishes last.
//   chunk 4, segments [0,3) [3,3) [3,12): pieces 1, 1, 3 -> scan {0, 1, 2, 5}; piece 3 is
//   elements 7-10 of the input (the second of segment 2), piece 4 element 11.
template <class T, class Op, int BLOCK>
__global__ void __launch_bounds__(BLOCK) seg_pieces_kernel(seg_args<T, Op> a) {
  kernel_entry();
  using Acc = typename Op::acc_type;
  constexpr int K = static_cast<int>(kPiecesMaxSegments / BLOCK);
  static_assert(K * BLOCK == static_cast<int>(kPiecesMaxSegments) && BLOCK % 32 == 0, "K whole segments a thread");
  __shared__ std::uint32_t first[kPiecesMaxSegments + 1];  // first piece of each segment; [S..] the total
  __shared__ std::uint32_t warp_total[BLOCK / 32];
  __shared__ bool last;
  const std::uint64_t S = a.p.outer;
  const std::int64_t n = static_cast<std::int64_t>(a.p.n);
  // Counts each segment's pieces of C elements and scans them into `first`; false where an
  // offset is bad (block-uniform).
  auto number = [&](std::uint64_t C) {
    std::uint32_t cnt[K], sum = 0;
    bool bad = false;
#pragma unroll
    for (int k = 0; k < K; ++k) {
      const std::uint64_t s = std::uint64_t(threadIdx.x) * K + k;
      cnt[k] = 0;
      if (s < S) {
        const std::int64_t b = a.p.d_begin[s], e = a.p.d_end[s];
        if (b < 0 || b > e || e > n) bad = true;
        else cnt[k] = e > b ? static_cast<std::uint32_t>((static_cast<std::uint64_t>(e - b) + C - 1) / C) : 1u;
      }
      sum += cnt[k];
    }
    const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x / 32;
    std::uint32_t inc = sum;
#pragma unroll
    for (int d = 1; d < 32; d <<= 1) {
      const std::uint32_t v = __shfl_up_sync(0xffffffffu, inc, d);
      if (lane >= static_cast<unsigned>(d)) inc += v;
    }
    if (lane == 31) warp_total[warp] = inc;
    if (__syncthreads_or(bad)) return false;
    std::uint32_t at = inc - sum;
    for (unsigned w = 0; w < warp; ++w) at += warp_total[w];
#pragma unroll
    for (int k = 0; k < K; ++k) {
      first[threadIdx.x * K + k] = at;
      at += cnt[k];
    }
    if (threadIdx.x == BLOCK - 1) first[kPiecesMaxSegments] = at;
    __syncthreads();
    return true;
  };
  std::uint64_t C = a.chunk;
  if (!number(C)) return;  // nothing written
  // Overlapping segments may cut into more pieces than the plan's bound (a.chunks = ceil(n / C)
  // + S partials in the workspace): then pieces m times as long, m = ceil(pieces / ceil(n / C)),
  // which keep them within it (sum of ceil(p_s / m) <= pieces / m + S).
  // (Only nonempty segments make more than one piece each, so n >= 1 here and ceil(n / C) >= 1.)
  if (first[S] > a.chunks) {
    const std::uint64_t whole = a.chunks - S;
    C *= (first[S] + whole - 1) / whole;
    __syncthreads();  // every thread has read first[S]
    if (!number(C)) return;  // (offsets changed under the call: nothing more written)
  }
  const std::uint32_t pieces = first[S];
  for (std::uint32_t pc = blockIdx.x; pc < pieces; pc += gridDim.x) {
    std::uint32_t lo = 0, hi = static_cast<std::uint32_t>(S);  // first[lo] <= pc < first[hi]
    while (hi - lo > 1) {
      const std::uint32_t mid = (lo + hi) / 2;
      if (first[mid] <= pc) lo = mid;
      else hi = mid;
    }
    const std::uint64_t s = lo;
    const std::uint32_t j = pc - first[s], np = first[s + 1] - first[s];
    const std::int64_t b = a.p.d_begin[s], e = a.p.d_end[s];
    const std::uint64_t len = static_cast<std::uint64_t>(e - b);
    const T* base = a.d_in + b;
    const std::uint64_t plo = std::uint64_t(j) * C, phi = plo + C < len ? plo + C : len;
    Acc v = range_share<T, Op>(base, plo, phi, threadIdx.x, BLOCK);
    v = core::block_reduce<Op, BLOCK>(v);
    if (np == 1) {
      if (threadIdx.x == 0) a.d_out[s] = core::finalize_with<Op>(v, len, base);
    } else {
      if (threadIdx.x == 0) {
        a.d_partials[pc] = v;
        last = core::atomic_inc_acq_rel(a.d_counters + s, np - 1) == np - 1;
      }
      __syncthreads();
      if (last && threadIdx.x < 32) {
        Acc r = Op::identity();
        for (std::uint32_t k = threadIdx.x; k < np; k += 32) r = Op::combine(r, core::load_cg(a.d_partials + first[s] + k));
        r = core::warp_reduce<Op, true>(r);
        if (threadIdx.x == 0) a.d_out[s] = core::finalize_with<Op>(r, len, base);
      }
    }
    __syncthreads();  // block_reduce's shared memory and `last` are reused by the next piece
  }
}

}  // namespace tally::seg
