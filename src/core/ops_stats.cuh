// The fused statistics operator (count, sum, min, max, mean and the sum of squared deviations in
// one pass): its accumulator, its merge and the block merge in warp means the kernel calls
// instead of a tree of merges (custom_block). The kernel sees it through the interface of ops.cuh.
#pragma once

#include <cstdint>
#include <type_traits>

#include "block.cuh"
#include "ops.cuh"

namespace tally::core {

// ---- fused statistics -----------------------------------------------------------------------
// Each accumulator keeps shifted sums in f64: s1 = sum(x - c), s2 = sum((x - c)^2) about its own
// centre c (a thread's first element), with the plain sum, the count and min/max beside them.
// Merging two accumulators re-centres both on one new centre near their joint mean; the algebra
// of the re-centring is exact (s1 + n d, s2 + d (2 s1 + n d) with d the shift), so the centre
// need only be near the mean, and it is found with approximate reciprocals (rcp.approx.f64)
// instead of IEEE divisions: a merge is a dozen additions and multiplications, which keeps the
// warp and block trees short (the divisions of Chan's update were most of the small-size cost).
// Once centred near its mean, an accumulator's further merges add non-negative terms (m2 stays
// well conditioned, as in Chan's method). m2 = s2 - s1^2 / n at the end.
//
// min/max run in the input's own precision: f32, f16 and bf16 with min.NaN/max.NaN (NaN
// propagates by itself, so no NaN flag), f64 NaN-blind with a NaN flag (no one-instruction
// NaN-propagating f64 min exists), integers in f64 (as the results are f64).
template <class M, bool Flag>
struct stats_acc {
  double n, c, s1, s2, sum;
  M mn, mx;
  static constexpr bool has_flag = false;
};
template <>
struct stats_acc<double, true> {
  double n, c, s1, s2, sum, mn, mx, nan;
  static constexpr bool has_flag = true;
};
struct stats_out {  // layout of tally::stats
  std::uint64_t count;
  double sum, min, max, mean, m2;
};
// An approximation of 1/x (about 20 correct bits) for centring: never used for a result.
__device__ __forceinline__ double rcp_approx(double x) {
  double r;
  asm("rcp.approx.ftz.f64 %0, %1;" : "=d"(r) : "d"(x));
  return r;
}
// 1/x within an ulp or so: rcp_approx and two Newton steps (each doubles the correct bits), for
// the warps' and the block's means, which centre the re-centred sums (x > 0).
__device__ __forceinline__ double rcp_refined(double x) {
  double r = rcp_approx(x);
  r = fma_rn(r, fma_rn(-x, r, 1.0), r);
  return fma_rn(r, fma_rn(-x, r, 1.0), r);
}
template <class T, bool Ignore>
struct op_stats {
  static constexpr bool custom_fold = true, is_fp = is_float_v<T>;
  static constexpr bool narrow = std::is_same_v<num_t<T>, float>;  // f32, f16, bf16
  // NaN handling: narrow floats by min.NaN, f64 under propagation by a flag, ignore by skipping.
  static constexpr bool flag = std::is_same_v<num_t<T>, double> && !Ignore;
  using M = std::conditional_t<narrow, float, double>;
  static constexpr int max_accs = 2;
  static constexpr bool custom_block = true, heavy = true;
  // f64: a round's fold (16 elements a thread at 512 x 8, about 9 instructions each) leaves each
  // warp without loads in flight for part of every round (stats f64 at 91-94% of the fast sum on
  // the H200, 95.5% on the H100), so from 2 x the L2 up the next round's loads go out first
  // (tuning.hpp, pipeline_rounds). Not f32 (no gain on the H100 at any size) nor the integers
  // (8 bytes of spills a thread at 512 x 8 in a build with the pipelined loop; ptxas, sm_90).
  static constexpr bool pipelined = std::is_same_v<T, double>;
  using acc_type = stats_acc<M, flag>;
  using out_type = stats_out;
  static __host__ __device__ acc_type identity() {
    acc_type a{};
    a.n = a.c = a.s1 = a.s2 = a.sum = 0;
    a.mn = M(__builtin_huge_val());
    a.mx = M(-__builtin_huge_val());
    if constexpr (flag) a.nan = 0;
    return a;
  }
  static __device__ __forceinline__ M extreme(M a, M b, bool max) {
    if constexpr (narrow) return max ? pick_extreme<float, true, Ignore>(a, b) : pick_extreme<float, false, Ignore>(a, b);
    else return max ? fmax(a, b) : fmin(a, b);  // NaN-blind; the flag (f64) restores propagation
  }
  // Adds one element (its value m in the input's precision, x widened to f64).
  static __device__ __forceinline__ void add(acc_type& a, M m, double x) {
    if constexpr (is_fp && Ignore) {
      const bool ok = x == x;
      if (a.n == 0 && ok) a.c = x;  // the first number this accumulator counts
      const double d = ok ? x - a.c : 0.0;
      a.s1 += d;
      a.s2 = fma_rn(d, d, a.s2);
      a.sum += ok ? x : 0.0;
      a.n += ok ? 1.0 : 0.0;
    } else {
      const double d = x - a.c;
      a.s1 += d;
      a.s2 = fma_rn(d, d, a.s2);
      a.sum += x;
      if constexpr (flag) a.nan = (x != x) ? 1.0 : a.nan;
    }
    a.mn = extreme(a.mn, m, false);
    a.mx = extreme(a.mx, m, true);
  }
  static __device__ __forceinline__ M value_of(T x) {
    if constexpr (narrow) return as_num(x);
    else return static_cast<double>(as_num(x));
  }
  static __device__ acc_type transform(T x) {
    acc_type a = identity();
    const double v = static_cast<double>(as_num(x));
    a.c = (v == v) ? v : 0.0;
    add(a, value_of(x), v);
    if constexpr (!(is_fp && Ignore)) a.n = 1;
    return a;
  }
  template <int VN>
  static __device__ __forceinline__ acc_type fold(acc_type a, const T (&e)[VN], std::uint64_t) {
    if constexpr (!(is_fp && Ignore)) {
      if (a.n == 0) a.c = static_cast<double>(as_num(e[0]));
    }
#pragma unroll
    for (int k = 0; k < VN; ++k) add(a, value_of(e[k]), static_cast<double>(as_num(e[k])));
    if constexpr (!(is_fp && Ignore)) a.n += VN;
    return a;
  }
  static __device__ acc_type combine(acc_type a, acc_type b) {
    if (a.n == 0 || b.n == 0) {
      acc_type r = a.n == 0 ? b : a;
      if constexpr (flag) r.nan = a.nan > b.nan ? a.nan : b.nan;
      return r;
    }
    const double n = a.n + b.n;
    // A centre near the joint mean (approximate: it only has to keep the sums well scaled).
    const double ma = a.c + a.s1 * rcp_approx(a.n), mb = b.c + b.s1 * rcp_approx(b.n);
    const double c = ma + (mb - ma) * (b.n * rcp_approx(n));
    const double da = a.c - c, db = b.c - c;
    acc_type r;
    r.n = n;
    r.c = c;
    r.s1 = fma_rn(a.n, da, a.s1) + fma_rn(b.n, db, b.s1);
    r.s2 = fma_rn(da, fma_rn(a.n, da, 2.0 * a.s1), a.s2) + fma_rn(db, fma_rn(b.n, db, 2.0 * b.s1), b.s2);
    r.sum = a.sum + b.sum;
    r.mn = extreme(a.mn, b.mn, false);
    r.mx = extreme(a.mx, b.mx, true);
    if constexpr (flag) r.nan = a.nan > b.nan ? a.nan : b.nan;
    return r;
  }
  // A block's accumulators without a tree of merges: per warp, then per block, the count and
  // the plain sum first, which give a mean; then the sums re-centred on it (s1 + n d and
  // s2 + d (2 s1 + n d) with d = c - mean: exact algebra) and summed with min and max in a fixed
  // order. A warp re-centres its threads on the warp's mean; warp 0 re-centres the warps on the
  // block's mean mu, and thread 0 gets the block's accumulator centred on mu. A mean as centre
  // keeps every re-centred s2 a part of the block's m2 (no cancellation; a thread's or a block's
  // first element as a shared centre could be an outlier: m2 up to n_b x 2^-53 off,
  // scripts/stats-centre-study.py). s1 is carried, not taken as zero: the means come from the
  // rounded plain sum, which leaves s1 = n (mean - c) small but not zero, and a merge that
  // dropped it erred by far more than the rest (m2 of 2^20 f64 values in [1e6, 1e6 + 1] on 132
  // blocks 3e-13 relative instead of 2e-16).
  // The warp steps are what the small sizes pay for (every warp shuffles every word at every
  // step; one shuffle a clock an SM), so each warp-wide exchange sends half of what both lanes
  // hold: (n, sum) splits at the first step, lanes with bit 4 of their index keeping the sum,
  // the others n, and meet again at the end; (s1, s2, min, -max) split at the first and second
  // steps (a lane keeps one of the four). The max rides negated, so every extreme is a min. f32:
  // 12 + 11 shuffles a warp instead of 30 + 20; f64 with the NaN flag (folded into min and max,
  // which then propagate NaN): 12 + 12 instead of 50 + 20. Warps without a counted element
  // skip their steps (the last block's merge of one partial per block fills few warps).
  static __device__ __forceinline__ M tree_min(M a, M b) {
    if constexpr (narrow) return pick_extreme<float, false, Ignore>(a, b);
    else if constexpr (flag) return pick_extreme<double, false, false>(a, b);
    else return fmin(a, b);
  }
  static __device__ __forceinline__ std::uint64_t bits64(double x) {
    return static_cast<std::uint64_t>(__double_as_longlong(x));
  }
  static __device__ __forceinline__ std::uint64_t bits64(float x) { return __float_as_uint(x); }
  static __device__ __forceinline__ M m_of(std::uint64_t b) {
    if constexpr (narrow) return __uint_as_float(static_cast<std::uint32_t>(b));
    else return __longlong_as_double(static_cast<long long>(b));
  }
  template <int BLOCK>
  static __device__ __forceinline__ acc_type block_reduce(acc_type a) {
    constexpr int kWarps = BLOCK / 32;
    static_assert(kWarps >= 1 && kWarps <= 32 && (kWarps & (kWarps - 1)) == 0,
                  "a power of two of warps");
    __shared__ double sh_n[kWarps], sh_sum[kWarps], sh_c[kWarps], sh_s1[kWarps], sh_s2[kWarps];
    __shared__ M sh_mn[kWarps], sh_nmx[kWarps];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const bool hi16 = (lane & 16) != 0, hi8 = (lane & 8) != 0;
    const M inf = M(__builtin_huge_val());
    M mn = a.mn, nmx = -a.mx;
    if constexpr (flag) {
      if (a.nan != 0) mn = nmx = M(__builtin_nan(""));
    }
    __syncthreads();  // an earlier call's readers are done with the scratch
    if (__any_sync(0xffffffffu, a.n > 0)) {  // warp-uniform
      // (n, sum): half each from the first step, then both in every lane.
      double v = hi16 ? a.sum : a.n;
      v += shfl_xor(hi16 ? a.n : a.sum, 16);
#pragma unroll
      for (int m = 8; m > 0; m >>= 1) v += shfl_xor(v, m);
      const double o = shfl_xor(v, 16);
      const double nw = hi16 ? o : v, sw = hi16 ? v : o;
      // nw > 0 in some lane, so in all. mul_rn: a product contracted into the subtraction below
      // would centre the lanes on the unrounded mean while the entry records the rounded one.
      const double cw = mul_rn(sw, rcp_refined(nw));
      double s1 = 0.0, s2 = 0.0;
      if (a.n > 0) {
        const double d = a.c - cw;
        s1 = fma_rn(a.n, d, a.s1);
        s2 = fma_rn(d, fma_rn(a.n, d, 2.0 * a.s1), a.s2);
      }
      // (s1, min) in lanes 0-15, (s2, -max) in 16-31; then the double in lanes whose bit 3 is 0,
      // the extreme in the others: lanes 0, 8, 16 and 24 end with s1, min, s2 and -max.
      double kd = hi16 ? s2 : s1;
      M km = hi16 ? nmx : mn;
      kd += shfl_xor(hi16 ? s1 : s2, 16);
      km = tree_min(km, shfl_xor(hi16 ? mn : nmx, 16));
#pragma unroll
      for (int m = 8; m > 0; m >>= 1) {
        // At the split (m = 8) a lane sends what its partner keeps; after it, what it keeps.
        const bool send_d = m == 8 ? hi8 : !hi8;
        const std::uint64_t r = shfl_xor(send_d ? bits64(kd) : bits64(km), m);
        const double rd = __longlong_as_double(static_cast<long long>(r));
        if (hi8) km = tree_min(km, m_of(r));
        else kd += rd;
      }
      if (lane == 0) sh_n[warp] = nw, sh_sum[warp] = sw, sh_c[warp] = cw, sh_s1[warp] = kd;
      if (lane == 8) sh_mn[warp] = km;
      if (lane == 16) sh_s2[warp] = kd;
      if (lane == 24) sh_nmx[warp] = km;
    } else if (lane == 0) {
      sh_n[warp] = sh_sum[warp] = sh_c[warp] = sh_s1[warp] = sh_s2[warp] = 0.0;
      sh_mn[warp] = sh_nmx[warp] = inf;
    }
    __syncthreads();
    acc_type r = identity();
    if (warp != 0) return r;
    // Warp 0: the warps' (n, sum) to every lane, the block's mean mu, each warp's sums re-centred
    // on it, then (s1, s2, min, -max) down to lane 0.
    const bool in = lane < kWarps;
    double n = in ? sh_n[lane] : 0.0, sum = in ? sh_sum[lane] : 0.0;
    const double c = in ? sh_c[lane] : 0.0;
    double s1 = in ? sh_s1[lane] : 0.0, s2 = in ? sh_s2[lane] : 0.0;
    mn = in ? sh_mn[lane] : inf;
    nmx = in ? sh_nmx[lane] : inf;
    const double nl = n;
#pragma unroll
    for (int m = kWarps / 2; m > 0; m >>= 1) {
      n += shfl_xor(n, m);
      sum += shfl_xor(sum, m);
    }
    const double mu = n > 0 ? mul_rn(sum, rcp_refined(n)) : 0.0;  // rounded, as r.c records it
    if (nl > 0) {
      const double d = c - mu;
      s2 = fma_rn(d, fma_rn(nl, d, 2.0 * s1), s2);
      s1 = fma_rn(nl, d, s1);
    }
#pragma unroll
    for (int m = kWarps / 2; m > 0; m >>= 1) {
      s1 += shfl_down(s1, m);
      s2 += shfl_down(s2, m);
      mn = tree_min(mn, shfl_down(mn, m));
      nmx = tree_min(nmx, shfl_down(nmx, m));
    }
    r.n = n;
    r.c = mu;
    r.s1 = s1;
    r.s2 = s2;
    r.sum = sum;
    r.mn = mn;
    r.mx = -nmx;
    if constexpr (flag) r.nan = mn != mn ? 1.0 : 0.0;
    return r;
  }
  static __device__ out_type finalize(acc_type a) {
    const double qnan = __builtin_nan("");
    out_type o;
    o.count = static_cast<std::uint64_t>(a.n);
    o.sum = a.sum;
    if (a.n == 0) {
      o.min = o.max = o.mean = qnan;
      o.m2 = 0;
      return o;
    }
    bool nan = false;
    if constexpr (flag) nan = a.nan != 0;
    o.min = nan ? qnan : static_cast<double>(a.mn);
    o.max = nan ? qnan : static_cast<double>(a.mx);
    o.mean = a.sum / a.n;
    // m2 = s2 - s1^2 / n. After block_reduce s1 = n (mean - c) is tiny (c the mean from the
    // rounded plain sum): when s1^2 / n < 2^-56 s2 (a quarter of s2's lower half-ulp) the
    // subtraction would return s2 itself, so the same bits come without the IEEE division, which
    // would otherwise sit on the last block's critical path in every call (and whose zero case
    // is its slow path, a call). s1 = 0 passes the test; NaN, an infinite s1^2 and s2 = 0 < s1^2
    // take the division.
    const double m2 = a.s1 * a.s1 <= 0x1p-56 * a.s2 * a.n ? a.s2 : a.s2 - a.s1 * (a.s1 / a.n);
    o.m2 = m2 < 0 ? 0.0 : m2;  // NaN stays NaN
    // A sum that is not finite (an infinite element, or f64 data whose sum overflows) leaves the
    // means infinite, and the re-centred sums inf or NaN by the order of the merges (an
    // accumulator never merged, as a row tile's lane, kept s1 = s2 = inf and the shortcut above
    // returned inf): m2 is NaN then, by rule. numpy's var gives NaN with an infinite element too;
    // for an overflowing sum it gives inf, which is no better an answer. f32, f16 and bf16 sums,
    // in f64, cannot overflow.
    if (!isfinite(a.sum)) o.m2 = qnan;
    return o;
  }
};

}  // namespace tally::core
