// The segmented layer's kernels: group (short contiguous segments), split (long contiguous
// segments, a block or several per segment), columns (inner > 1) and exact_block. Every op is a
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

template <class T, class Op>
struct seg_args {
  const T* d_in;
  typename Op::out_type* d_out;
  problem p;
  int group;
  unsigned per_seg;
  int col_vecs;
  bool vec;
  typename Op::acc_type* d_partials;         // split / columns with per_seg > 1
  unsigned int* d_counters;                  // one per segment or tile, zero between calls
  const unsigned long long* d_status;        // ragged: kStatusOk, else the first bad segment
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

// Shuffle down within groups of `width` lanes (a power of two dividing 32).
template <class A>
__device__ __forceinline__ A shfl_down_group(A v, int offset, int width) {
  static_assert(sizeof(A) % 4 == 0, "accumulators are whole 32-bit words");
  constexpr int W = sizeof(A) / 4;
  std::uint32_t w[W];
  __builtin_memcpy(w, &v, sizeof(A));
#pragma unroll
  for (int k = 0; k < W; ++k) w[k] = __shfl_down_sync(0xffffffffu, w[k], offset, width);
  A r;
  __builtin_memcpy(&r, w, sizeof(A));
  return r;
}

// One lane's share of a contiguous segment read by G lanes: the scalar head up to 16-byte
// alignment, whole vectors (lane, lane + G, ...; four loads in flight), the scalar tail. Element
// indices are relative to the segment's start.
template <class T, class Op>
__device__ __forceinline__ typename Op::acc_type group_share(const T* base, std::uint64_t len, unsigned lane,
                                                             unsigned G) {
  using V = vec16<T>;
  constexpr int VN = V::size;
  typename Op::acc_type acc = Op::identity();
  const core::split16 s = core::split_input(base, len);
  for (std::uint64_t j = lane; j < s.head; j += G) acc = Op::combine(acc, core::transform_elem<Op>(base[j], j));
  const V* vb = reinterpret_cast<const V*>(base + s.head);
  std::uint64_t j = lane;
  for (; j + 3 * std::uint64_t(G) < s.nvec; j += 4 * std::uint64_t(G)) {
    V v[4];
#pragma unroll
    for (int u = 0; u < 4; ++u) v[u] = core::load_vec<core::load_hint::ldg>(vb + j + u * G);
#pragma unroll
    for (int u = 0; u < 4; ++u) acc = core::fold_vec<Op>(acc, v[u], s.head + (j + u * G) * VN);
  }
  for (; j < s.nvec; j += G) acc = core::fold_vec<Op>(acc, core::load_vec<core::load_hint::ldg>(vb + j), s.head + j * VN);
  for (std::uint64_t t = s.tail_begin + lane; t < len; t += G)
    acc = Op::combine(acc, core::transform_elem<Op>(base[t], t));
  return acc;
}

// Short contiguous segments: a group of G lanes per segment; the loop is uniform across each
// warp (every lane shuffles), lanes whose segment is past the end carry the identity.
template <class T, class Op, int BLOCK>
__global__ void __launch_bounds__(BLOCK) seg_group_kernel(seg_args<T, Op> a) {
  if (status_bad(a.d_status)) return;
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
    const T* base = a.d_in + off;
    typename Op::acc_type acc = group_share<T, Op>(base, len, lane, G);
    for (unsigned offset = G / 2; offset > 0; offset >>= 1)
      acc = Op::combine(acc, shfl_down_group(acc, static_cast<int>(offset), static_cast<int>(G)));
    if (valid && lane == 0) a.d_out[s] = core::finalize_with<Op>(acc, len, base);
  }
}

// Long contiguous segments: per_seg blocks per segment, each reducing a grid-stride share with
// the core's block code (reduce_block_range: aligned 16-byte body, scalar head and tail, the
// op's own fold and block tree); the last block of a segment combines the partials in order.
template <class T, class Op, int BLOCK>
__global__ void __launch_bounds__(BLOCK, 2) seg_split_kernel(seg_args<T, Op> a) {
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
        base, len, c, a.per_seg);
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

// inner > 1: a tile is col_vecs vectors of adjacent results (VN results each with 16-byte loads,
// one without) and BLOCK / col_vecs lanes along the axis. Lane kl reads rows kl, kl + lanes, ...
// of its share of the axis, four loads in flight; the lanes of one column combine in a fixed
// tree in shared memory; per_seg blocks per tile combine their partials like split.
template <class T, class Op, int BLOCK, int VN>
__device__ __forceinline__ void columns_tile(const seg_args<T, Op>& a, std::uint64_t w) {
  using Acc = typename Op::acc_type;
  using V = vec16<T>;
  __shared__ Acc tree[BLOCK];
  __shared__ bool last;
  const problem& p = a.p;
  const unsigned CV = static_cast<unsigned>(a.col_vecs), lanes = BLOCK / CV;
  const std::uint64_t cols_per_tile = std::uint64_t(CV) * VN;
  const std::uint64_t col_tiles = (p.inner + cols_per_tile - 1) / cols_per_tile;
  const std::uint64_t tile = w / a.per_seg;
  const unsigned c = static_cast<unsigned>(w % a.per_seg);
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
    if constexpr (VN > 1) {
      for (; k + 3 * std::uint64_t(lanes) < ke; k += 4 * std::uint64_t(lanes)) {
        V v[4];
#pragma unroll
        for (int u = 0; u < 4; ++u)
          v[u] = core::load_vec<core::load_hint::ldg>(reinterpret_cast<const V*>(col + (k + u * lanes) * p.length_stride));
#pragma unroll
        for (int u = 0; u < 4; ++u)
#pragma unroll
          for (int e = 0; e < VN; ++e) acc[e] = Op::combine(acc[e], core::transform_elem<Op>(v[u].e[e], k + u * lanes));
      }
      for (; k < ke; k += lanes) {
        const V v = core::load_vec<core::load_hint::ldg>(reinterpret_cast<const V*>(col + k * p.length_stride));
#pragma unroll
        for (int e = 0; e < VN; ++e) acc[e] = Op::combine(acc[e], core::transform_elem<Op>(v.e[e], k));
      }
    } else {
      for (; k + 3 * std::uint64_t(lanes) < ke; k += 4 * std::uint64_t(lanes)) {
        T x[4];
#pragma unroll
        for (int u = 0; u < 4; ++u) x[u] = col[(k + u * lanes) * p.length_stride];
#pragma unroll
        for (int u = 0; u < 4; ++u) acc[0] = Op::combine(acc[0], core::transform_elem<Op>(x[u], k + u * lanes));
      }
      for (; k < ke; k += lanes) acc[0] = Op::combine(acc[0], core::transform_elem<Op>(col[k * p.length_stride], k));
    }
  }
  // Each of the VN results: the lanes along the axis combine in a fixed tree.
#pragma unroll 1
  for (int e = 0; e < VN; ++e) {
    __syncthreads();  // the previous result's readers are done with tree
    tree[threadIdx.x] = acc[e];
    __syncthreads();
    for (unsigned step = lanes / 2; step > 0; step >>= 1) {
      if (kl < step) tree[threadIdx.x] = Op::combine(tree[threadIdx.x], tree[threadIdx.x + step * CV]);
      __syncthreads();
    }
    if (kl == 0 && col0 + e < p.inner) {
      if (a.per_seg == 1) a.d_out[o * p.inner + col0 + e] = core::finalize_with<Op>(tree[cv], p.length, a.d_in);
      else {
        a.d_partials[w * cols_per_tile + std::uint64_t(cv) * VN + e] = tree[cv];
        __threadfence();  // visible before thread 0 publishes the tile's count
      }
    }
  }
  if (a.per_seg == 1) return;
  __syncthreads();
  if (threadIdx.x == 0) {
    const unsigned old = core::atomic_inc_acq_rel(a.d_counters + tile, a.per_seg - 1);
    last = old == a.per_seg - 1;
  }
  __syncthreads();
  if (last) {
    for (std::uint64_t j = threadIdx.x; j < cols_per_tile; j += BLOCK) {
      const std::uint64_t colj = cb * cols_per_tile + j;
      if (colj >= p.inner) continue;
      Acc r = Op::identity();
      for (unsigned q = 0; q < a.per_seg; ++q)
        r = Op::combine(r, core::load_cg(a.d_partials + (tile * a.per_seg + q) * cols_per_tile + j));
      a.d_out[o * p.inner + colj] = core::finalize_with<Op>(r, p.length, a.d_in);
    }
  }
  __syncthreads();
}

template <class T, class Op, int BLOCK>
__global__ void __launch_bounds__(BLOCK) seg_columns_kernel(seg_args<T, Op> a) {
  const std::uint64_t VNv = a.vec ? vec16<T>::size : 1;
  const std::uint64_t cols_per_tile = std::uint64_t(a.col_vecs) * VNv;
  const std::uint64_t work = a.p.outer * ((a.p.inner + cols_per_tile - 1) / cols_per_tile) * a.per_seg;
  for (std::uint64_t w = blockIdx.x; w < work; w += gridDim.x) {
    if (a.vec) columns_tile<T, Op, BLOCK, vec16<T>::size>(a, w);
    else columns_tile<T, Op, BLOCK, 1>(a, w);
  }
}

// Exact sums and means of contiguous segments: a block per segment with the block's exact
// accumulator (the core's exact op), normalised and rounded once by warp 0 (the same rounding of
// the same exact sum as the 1-D exact reduce, so the same bits).
template <class T, class Op, int BLOCK>
__global__ void __launch_bounds__(BLOCK, 2) seg_exact_kernel(seg_args<T, Op> a) {
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
                                                       Op::max_accs>(a.d_in + off, len, 0, 1);
    __syncthreads();  // every flush is in st.words
    if (threadIdx.x < 32) core::exact_finish<R, Op::form>(v, len, a.d_out + s);
    __syncthreads();  // st is reused by the next segment
  }
}

}  // namespace tally::seg
