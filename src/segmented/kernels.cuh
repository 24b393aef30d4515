// The segmented layer's kernels: rowtile and group (short contiguous segments), split (long
// contiguous segments, a block or several per segment), thin and columns (inner > 1: a thread per
// vector of results, or tiles with lanes along the axis), ragged spans (a warp's window of shared
// memory), ragged chunks and fix-up, ragged pieces (few segments, one launch), ragged tiles (a
// sweep candidate), exact_block. Every op is a
// core op struct (src/core/ops.cuh): the same identity, transform, fold, combine and finalize
// as the 1-D reduce, so each segment's result follows the same rules (NaN, ties, modes).
//
//   seg_group_kernel<float, op_sum<float>>: rows {1 2 3 4 | 5 6 7 8}, group 1 -> {10, 26}
#pragma once

#include <cstdint>

#include "core/device.cuh"
#include "core/device_exact.cuh"
#include "problem.hpp"

namespace tally::seg {

using core::vec16;

inline constexpr unsigned long long kStatusOk = ~0ull;  // ragged offsets all valid

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

// One lane's share of elements [lo, hi) of a contiguous segment starting at seg, read by G lanes
// (lane < G): the scalar head up to 16-byte alignment, whole vectors (lane, lane + G, ...; U = 4
// or 8 loads in flight), the scalar tail. Element indices are relative to the segment's start.
// Binary ops (dot) read element j of both segments: seg2 starts the second one; its vectors are
// 16-byte loads where it shares the first one's alignment, element loads otherwise.
template <class T, class Op>
__device__ __forceinline__ auto elem_at(const T* base, const T* base2, std::uint64_t j) {
  if constexpr (core::binary_v<Op>) return core::pair_elem<T>{base[j], base2[j]};
  else return base[j];
}
template <class T, class Op, int U = 4>
__device__ __forceinline__ typename Op::acc_type range_share(const T* seg, std::uint64_t lo, std::uint64_t hi,
                                                             unsigned lane, unsigned G, const T* seg2 = nullptr) {
  static_assert(U == 4 || U == 8, "four or eight loads in flight");
  using V = vec16<T>;
  constexpr int VN = V::size;
  typename Op::acc_type acc = Op::identity();
  const T* base = seg + lo;
  const T* base2 = core::binary_v<Op> ? seg2 + lo : nullptr;
  const std::uint64_t len = hi - lo;
  const core::split16 s = core::split_input(base, len);
  const bool y_aligned =
      core::binary_v<Op> && (reinterpret_cast<std::uintptr_t>(base2) - reinterpret_cast<std::uintptr_t>(base)) % 16 == 0;
  auto fold = [&](typename Op::acc_type acc_in, const V& v, std::uint64_t j) {
    if constexpr (core::binary_v<Op>)
      return core::fold_vec2<Op>(acc_in, v, core::load_second<core::load_hint::ldg>(base2, s.head + j * VN, y_aligned),
                                 lo + s.head + j * VN);
    else return core::fold_vec<Op>(acc_in, v, lo + s.head + j * VN);
  };
  for (std::uint64_t j = lane; j < s.head; j += G)
    acc = Op::combine(acc, core::transform_elem<Op>(elem_at<T, Op>(base, base2, j), lo + j));
  const V* vb = reinterpret_cast<const V*>(base + s.head);
  std::uint64_t j = lane;
  // U loads in flight, then (U = 8) one round of four; a lane folds its vectors j, j + G, ... in
  // that order whatever U is, so U changes the speed, never the bits.
  for (; j + (U - 1) * std::uint64_t(G) < s.nvec; j += U * std::uint64_t(G)) {
    V v[U];
#pragma unroll
    for (int u = 0; u < U; ++u) v[u] = core::load_vec<core::load_hint::ldg>(vb + j + u * G);
#pragma unroll
    for (int u = 0; u < U; ++u) acc = fold(acc, v[u], j + u * G);
  }
  if constexpr (U > 4) {
    if (j + 3 * std::uint64_t(G) < s.nvec) {
      V v[4];
#pragma unroll
      for (int u = 0; u < 4; ++u) v[u] = core::load_vec<core::load_hint::ldg>(vb + j + u * G);
#pragma unroll
      for (int u = 0; u < 4; ++u) acc = fold(acc, v[u], j + u * G);
      j += 4 * std::uint64_t(G);
    }
  }
  for (; j < s.nvec; j += G) acc = fold(acc, core::load_vec<core::load_hint::ldg>(vb + j), j);
  for (std::uint64_t t = s.tail_begin + lane; t < len; t += G)
    acc = Op::combine(acc, core::transform_elem<Op>(elem_at<T, Op>(base, base2, t), lo + t));
  return acc;
}
// range_share's eager form (unary ops, elements of 4 or 8 bytes): the lane's scalar head and tail
// and its first U vectors are loaded in one round, its last partial round of vectors in another,
// where range_share waits for each head element, each vector past its last full round and each
// tail element in turn (a segment of 64 f32 elements read by two lanes: two rounds, not up to
// eight). The folds keep range_share's order (head, vectors j, j + G, ..., tail): the same bits.
template <class T, class Op, int U = 4>
__device__ __forceinline__ typename Op::acc_type range_share_eager(const T* seg, std::uint64_t len, unsigned lane,
                                                                   unsigned G) {
  using V = vec16<T>;
  constexpr int VN = V::size, HM = VN - 1;  // a head or a tail holds at most VN - 1 elements
  static_assert(!core::binary_v<Op> && VN >= 2 && VN <= 4, "unary ops, elements of 4 or 8 bytes");
  typename Op::acc_type acc = Op::identity();
  const core::split16 s = core::split_input(seg, len);
  const V* vb = reinterpret_cast<const V*>(seg + s.head);
  T hv[HM], tv[HM];
  V v[U];
  auto load_round = [&](std::uint64_t j0) {  // vectors j0, j0 + G, ..., those past nvec left out
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const std::uint64_t jv = j0 + std::uint64_t(u) * G;
      v[u] = jv < s.nvec ? core::load_vec<core::load_hint::ldg>(vb + jv) : V{};
    }
  };
#pragma unroll
  for (int i = 0; i < HM; ++i) {
    const std::uint64_t jh = lane + std::uint64_t(i) * G, jt = s.tail_begin + jh;
    hv[i] = jh < s.head ? seg[jh] : T{};
    tv[i] = jt < len ? seg[jt] : T{};
  }
  load_round(lane);
#pragma unroll
  for (int i = 0; i < HM; ++i) {
    const std::uint64_t jh = lane + std::uint64_t(i) * G;
    if (jh < s.head) acc = Op::combine(acc, core::transform_elem<Op>(hv[i], jh));
  }
  std::uint64_t j = lane;
  for (;;) {  // v holds the loads of vectors j, j + G, ..., those past nvec left out
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const std::uint64_t jv = j + std::uint64_t(u) * G;
      if (jv < s.nvec) acc = core::fold_vec<Op>(acc, v[u], s.head + jv * VN);
    }
    j += U * std::uint64_t(G);
    if (j >= s.nvec) break;
    load_round(j);
  }
#pragma unroll
  for (int i = 0; i < HM; ++i) {
    const std::uint64_t jt = s.tail_begin + lane + std::uint64_t(i) * G;
    if (jt < len) acc = Op::combine(acc, core::transform_elem<Op>(tv[i], jt));
  }
  return acc;
}
// A group's share of a segment; EAGER: range_share_eager where it applies (unary ops, elements
// of 4 or 8 bytes), range_share elsewhere.
template <class T, class Op, int U = 4, bool EAGER = false>
__device__ __forceinline__ typename Op::acc_type group_share(const T* base, std::uint64_t len, unsigned lane,
                                                             unsigned G, const T* base2 = nullptr) {
  if constexpr (EAGER && !core::binary_v<Op> && vec16<T>::size >= 2 && vec16<T>::size <= 4)
    return range_share_eager<T, Op, U>(base, len, lane, G);
  else
    return range_share<T, Op, U>(base, 0, len, lane, G, base2);
}
// Row s of the second input of a binary op (null for unary ops).
template <class T, class Op>
__device__ __forceinline__ const T* second_row(const seg_args<T, Op>& a, std::uint64_t s) {
  if constexpr (core::binary_v<Op>) return a.d_in2 + s * a.p.outer_stride2;
  else return nullptr;
}

// Ragged, offsets in order: a long segment (more than one chunk) marks the chunks it covers for
// the chunk kernel: B of the chunk it begins in, A of every later chunk it reaches. `lanes`
// threads (a warp, or one), `lane` of them.
__device__ __forceinline__ void mark_long(std::int64_t* cover_a, std::int64_t* cover_b, std::uint64_t s,
                                          std::uint64_t off, std::uint64_t len, std::uint64_t chunk, unsigned lane,
                                          unsigned lanes = 32) {
  const std::uint64_t k0 = off / chunk, k1 = (off + len - 1) / chunk;
  if (lane == 0) cover_b[k0] = static_cast<std::int64_t>(s);
  for (std::uint64_t k = k0 + 1 + lane; k <= k1; k += lanes) cover_a[k] = static_cast<std::int64_t>(s);
}

// The segments of a warp's lanes past its short ones (`longer`: the lanes holding them), one at
// a time: with offsets in order, those longer than a chunk are only marked for the chunk kernel;
// the others the whole warp reads (group_share, 32 lanes), and lane 0 writes the result.
template <class T, class Op, int U, bool EAGER = false>
__device__ __forceinline__ void warp_longer(const seg_args<T, Op>& a, unsigned longer, bool sorted, std::uint64_t s,
                                            std::uint64_t off, std::uint64_t len, unsigned lane32) {
  while (longer != 0) {  // warp-uniform
    const int src = __ffs(longer) - 1;
    longer &= longer - 1;
    const std::uint64_t ls = __shfl_sync(0xffffffffu, s, src);
    const std::uint64_t loff = __shfl_sync(0xffffffffu, off, src), llen = __shfl_sync(0xffffffffu, len, src);
    if (sorted && llen > a.chunk) {
      ragged_ws<typename Op::acc_type> w(a.d_partials, a.chunks, a.tiles);
      mark_long(w.cover_a, w.cover_b, ls, loff, llen, a.chunk, lane32);
      continue;
    }
    const T* lbase = a.d_in + loff;
    typename Op::acc_type r = group_share<T, Op, U, EAGER>(lbase, llen, lane32, 32, second_row(a, ls));
    r = core::warp_reduce<Op, true>(r);
    if (lane32 == 0) a.d_out[ls] = core::finalize_with<Op>(r, llen, lbase);
  }
}

// Short contiguous segments: a group of G lanes per segment; the loop is uniform across each
// warp (every lane shuffles), lanes whose segment is past the end carry the identity. Ragged
// segments longer than short_max go to the whole warp afterwards, one at a time; with offsets in
// order, those longer than a chunk are only marked for the chunk kernel. U: loads in flight per
// lane, of the groups and of the whole warp (4, or 8 where the plan says: the same bits either
// way).
template <class T, class Op, int BLOCK, int U, bool EAGER = false>
__device__ __forceinline__ void group_body(const seg_args<T, Op>& a) {
  const bool sorted = a.d_status != nullptr && a.d_status[1] == kSorted;
  const unsigned G = static_cast<unsigned>(a.group);
  const unsigned lane32 = threadIdx.x & 31u, lane = lane32 & (G - 1);
  const std::uint64_t per_warp = 32 / G;
  const std::uint64_t warp = (std::uint64_t(blockIdx.x) * BLOCK + threadIdx.x) / 32;
  const std::uint64_t warps = std::uint64_t(gridDim.x) * BLOCK / 32;
  for (std::uint64_t s0 = warp * per_warp; s0 < a.p.outer; s0 += warps * per_warp) {
    const std::uint64_t s = s0 + lane32 / G;
    const bool valid = s < a.p.outer;
    std::uint64_t off = 0, len = 0;
    if (valid) segment_range(a.p, s, off, len);
    const bool fits = len <= a.short_max;
    const T* base = a.d_in + off;
    typename Op::acc_type acc = group_share<T, Op, U, EAGER>(base, fits ? len : 0, lane, G, valid ? second_row(a, s) : nullptr);
    for (unsigned offset = G / 2; offset > 0; offset >>= 1)
      acc = Op::combine(acc, shfl_down_group(acc, static_cast<int>(offset), static_cast<int>(G)));
    if (valid && fits && lane == 0) a.d_out[s] = core::finalize_with<Op>(acc, len, base);
    warp_longer<T, Op, U, EAGER>(a, __ballot_sync(0xffffffffu, valid && !fits && lane == 0), sorted, s, off, len, lane32);
  }
}

template <class T, class Op, int BLOCK, int U = 4, bool EAGER = false>
__global__ void __launch_bounds__(BLOCK) seg_group_kernel(seg_args<T, Op> a) {
  kernel_entry();
  if (status_bad(a.d_status)) return;
  group_body<T, Op, BLOCK, U, EAGER>(a);
}

// The start of a ragged kernel that needs the offsets in order (spans, tiles, stripes): the
// previous launch's writes, the offset check's verdict; offsets out of order run the lane
// groups' body (the plan's lanes a segment) here. True where the caller goes on.
template <class T, class Op, int BLOCK>
__device__ __forceinline__ bool ragged_in_order(const seg_args<T, Op>& a) {
  kernel_entry();
  if (status_bad(a.d_status)) return false;
  if (a.d_status[1] != kSorted) {
    group_body<T, Op, BLOCK, 4>(a);
    return false;
  }
  return true;
}

// Ragged spans (offsets in order, unary ops): a warp takes span_segs (1-32) consecutive segments,
// a lane each, and copies the elements they cover into its shared-memory window (cp.async, 16-byte
// vectors of whole lines: every byte once, a window of loads in flight, whatever the lengths)
// while nothing waits on the data; each lane then folds its segment's part of the window from
// shared memory. A segment up to short_max elements is a lane's; longer ones go to the whole
// warp, and past a chunk to the chunk kernel (warp_longer), as in the lane groups. Segments
// that lie apart (a gap of more than kSpanGap elements, or a longer segment between) start a new
// run of windows, so no byte outside the lanes' segments is copied past a vector's alignment.
// A lane folds its elements as range_share does with one lane (head elements, vectors in order,
// tail elements; a window ends on a 16-byte boundary): the bits of the one-lane group plan.
//
//   f32, segments [0,3) [3,9) [9,9) [9,14), 4 KiB windows: one run, one window [0,14): the
//   vectors [0,4) [4,8) [8,12) by cp.async, elements 12, 13 loaded; lane 1 folds 3, 4..7 (a
//   vector), 8; lane 2 writes the empty segment's identity.
inline constexpr std::int64_t kSpanGap = 16;  // elements between segments still copied in one run

// One 16-byte cp.async, global to shared, and the wait for all of this thread's copies.
__device__ __forceinline__ void copy16_async(void* smem, const void* gmem) {
  const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(gmem) : "memory");
}
__device__ __forceinline__ void copy_async_wait() { asm volatile("cp.async.wait_all;\n" ::: "memory"); }

// Elements [0, len) of a piece of a segment, at `glob` in the input and `img` in shared memory
// (the same address modulo 16), folded into acc as range_share folds them with one lane; idx:
// the piece's first element's index in its segment.
template <class T, class Op>
__device__ __forceinline__ typename Op::acc_type image_fold(typename Op::acc_type acc, const T* img, const T* glob,
                                                             std::uint64_t idx, std::uint64_t len) {
  using V = vec16<T>;
  constexpr int VN = V::size;
  const core::split16 s = core::split_input(glob, len);
  for (std::uint64_t j = 0; j < s.head; ++j) acc = Op::combine(acc, core::transform_elem<Op>(img[j], idx + j));
  const V* vb = reinterpret_cast<const V*>(img + s.head);
#pragma unroll 2
  for (std::uint64_t j = 0; j < s.nvec; ++j) acc = core::fold_vec<Op>(acc, vb[j], idx + s.head + j * VN);
  for (std::uint64_t t = s.tail_begin; t < len; ++t) acc = Op::combine(acc, core::transform_elem<Op>(img[t], idx + t));
  return acc;
}

// A middle segment (past a lane's limit, within a chunk) folded by the whole warp from the window,
// its part [lo, hi) (segment-relative; a window's, which ends on a 16-byte boundary or at the
// segment's end) into each lane's acc: the lane's share of range_share with 32 lanes (its head
// element, its vectors j = lane, lane + 32, ... in order, its tail element), so a segment folded
// window by window and then combined by warp_reduce has the bits of the warp's own loads
// (warp_longer). img: the window, element x of the input at img[x - wa]; mb: the segment's start.
template <class T, class Op>
__device__ __forceinline__ typename Op::acc_type image_warp_fold(typename Op::acc_type acc, const T* img,
                                                                  std::int64_t wa, const T* in, std::int64_t mb,
                                                                  std::uint64_t len, std::uint64_t lo,
                                                                  std::uint64_t hi, unsigned lane) {
  using V = vec16<T>;
  constexpr std::uint64_t VN = V::size;
  const core::split16 s = core::split_input(in + mb, len);
  const T* seg = img + (mb - wa);  // the segment's element 0 in the window's frame (read within [lo, hi) only)
  if (lane < s.head && lane >= lo && lane < hi) acc = Op::combine(acc, core::transform_elem<Op>(seg[lane], lane));
  // Vectors q of the body within [lo, hi): q0 = first whole one at or past lo, q1 past the last.
  const std::uint64_t b0 = s.head;
  const std::uint64_t q0 = lo <= b0 ? 0 : (lo - b0 + VN - 1) / VN;
  const std::uint64_t q1_raw = hi <= b0 ? 0 : (hi - b0) / VN;
  const std::uint64_t q1 = q1_raw < s.nvec ? q1_raw : s.nvec;
  for (std::uint64_t q = q0 + ((lane + 32 - q0 % 32) % 32); q < q1; q += 32)
    acc = core::fold_vec<Op>(acc, *reinterpret_cast<const V*>(seg + b0 + q * VN), b0 + q * VN);
  const std::uint64_t t = s.tail_begin + lane;
  if (t < len && t >= lo && t < hi) acc = Op::combine(acc, core::transform_elem<Op>(seg[t], t));
  return acc;
}

// Elements [x0, x1) of the input into the warp's window img, element x at img[x - wa] (wa: the
// 16-byte boundary at or before x0): whole vectors by cp.async, the partial ones at either end
// element by element; then every lane of the warp sees them.
template <class T>
__device__ __forceinline__ void span_fill(T* img, const T* in, std::int64_t wa, std::int64_t x0, std::int64_t x1,
                                          unsigned lane) {
  using V = vec16<T>;
  constexpr std::int64_t VN = V::size;
  const std::int64_t mis = static_cast<std::int64_t>((reinterpret_cast<std::uintptr_t>(in + x0) & 15u) / sizeof(T));
  const std::int64_t va = mis ? x0 + VN - mis : x0;  // the first whole vector
  const std::int64_t head_end = va < x1 ? va : x1;
  const std::int64_t nv = va < x1 ? (x1 - va) / VN : 0;
  const std::int64_t tb = va + nv * VN;  // the tail: [tb, x1)
#pragma unroll 4
  for (std::int64_t q = lane; q < nv; q += 32) copy16_async(img + (va - wa) + q * VN, in + va + q * VN);
  if (static_cast<std::int64_t>(lane) < head_end - x0) img[x0 - wa + lane] = in[x0 + lane];
  if (tb >= va && static_cast<std::int64_t>(lane) < x1 - tb) img[tb - wa + lane] = in[tb + lane];
  copy_async_wait();
  __syncwarp();
}

template <class T, class Op, int BLOCK>
__device__ __forceinline__ void span_body(const seg_args<T, Op>& a, T* img) {
  using Acc = typename Op::acc_type;
  constexpr unsigned kAll = 0xffffffffu;
  const unsigned lane = threadIdx.x & 31u;
  const std::int64_t win = static_cast<std::int64_t>(a.span / sizeof(T));  // window elements
  const std::uint64_t warp = (std::uint64_t(blockIdx.x) * BLOCK + threadIdx.x) / 32;
  const std::uint64_t warps = std::uint64_t(gridDim.x) * BLOCK / 32;
  const unsigned per = static_cast<unsigned>(a.span_segs);
  const std::uint64_t segs = a.p.outer, batches = (segs + per - 1) / per;
  auto offsets = [&](std::uint64_t bt, std::int64_t& b, std::int64_t& e) {
    const std::uint64_t s = bt * per + lane;
    b = e = 0;
    if (bt < batches && lane < per && s < segs) b = a.p.d_begin[s], e = a.p.d_end[s];
  };
  std::int64_t nb, ne;
  offsets(warp, nb, ne);
  for (std::uint64_t bt = warp; bt < batches; bt += warps) {  // warp-uniform
    const std::uint64_t s = bt * per + lane;
    const bool valid = lane < per && s < segs;
    const std::int64_t b = nb, e = ne;
    offsets(bt + warps, nb, ne);  // the next batch's offsets load meanwhile
    const std::uint64_t len = static_cast<std::uint64_t>(e - b);
    const bool mine = valid && len <= a.short_max;
    const bool own = mine && len > 0;                               // the lane folds it alone
    const bool mid = a.span_mid && valid && !mine && len <= a.chunk;  // the warp, from the windows
    const bool act = own || mid;                                    // in the runs of windows
    const unsigned am = __ballot_sync(kAll, act);
    // A run ends at an active lane whose next active lane begins more than kSpanGap past its end.
    const unsigned above = lane == 31 ? 0u : am & (kAll << (lane + 1));
    const std::int64_t next_b = __shfl_sync(kAll, b, above ? __ffs(above) - 1 : static_cast<int>(lane));
    const unsigned ends = __ballot_sync(kAll, act && (above == 0 || next_b - e > kSpanGap));
    Acc acc = Op::identity(), macc = Op::identity();  // the lane's segment; its share of the open middle one
    unsigned left = am;
    while (left != 0) {  // warp-uniform: a run of windows over lanes f .. r
      const int f = __ffs(left) - 1;
      const int r = __ffs(ends & (kAll << f)) - 1;
      const std::int64_t run_end = __shfl_sync(kAll, e, r);
      for (std::int64_t x0 = __shfl_sync(kAll, b, f); x0 < run_end;) {
        const std::int64_t wa = x0 - static_cast<std::int64_t>((reinterpret_cast<std::uintptr_t>(a.d_in + x0) & 15u) / sizeof(T));
        const std::int64_t x1 = wa + win < run_end ? wa + win : run_end;
        span_fill<T>(img, a.d_in, wa, x0, x1, lane);
        const std::int64_t lo = b > x0 ? b : x0, hi = e < x1 ? e : x1;
        if (own && lo < hi)
          acc = image_fold<T, Op>(acc, img + (lo - wa), a.d_in + lo, static_cast<std::uint64_t>(lo - b),
                                  static_cast<std::uint64_t>(hi - lo));
        // The middle segments meeting the window, in order (at most the last stays open).
        for (unsigned mm = __ballot_sync(kAll, mid && lo < hi); mm != 0; mm &= mm - 1) {  // warp-uniform
          const int src = __ffs(mm) - 1;
          const std::int64_t mb = __shfl_sync(kAll, b, src), me = __shfl_sync(kAll, e, src);
          const std::int64_t plo = mb > x0 ? mb : x0, phi = me < x1 ? me : x1;
          macc = image_warp_fold<T, Op>(macc, img, wa, a.d_in, mb, static_cast<std::uint64_t>(me - mb),
                                        static_cast<std::uint64_t>(plo - mb), static_cast<std::uint64_t>(phi - mb), lane);
          if (me <= x1) {  // it ends here
            const Acc r = core::warp_reduce<Op, true>(macc);
            if (lane == 0)
              a.d_out[bt * per + static_cast<unsigned>(src)] =
                  core::finalize_with<Op>(r, static_cast<std::uint64_t>(me - mb), a.d_in + mb);
            macc = Op::identity();
          }
        }
        __syncwarp();  // the window is free for the next fill
        x0 = x1;
      }
      left &= r == 31 ? 0u : kAll << (r + 1);
    }
    if (mine) a.d_out[s] = core::finalize_with<Op>(acc, len, a.d_in + b);
    warp_longer<T, Op, 8>(a, __ballot_sync(kAll, valid && !mine && !mid), true, s, static_cast<std::uint64_t>(b), len, lane);
  }
}

// Short ragged segments as spans (span_body) where the offsets are in order; otherwise the lane
// groups' body (the plan's lanes a segment). a.span bytes of dynamic shared memory a warp.
template <class T, class Op, int BLOCK>
__global__ void __launch_bounds__(BLOCK, 512 / BLOCK) seg_span_kernel(seg_args<T, Op> a) {  // up to 128 registers
  if (!ragged_in_order<T, Op, BLOCK>(a)) return;
  extern __shared__ __align__(16) unsigned char span_smem[];
  span_body<T, Op, BLOCK>(a, reinterpret_cast<T*>(span_smem + (threadIdx.x / 32) * a.span));
}

// Ops whose combine gives the same bits in either order (integer and float sums, the means of
// sums): row tiles may then reduce-scatter their steps' partials instead of a tree per step.
template <class Op>
inline constexpr bool kCommutes = false;
template <class T>
inline constexpr bool kCommutes<core::op_sum<T>> = true;
template <class B, class R>
inline constexpr bool kCommutes<core::op_mean<B, R>> = kCommutes<B>;

// Row tiles of M lanes a row (2 <= M <= U): the U steps' partials of each group of M lanes are
// reduce-scattered, halving at each of log2(M) shuffle rounds (lane lv keeps the upper half where
// its bit d is set, the lower half where not, and adds its partner's copy of that half), so lane
// lv ends with the whole rows of steps lv * U / M .. + U / M - 1; each row is the same
// expression as the tree's, (a0 + a2) + (a1 + a3) for M = 4, and so the same bits for ops that
// commute. U / M stores of 4 or 8 bytes a lane, each 32 rows of the warp, then follow: log2(M)
// rounds of U / 2 + ... shuffles instead of a tree per step (M - 1 each) and the gather.
template <int M, int U, class T, class Op>
__device__ __forceinline__ void rowtile_scatter(const seg_args<T, Op>& a, typename Op::acc_type (&pa)[U],
                                                std::uint64_t r0, unsigned lane32) {
  static_assert(M >= 2 && M <= U, "a reduce-scatter of U steps over M lanes");
  const unsigned lv = lane32 & (M - 1), gi = lane32 / M;
  constexpr unsigned kRowsPerStep = 32 / M;
#pragma unroll
  for (int d = M / 2, h = U / 2; d >= 1; d /= 2, h /= 2) {
    const bool upper = (lv & static_cast<unsigned>(d)) != 0;
#pragma unroll
    for (int i = 0; i < h; ++i) {
      const auto send = upper ? pa[i] : pa[i + h];
      const auto keep = upper ? pa[i + h] : pa[i];
      pa[i] = Op::combine(keep, core::shfl_words(send, [d](std::uint32_t x) { return __shfl_xor_sync(0xffffffffu, x, d); }));
    }
  }
#pragma unroll
  for (int i = 0; i < U / M; ++i) {
    const std::uint64_t r = r0 + (std::uint64_t(lv) * (U / M) + i) * kRowsPerStep + gi;
    if (r < a.p.outer) a.d_out[r] = core::finalize_with<Op>(pa[i], a.p.length, a.d_in + r * a.p.outer_stride);
  }
}

// Short rows of m = group whole 16-byte vectors (m a power of two, rows 16-byte aligned): lane l
// of a warp reads vector l % m of row l / m of a step of 32 / m rows, so each warp load is 512
// contiguous bytes when the rows are packed; U steps' loads are in flight per lane (4 or 8), then
// each step's m lanes combine in a shuffle tree. The warp's U * 32 / m results are then stored
// by consecutive lanes (a 128-byte store of 32 four-byte results where the step's first lanes
// would store 32 / m of them at a time); results of other sizes (argmin/argmax, stats: their
// registers), and rows of one vector, are
// stored by each step's first lanes. Ops that commute exactly (kCommutes) with 2-8 lanes a row
// (at most U) reduce-scatter the steps instead (rowtile_scatter): no tree per step, no gather.
template <class T, class Op, int BLOCK, int U = 4>
__global__ void __launch_bounds__(BLOCK) seg_rowtile_kernel(seg_args<T, Op> a) {
  kernel_entry();
  static_assert(U == 4 || U == 8, "four or eight steps in flight");
  using V = vec16<T>;
  using Acc = typename Op::acc_type;
  using Out = typename Op::out_type;
  constexpr int VN = V::size;
  const unsigned m = static_cast<unsigned>(a.group);
  const unsigned lane32 = threadIdx.x & 31u, lv = lane32 & (m - 1);
  const std::uint64_t rows_per_step = 32 / m;
  const std::uint64_t warp = (std::uint64_t(blockIdx.x) * BLOCK + threadIdx.x) / 32;
  const std::uint64_t warps = std::uint64_t(gridDim.x) * BLOCK / 32;
  const std::uint64_t ldv = a.p.outer_stride / VN;  // row stride in vectors
  const V* vb = reinterpret_cast<const V*>(a.d_in);
  // Binary ops (dot of matching rows): the same vector of the second matrix's row.
  constexpr bool B = core::binary_v<Op>;
  constexpr int UY = B ? U : 1;
  constexpr bool kGather = sizeof(Out) % 4 == 0 && sizeof(Out) <= 8;
  const bool gather = kGather && m > 1;  // one lane per row (m = 1) stores 32 adjacent results already
  const std::uint64_t ldv2 = a.p.outer_stride2 / VN;
  const V* vb2 = reinterpret_cast<const V*>(a.d_in2);
  for (std::uint64_t r0 = warp * rows_per_step * U; r0 < a.p.outer; r0 += warps * rows_per_step * U) {
    V v[U];
    [[maybe_unused]] V w[UY];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const std::uint64_t r = r0 + u * rows_per_step + lane32 / m;
      if (r < a.p.outer) {
        v[u] = core::load_vec<core::load_hint::ldg>(vb + r * ldv + lv);
        if constexpr (B) w[u] = core::load_vec<core::load_hint::ldg>(vb2 + r * ldv2 + lv);
      }
    }
    if constexpr (kCommutes<Op> && !B && kGather) {
      if (m >= 2 && m <= static_cast<unsigned>(U) && m <= 8) {  // warp-uniform
        Acc pa[U];
#pragma unroll
        for (int u = 0; u < U; ++u) {
          const std::uint64_t r = r0 + u * rows_per_step + lane32 / m;
          pa[u] = r < a.p.outer ? core::fold_vec<Op>(Op::identity(), v[u], std::uint64_t(lv) * VN) : Op::identity();
        }
        if (m == 2) rowtile_scatter<2, U>(a, pa, r0, lane32);
        else if (m == 4) rowtile_scatter<4, U>(a, pa, r0, lane32);
        else if constexpr (U >= 8) rowtile_scatter<8, U>(a, pa, r0, lane32);
        continue;
      }
    }
    [[maybe_unused]] Out res[kGather ? U : 1];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const std::uint64_t r = r0 + u * rows_per_step + lane32 / m;
      Acc acc = Op::identity();
      if (r < a.p.outer) {
        if constexpr (B) acc = core::fold_vec2<Op>(acc, v[u], w[u], std::uint64_t(lv) * VN);
        else acc = core::fold_vec<Op>(acc, v[u], std::uint64_t(lv) * VN);
      }
      for (unsigned offset = m / 2; offset > 0; offset >>= 1)
        acc = Op::combine(acc, shfl_down_group(acc, static_cast<int>(offset), static_cast<int>(m)));
      // Only each group's first lane holds its row's result (the gather reads those lanes alone);
      // lanes past the end finalize row 0, never stored.
      const std::uint64_t rr = r < a.p.outer ? r : 0;
      Out o{};
      if (lv == 0) o = core::finalize_with<Op>(acc, a.p.length, a.d_in + rr * a.p.outer_stride);
      if constexpr (kGather) res[u] = o;
      if (!gather && lv == 0 && r < a.p.outer) a.d_out[r] = o;
    }
    if constexpr (kGather) {
      if (!gather) continue;
      // Result i of the warp's U * rows_per_step: step i / rows_per_step, in the first lane of
      // its group; lane i % 32 of store round i / 32 stores it.
      const unsigned rows_w = U * static_cast<unsigned>(rows_per_step);
      for (unsigned q = 0; q * 32 < rows_w; ++q) {  // warp-uniform
        const unsigned i = q * 32 + lane32;
        const unsigned step = i / static_cast<unsigned>(rows_per_step);
        const int src = static_cast<int>((i % rows_per_step) * m);
        Out val = res[0];
#pragma unroll
        for (int u = 0; u < U; ++u) {
          const Out t = shfl_idx(res[u], src);
          if (static_cast<unsigned>(u) == step) val = t;
        }
        if (i < rows_w && r0 + i < a.p.outer) a.d_out[r0 + i] = val;
      }
    }
  }
}

// Ragged, offsets in order: chunk k of the input, [k * chunk, (k + 1) * chunk). The block reduces
// the part of segment A (covering the chunk's start, begun before it) and of segment B
// (beginning in it, ending past it) that lie in the chunk, each to a partial. A grid of at most
// the resident blocks: block g takes chunks g, g + grid, ..., BLOCK at a time; each thread checks
// one chunk's marks against the offsets, and the block reads only the chunks with a long segment
// (most have none where the segments are short: 16384 chunks of 64 KiB at 2^28 f32).
template <class T, class Op, int BLOCK>
__global__ void __launch_bounds__(BLOCK) seg_chunk_kernel(seg_args<T, Op> a) {
  core::pdl_wait();  // the previous launch's writes (offset check, marks) are visible
  // (no early trigger: the fix-up would hold SM slots)
  using Acc = typename Op::acc_type;
  if (status_bad(a.d_status) || a.d_status[1] != kSorted) return;
  __shared__ std::int64_t sh_ab[BLOCK], sh_ae[BLOCK], sh_bb[BLOCK];  // A's begin and end, B's begin (or -1)
  __shared__ std::uint64_t sh_k[BLOCK];
  __shared__ unsigned count;
  ragged_ws<Acc> w(a.d_partials, a.chunks, a.tiles);
  const std::uint64_t G = gridDim.x;
  for (std::uint64_t i0 = 0; i0 * G + blockIdx.x < a.chunks; i0 += BLOCK) {  // block-uniform
    if (threadIdx.x == 0) count = 0;
    __syncthreads();
    const std::uint64_t k = (i0 + threadIdx.x) * G + blockIdx.x;
    if (k < a.chunks) {
      const std::uint64_t cs = k * a.chunk, ce = cs + a.chunk < a.p.n ? cs + a.chunk : a.p.n;
      std::int64_t ab = -1, ae = -1, bb = -1;
      const std::int64_t sa = w.cover_a[k], sb = w.cover_b[k];
      if (sa >= 0 && static_cast<std::uint64_t>(sa) < a.p.outer) {
        const std::int64_t b = a.p.d_begin[sa], e = a.p.d_end[sa];
        if (b < static_cast<std::int64_t>(cs) && e > static_cast<std::int64_t>(cs) &&
            static_cast<std::uint64_t>(e - b) > a.chunk)
          ab = b, ae = e;
      }
      if (sb >= 0 && static_cast<std::uint64_t>(sb) < a.p.outer) {
        const std::int64_t b = a.p.d_begin[sb], e = a.p.d_end[sb];
        if (b >= static_cast<std::int64_t>(cs) && b < static_cast<std::int64_t>(ce) &&
            static_cast<std::uint64_t>(e - b) > a.chunk)
          bb = b;
      }
      if (ab >= 0 || bb >= 0) {
        const unsigned j = atomicAdd(&count, 1u);  // the list's order: any (each chunk's partials are its own)
        sh_ab[j] = ab, sh_ae[j] = ae, sh_bb[j] = bb, sh_k[j] = k;
      }
    }
    __syncthreads();
    const unsigned listed = count;
    for (unsigned j = 0; j < listed; ++j) {
      const std::uint64_t kk = sh_k[j];
      const std::uint64_t cs = kk * a.chunk, ce = cs + a.chunk < a.p.n ? cs + a.chunk : a.p.n;
      const std::int64_t ab = sh_ab[j], ae = sh_ae[j], bb = sh_bb[j];
      if (ab >= 0) {  // block-uniform
        const std::uint64_t hi = (static_cast<std::uint64_t>(ae) < ce ? static_cast<std::uint64_t>(ae) : ce) - ab;
        Acc v = range_share<T, Op>(a.d_in + ab, cs - ab, hi, threadIdx.x, BLOCK);
        v = core::block_reduce<Op, BLOCK>(v);
        if (threadIdx.x == 0) w.part_a[kk] = v;
        __syncthreads();  // block_reduce's shared memory is free again
      }
      if (bb >= 0) {
        Acc v = range_share<T, Op>(a.d_in + bb, 0, ce - bb, threadIdx.x, BLOCK);
        v = core::block_reduce<Op, BLOCK>(v);
        if (threadIdx.x == 0) w.part_b[kk] = v;
        __syncthreads();
      }
    }
    __syncthreads();  // every thread has read `count`
  }
}

// Ragged, offsets in order: a warp per chunk; where a long segment begins in the chunk, the warp
// combines its partials in a fixed order (B of this chunk, then A of each later chunk it reaches:
// lane l takes every 32nd, then the warp's tree) and writes the segment's result. Tile plans
// add a thread per tile after the chunks' warps: where a segment begun in the tile runs past
// its end, the thread adds the partials of the tiles it reaches, in order (a segment of at most
// a chunk: a few tiles). Stripe plans (no chunks), a warp a stripe instead: where a segment begun
// in stripe k runs past its end, its partial there, then the entering partials of the stripes it
// reaches (lane l takes every 32nd, then the warp's tree), written as the segment's result.
template <class T, class Op, int BLOCK>
__global__ void __launch_bounds__(BLOCK) seg_fixup_kernel(seg_args<T, Op> a) {
  kernel_entry();
  using Acc = typename Op::acc_type;
  if (status_bad(a.d_status) || a.d_status[1] != kSorted) return;
  const ragged_ws<Acc> w(a.d_partials, a.chunks, a.tiles);
  if (a.stripes > 0) {  // stripe plans: a warp a stripe
    const std::uint64_t k = (std::uint64_t(blockIdx.x) * BLOCK + threadIdx.x) / 32;
    const unsigned lane = threadIdx.x & 31u;
    if (k >= a.stripes) return;  // warp-uniform
    const std::int64_t s = w.tail_seg[k];
    if (s < 0 || static_cast<std::uint64_t>(s) >= a.p.outer) return;
    const std::int64_t b = a.p.d_begin[s], e = a.p.d_end[s];
    const std::uint64_t last = static_cast<std::uint64_t>(e - 1) / a.stripe;
    Acc r = Op::identity();
    for (std::uint64_t t = k + 1 + lane; t <= last; t += 32) r = Op::combine(r, w.head_part[t]);
    r = core::warp_reduce<Op, true>(r);
    if (lane == 0) a.d_out[s] = core::finalize_with<Op>(Op::combine(w.tail_part[k], r), static_cast<std::uint64_t>(e - b), a.d_in + b);
    return;
  }
  const std::uint64_t chunk_blocks = (a.chunks * 32 + BLOCK - 1) / BLOCK;
  if (blockIdx.x >= chunk_blocks) {  // block-uniform: the tiles' part
    const std::uint64_t k = (std::uint64_t(blockIdx.x) - chunk_blocks) * BLOCK + threadIdx.x;
    if (k >= a.tiles) return;
    const std::int64_t s = w.tail_seg[k];
    if (s < 0 || static_cast<std::uint64_t>(s) >= a.p.outer) return;
    const std::int64_t b = a.p.d_begin[s], e = a.p.d_end[s];
    constexpr std::int64_t W = kTileElems;
    Acc r = w.tail_part[k];
    for (std::uint64_t t = k + 1; static_cast<std::int64_t>(t) * W < e; ++t) r = Op::combine(r, w.head_part[t]);
    a.d_out[s] = core::finalize_with<Op>(r, static_cast<std::uint64_t>(e - b), a.d_in + b);
    return;
  }
  const std::uint64_t k = (std::uint64_t(blockIdx.x) * BLOCK + threadIdx.x) / 32;
  const unsigned lane = threadIdx.x & 31u;
  if (k >= a.chunks) return;  // warp-uniform
  const std::uint64_t cs = k * a.chunk, ce = cs + a.chunk < a.p.n ? cs + a.chunk : a.p.n;
  const std::int64_t sb = w.cover_b[k];
  if (sb < 0 || static_cast<std::uint64_t>(sb) >= a.p.outer) return;
  const std::int64_t b = a.p.d_begin[sb], e = a.p.d_end[sb];
  if (b < static_cast<std::int64_t>(cs) || b >= static_cast<std::int64_t>(ce) || static_cast<std::uint64_t>(e - b) <= a.chunk)
    return;
  const std::uint64_t last = (static_cast<std::uint64_t>(e) - 1) / a.chunk;
  Acc r = Op::identity();
  for (std::uint64_t i = lane; i <= last - k; i += 32) r = Op::combine(r, i == 0 ? w.part_b[k] : w.part_a[k + i]);
  r = core::warp_reduce<Op, true>(r);
  if (lane == 0) a.d_out[sb] = core::finalize_with<Op>(r, static_cast<std::uint64_t>(e - b), a.d_in + b);
}

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

template <class T, class Op, int BLOCK>
__global__ void __launch_bounds__(BLOCK, kTileMinBlocks<Op>) seg_tile_kernel(seg_args<T, Op> a) {
  // The partition is whole where the offsets are in order (one write a tile then).
  if (!ragged_in_order<T, Op, BLOCK>(a)) return;
  using Acc = typename Op::acc_type;
  __shared__ tile_smem<T, Op, BLOCK> sm;
  static_assert(BLOCK >= tile_smem<T, Op, BLOCK>::kWords, "at most a word of each mark map a thread");
  const ragged_ws<Acc> ws(a.d_partials, a.chunks, a.tiles);
  if (threadIdx.x < tile_smem<T, Op, BLOCK>::kWords) sm.bmap[threadIdx.x] = 0, sm.gmap[threadIdx.x] = 0;
  const std::uint64_t G = gridDim.x;
  for (std::uint64_t i0 = 0; i0 * G + blockIdx.x < a.tiles; i0 += BLOCK) {  // block-uniform
    const std::uint64_t kt = (i0 + threadIdx.x) * G + blockIdx.x;
    std::int64_t f = -1;
    if (kt < a.tiles) {
      f = ws.first[kt];
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

// A commit of this thread's cp.async copies so far; the wait for all but the last N commits.
__device__ __forceinline__ void copy_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void copy_async_wait_group() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

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
      // (the tree the scan below builds at lane 31 where no lane restarts: the same bits)
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


// Long contiguous segments: per_seg blocks per segment, each reducing a grid-stride share with
// the core's block code (reduce_block_range: aligned 16-byte body, scalar head and tail, the
// op's own fold and block tree); the last block of a segment combines the partials in order.
// 512 threads (two blocks per SM) for long rows; 256 (four per SM, the same 64 registers a
// thread) for rows of about one round of 256 x 4 vectors, which a 512-thread block would read
// with half its threads and half the loads in flight per SM.
template <class T, class Op, int BLOCK>
__global__ void __launch_bounds__(BLOCK, kSplitThreadsPerSm / BLOCK) seg_split_kernel(seg_args<T, Op> a) {
  kernel_entry();
  using Acc = typename Op::acc_type;
  if (status_bad(a.d_status)) return;
  __shared__ bool last;
  const std::uint64_t work = a.p.outer * a.per_seg;
  for (std::uint64_t w = blockIdx.x; w < work; w += gridDim.x) {
    const std::uint64_t s = w / a.per_seg;
    const unsigned c = static_cast<unsigned>(w % a.per_seg);
    std::uint64_t off = 0, len = 0;
    segment_range(a.p, s, off, len);
    const T* base = a.d_in + off;
    const Acc v = core::reduce_block_range<T, Op, BLOCK, 4, core::load_hint::ldg, core::layout::strided>(
        base, len, c, a.per_seg, second_row(a, s));
    if (a.per_seg == 1) {
      if (threadIdx.x == 0) a.d_out[s] = core::finalize_with<Op>(v, len, base);
      continue;
    }
    if (threadIdx.x == 0) {
      a.d_partials[w] = v;
      const unsigned old = core::atomic_inc_acq_rel(a.d_counters + s, a.per_seg - 1);
      last = old == a.per_seg - 1;
    }
    __syncthreads();
    if (last && threadIdx.x < 32) {
      Acc r = Op::identity();
      for (unsigned k = threadIdx.x; k < a.per_seg; k += 32)
        r = Op::combine(r, core::load_cg(a.d_partials + s * a.per_seg + k));
      r = core::warp_reduce<Op, true>(r);
      if (threadIdx.x == 0) a.d_out[s] = core::finalize_with<Op>(r, len, base);
    }
    __syncthreads();  // `last` is reused by the next segment
  }
}

// VN adjacent elements at p (aligned to VN elements) into the first VN of a vector: one 16-, 8-,
// 4- or 2-byte load.
template <int VN, class T>
__device__ __forceinline__ vec16<T> load_cols(const T* p) {
  constexpr int kBytes = VN * static_cast<int>(sizeof(T));
  static_assert(kBytes <= 16 && (kBytes & (kBytes - 1)) == 0, "a power-of-two part of 16 bytes");
  if constexpr (kBytes == 16) {
    return core::load_vec<core::load_hint::ldg>(reinterpret_cast<const vec16<T>*>(p));
  } else {
    vec16<T> v;
    if constexpr (VN == 1) {
      v.e[0] = *p;
    } else if constexpr (kBytes == 8) {
      const uint2 r = __ldg(reinterpret_cast<const uint2*>(p));
      __builtin_memcpy(&v, &r, 8);
    } else if constexpr (kBytes == 4) {
      const unsigned r = __ldg(reinterpret_cast<const unsigned*>(p));
      __builtin_memcpy(&v, &r, 4);
    } else {
      const unsigned short r = __ldg(reinterpret_cast<const unsigned short*>(p));
      __builtin_memcpy(&v, &r, 2);
    }
    return v;
  }
}

// inner > 1: a tile is col_vecs vectors of adjacent results (VN results each with vector loads,
// one without; vector_results) and BLOCK / col_vecs lanes along the axis. Lane kl reads rows kl, kl + lanes, ...
// of its share of the axis, kColumnLoads loads in flight (RING: two rounds of them, the next
// round's loads issued before this one folds); the lanes of one column combine by shuffles
// inside a warp, then across warps in shared memory; per_seg blocks per tile combine their
// partials like split.
template <class T, class Op, int BLOCK, int VN, bool RING = false>
__device__ __forceinline__ void columns_tile(const seg_args<T, Op>& a, std::uint64_t w,
                                             typename Op::acc_type (&tree)[2][BLOCK], bool& last) {
  using Acc = typename Op::acc_type;
  using V = vec16<T>;
  const problem& p = a.p;
  const unsigned CV = static_cast<unsigned>(a.col_vecs), lanes = BLOCK / CV;
  const std::uint64_t cols_per_tile = std::uint64_t(CV) * VN;
  const std::uint64_t col_tiles = (p.inner + cols_per_tile - 1) / cols_per_tile;
  // Work item w is share c of tile w % tiles: blocks running together read adjacent tiles of the
  // same rows (whole rows of the matrix across the GPU, not strips of it). The tile's partial of
  // share c sits at slot tile * per_seg + c.
  const std::uint64_t tiles = p.outer * col_tiles;
  const std::uint64_t tile = w % tiles;
  const unsigned c = static_cast<unsigned>(w / tiles);
  const std::uint64_t slot = tile * a.per_seg + c;
  const std::uint64_t o = tile / col_tiles, cb = tile % col_tiles;
  const unsigned cv = threadIdx.x % CV, kl = threadIdx.x / CV;
  const std::uint64_t col0 = cb * cols_per_tile + std::uint64_t(cv) * VN;
  const std::uint64_t chunk = (p.length + a.per_seg - 1) / a.per_seg;
  const std::uint64_t kb = chunk * c, ke = kb + chunk < p.length ? kb + chunk : p.length;
  Acc acc[VN];
#pragma unroll
  for (int e = 0; e < VN; ++e) acc[e] = Op::identity();
  if (col0 < p.inner) {
    const T* col = a.d_in + o * p.outer_stride + col0;
    std::uint64_t k = kb + kl;
    // Rounds of kColumnLoads loads in flight, the last one predicated (a lane's rows fold in
    // order k, k + lanes, ... either way).
    const std::uint64_t step = lanes;
    if constexpr (RING && VN > 1) {
      // Whole rounds two at a time in flight: round r + 1's loads go out before round r folds,
      // the two buffers alternating (a copy between them would wait for the loads); the rows
      // fold in the same order, so the bits are the one-round loop's. What is left (less than a
      // whole round) takes the loop below.
      const std::uint64_t ls = p.length_stride, round = kColumnLoads * step;
      const auto whole = [&](std::uint64_t r0) { return r0 + (kColumnLoads - 1) * step < ke; };
      const auto issue = [&](V (&v)[kColumnLoads], std::uint64_t r0) {
#pragma unroll
        for (int u = 0; u < kColumnLoads; ++u) v[u] = load_cols<VN>(col + (r0 + u * step) * ls);
      };
      const auto fold = [&](const V (&v)[kColumnLoads], std::uint64_t r0) {
#pragma unroll
        for (int u = 0; u < kColumnLoads; ++u)
#pragma unroll
          for (int e = 0; e < VN; ++e) acc[e] = Op::combine(acc[e], core::transform_elem<Op>(v[u].e[e], r0 + u * step));
      };
      // cur holds the round at k: the next whole round's loads into nxt, then cur folds; false
      // where none follows (cur folded, the ring done).
      const auto advance = [&](V (&cur)[kColumnLoads], V (&nxt)[kColumnLoads]) {
        const bool more = whole(k + round);
        if (more) issue(nxt, k + round);
        fold(cur, k);
        k += round;
        return more;
      };
      if (whole(k) && whole(k + round)) {
        V va[kColumnLoads], vb[kColumnLoads];
        issue(va, k);
#pragma unroll 1
        while (advance(va, vb) && advance(vb, va)) {
        }
      }
    }
    for (; k < ke; k += kColumnLoads * step) {
      if constexpr (VN > 1) {
        V v[kColumnLoads];
#pragma unroll
        for (int u = 0; u < kColumnLoads; ++u)
          if (k + u * step < ke)
            v[u] = load_cols<VN>(col + (k + u * step) * p.length_stride);
#pragma unroll
        for (int u = 0; u < kColumnLoads; ++u)
          if (k + u * step < ke)
#pragma unroll
            for (int e = 0; e < VN; ++e) acc[e] = Op::combine(acc[e], core::transform_elem<Op>(v[u].e[e], k + u * step));
      } else {
        T x[kColumnLoads];
#pragma unroll
        for (int u = 0; u < kColumnLoads; ++u)
          if (k + u * step < ke) x[u] = col[(k + u * step) * p.length_stride];
#pragma unroll
        for (int u = 0; u < kColumnLoads; ++u)
          if (k + u * step < ke) acc[0] = Op::combine(acc[0], core::transform_elem<Op>(x[u], k + u * step));
      }
    }
  }
  // Each of the VN results: the lanes along the axis combine in a fixed tree, first inside the
  // warp (lanes CV apart, where a warp spans several rows), then the warps' partials in order in
  // shared memory (two buffers, one barrier per result). Partial j of vector cv sits at
  // j * S + cv.
  const unsigned S = CV < 32 ? 32u : CV, parts = BLOCK / S;
  __syncthreads();  // the previous tile's readers are done with tree
#pragma unroll 1
  for (int e = 0; e < VN; ++e) {
    Acc v = acc[e];
    for (unsigned offset = 16; offset >= CV; offset >>= 1)
      v = Op::combine(v, shfl_down_group(v, static_cast<int>(offset), 32));
    Acc* buf = tree[e & 1];
    if ((threadIdx.x & 31u) < CV) buf[threadIdx.x] = v;
    __syncthreads();
    if (threadIdx.x < CV) {
      Acc r = buf[threadIdx.x];
      for (unsigned j = 1; j < parts; ++j) r = Op::combine(r, buf[j * S + threadIdx.x]);
      if (col0 + e < p.inner) {
        if (a.per_seg == 1) a.d_out[o * p.inner + col0 + e] = core::finalize_with<Op>(r, p.length, a.d_in);
        else a.d_partials[slot * cols_per_tile + std::uint64_t(cv) * VN + e] = r;
      }
    }
  }
  if (a.per_seg == 1) return;
  // The block's partials (written by up to CV threads) precede thread 0's increment in causality
  // order (the barrier synchronizes the block), and the increment's release at device scope
  // publishes them to the last block, whose acquiring increment and barrier order its reads after
  // them (PTX memory model; the pattern of CUTLASS's semaphores). A fence per writing thread and
  // result cost microseconds of latency at small sizes; one device-scope fence.sc before the
  // increment cost about 0.35 us (H100, 2026-11-26, graph us at 2^20 elements: 2^16 x 16 columns
  // 5.98 with it, 5.62 without; 2^12 x 256 6.48, 6.13).
  __syncthreads();
  if (threadIdx.x == 0) {
    const unsigned old = core::atomic_inc_acq_rel(a.d_counters + tile, a.per_seg - 1);
    last = old == a.per_seg - 1;
  }
  __syncthreads();
  if (last) {
    // The tile's per_seg x cols_per_tile partials: thread t takes column t % cols_per_tile (or
    // every BLOCK-th column when the tile is wider than the block) and every R-th partial of it
    // from t / cols_per_tile, eight loads in flight; the R shares of a column combine in a fixed
    // tree in shared memory.
    const unsigned R = cols_per_tile >= BLOCK ? 1u : static_cast<unsigned>(BLOCK / cols_per_tile);
    const unsigned q0 = threadIdx.x / (BLOCK / R > 0 ? static_cast<unsigned>(BLOCK / R) : 1u);
    const std::uint64_t jt = R == 1 ? threadIdx.x : threadIdx.x % cols_per_tile;
    const std::uint64_t jstep = R == 1 ? BLOCK : cols_per_tile;
    for (std::uint64_t j = jt; j < cols_per_tile; j += jstep) {
      const Acc* pj = a.d_partials + tile * a.per_seg * cols_per_tile + j;
      Acc r = Op::identity();
      unsigned q = q0;
      for (; q + 7 * R < a.per_seg; q += 8 * R) {
        Acc v[8];
#pragma unroll
        for (int u = 0; u < 8; ++u) v[u] = core::load_cg(pj + std::uint64_t(q + u * R) * cols_per_tile);
#pragma unroll
        for (int u = 0; u < 8; ++u) r = Op::combine(r, v[u]);
      }
      for (; q < a.per_seg; q += R) r = Op::combine(r, core::load_cg(pj + std::uint64_t(q) * cols_per_tile));
      if (R == 1) {
        const std::uint64_t colj = cb * cols_per_tile + j;
        if (colj < p.inner) a.d_out[o * p.inner + colj] = core::finalize_with<Op>(r, p.length, a.d_in);
        continue;
      }
      tree[0][threadIdx.x] = r;  // R > 1: one column per thread, the block's threads in R shares
    }
    if (R > 1) {
      __syncthreads();
      for (unsigned step = R / 2; step > 0; step >>= 1) {
        if (q0 < step) tree[0][threadIdx.x] = Op::combine(tree[0][threadIdx.x], tree[0][threadIdx.x + step * cols_per_tile]);
        __syncthreads();
      }
      const std::uint64_t colj = cb * cols_per_tile + jt;
      if (q0 == 0 && colj < p.inner) a.d_out[o * p.inner + colj] = core::finalize_with<Op>(tree[0][threadIdx.x], p.length, a.d_in);
    }
  }
  __syncthreads();
}

// The column tiles with two rounds of loads in flight a lane (plan.col_ring): 16-byte loads of
// 4-byte elements with 4-byte accumulators only (two rounds of eight 16-byte vectors and four
// accumulators within the two blocks an SM that the one-round kernel has).
template <class T, class Op>
inline constexpr bool kColumnRing = sizeof(T) == 4 && sizeof(typename Op::acc_type) == 4 &&
                                    vector_results(static_cast<int>(sizeof(T)), static_cast<int>(sizeof(typename Op::acc_type))) > 1;

template <class T, class Op, int BLOCK>
__global__ void __launch_bounds__(BLOCK) seg_columns_kernel(seg_args<T, Op> a) {
  kernel_entry();
  constexpr int kVN = vector_results(static_cast<int>(sizeof(T)), static_cast<int>(sizeof(typename Op::acc_type)));
  const std::uint64_t VNv = a.vec ? kVN : 1;
  const std::uint64_t cols_per_tile = std::uint64_t(a.col_vecs) * VNv;
  const std::uint64_t work = a.p.outer * ((a.p.inner + cols_per_tile - 1) / cols_per_tile) * a.per_seg;
  __shared__ typename Op::acc_type tree[2][BLOCK];  // the in-block combine's two buffers
  __shared__ bool last;
  for (std::uint64_t w = blockIdx.x; w < work; w += gridDim.x) {
    if (a.vec) columns_tile<T, Op, BLOCK, kVN>(a, w, tree, last);
    else columns_tile<T, Op, BLOCK, 1>(a, w, tree, last);
  }
}
// The same, two rounds in flight a lane, 16-byte loads only (the launcher's check), held to two
// blocks an SM (the one-round kernel's occupancy for these ops).
template <class T, class Op, int BLOCK>
__global__ void __launch_bounds__(BLOCK, 2) seg_columns_ring_kernel(seg_args<T, Op> a) {
  kernel_entry();
  constexpr int kVN = vector_results(static_cast<int>(sizeof(T)), static_cast<int>(sizeof(typename Op::acc_type)));
  const std::uint64_t cols_per_tile = std::uint64_t(a.col_vecs) * kVN;
  const std::uint64_t work = a.p.outer * ((a.p.inner + cols_per_tile - 1) / cols_per_tile) * a.per_seg;
  __shared__ typename Op::acc_type tree[2][BLOCK];
  __shared__ bool last;
  for (std::uint64_t w = blockIdx.x; w < work; w += gridDim.x) columns_tile<T, Op, BLOCK, kVN, true>(a, w, tree, last);
}

// Thin columns: a thread per vector of VN adjacent results (M vectors at once, a grid's width
// apart), down the whole axis in order with kThinLoads loads in flight (rows k .. k + 8 / M - 1
// of each of its M vectors); each result is the op's fold over k = 0, 1, ... Item i is vector
// i % (inner / VN) of outer slice i / (inner / VN). No shared memory, no partials, no barrier.
template <class T, class Op, int BLOCK, int VN, int M>
__global__ void __launch_bounds__(BLOCK) seg_thin_kernel(seg_args<T, Op> a) {
  kernel_entry();
  using Acc = typename Op::acc_type;
  using V = vec16<T>;
  constexpr int RU = kThinLoads / M;
  const problem& p = a.p;
  const std::uint64_t ivec = p.inner / VN;
  const std::uint64_t items = p.outer * ivec;
  const std::uint64_t nthreads = std::uint64_t(gridDim.x) * BLOCK;
  const std::uint64_t ls = p.length_stride;
  for (std::uint64_t i0 = std::uint64_t(blockIdx.x) * BLOCK + threadIdx.x; i0 < items; i0 += nthreads * M) {
    const T* col[M];
    std::uint64_t out[M];
    bool ok[M];
    Acc acc[M][VN];
#pragma unroll
    for (int m = 0; m < M; ++m) {
      const std::uint64_t i = i0 + std::uint64_t(m) * nthreads;
      ok[m] = i < items;
      const std::uint64_t o = ok[m] ? i / ivec : 0, c = ok[m] ? (i - o * ivec) * VN : 0;
      col[m] = a.d_in + o * p.outer_stride + c;
      out[m] = o * p.inner + c;
#pragma unroll
      for (int e = 0; e < VN; ++e) acc[m][e] = Op::identity();
    }
    auto fold = [&](int m, const V& v, std::uint64_t k) {
#pragma unroll
      for (int e = 0; e < VN; ++e) acc[m][e] = Op::combine(acc[m][e], core::transform_elem<Op>(v.e[e], k));
    };
    std::uint64_t k = 0;
    for (; k + RU <= p.length; k += RU) {
      V v[RU][M];
#pragma unroll
      for (int u = 0; u < RU; ++u)
#pragma unroll
        for (int m = 0; m < M; ++m)
          if (ok[m]) v[u][m] = load_cols<VN>(col[m] + (k + u) * ls);
#pragma unroll
      for (int u = 0; u < RU; ++u)
#pragma unroll
        for (int m = 0; m < M; ++m)
          if (ok[m]) fold(m, v[u][m], k + u);
    }
    for (; k < p.length; ++k) {
      V v[M];
#pragma unroll
      for (int m = 0; m < M; ++m)
        if (ok[m]) v[m] = load_cols<VN>(col[m] + k * ls);
#pragma unroll
      for (int m = 0; m < M; ++m)
        if (ok[m]) fold(m, v[m], k);
    }
#pragma unroll
    for (int m = 0; m < M; ++m)
      if (ok[m])
#pragma unroll
        for (int e = 0; e < VN; ++e) a.d_out[out[m] + e] = core::finalize_with<Op>(acc[m][e], p.length, a.d_in);
  }
}

// Exact sums and means of contiguous segments: a block per segment with the block's exact
// accumulator (the core's exact op), normalised and rounded once by warp 0 (the same rounding of
// the same exact sum as the 1-D exact reduce, so the same bits).
template <class T, class Op, int BLOCK>
__global__ void __launch_bounds__(BLOCK, 2) seg_exact_kernel(seg_args<T, Op> a) {
  kernel_entry();
  using R = typename Op::out_type;
  if (status_bad(a.d_status)) return;
  core::exact_block_state& st = core::exact_block();
  for (std::uint64_t s = blockIdx.x; s < a.p.outer; s += gridDim.x) {
    for (int k = threadIdx.x; k < core::exact::kWords; k += BLOCK) st.words[k] = 0;
    if (threadIdx.x == 0) st.flushed = 0;
    __syncthreads();
    std::uint64_t off = 0, len = 0;
    segment_range(a.p, s, off, len);
    const core::exact_acc v = core::reduce_block_range<T, Op, BLOCK, 4, core::load_hint::ldg, core::layout::strided,
                                                       Op::max_accs>(a.d_in + off, len, 0, 1, second_row(a, s));
    __syncthreads();  // every flush is in st.words
    if (threadIdx.x < 32) core::exact_finish<R, Op::form>(v, len, a.d_out + s);
    __syncthreads();  // st is reused by the next segment
  }
}

}  // namespace tally::seg
