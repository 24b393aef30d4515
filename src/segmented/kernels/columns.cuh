// Columns (inner > 1): the thin kernel (a thread a vector of results) and column tiles (lanes
// along the axis, a ring of loads in flight).
#pragma once

#include <type_traits>

#include "groups.cuh"

namespace tally::seg {

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

// 64-bit quotient in 32-bit arithmetic where both operands fit (a 64-bit division is a subroutine
// of about 70 instructions; a tile's indices take five of them before its first load). Used by
// the kernels of 4-byte accumulators only: in others the second path made ptxas spill (i64
// argmin/argmax, integer means: 8 bytes), so they keep the plain divisions.
__device__ __forceinline__ std::uint64_t div_u64(std::uint64_t a, std::uint64_t b) {
  if (((a | b) >> 32) == 0) return static_cast<unsigned>(a) / static_cast<unsigned>(b);
  return a / b;
}

// log2 of a power of two (vector_results' counts), at compile time.
TALLY_HD constexpr int ilog2(int v) { return v <= 1 ? 0 : 1 + ilog2(v / 2); }

// Shared-memory buffers of the in-block combine: one per result of a vector for 4-byte
// accumulators and two to four results a vector (16-byte loads of 4- or 8-byte elements: every
// result's partials land before one barrier), else two (a barrier per result: 2- and 1-byte
// elements, element loads, wider accumulators; and the ring kernel, which passes NB = 2). With
// one buffer per result for 8-byte accumulators too, ptxas for sm_90 spilled (f64 min/max under
// ignore, f64 sum_sq) or lost a block an SM (f64 mean: 126 -> 166 registers).
template <class Op, int VN>
inline constexpr int kColumnTreeBufs = (VN > 1 && VN <= 4 && sizeof(typename Op::acc_type) == 4) ? VN : 2;

// Partials of other blocks a thread of a tile's last block loads at once where they are 4 bytes
// (a batch costs one round trip to L2; 32 made the f32 kernels take 204 registers).
inline constexpr int kCombineBatch = 16;

// The end of a column tile's share (columns_tile and the lean kernel): each of the VN results
// of lane (kl, cv) combines over the lanes along the axis in a fixed tree, is written (one block a
// tile) or left as the share's partial, and the tile's last block to arrive combines the shares'
// partials in order. The same order in both kernels: their plans give the same bits. RING: the
// ring kernel's batch of the last block's loads (8, not kCombineBatch; LB overrides it where > 0).
//
// CV (the tile's vectors) is a power of two, 1 to BLOCK (the plan's rule and forced_plan_refusal):
// its quotients are shifts and masks, and the loops over the warp's shuffle steps and the warps'
// partials run unrolled under a predicate (small accumulators), so a share's combine is not a
// chain of divisions and one-step loops. Those cost the lean kernel about a microsecond a block
// against the same combine with CV a constant (tally's columns_bisect probe, H200, 2026-11-29:
// 2^16 x 16 columns at 2^20 4.34 against 3.15 us). The same steps in the same order: the same bits.
template <class T, class Op, int BLOCK, int VN, bool RING, int NB, int LB = 0>
__device__ __forceinline__ void columns_tile_combine(const seg_args<T, Op>& a, const typename Op::acc_type (&acc)[VN],
                                                     typename Op::acc_type (&tree)[NB][BLOCK], bool& last,
                                                     std::uint64_t tile, std::uint64_t slot, std::uint64_t o,
                                                     std::uint64_t cb, unsigned CV) {
  using Acc = typename Op::acc_type;
  // Small accumulators take the unrolled, predicated loops (wide ones, e.g. the statistics' record,
  // would hold every step's loads at once in registers the columns kernel does not have).
  constexpr bool kUnrolled = sizeof(Acc) <= 8 && VN <= 4;
  const problem& p = a.p;
  const unsigned lg = 31u - static_cast<unsigned>(__clz(CV));  // CV = 2^lg
  const unsigned cpt = CV * VN;                                  // results a tile: at most 256 x 16
  const std::uint64_t cols_per_tile = cpt;
  const unsigned cv = threadIdx.x & (CV - 1);
  // Each of the VN results: the lanes along the axis combine in a fixed tree, first inside the
  // warp (lanes CV apart, where a warp spans several rows), then the warps' partials in order in
  // shared memory (one buffer per result and one barrier for all where NB >= VN, else two buffers
  // and one barrier per result). Partial j of vector cv sits at j * S + cv.
  const unsigned S = CV < 32 ? 32u : CV, parts = CV < 32 ? BLOCK / 32 : BLOCK >> lg;
  __syncthreads();  // the previous tile's readers are done with tree
  // Result e's partial of this lane after the shuffles inside the warp; and what becomes of the
  // block's combined result e of vector t (the output, or the tile's partial).
  const auto warp_part = [&](int e) {
    // acc[e] by a chain of selects: e is a loop counter the loop below does not unroll, and an
    // array read at a run-time index lives in local memory (a stack frame of 16-256 bytes in
    // every kernel of this path: f16's eight results, the statistics' records, u8's sixteen;
    // with it none, and the lean kernel fits 2-byte elements). The ring kernel, held to 128
    // registers, keeps the array in memory (the selects' registers made it spill 44-48 bytes).
    Acc v = acc[0];
    if constexpr (RING) {
      v = acc[e];
    } else {
#pragma unroll
      for (int k = 1; k < VN; ++k)
        if (k == e) v = acc[k];
    }
    if constexpr (kUnrolled) {
#pragma unroll
      for (unsigned offset = 16; offset >= 1; offset >>= 1)
        if (offset >= CV) v = Op::combine(v, shfl_down_group(v, static_cast<int>(offset), 32));
    } else {
      for (unsigned offset = 16; offset >= CV; offset >>= 1)
        v = Op::combine(v, shfl_down_group(v, static_cast<int>(offset), 32));
    }
    return v;
  };
  // Partial t's warps 0, 1, ..., parts - 1 of a buffer, in order.
  const auto over_warps = [&](const Acc* buf, unsigned t) {
    Acc r = buf[t];
    if constexpr (kUnrolled) {
#pragma unroll
      for (unsigned j = 1; j < BLOCK / 32; ++j)
        if (j < parts) r = Op::combine(r, buf[j * S + t]);
    } else {
      for (unsigned j = 1; j < parts; ++j) r = Op::combine(r, buf[j * S + t]);
    }
    return r;
  };
  const auto emit = [&](const Acc& r, unsigned t, int e) {
    const std::uint64_t col = cb * cols_per_tile + std::uint64_t(t) * VN + e;
    if (col < p.inner) {
      if (a.per_seg == 1) a.d_out[o * p.inner + col] = core::finalize_with<Op>(r, p.length, a.d_in);
      else a.d_partials[slot * cols_per_tile + std::uint64_t(t) * VN + e] = r;
    }
  };
  if constexpr (VN > 1 && NB >= VN) {
    // Small accumulators: every result's warp partials before one barrier, then thread i of the
    // first CV x VN combines result e = i / CV of vector i % CV over the warps in order (the
    // same reads and order as the loop below, which pays a barrier and a serial read per result).
    // (The VN results' shuffles a step at a time: VN independent chains in flight, not one after
    // another.)
    Acc v[VN];
#pragma unroll
    for (int e = 0; e < VN; ++e) v[e] = acc[e];
#pragma unroll
    for (unsigned offset = 16; offset >= 1; offset >>= 1)
      if (offset >= CV)
#pragma unroll
        for (int e = 0; e < VN; ++e) v[e] = Op::combine(v[e], shfl_down_group(v[e], static_cast<int>(offset), 32));
#pragma unroll
    for (int e = 0; e < VN; ++e)
      if ((threadIdx.x & 31u) < CV) tree[e][threadIdx.x] = v[e];
    __syncthreads();
    for (unsigned i = threadIdx.x; i < cpt; i += BLOCK) {
      const unsigned e = i >> lg, t = i & (CV - 1);
      emit(over_warps(tree[e], t), t, static_cast<int>(e));
    }
  } else {
#pragma unroll 1
    for (int e = 0; e < VN; ++e) {
      const Acc v = warp_part(e);
      Acc* buf = tree[e & 1];
      if ((threadIdx.x & 31u) < CV) buf[threadIdx.x] = v;
      __syncthreads();
      if (threadIdx.x < CV) emit(over_warps(buf, threadIdx.x), cv, e);
    }
  }
  if (a.per_seg == 1) return;
  // The block's partials (written by up to CV x VN threads) precede thread 0's increment in causality
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
    // from t / cols_per_tile, 8 or 16 loads in flight (below); the R shares of a column combine in
    // a fixed tree in shared memory.
    // (cpt and BLOCK are powers of two: 32-bit quotients, exact.)
    const unsigned lgc = lg + static_cast<unsigned>(ilog2(VN));  // cpt = 2^lgc
    const unsigned R = cpt >= BLOCK ? 1u : BLOCK >> lgc;
    const unsigned q0 = R == 1 ? 0u : threadIdx.x >> lgc;
    const unsigned jt = R == 1 ? threadIdx.x : threadIdx.x & (cpt - 1);
    const unsigned jstep = R == 1 ? BLOCK : cpt;
    for (unsigned j = jt; j < cpt; j += jstep) {
      const Acc* pj = a.d_partials + tile * a.per_seg * cols_per_tile + j;
      // Shares q0, q0 + R, ... in order. 4-byte accumulators: 16 loads in flight (8 in the ring
      // kernel, whose sweep candidates may share tiles too; offsets below 16 x max(BLOCK,
      // cols_per_tile): 32-bit), the rest (fewer) in one predicated batch; wider ones 8 at a time
      // and the rest one by one, as before.
      Acc r = Op::identity();
      unsigned q = q0;
      if constexpr (sizeof(Acc) == 4) {
        constexpr int B = LB > 0 ? LB : RING ? 8 : kCombineBatch;
        const unsigned share = R * static_cast<unsigned>(cols_per_tile);
        for (; q + (B - 1) * R < a.per_seg; q += B * R) {
          const Acc* pq = pj + std::uint64_t(q) * cols_per_tile;
          Acc v[B];
#pragma unroll
          for (int u = 0; u < B; ++u) v[u] = core::load_cg(pq + u * share);
#pragma unroll
          for (int u = 0; u < B; ++u) r = Op::combine(r, v[u]);
        }
        if (q < a.per_seg) {
          const Acc* pq = pj + std::uint64_t(q) * cols_per_tile;
          Acc v[B];
#pragma unroll
          for (int u = 0; u < B; ++u)
            if (q + u * R < a.per_seg) v[u] = core::load_cg(pq + u * share);
#pragma unroll
          for (int u = 0; u < B; ++u)
            if (q + u * R < a.per_seg) r = Op::combine(r, v[u]);
        }
      } else {
        for (; q + 7 * R < a.per_seg; q += 8 * R) {
          Acc v[8];
#pragma unroll
          for (int u = 0; u < 8; ++u) v[u] = core::load_cg(pj + std::uint64_t(q + u * R) * cols_per_tile);
#pragma unroll
          for (int u = 0; u < 8; ++u) r = Op::combine(r, v[u]);
        }
        for (; q < a.per_seg; q += R) r = Op::combine(r, core::load_cg(pj + std::uint64_t(q) * cols_per_tile));
      }
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

// inner > 1: a tile is col_vecs vectors of adjacent results (VN results each with vector loads,
// one without; vector_results) and BLOCK / col_vecs lanes along the axis. Lane kl reads rows kl, kl + lanes, ...
// of its share of the axis, kColumnLoads loads in flight (RING: two rounds of them, the next
// round's loads issued before this one folds); the lanes of one column combine by shuffles
// inside a warp, then across warps in shared memory; per_seg blocks per tile combine their
// partials like split.
template <class T, class Op, int BLOCK, int VN, bool RING = false, int NB = 2>
__device__ __forceinline__ void columns_tile(const seg_args<T, Op>& a, std::uint64_t w,
                                             typename Op::acc_type (&tree)[NB][BLOCK], bool& last) {
  using Acc = typename Op::acc_type;
  using V = vec16<T>;
  constexpr bool kFastDiv = sizeof(Acc) == 4;
  const problem& p = a.p;
  const unsigned CV = static_cast<unsigned>(a.col_vecs);  // a power of two (columns_tile_combine)
  const unsigned lg = 31u - static_cast<unsigned>(__clz(CV)), lanes = BLOCK >> lg;
  const std::uint64_t cols_per_tile = std::uint64_t(CV) * VN;
  // (kFastDiv ? the 32-bit quotients : the plain 64-bit expressions, as before.)
  const std::uint64_t col_tiles =
      kFastDiv ? div_u64(p.inner + cols_per_tile - 1, cols_per_tile) : (p.inner + cols_per_tile - 1) / cols_per_tile;
  // Work item w is share c of tile w % tiles: blocks running together read adjacent tiles of the
  // same rows (whole rows of the matrix across the GPU, not strips of it). The tile's partial of
  // share c sits at slot tile * per_seg + c.
  const std::uint64_t tiles = p.outer * col_tiles;
  const std::uint64_t cq = kFastDiv ? div_u64(w, tiles) : 0;
  const std::uint64_t tile = kFastDiv ? w - cq * tiles : w % tiles;
  const unsigned c = static_cast<unsigned>(kFastDiv ? cq : w / tiles);
  const std::uint64_t slot = tile * a.per_seg + c;
  const std::uint64_t o = kFastDiv ? div_u64(tile, col_tiles) : tile / col_tiles;
  const std::uint64_t cb = kFastDiv ? tile - o * col_tiles : tile % col_tiles;
  const unsigned cv = threadIdx.x & (CV - 1), kl = threadIdx.x >> lg;
  const std::uint64_t col0 = cb * cols_per_tile + std::uint64_t(cv) * VN;
  const std::uint64_t chunk = kFastDiv ? div_u64(p.length + a.per_seg - 1, a.per_seg) : (p.length + a.per_seg - 1) / a.per_seg;
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
    if constexpr (VN > 1) {
      // Whole rounds first, without a predicate a load (the lean kernel's note: eight live
      // predicates left the eighth load waiting for the first); the same rows in the same order.
      for (; k + (kColumnLoads - 1) * step < ke; k += kColumnLoads * step) {
        V v[kColumnLoads];
#pragma unroll
        for (int u = 0; u < kColumnLoads; ++u) v[u] = load_cols<VN>(col + (k + u * step) * p.length_stride);
#pragma unroll
        for (int u = 0; u < kColumnLoads; ++u)
#pragma unroll
          for (int e = 0; e < VN; ++e) acc[e] = Op::combine(acc[e], core::transform_elem<Op>(v[u].e[e], k + u * step));
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
  columns_tile_combine<T, Op, BLOCK, VN, RING, NB>(a, acc, tree, last, tile, slot, o, cb, CV);
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
  constexpr bool kFastDiv = sizeof(typename Op::acc_type) == 4;
  const std::uint64_t work =
      a.p.outer *
      (kFastDiv ? div_u64(a.p.inner + cols_per_tile - 1, cols_per_tile) : (a.p.inner + cols_per_tile - 1) / cols_per_tile) *
      a.per_seg;
  constexpr int NB = kColumnTreeBufs<Op, kVN>;
  __shared__ typename Op::acc_type tree[NB][BLOCK];  // the in-block combine's buffers
  __shared__ bool last;
  for (std::uint64_t w = blockIdx.x; w < work; w += gridDim.x) {
    if (a.vec) columns_tile<T, Op, BLOCK, kVN, false, NB>(a, w, tree, last);
    else columns_tile<T, Op, BLOCK, 1, false, NB>(a, w, tree, last);
  }
}
// The same, two rounds in flight a lane, 16-byte loads only (the launcher's check), held to two
// blocks an SM (the one-round kernel's occupancy for these ops).
template <class T, class Op, int BLOCK>
__global__ void __launch_bounds__(BLOCK, 2) seg_columns_ring_kernel(seg_args<T, Op> a) {
  kernel_entry();
  constexpr int kVN = vector_results(static_cast<int>(sizeof(T)), static_cast<int>(sizeof(typename Op::acc_type)));
  const std::uint64_t cols_per_tile = std::uint64_t(a.col_vecs) * kVN;
  constexpr bool kFastDiv = sizeof(typename Op::acc_type) == 4;
  const std::uint64_t work =
      a.p.outer *
      (kFastDiv ? div_u64(a.p.inner + cols_per_tile - 1, cols_per_tile) : (a.p.inner + cols_per_tile - 1) / cols_per_tile) *
      a.per_seg;
  // Two buffers, a barrier per result: the one-barrier combine made this kernel spill (ptxas for
  // sm_90: 168 bytes a thread of the f32 sum under its 128 registers).
  __shared__ typename Op::acc_type tree[2][BLOCK];
  __shared__ bool last;
  for (std::uint64_t w = blockIdx.x; w < work; w += gridDim.x) columns_tile<T, Op, BLOCK, kVN, true>(a, w, tree, last);
}

// The lean column tiles (plan.col_lean): plain ops' 16-byte loads, held to kColumnsLeanBlocksPerSm
// blocks an SM (64 registers a thread) where the columns kernel, whose generic parts (64-bit
// counts, a grid-stride loop over the tiles, the ring, element loads) take 100-128, holds two. A
// block a work item (the grid is the plan's tiles x shares: a loop over them kept the item's
// indices live through the combine and spilled), 32-bit counts (tiles x shares, the axis and the
// results under 2^31: plan.cpp, column_lean_fits), a lane's row pointer stepped (not recomputed)
// between rounds, whole rounds of loads without predicates, the same loads in flight, the same fold of each lane's rows in order and the
// same combine (columns_tile_combine): the columns kernel's bits for the same plan. Ops whose
// accumulators spill here keep the columns kernel (launch.cuh, lean_columns_ok).
inline constexpr int kColumnsLeanBatch = 8;  // the last block's loads in flight (16 spilled f32 max)
// CVC: the tile's vectors as a constant (tally_columns_probe's comparison; the library runs 0: the
// plan's col_vecs, a power of two, its quotients shifts).
template <class T, class Op, int BLOCK, unsigned CVC = 0>
__global__ void __launch_bounds__(BLOCK, kColumnsLeanBlocksPerSm) seg_columns_lean_kernel(seg_args<T, Op> a) {
  kernel_entry();
  using Acc = typename Op::acc_type;
  using V = vec16<T>;
  constexpr int VN = vector_results(static_cast<int>(sizeof(T)), static_cast<int>(sizeof(Acc)));
  constexpr int NB = kColumnTreeBufs<Op, VN>;
  __shared__ Acc tree[NB][BLOCK];
  __shared__ bool last;
  const problem& p = a.p;
  const unsigned CV = CVC > 0 ? CVC : static_cast<unsigned>(a.col_vecs);
  const unsigned lg = 31u - static_cast<unsigned>(__clz(CV)), lgc = lg + static_cast<unsigned>(ilog2(VN));
  const unsigned lanes = BLOCK >> lg, cols_per_tile = CV * VN;
  const unsigned inner = static_cast<unsigned>(p.inner), len = static_cast<unsigned>(p.length), per = a.per_seg;
  const unsigned col_tiles = (inner + cols_per_tile - 1) >> lgc;
  const unsigned tiles = static_cast<unsigned>(p.outer) * col_tiles;
  // Work item blockIdx.x: share c of tile blockIdx.x % tiles, as in columns_tile.
  const unsigned w = blockIdx.x, c = w / tiles, tile = w - c * tiles;
  const unsigned o = tile / col_tiles, cb = tile - o * col_tiles;
  const unsigned cv = threadIdx.x & (CV - 1), kl = threadIdx.x >> lg;
  const unsigned col0 = cb * cols_per_tile + cv * VN;
  const unsigned chunk = (len + per - 1) / per, kb = chunk * c, ke = min(kb + chunk, len);
  Acc acc[VN];
#pragma unroll
  for (int e = 0; e < VN; ++e) acc[e] = Op::identity();
  if (col0 < inner) {
    const std::uint64_t step = std::uint64_t(lanes) * p.length_stride;
    const T* q = a.d_in + std::uint64_t(o) * p.outer_stride + col0 + std::uint64_t(kb + kl) * p.length_stride;
    const auto fold = [&](const V& v, unsigned k) {
#pragma unroll
      for (int e = 0; e < VN; ++e) acc[e] = Op::combine(acc[e], core::transform_elem<Op>(v.e[e], std::uint64_t(k)));
    };
    unsigned k = kb + kl;
    // Whole rounds without a predicate a load: eight predicates live across a round's loads left
    // sm_90's seven predicate registers short, and ptxas issued the eighth load only after the
    // first had landed (two latencies a round: 254 against 242 us for 2^16 x 4096 f32, c32 x8,
    // tally_columns_probe on the H200, 2026-11-29). The last, partial round is predicated.
    for (; k + (kColumnLoads - 1) * lanes < ke; k += kColumnLoads * lanes) {
      V v[kColumnLoads];
#pragma unroll
      for (int u = 0; u < kColumnLoads; ++u) {
        v[u] = load_cols<VN>(q);
        q += step;
      }
#pragma unroll
      for (int u = 0; u < kColumnLoads; ++u) fold(v[u], k + u * lanes);
    }
    if (k < ke) {
      V v[kColumnLoads];
#pragma unroll
      for (int u = 0; u < kColumnLoads; ++u)
        if (k + u * lanes < ke) v[u] = load_cols<VN>(q + u * step);
#pragma unroll
      for (int u = 0; u < kColumnLoads; ++u)
        if (k + u * lanes < ke) fold(v[u], k + u * lanes);
    }
  }
  columns_tile_combine<T, Op, BLOCK, VN, false, NB, kColumnsLeanBatch>(a, acc, tree, last, tile,
                                                                       std::uint64_t(tile) * per + c, o, cb, CV);
}

// A thread's N adjacent results at dst: whole 16-byte stores where they are 16 bytes or a multiple
// and dst is 16-byte aligned (a warp's stores then cover its results once, where N single stores
// would each touch every sector of them), else one store a result. The same values either way.
template <class Out, int N>
__device__ __forceinline__ void store_adjacent(Out* dst, const Out (&r)[N]) {
  constexpr int kBytes = N * static_cast<int>(sizeof(Out));
  if constexpr (kBytes % 16 == 0 && std::is_trivially_copyable_v<Out>) {
    if ((reinterpret_cast<std::uintptr_t>(dst) & 15u) == 0) {
#pragma unroll
      for (int q = 0; q < kBytes / 16; ++q) {
        uint4 w;
        __builtin_memcpy(&w, reinterpret_cast<const unsigned char*>(r) + 16 * q, 16);
        reinterpret_cast<uint4*>(dst)[q] = w;
      }
      return;
    }
  }
#pragma unroll
  for (int e = 0; e < N; ++e) dst[e] = r[e];
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
    using Out = typename Op::out_type;
#pragma unroll
    for (int m = 0; m < M; ++m)
      if (ok[m]) {
        Out r[VN];
#pragma unroll
        for (int e = 0; e < VN; ++e) r[e] = core::finalize_with<Op>(acc[m][e], p.length, a.d_in);
        store_adjacent(a.d_out + out[m], r);
      }
  }
}

}  // namespace tally::seg
