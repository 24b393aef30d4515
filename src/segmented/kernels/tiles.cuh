// Ragged tiles: a block a tile of the input, marks in shared memory, one pass a thread.
#pragma once

#include "groups.cuh"

namespace tally::seg {

// Ragged tiles, offsets in order: tile k of the input, [k * W, (k + 1) * W) with W = BLOCK * E
// elements (E = kTileElemsPerThread); thread t reads the E elements from k * W + t * E with whole
// 16-byte vectors, every byte of the tile once, whatever the segments' lengths and alignment. The
// offset check wrote each tile's first segment (or -1: nothing to do here); a block takes every
// gridDim-th tile, reads their entries BLOCK at a time and skips the empty ones.
//
// While a tile's elements load, its segments (the one entering it, then those beginning in it,
// BLOCK at a time) mark where runs start in shared memory: a bit in `bmap` and the segment in
// `run_seg` where a short segment begins, a bit in `gmap` where a run of no short segment begins
// (a gap after a segment's end, a long segment, which the chunk kernel reads, or n). Empty
// segments are written by the thread that reads their offsets. Then each thread folds its E
// elements in one pass, closing a run at each of its marks: a run begun and ended in the thread is
// written at once, the run open at its first element is its head (which segment it is: the last
// mark before the thread, from its warp's ballot or the earlier warps' words), the one open at its
// end its tail. A scan over the threads in order (a restart flag and a partial; the same tree
// every time) carries each run across the threads, so a head ends as the threads before it plus
// its own part; the partial of the segment entering the tile and of the one leaving it go to the
// workspace for the fix-up. Offsets not in order: the lane groups' body (the group kernel's).
//
//   W = 8 (two threads of 4 elements), segments [1,3) [3,7) [7,12): marks g0 b1 b3 b7 (g0: the
//   gap [0,1)); thread 0 (elements 0-3) writes [1,3) and has the tail x3 of [3,7); thread 1 (4-7)
//   has the head x4+x5+x6 of [3,7), which the scan ends as x3 + (x4+x5+x6), and the tail x7 of
//   [7,12), which leaves the tile.
template <class T, class Op, int BLOCK>
struct tile_smem {
  static constexpr int kWords = BLOCK * kTileElemsPerThread / 32;
  std::uint32_t bmap[kWords], gmap[kWords];         // run starts: a short segment's, any other's
  std::int32_t run_seg[BLOCK * kTileElemsPerThread];  // at a bmap bit: the segment less the one before the tile
  std::int64_t first[BLOCK];                        // the partition's entries of the block's next tiles
  std::int64_t enter_b;                             // the segment entering the tile: its first element
  int enter;                                        // and its run (0), or -1: none, or a long one
  typename Op::acc_type warp_v[BLOCK / 32];
  bool warp_f[BLOCK / 32];
};

template <class T, class Op, int BLOCK>
__device__ __forceinline__ void tile_body(const seg_args<T, Op>& a, const ragged_ws<typename Op::acc_type>& ws,
                                          std::uint64_t k, std::int64_t s_lo, tile_smem<T, Op, BLOCK>& sm) {
  using Acc = typename Op::acc_type;
  using V = vec16<T>;
  constexpr int VN = V::size, E = kTileElemsPerThread, NV = E / VN;
  static_assert((E == 16 || E == 32) && E % VN == 0, "a thread's elements: whole vectors, a mark word or half");
  constexpr std::int64_t W = kTileElems;
  static_assert(W == std::int64_t(BLOCK) * E, "the tile's elements");
  constexpr std::int64_t kNone = INT64_MAX;
  constexpr unsigned kAll = 0xffffffffu;
  const unsigned tid = threadIdx.x, lane = tid & 31u, warp = tid / 32;
  const std::int64_t n = static_cast<std::int64_t>(a.p.n), segs = static_cast<std::int64_t>(a.p.outer);
  const std::int64_t chunk = static_cast<std::int64_t>(a.chunk);
  const std::int64_t t0 = static_cast<std::int64_t>(k) * W;
  const std::int64_t tile_end = k + 1 == a.tiles ? kNone : t0 + W;  // segments beginning before it are the tile's
  const std::int64_t base_seg = s_lo - 1;  // runs name segments less this one: 0 is the one entering
  const int r0 = static_cast<int>(tid) * E;
  const std::int64_t p0 = t0 + r0;
  V v[NV];  // in flight while the marks are made
  if (a.p.aligned16 && p0 + E <= n) {
#pragma unroll
    for (int u = 0; u < NV; ++u) v[u] = core::load_vec<core::load_hint::ldg>(reinterpret_cast<const V*>(a.d_in + p0) + u);
  } else {
#pragma unroll
    for (int i = 0; i < E; ++i) v[i / VN].e[i % VN] = p0 + i < n ? a.d_in[p0 + i] : T{};
  }
  auto mark = [](std::uint32_t* map, std::int64_t pos) { atomicOr(&map[pos >> 5], 1u << (pos & 31)); };
  if (tid == 0) {
    if (n - t0 < W) mark(sm.gmap, n - t0);  // the last tile: nothing past n
    if (base_seg < 0) sm.enter = -1;
  }
  for (std::int64_t base = base_seg;; base += BLOCK) {  // block-uniform: windows of BLOCK segments
    const std::int64_t sg = base + static_cast<std::int64_t>(tid);
    bool owned = false;
    if (sg >= 0 && sg < segs) {
      const std::int64_t b = a.p.d_begin[sg], e = a.p.d_end[sg];
      if (sg == base_seg) {  // began before the tile: it enters where it reaches past t0
        const bool enters = e > t0;
        sm.enter = enters && e - b <= chunk ? 0 : -1;
        sm.enter_b = b;
        if (enters && e - t0 < W) mark(sm.gmap, e - t0);
      } else if (b < tile_end) {
        owned = true;
        if (e == b) {
          a.d_out[sg] = core::finalize_with<Op>(Op::identity(), 0, a.d_in + b);
        } else {
          if (e - b > chunk) {  // long: the chunk kernel's
            mark_long(ws.cover_a, ws.cover_b, static_cast<std::uint64_t>(sg), static_cast<std::uint64_t>(b),
                      static_cast<std::uint64_t>(e - b), a.chunk, 0, 1);
            mark(sm.gmap, b - t0);
          } else {
            mark(sm.bmap, b - t0);
            sm.run_seg[b - t0] = static_cast<std::int32_t>(sg - base_seg);
          }
          if (e - t0 < W) mark(sm.gmap, e - t0);
        }
      }
    }
    if (!__syncthreads_or(tid == BLOCK - 1 && owned)) break;  // also: this window's marks are made
  }
  // This thread's marks, and the run open at its first element: the last mark before it.
  // Positions from here on are relative to t0 (32 bits: a short segment entering the tile began
  // at most a chunk before it, and the plan keeps chunks under 2^30 elements).
  constexpr unsigned kPerWord = 32 / E;  // threads a mark word
  constexpr std::uint32_t kMask = E == 32 ? ~0u : (1u << E) - 1u;
  const unsigned wi = tid / kPerWord, sh = (tid % kPerWord) * E;
  const std::uint32_t bb = (sm.bmap[wi] >> sh) & kMask, bits = bb | ((sm.gmap[wi] >> sh) & kMask);
  const int my_last = bits != 0 ? r0 + 31 - __clz(static_cast<int>(bits)) : -1;
  int prev = -1;  // the last mark before this warp's elements (E words a warp)
  for (unsigned j = lane; j < warp * E; j += 32) {
    const std::uint32_t wd = sm.bmap[j] | sm.gmap[j];
    if (wd != 0) prev = max(prev, static_cast<int>(j * 32u) + 31 - __clz(static_cast<int>(wd)));
  }
  prev = static_cast<int>(__reduce_max_sync(kAll, static_cast<unsigned>(prev + 1))) - 1;
  const unsigned lower = __ballot_sync(kAll, bits != 0) & ((1u << lane) - 1u);
  const int from = __shfl_sync(kAll, my_last, lower != 0 ? 31 - __clz(static_cast<int>(lower)) : static_cast<int>(lane));
  const int hp = lower != 0 ? from : prev;
  int run, rb;  // the open run and its first element
  if (hp < 0) {
    run = sm.enter, rb = run == 0 ? static_cast<int>(sm.enter_b - t0) : 0;
  } else {
    run = (sm.bmap[hp >> 5] >> (hp & 31)) & 1u ? sm.run_seg[hp] : -1;
    rb = hp;
  }
  const int head_run = run, head_b = rb;
  // One pass: a mark closes the run before it (the head, or a run of this thread: written) and
  // opens the next (its segment, or -1: folded and dropped).
  Acc acc = Op::identity(), head = Op::identity();
  int first = -1;
#pragma unroll
  for (int i = 0; i < E; ++i) {
    if ((bits >> i) & 1u) {
      const int q = r0 + i;
      if (first < 0) {
        head = acc, first = i;
      } else if (run > 0) {
        a.d_out[base_seg + run] = core::finalize_with<Op>(acc, static_cast<std::uint64_t>(q - rb), a.d_in + t0 + rb);
      }
      run = (bb >> i) & 1u ? sm.run_seg[q] : -1;
      rb = q;
      acc = Op::identity();
    }
    acc = Op::combine(acc, core::transform_elem<Op>(v[i / VN].e[i % VN], static_cast<std::uint64_t>(r0 + i - rb)));
  }
  // The scan: a thread inside one run passes the partial on (flag 0), any other restarts it with
  // its tail (or nothing). Inclusive within the warp, then the warps' totals in order.
  const bool through = first < 0;
  bool f = !through;
  Acc val = through || run >= 0 ? acc : Op::identity();
  warp_segmented_scan<Op>(val, f, lane);
  if (lane == 31) sm.warp_v[warp] = val, sm.warp_f[warp] = f;
  __syncthreads();  // also: every thread is done with the marks
  if (tid < tile_smem<T, Op, BLOCK>::kWords) sm.bmap[tid] = 0, sm.gmap[tid] = 0;  // clean for the next tile
  Acc wv = Op::identity();  // the warps before this one, in order
  for (unsigned w = 0; w < warp; ++w) wv = sm.warp_f[w] ? sm.warp_v[w] : Op::combine(wv, sm.warp_v[w]);
  if (!f) val = Op::combine(wv, val);  // this thread's inclusive partial
  Acc before = core::shfl_idx(val, lane == 0 ? 0 : static_cast<int>(lane) - 1);
  if (lane == 0) before = wv;
  if (!through) {
    const Acc total = Op::combine(before, head);
    if (head_run > 0)
      a.d_out[base_seg + head_run] = core::finalize_with<Op>(total, static_cast<std::uint64_t>(r0 + first - head_b), a.d_in + t0 + head_b);
    else if (head_run == 0)
      ws.head_part[k] = total;  // the segment entering the tile ends here: the fix-up adds the rest
  }
  if (tid == BLOCK - 1) {  // the run open at the tile's end
    if (run > 0) {
      ws.tail_part[k] = val, ws.tail_seg[k] = base_seg + run;
    } else {
      if (run == 0) ws.head_part[k] = val;  // the entering segment runs through the whole tile
      ws.tail_seg[k] = -1;
    }
  }
  __syncthreads();  // the shared marks and warp totals are free for the next tile
}

// Four blocks an SM (64 registers a thread) for accumulators of at most 8 bytes: the tile body
// alone takes 64 for an f32 sum, but beside the lane groups' fallback (offsets not in order) 122
// unbounded, two blocks an SM.
template <class Op>
inline constexpr int kTileMinBlocks = sizeof(typename Op::acc_type) <= 8 ? 4 : 1;

// Block b's tiles b, b + grid, ...: their partition entries read BLOCK at a time (past L1: the
// one-launch kernel writes them in the same launch), tile_body on each that has a segment; a tile
// without one leaves no partial. The marks must be clean on entry.
template <class T, class Op, int BLOCK>
__device__ __forceinline__ void tiles_of_block(const seg_args<T, Op>& a, const ragged_ws<typename Op::acc_type>& ws,
                                               tile_smem<T, Op, BLOCK>& sm) {
  const std::uint64_t G = gridDim.x;
  for (std::uint64_t i0 = 0; i0 * G + blockIdx.x < a.tiles; i0 += BLOCK) {  // block-uniform
    const std::uint64_t kt = (i0 + threadIdx.x) * G + blockIdx.x;
    std::int64_t f = -1;
    if (kt < a.tiles) {
      f = __ldcg(ws.first + kt);
      if (f < 0) ws.tail_seg[kt] = -1;  // nothing here: no partial leaves it
    }
    sm.first[threadIdx.x] = f;
    __syncthreads();  // also: the marks are clean
    for (unsigned i = 0; i < BLOCK; ++i) {
      const std::uint64_t k = (i0 + i) * G + blockIdx.x;
      const std::int64_t s_lo = sm.first[i];
      if (k >= a.tiles) break;
      if (s_lo >= 0) tile_body<T, Op, BLOCK>(a, ws, k, s_lo, sm);  // block-uniform
    }
    __syncthreads();  // the entries are read
  }
}

template <class T, class Op, int BLOCK>
__global__ void __launch_bounds__(BLOCK, kTileMinBlocks<Op>) seg_tile_kernel(seg_args<T, Op> a) {
  // The partition is whole where the offsets are in order (one write a tile then).
  if (!ragged_in_order<T, Op, BLOCK>(a)) return;
  __shared__ tile_smem<T, Op, BLOCK> sm;
  static_assert(BLOCK >= tile_smem<T, Op, BLOCK>::kWords, "at most a word of each mark map a thread");
  if (threadIdx.x < tile_smem<T, Op, BLOCK>::kWords) sm.bmap[threadIdx.x] = 0, sm.gmap[threadIdx.x] = 0;
  tiles_of_block<T, Op, BLOCK>(a, ragged_ws<typename Op::acc_type>(a.d_partials, a.chunks, a.tiles), sm);
}

}  // namespace tally::seg
