// Ragged spans: a warp's window of shared memory over consecutive segments.
#pragma once

#include "groups.cuh"

namespace tally::seg {

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

}  // namespace tally::seg
