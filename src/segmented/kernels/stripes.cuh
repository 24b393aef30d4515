// Ragged stripes: a warp a stripe of the input, tiles by cp.async, runs carried across lanes and
// tiles in one pass.
#pragma once

#include "groups.cuh"

namespace tally::seg {

// Ragged stripes, offsets in order (plan.stripe > 0): warp k reads stripe k of the input,
// [k * S, (k + 1) * S) with S = a.stripe (a multiple of kTileElems; the warp finds the first
// segment beginning in it by a 32-way search of the begins), as warp tiles of TW = 512
// elements, lane l folding elements [16 l, 16 l + 16) of each. Whatever the segments' lengths,
// every element is read once, by whole 16-byte vectors in the order of the input (cp.async into
// one of two stages a warp, the next tile's copies in flight while a tile is folded); a lane
// reads its 16 elements back in a row (slots rotated so that the eight lanes of a quarter warp
// touch eight bank quads).
//
// The warp holds the offsets of 32 segments, a lane each (the next 32 loading meanwhile). For
// each tile, the lanes mark where runs start: a bit and the segment in `run_seg` where a non-empty
// segment begins, a bit and -1 where one ends (a gap, or the next one's begin mark replaces it)
// and at n; an empty segment is written by its lane. Each lane folds its 16 elements in one pass,
// closing a run at each of its marks (a run begun and ended in the lane is written there); the
// run open at its first element is the last mark of a lane before it, or the run open at the
// tile's start. A scan across the lanes (a restart flag and a partial, the same tree every time)
// carries runs across lanes, and the run open at the tile's end, with its partial, into the next
// tile: a segment of any length is folded in the stripe without a second pass. Only the segment
// entering the stripe (its partial up to where it ends: head_part) and the one leaving it
// (tail_part, tail_seg) go to the workspace, for the stripe fix-up. The bits differ from the
// lane groups' (another association) and are the same every run for a given stripe length.
//
//   TW = 8 (two lanes of 4), segments [1,3) [3,7) [7,12) in a stripe from 0: marks 1 (run 0),
//   3 (run 1), 7 (run 2) and the end marks 3 and 7 replaced by the begins; lane 0 (elements 0-3)
//   folds x0 (the gap before segment 0, dropped), writes segment 0 (x1+x2) and has the tail x3;
//   lane 1 has the head x4+x5+x6, which the scan ends as x3 + (x4+x5+x6), and x7 of segment 2,
//   open at the tile's end: the next tile's lane 0 continues it.
inline constexpr int kStripeStages = 2;  // (three, with six blocks an SM, measured slower: tuning.md)
template <class T>
inline constexpr std::size_t kStripeWarpBytes = kStripeStages * kStripeTileElems * sizeof(T) + kStripeTileElems * 4 + kStripeTileElems / 8;

// The stripe fold keeps a lane's prefixes where its elements were (an accumulator no wider than an element).
template <class T, class Op>
inline constexpr bool kStripeStagedFold = sizeof(typename Op::acc_type) <= sizeof(T) && alignof(typename Op::acc_type) <= alignof(T);

// The slot in a stage of vector u (of NV) of lane `owner`'s 16 elements.
template <int NV>
__device__ __forceinline__ int stripe_slot(int owner, int u) {
  return owner * NV + ((u + owner / (8 / NV)) & (NV - 1));
}

template <class T, class Op>
__device__ __forceinline__ void stripe_body(const seg_args<T, Op>& a, const ragged_ws<typename Op::acc_type>& ws,
                                            std::uint64_t k, unsigned char* smem) {
  using Acc = typename Op::acc_type;
  using V = vec16<T>;
  constexpr int VN = V::size, E = kStripeLaneElems, NV = E / VN;
  constexpr std::int64_t TW = kStripeTileElems;
  static_assert(E == 16 && E % VN == 0 && NV >= 1 && NV <= 8, "a lane's elements: whole vectors, half a mark word");
  constexpr unsigned kAll = 0xffffffffu;
  constexpr std::int64_t kNone = INT64_MAX;
  const unsigned lane = threadIdx.x & 31u;
  const std::int64_t n = static_cast<std::int64_t>(a.p.n), segs = static_cast<std::int64_t>(a.p.outer);
  const std::int64_t S = static_cast<std::int64_t>(a.stripe);
  const std::int64_t P0 = static_cast<std::int64_t>(k) * S, P1 = P0 + S < n ? P0 + S : n;
  const bool last_stripe = k + 1 == a.stripes;
  V* stage = reinterpret_cast<V*>(smem);
  std::int32_t* run_seg = reinterpret_cast<std::int32_t*>(smem + kStripeStages * TW * sizeof(T));
  std::uint32_t* bm = reinterpret_cast<std::uint32_t*>(run_seg + TW);
  const std::int64_t ntiles = (P1 - P0 + TW - 1) / TW;
  int slot[NV];  // this lane's vectors' slots in a stage (it copies vectors u * 32 + lane)
#pragma unroll
  for (int u = 0; u < NV; ++u) slot[u] = stripe_slot<NV>((u * 32 + static_cast<int>(lane)) / NV, (u * 32 + static_cast<int>(lane)) % NV);
  auto fill = [&](std::int64_t i) {
    const std::int64_t t0 = P0 + i * TW;
    V* st = stage + (i % kStripeStages) * (32 * NV);
    if (a.p.aligned16 && t0 + TW <= n) {  // warp-uniform: whole vectors
      const V* src = reinterpret_cast<const V*>(a.d_in + t0) + lane;
#pragma unroll
      for (int u = 0; u < NV; ++u) copy16_async(st + slot[u], src + u * 32);
      copy_async_commit();
      return;
    }
#pragma unroll
    for (int u = 0; u < NV; ++u) {
      V* dst = st + slot[u];
      const std::int64_t x = t0 + static_cast<std::int64_t>(u * 32 + static_cast<int>(lane)) * VN;  // its first element
      if (a.p.aligned16 && x + VN <= n) {
        copy16_async(dst, a.d_in + x);
      } else {  // not aligned, or the vector at or past n
        V v;
#pragma unroll
        for (int c = 0; c < VN; ++c) v.e[c] = x + c < n ? a.d_in[x + c] : T{};
        *dst = v;
      }
    }
    copy_async_commit();
  };
#pragma unroll
  for (int i = 0; i + 1 < kStripeStages; ++i) {  // the first tiles in flight
    if (i < ntiles) fill(i);
    else copy_async_commit();  // (an empty group: the waits count groups)
  }
  if (lane < TW / 32) bm[lane] = 0;  // the marks start clean (each tile clears them after it)
  __syncwarp();
  // The first segment beginning at or after P0 (the begins are in order): the warp probes 32
  // places of [lo, hi) at a time (about log32(segments) rounds), then the last 32.
  std::int64_t lo = 0, hi = segs;  // the answer lies in [lo, hi]
  while (hi - lo > 32) {           // warp-uniform
    const std::int64_t step = (hi - lo + 31) / 32, at = lo + static_cast<std::int64_t>(lane) * step;
    const int c = __popc(__ballot_sync(kAll, at < hi && a.p.d_begin[at] < P0));  // a prefix of the probes
    if (c == 0) {
      hi = lo;
    } else {
      hi = lo + c * step < hi ? lo + c * step : hi;
      lo += (c - 1) * step + 1;
    }
  }
  lo += __popc(__ballot_sync(kAll, lo + lane < hi && a.p.d_begin[lo + lane] < P0));
  const std::int64_t s_lo = lo;
  // The batch of 32 segments (lane j: segment sbase + j; past the last: kNone) and the next.
  std::int64_t sbase = s_lo > 0 ? s_lo - 1 : 0;
  auto batch = [&](std::int64_t base, std::int64_t& b, std::int64_t& e) {
    const std::int64_t s = base + static_cast<std::int64_t>(lane);
    b = e = kNone;
    if (s < segs) b = a.p.d_begin[s], e = a.p.d_end[s];
  };
  std::int64_t cb, ce, nb, ne;
  batch(sbase, cb, ce);
  batch(sbase + 32, nb, ne);
  // The run open at the stripe's start: the segment begun before it that reaches into it, else a gap.
  const std::int64_t enter = s_lo > 0 && __shfl_sync(kAll, ce, 0) > P0 ? s_lo - 1 : -1;
  int open_seg = static_cast<int>(enter);
  std::int64_t open_b = __shfl_sync(kAll, cb, 0);
  Acc open_acc = Op::identity();
  for (std::int64_t i = 0; i < ntiles; ++i) {  // warp-uniform
    const std::int64_t t0 = P0 + i * TW, tw_end = t0 + TW;
    const std::int64_t tend = last_stripe && i + 1 == ntiles ? kNone : tw_end;  // empty segments before it are the tile's
    if (i + kStripeStages - 1 < ntiles) fill(i + kStripeStages - 1);
    else copy_async_commit();
    auto mark = [&](int pos, std::int32_t run) {
      atomicOr(&bm[pos >> 5], 1u << (pos & 31));
      run_seg[pos] = run;
    };
    // Positions relative to t0, compared unsigned (a position before t0 wraps past every limit):
    // end marks below n and the tile's end, empty segments below tend, begin marks in the tile.
    const std::uint64_t end_lim = static_cast<std::uint64_t>(n - t0 < TW ? n - t0 : TW);
    const std::uint64_t empty_lim = static_cast<std::uint64_t>(tend - t0);
    if (lane == 0 && n < tw_end) mark(static_cast<int>(n - t0), -1);
    for (;;) {  // warp-uniform: batches until one ends past the tile
      const std::uint64_t ub = static_cast<std::uint64_t>(cb - t0), ue = static_cast<std::uint64_t>(ce - t0);
      const bool nonempty = cb < ce;
      if (nonempty && ue < end_lim) mark(static_cast<int>(ue), -1);
      if (cb == ce && ub < empty_lim) a.d_out[sbase + lane] = core::finalize_with<Op>(Op::identity(), 0, a.d_in + cb);
      __syncwarp();  // a begin mark replaces an end mark at its position
      if (nonempty && ub < static_cast<std::uint64_t>(TW)) mark(static_cast<int>(ub), static_cast<std::int32_t>(sbase + lane));
      // Done where the batch's last segment ends past the tile (kNone past the last segment); the
      // input's last tile also takes every empty segment at n, batch after batch.
      if (__shfl_sync(kAll, ce, 31) >= tend) break;
      sbase += 32;
      cb = nb, ce = ne;
      batch(sbase + 32, nb, ne);
    }
    copy_async_wait_group<kStripeStages - 1>();  // this tile's copies (the next ones may still be in flight)
    __syncwarp();                // every lane's copies and marks
    V* st = stage + (i % kStripeStages) * (32 * NV);
    T x[E];
#pragma unroll
    for (int u = 0; u < NV; ++u) {
      const V v = st[stripe_slot<NV>(static_cast<int>(lane), u)];
#pragma unroll
      for (int c = 0; c < VN; ++c) x[u * VN + c] = v.e[c];
    }
    const std::uint32_t bits = (bm[lane >> 1] >> ((lane & 1u) * 16u)) & 0xffffu;
    const int r0 = static_cast<int>(lane) * E;
    const unsigned marked = __ballot_sync(kAll, bits != 0);
    if (marked == 0) {  // warp-uniform: no run starts in the tile, the open one takes all of it
      // (the tree the scan below builds at lane 31 where no lane restarts: the same bits; not
      // core::warp_reduce, whose tree pairs lanes i and i + 16 first: other bits)
      Acc v = Op::identity();
#pragma unroll
      for (int j = 0; j < E; ++j)
        v = Op::combine(v, core::transform_elem<Op>(x[j], static_cast<std::uint64_t>(t0 + r0 + j - open_b)));
#pragma unroll
      for (int d = 1; d < 32; d *= 2) {
        const Acc o = core::shfl_idx(v, static_cast<int>(lane) + d < 32 ? static_cast<int>(lane) + d : 31);
        v = Op::combine(v, o);  // lane 0: aligned blocks of 2d lanes, in order
      }
      open_acc = Op::combine(open_acc, core::shfl_idx(v, 0));
      __syncwarp();  // every lane has read the stage (its marks are clean)
      continue;
    }
    // The run open at this lane's first element: the last mark of the lanes before it, else the tile's.
    const int my_last = bits != 0 ? r0 + 31 - __clz(static_cast<int>(bits)) : -1;
    const unsigned lower = marked & ((1u << lane) - 1u);
    const int hp = __shfl_sync(kAll, my_last, lower != 0 ? 31 - __clz(static_cast<int>(lower)) : static_cast<int>(lane));
    int run = open_seg;
    std::int64_t head_b = open_b;  // the first element of the run open at the lane's start
    if (lower != 0) run = run_seg[hp], head_b = t0 + hp;
    const int head_run = run;
    Acc acc = Op::identity(), head = Op::identity();
    int first = -1, rbl = -1;  // the first mark; the run opened at the last one (relative to t0; -1: none yet)
    if constexpr (kStripeStagedFold<T, Op>) {
      // Without a branch an element: the lane's runs as a scan of its elements that restarts at
      // each mark, every prefix kept in the lane's own slots of the stage (its elements are in
      // registers now; no other lane reads them before the next tile). A run closes at the next
      // mark with the prefix just before it: the lanes loop over their marks alone, not the warp
      // over every element where some lane has one.
      Acc c[E];
      int lm = -1;  // the last mark so far (relative to t0), for the ops that fold an index
#pragma unroll
      for (int j = 0; j < E; ++j) {
        const int q = r0 + j;
        const bool m = (bits >> j) & 1u;
        if constexpr (core::indexed_v<Op>) lm = m ? q : lm;
        const std::uint64_t idx = lm >= 0 ? static_cast<std::uint64_t>(q - lm) : static_cast<std::uint64_t>(t0 + q - head_b);
        c[j] = Op::combine(m || j == 0 ? Op::identity() : c[j > 0 ? j - 1 : 0], core::transform_elem<Op>(x[j], idx));
      }
      auto prefix = [&](int j) -> Acc* {  // where the lane's prefix j lives
        return reinterpret_cast<Acc*>(reinterpret_cast<T*>(st + stripe_slot<NV>(static_cast<int>(lane), j / VN)) + j % VN);
      };
#pragma unroll
      for (int j = 0; j < E; ++j) *prefix(j) = c[j];
      acc = c[E - 1];
      if (bits != 0) {
        first = __ffs(static_cast<int>(bits)) - 1;
        if (first > 0) head = *prefix(first - 1);
        rbl = r0 + first;
        run = run_seg[rbl];
        for (unsigned rest = bits & (bits - 1u); rest != 0; rest &= rest - 1u) {
          const int j = __ffs(static_cast<int>(rest)) - 1, q = r0 + j;
          if (run >= 0) a.d_out[run] = core::finalize_with<Op>(*prefix(j - 1), static_cast<std::uint64_t>(q - rbl), a.d_in + t0 + rbl);
          run = run_seg[q], rbl = q;
        }
      }
    } else {  // an accumulator wider than an element: a branch where a lane has a mark
#pragma unroll
      for (int j = 0; j < E; ++j) {
        const int q = r0 + j;
        if ((bits >> j) & 1u) {
          if (first < 0) {
            head = acc, first = j;
          } else if (run >= 0) {
            a.d_out[run] = core::finalize_with<Op>(acc, static_cast<std::uint64_t>(q - rbl), a.d_in + t0 + rbl);
          }
          run = run_seg[q], rbl = q;
          acc = Op::identity();
        }
        const std::uint64_t idx = rbl >= 0 ? static_cast<std::uint64_t>(q - rbl) : static_cast<std::uint64_t>(t0 + q - head_b);
        acc = Op::combine(acc, core::transform_elem<Op>(x[j], idx));
      }
    }
    const std::int64_t rb = rbl >= 0 ? t0 + rbl : head_b;  // the run open at the lane's end
    // The scan across the lanes: a lane inside one run passes the partial on (flag 0), any other
    // restarts it with its tail (or nothing: a gap).
    const bool through = first < 0;
    bool f = !through;
    Acc val = through || run >= 0 ? acc : Op::identity();
    warp_segmented_scan<Op>(val, f, lane);
    if (!f) val = Op::combine(open_acc, val);  // the run open at the tile's start, through this lane
    Acc before = core::shfl_idx(val, lane == 0 ? 0 : static_cast<int>(lane) - 1);
    if (lane == 0) before = open_acc;
    if (!through && head_run >= 0) {
      const Acc total = Op::combine(before, head);
      if (head_run == enter)
        ws.head_part[k] = total;  // the segment entering the stripe ends here: the fix-up adds the rest
      else
        a.d_out[head_run] = core::finalize_with<Op>(total, static_cast<std::uint64_t>(t0 + r0 + first - head_b), a.d_in + head_b);
    }
    open_acc = core::shfl_idx(val, 31);
    open_seg = __shfl_sync(kAll, run, 31);
    open_b = __shfl_sync(kAll, rb, 31);
    __syncwarp();  // every lane has read the marks and the stage
    if (lane < TW / 32) bm[lane] = 0;
    __syncwarp();
  }
  if (lane == 0) {  // the run open at the stripe's end
    if (open_seg >= 0 && open_seg == enter) {
      ws.head_part[k] = open_acc, ws.tail_seg[k] = -1;  // the entering segment runs through the stripe
    } else if (open_seg >= 0) {
      ws.tail_part[k] = open_acc, ws.tail_seg[k] = open_seg;
    } else {
      ws.tail_seg[k] = -1;
    }
  }
}

// Eight blocks of four warps an SM (64 registers a thread) for accumulators of at most 8 bytes.
template <class Op>
inline constexpr int kStripeMinBlocks = sizeof(typename Op::acc_type) <= 8 ? 8 : 4;

template <class T, class Op, int BLOCK>
__global__ void __launch_bounds__(BLOCK, kStripeMinBlocks<Op>) seg_stripe_kernel(seg_args<T, Op> a) {
  if (!ragged_in_order<T, Op, BLOCK>(a)) return;
  extern __shared__ __align__(16) unsigned char stripe_smem[];
  const std::uint64_t k = (std::uint64_t(blockIdx.x) * BLOCK + threadIdx.x) / 32;
  if (k >= a.stripes) return;  // warp-uniform
  const ragged_ws<typename Op::acc_type> ws(a.d_partials, a.chunks, a.tiles);
  stripe_body<T, Op>(a, ws, k, stripe_smem + (threadIdx.x / 32) * kStripeWarpBytes<T>);
}

}  // namespace tally::seg
