// Lane groups (short contiguous or ragged segments, G lanes a segment) and what the other
// ragged kernels share with them: a lane's share of a segment, the long segments' marks, and the
// start of a kernel that needs the offsets in order.
#pragma once

#include "common.cuh"

namespace tally::seg {

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

// Segment s, elements [off, off + len) of the input, read by the whole warp (group_share, 32
// lanes) and reduced by the warp's tree; lane 0 writes its result.
template <class T, class Op, int U, bool EAGER = false>
__device__ __forceinline__ void warp_segment(const seg_args<T, Op>& a, std::uint64_t s, std::uint64_t off,
                                             std::uint64_t len, unsigned lane32) {
  const T* base = a.d_in + off;
  typename Op::acc_type r = group_share<T, Op, U, EAGER>(base, len, lane32, 32, second_row(a, s));
  r = core::warp_reduce<Op, true>(r);
  if (lane32 == 0) a.d_out[s] = core::finalize_with<Op>(r, len, base);
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
    warp_segment<T, Op, U, EAGER>(a, ls, loff, llen, lane32);
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

}  // namespace tally::seg
