// The exactly rounded sum, mean and dot product in one launch (accuracy::exact).
//
// The exact sum is an op like any other (op_exact) and runs in the core's block loop
// (reduce_block_range: the same loads, unrolling and head/tail handling as the fast sum), or,
// from eight times the L2 up, in a dynamic schedule of chunks (exact_block_dynamic). Its accumulator
// is a two-term floating-point expansion (exact.cuh: one add per f32/f16/bf16 element and one
// bound per round of loads, exact_grid_round; TwoSum twice per f64 element); whatever does not
// fit is flushed into the block's long fixed-point accumulator in shared memory (integer
// atomics: the order of the adds does not matter). For ordinary data nothing is flushed at all.
//
// A block writes its merged expansion as its partial and, only if it flushed anything, adds its
// normalised accumulator into a global one and says so in a flag. The last block merges every
// partial. If nothing was flushed anywhere, the exact sum is a0 + a1 of the merged expansion and
// rounds in a few instructions (exact::round_pair); otherwise warp 0 takes the global
// accumulator (resetting it for the next call), normalises and rounds it in parallel
// (exact_warp.cuh). Either way the result is the exact sum rounded to nearest-even once: the same
// bits for any grid, block size, GPU or order of the elements.
//
//   exact_kernel<float, op_exact<float, exact_form::sum>, 512, 8, ...>: {1e30f, 1.f, -1e30f} -> 1.f  (fast: 0.f)
#pragma once

#include <cstdint>

#include "device.cuh"
#include "exact.cuh"
#include "exact_warp.cuh"

namespace tally::core {

// What a thread, a block and the grid carry: the expansion and the special values seen. grid:
// inside a thread's loop over narrow inputs (f32/f16/bf16), a0 is an integer multiple of
// 2^grid (exact_grid_of; kNoGrid when nothing constrains it); unused elsewhere.
struct exact_acc {
  double a0, a1;
  unsigned flags;
  int grid;
};
// A block's published partial carries this flag when the block added words into the global
// accumulator (d_acc): the last block ORs every partial's flags, so it learns from the partials
// it reads anyway whether to read and clear d_acc (no flag word of its own to exchange, a global
// round trip on every call). Not a special-value flag (exact::special_result reads kNaN, kPosInf
// and kNegInf only); cleared before the result is rounded or carried.
inline constexpr unsigned kAccUsed = 8;
static_assert((kAccUsed & (exact::kNaN | exact::kPosInf | exact::kNegInf)) == 0, "a flag of its own");
inline constexpr int kNoGrid = 127;

template <class T>
struct exact_args {
  const T* d_in;
  const T* d_in2;  // dot: the second vector
  std::uint64_t n;
  void* d_out;
  exact_acc* d_partials;
  unsigned int* d_counter;  // zero between calls
  long long* d_acc;         // exact::kWords words, zero between calls (a partial's kAccUsed: in use)
  unsigned int* d_next;     // the dynamic schedule's next chunk (exact_block_dynamic), zero between calls
  long long* d_carry;       // chunked reductions: add the exact sum here instead of rounding it
  unsigned int chunk_rounds;  // the dynamic schedule's least rounds a chunk (0 or 1: one)
  unsigned int chunk_tail;    // and its last rounds >> chunk_tail in chunks of one round (0: none)
};

enum class exact_form { sum, mean, dot };

// The block's long accumulator, shared by every thread of the block (a function-scope
// __shared__ variable: op_exact's static functions reach it without a pointer).
struct exact_block_state {
  long long words[exact::kWords];
  int flushed;  // nonzero once anything went into words
};
__device__ __forceinline__ exact_block_state& exact_block() {
  __shared__ exact_block_state state;
  return state;
}
// Adds delta to word k of the block's accumulator (the order of these adds does not matter).
__device__ __forceinline__ void exact_add_word(int k, long long delta) {
  exact_block_state& st = exact_block();
  atomicAdd(reinterpret_cast<unsigned long long*>(&st.words[k]), static_cast<unsigned long long>(delta));
  atomicOr(&st.flushed, 1);
}
// Adds a finite double to the block's accumulator (the rare path of the expansion).
__device__ __forceinline__ void exact_flush(double v) {
  exact::add(v, 0, [](int k, long long d) { exact_add_word(k, d); });
}

// The general path of one element: fpe_add (or fpe_add_product) with its flushes, inline for
// the rolled fallback of fold_round and out of line (a call) for the per-element fast paths, so
// that the unrolled loops hold no copy of it: 16-32 inlined copies made the kernel too large
// for the instruction cache (ncu on the H200: warps stalled 10.5 of 18.7 cycles on instruction
// fetch at 2^14).
__device__ __forceinline__ exact_acc exact_add_general(exact_acc a, double x) {
  exact::fpe2 f{a.a0, a.a1};
  exact::fpe_add(f, x, a.flags, [](double v) { exact_flush(v); });
  a.a0 = f.a0;
  a.a1 = f.a1;
  return a;
}
static __device__ __noinline__ exact_acc exact_add_general_call(exact_acc a, double x) {
  return exact_add_general(a, x);
}
static __device__ __noinline__ exact_acc exact_add_product_general(exact_acc a, double x, double y) {
  exact::fpe2 f{a.a0, a.a1};
  exact::fpe_add_product(f, x, y, a.flags, [](double v) { exact_flush(v); },
                         [](int k, long long d) { exact_add_word(k, d); });
  a.a0 = f.a0;
  a.a1 = f.a1;
  return a;
}

// The fast path of one element, as a speculative update and a test: true when the update was
// the exact operation (then a holds it), false when the element needs the general path from
// the state before it (a is then garbage). f32/f16/bf16 values (and f32 products, 48 bits):
// one add and fpe_add_narrow's exactness test. f64 values: fpe_add's two TwoSums, exact when
// the sum stays below the limit and the second TwoSum leaves nothing to flush.
__device__ __forceinline__ bool exact_try_narrow(exact_acc& a, double x) {
  const double s = __dadd_rn(a.a0, x);
  const bool ok = (__dsub_rn(s, a.a0) == x) & (__dsub_rn(s, x) == a.a0);
  a.a0 = s;
  return ok;
}
__device__ __forceinline__ bool exact_try_wide(exact_acc& a, double x) {
  const double s = __dadd_rn(a.a0, x);
  const double bb = __dsub_rn(s, a.a0);
  const double e = __dadd_rn(__dsub_rn(a.a0, __dsub_rn(s, bb)), __dsub_rn(x, bb));
  const double t = __dadd_rn(a.a1, e);
  const double cc = __dsub_rn(t, a.a1);
  const double e2 = __dadd_rn(__dsub_rn(a.a1, __dsub_rn(t, cc)), __dsub_rn(e, cc));
  const bool ok = (fabs(s) < exact::kFpeLimit) & (e2 == 0.0);
  a.a0 = s;
  a.a1 = t;
  return ok;
}

// The largest g with v an integer multiple of 2^g (-1074 .. 1023; 4096 for zero).
__device__ __forceinline__ int exact_grid_full(double v) {
  const unsigned long long b = static_cast<unsigned long long>(__double_as_longlong(v)) & 0x7fffffffffffffffull;
  if (b == 0) return 4096;
  const int e = static_cast<int>(b >> 52);
  const unsigned long long m = (b & ((1ull << 52) - 1)) | (e != 0 ? 1ull << 52 : 0ull);
  return (e != 0 ? e : 1) - 1075 + (__ffsll(static_cast<long long>(m)) - 1);
}

// The grid of a double: the largest g <= kNoGrid with v an integer multiple of 2^g (kNoGrid for
// zero). Only after the general path (rare): the fast path keeps the grid itself.
__device__ __forceinline__ int exact_grid_of(double v) { return min(exact_grid_full(v), kNoGrid); }

// The part of a (biased exponent field e, at least 1) above 2^p: a truncated toward zero to a
// multiple of 2^p (its significand's bits below 2^p cleared; +0.0 when none are left), so
// a - exact_above(a) is exact (a's low bits) and below 2^p in magnitude.
__device__ __forceinline__ double exact_above(double a, int e, int p) {
  const int k = p - (e - 1075);  // a's significand bits below 2^p (its last bit is 2^(e - 1075))
  if (k <= 0) return a;
  if (k >= 53) return 0.0;  // |a| < 2^(e - 1022) <= 2^p
  return __dadd_rn(__longlong_as_double(__double_as_longlong(a) & ~((1ll << k) - 1)), 0.0);  // -0 -> +0
}

// A warp's 32 expansions merged by two plain add trees, when one warp-wide test proves every add
// exact; false (and v unchanged) otherwise, and the caller merges step by step. The argument: with
// g the finest grid of any a0 or a1 in the warp (each an integer multiple of 2^g) and every
// |a0|, |a1| < 2^m, each lane splits a0 + a1 at p = g + 47 into hi (the parts above 2^p: a
// multiple of 2^p, |hi| < 2^(m + 1)) and lo (the rest: a multiple of 2^g, |lo| < 2^(p + 1)). Any
// sum of up to 32 lanes' hi is then a multiple of 2^p below 2^(m + 6) and any sum of their lo a
// multiple of 2^g below 2^(p + 6) = 2^(g + 53): both are doubles when m - g <= 94, so every add of
// both trees (and of each lane's two halves) is exact, and lane 0 ends with (hi, lo) holding the
// warp's exact value, |hi| below 2^1000 when m <= 994 (the expansion's limit). No flushes; the
// flags are ORed. Lanes at or above width must hold the identity (block_reduce's second level).
// The same exact value as the step-by-step merge, so the same bits after rounding.
__device__ __forceinline__ bool exact_warp_merge_certified(exact_acc& v) {
  const unsigned long long b0 = static_cast<unsigned long long>(__double_as_longlong(v.a0));
  const unsigned long long b1 = static_cast<unsigned long long>(__double_as_longlong(v.a1));
  const int e0 = max(static_cast<int>((b0 >> 52) & 0x7ff), 1), e1 = max(static_cast<int>((b1 >> 52) & 0x7ff), 1);
  const int g = __reduce_min_sync(0xffffffffu, min(exact_grid_full(v.a0), exact_grid_full(v.a1)));
  const int m = __reduce_max_sync(0xffffffffu, max(e0, e1)) - 1022;  // |a0|, |a1| < 2^(e - 1022)
  if (m - g > 94 || m > 994) return false;  // warp-uniform
  const int p = g + 47;
  const double h0 = exact_above(v.a0, e0, p), h1 = exact_above(v.a1, e1, p);
  double hi = __dadd_rn(h0, h1);
  double lo = __dadd_rn(__dsub_rn(v.a0, h0), __dsub_rn(v.a1, h1));
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    hi = __dadd_rn(hi, __shfl_down_sync(0xffffffffu, hi, offset));
    lo = __dadd_rn(lo, __shfl_down_sync(0xffffffffu, lo, offset));
  }
  v.a0 = hi;
  v.a1 = lo;
  v.flags = __reduce_or_sync(0xffffffffu, v.flags);
  return true;
}

// After the general path, a0 holds a rounded sum whose last bit is its ulp: the grid test would
// then allow the sum no growth out of its binade, and every later round of that thread would
// take the general path (the slowest thread sets the kernel's time). So a0 keeps its top 24 bits
// and the rest (exact: a0 - hi) moves into a1 (TwoSum; what a1 cannot hold is flushed), and the
// grid is hi's, 29 bits coarser.
static __device__ __noinline__ exact_acc exact_coarsen_call(exact_acc a) {
  const double hi = __longlong_as_double(__double_as_longlong(a.a0) & ~((1ll << 29) - 1));
  const double lo = __dsub_rn(a.a0, hi);  // exact: the low 29 bits of a0's significand
  if (lo != 0.0 && hi != 0.0) {  // (hi == 0: a subnormal a0; never a0 = -0.0)
    double e2;
    a.a1 = exact::detail::two_sum(a.a1, lo, e2);
    if (e2 != 0.0) exact_flush(e2);
    a.a0 = hi;
  }
  a.grid = exact_grid_of(a.a0);
  return a;
}

// The round test of narrow inputs (f32, f16 and bf16 values, as floats): every element of the
// round is added to its accumulator's a0 with one f64 add, and one test per accumulator at the
// end says whether every one of those adds was exact. The argument: a0 is a multiple of 2^g0 (its
// grid) and every nonzero element x a multiple of 2^(E - 151), E the exponent field of 2b - 1
// for x's bit pattern b (the sign shifted out; E - 151 is one or two below x's own last bit;
// +0 and -0 map to all ones, so they constrain nothing);
// with g the smallest of these, every partial sum is a multiple of 2^g, and if |a0| + m max|x|
// (m elements; rounded up) is at most 2^(g + 53), each partial sum is a double, so each add
// returned it exactly. NaN shows in a0 (a0 != a0), an infinity in max|x|. Per element: the f64
// add and two integer/f32 operations instead of the add's two exactness subtractions and
// compares in f64 (H100: 4 per element on the f64 pipe fewer). The grids become the smaller g.
template <int U, int A, class V>
__device__ __forceinline__ bool exact_grid_round(exact_acc (&acc)[A], const exact_acc (&keep)[A], const V (&v)[U]) {
  constexpr int VN = V::size;
  constexpr int kPerAcc = ((U + A - 1) / A) * VN;  // the most elements one accumulator takes
  unsigned wmin = 0xffffffffu;
  float amax = 0.0f;
#pragma unroll
  for (int u = 0; u < U; ++u)
#pragma unroll
    for (int k = 0; k < VN; ++k) {
      const float x = as_num(v[u].e[k]);
      const unsigned b = __float_as_uint(x);
      wmin = min(wmin, b + b - 1u);
      amax = fmaxf(amax, fabsf(x));
      acc[u % A].a0 = __dadd_rn(acc[u % A].a0, static_cast<double>(x));
    }
  const int round_grid = static_cast<int>(wmin >> 24) - 151;
  bool ok = true;
#pragma unroll
  for (int j = 0; j < A; ++j) {
    const int g = min(keep[j].grid, round_grid);
    const double limit = __hiloint2double((g + 53 + 1023) << 20, 0);  // 2^(g + 53), g in [-151, 127]
    const double reach = __dadd_ru(fabs(keep[j].a0), static_cast<double>(kPerAcc) * static_cast<double>(amax));
    ok &= (reach <= limit) & (acc[j].a0 == acc[j].a0);
    acc[j].grid = g;
  }
  return ok;
}

// The exact sum (or dot) as a core op. ACCS independent expansions per thread (the merge is
// exact, so their number changes no bit of the result, only the speed).
//
// One-input sums fold a whole round of loads at once (fold_round): every element takes its fast
// path speculatively and one test at the end of the round says whether all were exact; if not
// (rare: an element whose bits reach below what the expansion holds, a special value, a sum
// near the limit), the round is redone from the saved state with the general path, one
// out-of-line call per element. The loop body is then a few instructions per element and one
// branch per round, so loads can be scheduled across it.
//
// GridTest (narrow inputs): the round's test is exact_grid_round's bound (the dynamic schedule's
// kernel and the f32 one-deep-block kernel, launch.cuh; the tune's grid-test candidates), partial
// rounds padded (pads_rounds); false: each element's own exactness test (exact_try_narrow), which
// the strided kernel and the segmented layer use (it measured as fast or faster there).
template <class T, exact_form F, int ACCS = 2, bool GridTest = false>
struct op_exact {
  static constexpr exact_form form = F;
  using N = num_t<T>;
  static_assert(std::is_floating_point_v<N>);
  static constexpr bool custom_fold = true, binary = F == exact_form::dot, custom_block = true, heavy = true;
  static constexpr bool wide = std::is_same_v<N, double>;
  static constexpr int max_accs = ACCS;
  using acc_type = exact_acc;
  using out_type = N;
  using elem_type = std::conditional_t<binary, pair_elem<T>, T>;

  static constexpr bool grid_test = GridTest && !wide;
  static __host__ __device__ acc_type identity() { return {0.0, 0.0, 0u, kNoGrid}; }
  static __device__ __forceinline__ bool try_add(acc_type& a, double x) {
    if constexpr (wide) return exact_try_wide(a, x);
    else return exact_try_narrow(a, x);
  }
  // One value: the fast path, else the general one (out of line).
  static __device__ __forceinline__ void feed_value(acc_type& a, double x) {
    const acc_type before = a;
    if (!try_add(a, x)) a = exact_add_general_call(before, x);
  }
  static __device__ __forceinline__ void feed(acc_type& a, const elem_type& e) {
    if constexpr (binary) {
      const double x = as_num(e.x), y = as_num(e.y);
      if constexpr (wide) {
        double p, err;
        exact::two_prod(x, y, p, err);
        if (exact::two_prod_exact_range(p)) {
          feed_value(a, p);
          feed_value(a, err);
        } else {
          a = exact_add_product_general(a, x, y);
        }
      } else {
        feed_value(a, __dmul_rn(x, y));  // exact: 24 + 24 bits
      }
    } else {
      feed_value(a, static_cast<double>(as_num(e)));
    }
  }
  static __device__ acc_type transform(const elem_type& e) {
    acc_type a = identity();
    feed(a, e);
    return a;
  }
  static __device__ acc_type combine(acc_type a, acc_type b) {
    exact::fpe2 f{a.a0, a.a1};
    a.flags |= b.flags;
    exact::fpe_merge_fast(f, exact::fpe2{b.a0, b.a1}, a.flags, [](double v) { exact_flush(v); });
    a.a0 = f.a0;
    a.a1 = f.a1;
    return a;
  }
  template <int VN>
  static __device__ __forceinline__ acc_type fold(acc_type a, const elem_type (&e)[VN], std::uint64_t) {
#pragma unroll
    for (int k = 0; k < VN; ++k) feed(a, e[k]);
    return a;
  }
  // A whole round of U vectors into the A accumulators (vector u into acc[u % A], as the core
  // loop would).
  static constexpr bool round_fold = !binary;
  // With the round's grid test, a partial round too, padded with -0 (the additive identity of
  // IEEE arithmetic: a0 + -0 is a0, +0 included; its bits constrain no grid, as exact_grid_round
  // says; the general path adds nothing for it), so that a thread holding fewer than U vectors
  // still takes one test, not one an element (tuning.hpp, one_deep_round).
  static constexpr bool pads_rounds = round_fold && grid_test;
  static __device__ __forceinline__ T pad() {
    static_assert(std::is_same_v<T, float> || is_half_v<T>, "the grid test's narrow inputs only");
    if constexpr (std::is_same_v<T, float>) return -0.0f;
    else return T{static_cast<std::uint16_t>(0x8000u)};  // f16_t / bf16_t bits: -0
  }
  template <int U, int A, class V>
  static __device__ __forceinline__ void fold_round(acc_type (&acc)[A], const V (&v)[U]) {
    constexpr int VN = V::size;
    acc_type keep[A];
#pragma unroll
    for (int j = 0; j < A; ++j) keep[j] = acc[j];
    bool ok = true;
    if constexpr (grid_test) {
      ok = exact_grid_round<U, A>(acc, keep, v);
    } else {
#pragma unroll
      for (int u = 0; u < U; ++u)
#pragma unroll
        for (int k = 0; k < VN; ++k) ok &= try_add(acc[u % A], static_cast<double>(as_num(v[u].e[k])));
    }
    if (!ok) {
      // Every element of the round into the first expansion (the exact sum does not care which),
      // from the registers, through the out-of-line general path: a re-read from memory here cost
      // one load latency per element, and the slowest thread sets the kernel's time.
#pragma unroll
      for (int j = 0; j < A; ++j) acc[j] = keep[j];
#pragma unroll
      for (int u = 0; u < U; ++u)
#pragma unroll
        for (int k = 0; k < VN; ++k) acc[0] = exact_add_general_call(acc[0], static_cast<double>(as_num(v[u].e[k])));
      // Every accumulator: one whose own history failed the bound would fail every later round
      // if it kept its grid (all of this round went into acc[0], not into it).
      if constexpr (grid_test)
#pragma unroll
        for (int j = 0; j < A; ++j) acc[j] = exact_coarsen_call(acc[j]);
    }
  }
  // The certified add trees where their test holds (the usual case: one test, then two shuffles
  // and two adds a step instead of six shuffles and a merge); otherwise a shuffle tree in which
  // only the lanes whose results count combine: a combine may flush into the block's
  // accumulator, so the other lanes' combines (harmless for a pure op) would add their garbage
  // to it.
  static __device__ __forceinline__ acc_type warp_merge(acc_type v, int width) {
    if (exact_warp_merge_certified(v)) return v;
    const unsigned lane = threadIdx.x & 31u;
#pragma unroll 1
    for (int offset = 16; offset > 0; offset >>= 1) {
      if (offset >= width) continue;
      const acc_type g = shfl_down(v, offset);
      if (lane < unsigned(offset)) v = combine(v, g);
    }
    return v;
  }
  template <int BLOCK>
  static __device__ __forceinline__ acc_type block_reduce(acc_type v) {
    constexpr int kWarps = BLOCK / 32;
    __shared__ acc_type parts[kWarps];
    v = warp_merge(v, 32);
    if constexpr (kWarps == 1) {
      return v;
    } else {
      const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
      __syncthreads();  // an earlier call's readers are done with parts
      if (lane == 0) parts[warp] = v;
      __syncthreads();
      if (warp == 0) v = warp_merge(lane < kWarps ? parts[lane] : identity(), kWarps);
      return v;
    }
  }
};

// The result of the exact value rounded (R = the result type): mean divides the exact sum
// rounded to f64 by n, then rounds to R.
template <class R, exact_form F, class Round>
__device__ __forceinline__ R exact_result(std::uint64_t n, Round&& round) {
  if constexpr (F == exact_form::mean) {
    if (n == 0) return R(__builtin_nan(""));
    return static_cast<R>(round(double()) / static_cast<double>(n));
  } else {
    return round(R());
  }
}

// Warp 0 finishes: v (lane 0's) is everything not in the block's accumulator. If nothing was
// flushed, round a0 + a1 directly; otherwise add v into the accumulator, normalise and round it
// with the whole warp. Lane 0 writes the result.
template <class R, exact_form F>
__device__ __forceinline__ void exact_finish(const exact_acc& v, std::uint64_t n, void* d_out) {
  exact_block_state& st = exact_block();
  const unsigned lane = threadIdx.x & 31u;
  __syncwarp();
  if (st.flushed == 0) {
    if (lane == 0)
      *static_cast<R*>(d_out) = exact_result<R, F>(n, [&](auto r) {
        return exact::round_pair<decltype(r)>(v.a0, v.a1, v.flags);
      });
    return;
  }
  if (lane == 0) {
    exact::add(st.words, v.a0);
    exact::add(st.words, v.a1);
  }
  __syncwarp();
  exact::normalize_warp(st.words);
  const R r = exact_result<R, F>(n, [&](auto x) { return exact::round_warp<decltype(x)>(st.words, v.flags); });
  if (lane == 0) *static_cast<R*>(d_out) = r;
}

// Chunked reductions (src/chunked) reduce data that arrives in pieces: instead of rounding, a
// launch adds its exact sum into the caller's accumulator d_carry (exact::kWords normalised
// words, then the special-value flags as one more word) and writes no result; the host rounds the
// carry once after the last piece, so the result is the same bits as one launch over all of it.
// Warp 0, in place of exact_finish; launches on one stream, so nothing else writes d_carry.
__device__ __forceinline__ void exact_carry(const exact_acc& v, long long* d_carry) {
  exact_block_state& st = exact_block();
  const unsigned lane = threadIdx.x & 31u;
  __syncwarp();
  if (lane == 0) {
    exact::add(st.words, v.a0);
    exact::add(st.words, v.a1);
    d_carry[exact::kWords] |= static_cast<long long>(v.flags);
  }
  __syncwarp();
  for (int k = lane; k < exact::kWords; k += 32) st.words[k] += d_carry[k];
  __syncwarp();
  exact::normalize_warp(st.words);
  for (int k = lane; k < exact::kWords; k += 32) d_carry[k] = st.words[k];
}

// The dynamic schedule of the one-input exact sum. With a fixed share per block (the core's
// strided layout) the kernel lasts as long as its slowest block, and the exact sum's blocks do
// not keep pace with one another the way the fast sum's do (ncu on the H100, f32 at 2^28: SMs
// active 80% of the kernel's cycles): the body is cut into chunks of whole rounds, about 32 per
// block, and each block takes the next chunk from a counter (the next index fetched while the
// current chunk runs). Which block adds which element changes no bit of an exact sum. The
// launcher takes it from eight times the L2 up (tuning.hpp, exact_dynamic). Inputs
// too small for two chunks per block take chunks of one round in turn (block b: b, b + grid,
// ...), without the counter. d_next is zero on entry; the kernel's last block resets it.
template <class T, class Op, int BLOCK, int UNROLL, load_hint H, int ACCS>
__device__ __forceinline__ exact_acc exact_block_dynamic(const T* __restrict__ d_in, std::uint64_t n,
                                                         unsigned int* d_next, unsigned int chunk_rounds,
                                                         unsigned int chunk_tail) {
  using V = vec16<T>;
  constexpr int A = UNROLL < ACCS ? UNROLL : ACCS;
  constexpr std::uint64_t kRound = std::uint64_t(BLOCK) * UNROLL;  // vectors per block round
  constexpr std::uint64_t kChunksPerBlock = 32;
  const split16 s = split_input(d_in, n);
  const std::uint64_t rounds = s.nvec / kRound;
  std::uint64_t per = rounds / (kChunksPerBlock * gridDim.x);
  const bool dynamic = per > 0 || rounds >= 2ull * gridDim.x;
  // Inputs with a round or more a chunk take at least chunk_rounds (policy.hpp,
  // exact_chunk_rounds): each chunk ends with a block barrier, where the block's loads drain.
  if (per > 0 && per < chunk_rounds) per = chunk_rounds;
  if (per == 0) per = 1;
  // Chunks of per rounds; with chunk_tail (policy.hpp, exact_chunk_tail) the last rounds >>
  // chunk_tail rounds of the input then go in chunks of one round, so that the blocks end within
  // about a round of one another. Chunk c < big starts at round c x per, chunk c >= big at
  // big x per + (c - big); rounds from `whole` on go vector by vector below.
  const bool singles = per > 1 && chunk_tail > 0 && chunk_tail < 64;
  const std::uint64_t big = (rounds - (singles ? rounds >> chunk_tail : 0)) / per;
  const std::uint64_t chunks = big + (singles ? rounds - big * per : 0);
  const std::uint64_t whole = singles ? rounds : big * per;

  const V* __restrict__ d_vec = reinterpret_cast<const V*>(d_in + s.head);
  exact_acc acc[A];
#pragma unroll
  for (int j = 0; j < A; ++j) acc[j] = Op::identity();
  __shared__ unsigned int slot[2];
  std::uint64_t c = blockIdx.x;
  if (dynamic) {
    if (threadIdx.x == 0) slot[0] = atomicAdd(d_next, 1u);
    __syncthreads();
    c = slot[0];
  }
  for (int parity = 1; c < chunks; parity ^= 1) {
    // slot[parity] was last read before the barrier that ended the chunk before this one.
    if (dynamic && threadIdx.x == 0) slot[parity] = atomicAdd(d_next, 1u);
    const std::uint64_t first = c < big ? c * per : big * per + (c - big), len = c < big ? per : 1;
    const V* __restrict__ p = d_vec + first * kRound + threadIdx.x;
#pragma unroll 1
    for (std::uint64_t r = 0; r < len; ++r, p += kRound) {
      V v[UNROLL];
#pragma unroll
      for (int u = 0; u < UNROLL; ++u) v[u] = load_vec<H>(p + u * BLOCK);
      Op::template fold_round<UNROLL, A>(acc, v);
    }
    if (dynamic) {
      __syncthreads();
      c = slot[parity];
    } else {
      c += gridDim.x;
    }
  }
  // The rounds after the last whole chunk and the last partial round: vector by vector over the
  // grid (fewer than per + 1 rounds of one block).
  for (std::uint64_t i = whole * kRound + std::uint64_t(blockIdx.x) * BLOCK + threadIdx.x; i < s.nvec;
       i += std::uint64_t(gridDim.x) * BLOCK)
    acc[0] = fold_vec<Op>(acc[0], load_vec<H>(d_vec + i), s.head + i * V::size);
  // Scalar head and tail (fewer than 16 elements each) go to the last block.
  if (blockIdx.x == gridDim.x - 1) {
    if (threadIdx.x < s.head) acc[0] = Op::combine(acc[0], transform_elem<Op>(d_in[threadIdx.x], threadIdx.x));
    const std::uint64_t t = s.tail_begin + threadIdx.x;
    if (t < n) acc[A - 1] = Op::combine(acc[A - 1], transform_elem<Op>(d_in[t], t));
  }
  return block_reduce<Op, BLOCK>(combine_all<Op, A>(acc));
}

// DYNAMIC: one-input sums take exact_block_dynamic (dot keeps the strided layout); the launcher
// chooses it from the size (tuning.hpp, exact_dynamic).
template <class T, class Op, int BLOCK, int UNROLL, load_hint H, int MIN_BLOCKS, bool DYNAMIC = false>
__global__ void __launch_bounds__(BLOCK, MIN_BLOCKS) exact_kernel(exact_args<T> a) {
  using R = num_t<T>;
  constexpr exact_form F = Op::form;
  constexpr int ACCS = Op::max_accs;
  exact_block_state& st = exact_block();
  for (int k = threadIdx.x; k < exact::kWords; k += BLOCK) st.words[k] = 0;
  if (threadIdx.x == 0) st.flushed = 0;
  __syncthreads();
  pdl_wait();
  pdl_launch_dependents();

  constexpr bool kDynamic = DYNAMIC && round_fold_v<Op>;
  unsigned int* const d_next = a.d_next;
  exact_acc v;
  if constexpr (kDynamic)
    v = exact_block_dynamic<T, Op, BLOCK, UNROLL, H, ACCS>(a.d_in, a.n, d_next, a.chunk_rounds, a.chunk_tail);
  else
    v = reduce_block_range<T, Op, BLOCK, UNROLL, H, layout::strided, ACCS>(a.d_in, a.n, blockIdx.x, gridDim.x, a.d_in2);
  const unsigned warp = threadIdx.x >> 5;
  if (gridDim.x == 1) {  // one block: no partials, no global accumulator
    if (kDynamic && threadIdx.x == 0) *d_next = 0;
    if (warp == 0) {
      if (a.d_carry != nullptr) exact_carry(v, a.d_carry);
      else exact_finish<R, F>(v, a.n, a.d_out);
    }
    return;
  }

  // Publish: the accumulator (only if this block flushed anything), normalised so that 4096
  // blocks' words still fit, into the global one; then the expansion as this block's partial.
  __syncthreads();  // every flush of this block is in st.words
  // Read once by every thread (nothing flushes or clears it until the last block's zeroing below,
  // which it guards, so the branches and their barriers are block-uniform).
  const bool flushed = st.flushed != 0;
  if (flushed) {
    if (warp == 0) exact::normalize_warp(st.words);
    __syncthreads();
    for (int k = threadIdx.x; k < exact::kWords; k += BLOCK)
      if (st.words[k] != 0)
        atomicAdd(reinterpret_cast<unsigned long long*>(a.d_acc + k), static_cast<unsigned long long>(st.words[k]));
    __threadfence();
  }
  __shared__ bool is_last;
  __syncthreads();
  if (threadIdx.x == 0) {
    if (flushed) v.flags |= kAccUsed;  // the last block reads d_acc (ordered by the release below)
    a.d_partials[blockIdx.x] = v;
    is_last = atomic_inc_acq_rel(a.d_counter, gridDim.x - 1) == gridDim.x - 1;
  }
  __syncthreads();
  if (!is_last) return;
  if (kDynamic && threadIdx.x == 0) *d_next = 0;  // every block has taken its last chunk

  // The last block: a clean accumulator (its own flushes are in the global one; a block that
  // flushed nothing has its words still zero from the start), every partial merged, then the
  // global accumulator if any block used it.
  if (flushed) {
    for (int k = threadIdx.x; k < exact::kWords; k += BLOCK) st.words[k] = 0;
    if (threadIdx.x == 0) st.flushed = 0;
    __syncthreads();
  }
  exact_acc p = Op::identity();
  for (unsigned b = threadIdx.x; b < gridDim.x; b += BLOCK) p = Op::combine(p, load_cg(a.d_partials + b));
  p = block_reduce<Op, BLOCK>(p);
  if (warp != 0) return;
  const unsigned lane = threadIdx.x & 31u;
  // Lane 0's p holds every partial's flags: kAccUsed if any block added into d_acc. Then the
  // whole warp reads the words (independent loads past L1: the publishing blocks' atomics are
  // ordered before their partials' release and this block's acquire), leaves zeros for the next
  // call, and adds them into this block's accumulator.
  const bool used = __shfl_sync(0xffffffffu, p.flags & kAccUsed, 0) != 0;
  p.flags &= ~kAccUsed;
  if (used) {
    __syncwarp();  // warp 0's own flushes (in block_reduce) are in st.words
    long long g[(exact::kWords + 31) / 32];
#pragma unroll
    for (int j = 0; j < (exact::kWords + 31) / 32; ++j) {
      const int k = lane + 32 * j;
      g[j] = k < exact::kWords ? __ldcg(a.d_acc + k) : 0;
    }
#pragma unroll
    for (int j = 0; j < (exact::kWords + 31) / 32; ++j) {
      const int k = lane + 32 * j;
      if (k < exact::kWords) {
        __stcg(a.d_acc + k, 0ll);
        st.words[k] += g[j];
      }
    }
    if (lane == 0) st.flushed = 1;
  }
  if (a.d_carry != nullptr) exact_carry(p, a.d_carry);
  else exact_finish<R, F>(p, a.n, a.d_out);
}

}  // namespace tally::core
