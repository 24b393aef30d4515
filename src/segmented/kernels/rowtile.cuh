// Row tiles: many short rows a warp, reduce-scattered where the op commutes.
#pragma once

#include "groups.cuh"

namespace tally::seg {

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
      pa[i] = Op::combine(keep, core::shfl_xor(send, d));
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

}  // namespace tally::seg
