// The fused statistics operator (count, sum, min, max, mean and the sum of squared deviations in
// one pass): its accumulator, its merge and the two-tree block merge the kernel calls instead of
// a tree of merges (custom_block). The kernel sees it through the interface of ops.cuh.
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
// a block's mean, which centres its second tree (x > 0).
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
  // A block's accumulators in two cheap trees instead of one of merges: (count, sum, min, max)
  // first, which gives the block's mean mu; then each thread's sums re-centred on mu, s1 + n d
  // and s2 + d (2 s1 + n d) with d = c - mu (exact algebra; with c an element, d is of the order
  // of the spread, so no cancellation beyond what the thread's own centre had), summed in a
  // fixed order. Thread 0 gets the block's accumulator centred on mu. Its s1 is carried, not
  // taken as zero: mu comes from the plain sum, whose rounding (about 2^-53 x |mean| x a
  // thread's count) leaves s1 = n (mean - mu) small but not zero, and a later merge that dropped
  // it (2 d s1 of the re-centring) erred by far more than the rest: m2 of 2^20 f64 values in
  // [1e6, 1e6 + 1] on 132 blocks 3e-13 relative instead of 2e-16 (scripts/stats-centre-study.py).
  // The NaN flag rides only where there is one (f64 under propagation): elsewhere it was a
  // constant zero shuffled at every step (f32: 8 shuffled words a step, now 6; the same values).
  struct head_flagged {
    double n, sum;
    M mn, mx, nan;
  };
  struct head_plain {
    double n, sum;
    M mn, mx;
  };
  struct head_op {
    using acc_type = std::conditional_t<flag, head_flagged, head_plain>;
    static __device__ acc_type identity() {
      acc_type h;
      h.n = h.sum = 0.0;
      h.mn = M(__builtin_huge_val());
      h.mx = M(-__builtin_huge_val());
      if constexpr (flag) h.nan = M(0);
      return h;
    }
    static __device__ acc_type combine(acc_type a, acc_type b) {
      acc_type h;
      h.n = a.n + b.n;
      h.sum = a.sum + b.sum;
      h.mn = extreme(a.mn, b.mn, false);
      h.mx = extreme(a.mx, b.mx, true);
      if constexpr (flag) h.nan = a.nan > b.nan ? a.nan : b.nan;
      return h;
    }
  };
  struct centred {
    double s1, s2;
  };
  struct centred_op {
    using acc_type = centred;
    static __device__ centred identity() { return {0.0, 0.0}; }
    static __device__ centred combine(centred a, centred b) {
      return {add_rn(a.s1, b.s1), add_rn(a.s2, b.s2)};
    }
  };
  template <int BLOCK>
  static __device__ __forceinline__ acc_type block_reduce(acc_type a) {
    typename head_op::acc_type h;
    h.n = a.n;
    h.sum = a.sum;
    h.mn = a.mn;
    h.mx = a.mx;
    if constexpr (flag) h.nan = a.nan;
    h = block_reduce_generic<head_op, BLOCK, true>(h);
    __shared__ double mu_shared;
    // h.sum / h.n within an ulp or two (the IEEE division is a few times longer, on the critical
    // path of every block).
    if (threadIdx.x == 0) mu_shared = h.n > 0 ? h.sum * rcp_refined(h.n) : 0.0;
    __syncthreads();
    const double mu = mu_shared;
    centred m{0.0, 0.0};
    if (a.n > 0) {
      const double d = a.c - mu;
      m.s1 = fma_rn(a.n, d, a.s1);
      m.s2 = fma_rn(d, fma_rn(a.n, d, 2.0 * a.s1), a.s2);
    }
    m = block_reduce_generic<centred_op, BLOCK, true>(m);
    acc_type r = identity();
    r.n = h.n;
    r.c = mu;
    r.s1 = m.s1;
    r.s2 = m.s2;
    r.sum = h.sum;
    r.mn = h.mn;
    r.mx = h.mx;
    if constexpr (flag) r.nan = h.nan;
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
    return o;
  }
};

}  // namespace tally::core
