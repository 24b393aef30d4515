// Reduction operators: identity, per-element transform, combine and finalize, one struct each.
// The kernel sees only this interface, so argmin/argmax (an accumulator carrying an index),
// NaN policies and fused transforms (dot, statistics) plug in as new structs.
//
//   op_sum<int8_t>: transform(-3) -> uint64 0xfff...fd, combine adds mod 2^64, finalize -> int64 -3
#pragma once

#include <cstdint>
#include <type_traits>

#include "block.cuh"
#include "half.hpp"

namespace tally::core {

template <class T>
inline constexpr bool is_half_v = std::is_same_v<T, f16_t> || std::is_same_v<T, bf16_t>;
template <class T>
inline constexpr bool is_float_v = std::is_floating_point_v<T> || is_half_v<T>;

// The arithmetic type an element is read as: halves widen to f32, every other type is itself.
template <class T>
using num_t = std::conditional_t<is_half_v<T>, float, T>;
__device__ __forceinline__ float as_num(f16_t x) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(x.bits));
  return f;
}
__device__ __forceinline__ float as_num(bf16_t x) { return __uint_as_float(std::uint32_t(x.bits) << 16); }
template <class T, class = std::enable_if_t<!is_half_v<T>>>
__device__ __forceinline__ T as_num(T x) {
  return x;
}

// Error-free transformations (Knuth's TwoSum, FMA TwoProduct). The _rn intrinsics keep the
// compiler from contracting or reordering them.
__device__ __forceinline__ float add_rn(float a, float b) { return __fadd_rn(a, b); }
__device__ __forceinline__ double add_rn(double a, double b) { return __dadd_rn(a, b); }
__device__ __forceinline__ float sub_rn(float a, float b) { return __fsub_rn(a, b); }
__device__ __forceinline__ double sub_rn(double a, double b) { return __dsub_rn(a, b); }
__device__ __forceinline__ float mul_rn(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ double mul_rn(double a, double b) { return __dmul_rn(a, b); }
__device__ __forceinline__ float fma_rn(float a, float b, float c) { return __fmaf_rn(a, b, c); }
__device__ __forceinline__ double fma_rn(double a, double b, double c) { return __fma_rn(a, b, c); }
// s + e == a + b exactly (no overflow).
template <class F>
__device__ __forceinline__ F two_sum(F a, F b, F& e) {
  const F s = add_rn(a, b);
  const F bb = sub_rn(s, a);
  e = add_rn(sub_rn(a, sub_rn(s, bb)), sub_rn(b, bb));
  return s;
}

// Integer sums and products run in unsigned 64-bit arithmetic: wrap-around is defined there,
// and two's complement makes the bits identical to a signed sum.
template <class T>
using wide_int_t = std::conditional_t<std::is_signed_v<T>, std::int64_t, std::uint64_t>;

// Sum and product share everything but the identity and the combine.
template <class T, int Identity, class Combine>
struct op_arith {
  static constexpr bool is_float = is_float_v<T>;
  using acc_type = std::conditional_t<is_float, num_t<T>, std::uint64_t>;
  using out_type = std::conditional_t<is_float, num_t<T>, wide_int_t<T>>;
  static __host__ __device__ acc_type identity() { return acc_type(Identity); }
  static __device__ acc_type transform(T x) {
    if constexpr (is_float) return as_num(x);
    else return static_cast<acc_type>(static_cast<wide_int_t<T>>(x));
  }
  static __device__ acc_type combine(acc_type a, acc_type b) { return Combine::apply(a, b); }
  static __host__ __device__ out_type finalize(acc_type a) { return static_cast<out_type>(a); }
};
struct plus {
  template <class A>
  static __device__ A apply(A a, A b) { return a + b; }
};
struct times {
  template <class A>
  static __device__ A apply(A a, A b) { return a * b; }
};

template <class T>
struct op_sum : op_arith<T, 0, plus> {};
template <class T>
struct op_prod : op_arith<T, 1, times> {};

// Sums of 8- and 16-bit integers may add a whole vector in 32 bits first (see load.cuh).
template <class Op>
inline constexpr bool is_narrow_int_sum_v = false;
template <class T>
inline constexpr bool is_narrow_int_sum_v<op_sum<T>> = std::is_integral_v<T> && sizeof(T) <= 2;


template <class T>
struct limits;
#define TALLY_LIMITS(T, LO, HI)                                  \
  template <>                                                    \
  struct limits<T> {                                             \
    static __host__ __device__ constexpr T lowest() { return LO; } \
    static __host__ __device__ constexpr T highest() { return HI; } \
  };
TALLY_LIMITS(std::int8_t, -128, 127)
TALLY_LIMITS(std::uint8_t, 0, 255)
TALLY_LIMITS(std::int16_t, -32768, 32767)
TALLY_LIMITS(std::uint16_t, 0, 65535)
TALLY_LIMITS(std::int32_t, (-2147483647 - 1), 2147483647)
TALLY_LIMITS(std::uint32_t, 0u, 4294967295u)
TALLY_LIMITS(std::int64_t, (-9223372036854775807LL - 1), 9223372036854775807LL)
TALLY_LIMITS(std::uint64_t, 0ull, 18446744073709551615ull)
#undef TALLY_LIMITS
template <>
struct limits<float> {
  static __host__ __device__ constexpr float lowest() { return -__builtin_huge_valf(); }
  static __host__ __device__ constexpr float highest() { return __builtin_huge_valf(); }
};
template <>
struct limits<double> {
  static __host__ __device__ constexpr double lowest() { return -__builtin_huge_val(); }
  static __host__ __device__ constexpr double highest() { return __builtin_huge_val(); }
};

// Accumulators are whole 32-bit words (warp shuffles move words): 8- and 16-bit integers widen.
template <class T>
using word_t = std::conditional_t<(sizeof(T) < 4),
                                  std::conditional_t<std::is_signed_v<T>, std::int32_t, std::uint32_t>, T>;

// min/max: under NaN propagation any NaN wins (the combine order is fixed, so which NaN payload
// survives is fixed too); under `Ignore` a NaN loses to every number and the identity is NaN, so
// an all-NaN input gives NaN (fmin semantics). -0.0 orders below +0.0, so equal-comparing zeros
// never make the result depend on the combine order.
// The hardware min/max (FMNMX, DMNMX) already order -0.0 below +0.0 and skip a NaN operand
// (checked on an H100: fminf(-0, +0) = fminf(+0, -0) = -0, fmaxf gives +0, f64 the same), so
// Ignore is one instruction; propagation is min.NaN for f32 (one instruction, a canonical NaN)
// and a NaN test for f64. Integers compare plainly.
template <class N, bool Max, bool Ignore>
__device__ __forceinline__ N pick_extreme(N a, N b) {
  if constexpr (std::is_same_v<N, float>) {
    if constexpr (Ignore) return Max ? fmaxf(a, b) : fminf(a, b);
    float r;
    if constexpr (Max) asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
    else asm("min.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
    return r;
  } else if constexpr (std::is_floating_point_v<N>) {
    const N r = Max ? fmax(a, b) : fmin(a, b);
    if constexpr (Ignore) return r;
    else return a != a ? a : (b != b ? b : r);
  } else {
    return (Max ? (b > a) : (b < a)) ? b : a;
  }
}

template <class T, bool Max, bool Ignore = false>
struct op_extreme {
  using N = num_t<T>;
  using acc_type = word_t<N>;
  using out_type = N;
  static __host__ __device__ acc_type identity() {
    if constexpr (Ignore && std::is_floating_point_v<N>) return __builtin_nanf("");
    else return Max ? limits<N>::lowest() : limits<N>::highest();
  }
  static __device__ acc_type transform(T x) { return as_num(x); }
  static __device__ acc_type combine(acc_type a, acc_type b) { return pick_extreme<acc_type, Max, Ignore>(a, b); }
  static __host__ __device__ out_type finalize(acc_type a) { return static_cast<N>(a); }
};
template <class T>
using op_min = op_extreme<T, false>;
template <class T>
using op_max = op_extreme<T, true>;
template <class T>
using op_min_ignore = op_extreme<T, false, true>;
template <class T>
using op_max_ignore = op_extreme<T, true, true>;

// Bitwise operators work on the zero-extended bits, at least 32 wide so warp shuffles see a word.
template <class T>
using bits_t = std::conditional_t<(sizeof(T) <= 4), std::uint32_t, std::uint64_t>;
template <class T>
using ubits_t = std::make_unsigned_t<T>;

enum class bitwise { and_, or_, xor_ };
template <class T, bitwise B>
struct op_bitwise {
  static_assert(std::is_integral_v<T>, "bitwise reductions need integer elements");
  using acc_type = bits_t<T>;
  using out_type = T;
  static __host__ __device__ acc_type identity() { return B == bitwise::and_ ? ~acc_type(0) : acc_type(0); }
  static __device__ acc_type transform(T x) { return static_cast<acc_type>(static_cast<ubits_t<T>>(x)); }
  static __device__ acc_type combine(acc_type a, acc_type b) {
    if constexpr (B == bitwise::and_) return a & b;
    else if constexpr (B == bitwise::or_) return a | b;
    else return a ^ b;
  }
  static __host__ __device__ out_type finalize(acc_type a) { return static_cast<T>(static_cast<ubits_t<T>>(a)); }
};
template <class T>
using op_bit_and = op_bitwise<T, bitwise::and_>;
template <class T>
using op_bit_or = op_bitwise<T, bitwise::or_>;
template <class T>
using op_bit_xor = op_bitwise<T, bitwise::xor_>;

// all/any: an element is true when it compares unequal to zero (so NaN is true, -0.0 false).
template <class T, bool All>
struct op_logical {
  using acc_type = std::uint32_t;
  using out_type = std::uint8_t;
  static __host__ __device__ acc_type identity() { return All ? 1u : 0u; }
  static __device__ acc_type transform(T x) { return as_num(x) != num_t<T>(0) ? 1u : 0u; }
  static __device__ acc_type combine(acc_type a, acc_type b) { return All ? (a & b) : (a | b); }
  static __host__ __device__ out_type finalize(acc_type a) { return static_cast<out_type>(a); }
};
template <class T>
using op_all = op_logical<T, true>;
template <class T>
using op_any = op_logical<T, false>;

// ---- Op traits the kernel reads (all optional; the plain ops above define none) -------------
// indexed:     transform_at(x, index) instead of transform(x) (argmin/argmax).
// custom_fold: fold(acc, e[V], base) folds a vector of elements, in index order, all of them
//              later than anything already in acc.
// needs_count: finalize(acc, n).
// binary:      elements are pair_elem<T> {x, y} read from two inputs (dot).
// max_accs:    at most this many accumulators per thread (register pressure).
// reads_input: finalize(acc, d_in) (argmin/argmax re-read the winning element).
// min_blocks:  __launch_bounds__ minimum resident blocks (caps the registers).
// round_fold:  fold_round<U, A>(acc, v) folds a whole round of U loaded vectors (the exact
//              sum: one exactness test per round).
// pads_rounds: a thread's last, partial round is folded as a whole round too, its missing
//              vectors filled with Op::pad() (an element the fold ignores), so that it takes
//              the round's one test instead of each element's (device.cuh, reduce_block_range).
// heavy:       the fold costs more than the load (statistics, compensated and exact sums): the
//              grid spreads such ops over more blocks at middle sizes (tuning.hpp, grid_for).
// max_per_sm:  launch at most this many blocks per SM (0: as many as fit).
// pipelined:   a second kernel whose loop issues the next round's loads before this round
//              folds (device.cuh, reduce_block_range's PIPE), taken from 2 x the L2 up
//              (launch.cuh), in one-block-per-SM shapes of 4- and 8-byte elements: for folds long
//              enough that a warp would otherwise hold no loads in flight for part of each round.
#define TALLY_OP_TRAIT(name, type, fallback)                                       \
  template <class Op, class = void>                                               \
  inline constexpr type name##_v = fallback;                                      \
  template <class Op>                                                             \
  inline constexpr type name##_v<Op, std::void_t<decltype(Op::name)>> = Op::name;
TALLY_OP_TRAIT(indexed, bool, false)
TALLY_OP_TRAIT(custom_fold, bool, false)
TALLY_OP_TRAIT(needs_count, bool, false)
TALLY_OP_TRAIT(binary, bool, false)
TALLY_OP_TRAIT(max_accs, int, 8)
TALLY_OP_TRAIT(reads_input, bool, false)
TALLY_OP_TRAIT(min_blocks, int, 1)
TALLY_OP_TRAIT(max_per_sm, int, 0)
TALLY_OP_TRAIT(heavy, bool, false)
TALLY_OP_TRAIT(round_fold, bool, false)
TALLY_OP_TRAIT(pads_rounds, bool, false)
TALLY_OP_TRAIT(pipelined, bool, false)
#undef TALLY_OP_TRAIT

template <class Op, class A, class T>
__device__ __forceinline__ typename Op::out_type finalize_with(A a, std::uint64_t n, const T* d_in) {
  if constexpr (needs_count_v<Op>) return Op::finalize(a, n);
  else if constexpr (reads_input_v<Op>) return Op::finalize(a, d_in);
  else return Op::finalize(a);
}

template <class T>
struct pair_elem {
  T x, y;
};

// ---- argmin / argmax ------------------------------------------------------------------------
// The accumulator carries the value and a 64-bit index (as two words, so 4-byte values need no
// padding). Ties go to the smaller index in every combine, so the result does not depend on the
// combine order. Under propagation NaN beats every number and the first NaN wins; under Ignore a
// NaN element becomes the identity (index "none").
template <class N>
struct arg_acc {
  N v;
  std::uint32_t lo, hi;
  __host__ __device__ std::uint64_t idx() const { return (std::uint64_t(hi) << 32) | lo; }
};
template <class V>
struct arg_out {  // layout of tally::indexed<V>
  std::int64_t index;
  V value;
};
inline constexpr std::uint64_t kNoIndex = ~std::uint64_t(0);

template <class T, bool Max, bool Ignore = false>
struct op_arg {
  using V = num_t<T>;
  using N = word_t<V>;
  static constexpr bool is_fp = std::is_floating_point_v<V>;
  static constexpr bool indexed = true, custom_fold = true;
  using acc_type = arg_acc<N>;
  using out_type = arg_out<V>;
  static __host__ __device__ acc_type make(N v, std::uint64_t i) {
    return {v, static_cast<std::uint32_t>(i), static_cast<std::uint32_t>(i >> 32)};
  }
  static __host__ __device__ acc_type identity() {
    return make(Max ? N(limits<V>::lowest()) : N(limits<V>::highest()), kNoIndex);
  }
  // b strictly better than a by value alone (under propagation NaN is best, the first one kept).
  static __device__ __forceinline__ bool better(N b, N a) {
    if constexpr (is_fp && !Ignore) return (a == a) && ((Max ? (b > a) : (b < a)) || b != b);
    else return Max ? (b > a) : (b < a);
  }
  static __device__ acc_type transform_at(T x, std::uint64_t i) {
    const N v = as_num(x);
    if constexpr (is_fp && Ignore) {
      if (v != v) return identity();
    }
    return make(v, i);
  }
  static __device__ acc_type combine(acc_type a, acc_type b) {
    bool take_b;
    if (better(b.v, a.v)) take_b = true;
    else if (better(a.v, b.v)) take_b = false;
    else take_b = b.idx() < a.idx();
    return take_b ? b : a;
  }
  // The best of one vector by a small local index, then one 64-bit compare against acc.
  template <int VN>
  static __device__ __forceinline__ acc_type fold(acc_type acc, const T (&e)[VN], std::uint64_t base) {
    N best = identity().v;
    int bk = -1;
#pragma unroll
    for (int k = 0; k < VN; ++k) {
      const N v = as_num(e[k]);
      if (better(v, best) || (bk < 0 && v == v)) best = v, bk = k;
    }
    if (bk >= 0 && (acc.idx() == kNoIndex || better(best, acc.v))) acc = make(best, base + bk);
    return acc;
  }
  static __host__ __device__ out_type finalize(acc_type a) {
    if (a.idx() == kNoIndex) {
      if constexpr (is_fp) return {-1, V(__builtin_nan(""))};
      else return {-1, V(a.v)};
    }
    return {static_cast<std::int64_t>(a.idx()), V(a.v)};
  }
};
template <class T> using op_argmin = op_arg<T, false>;
template <class T> using op_argmax = op_arg<T, true>;
template <class T> using op_argmin_ignore = op_arg<T, false, true>;
template <class T> using op_argmax_ignore = op_arg<T, true, true>;

// The fast form for n < 2^32 - 1: every element maps to an unsigned key that orders like the
// value (larger is better for argmax and argmin alike; -0.0 and +0.0 share a key; NaN has the
// largest key under propagation and the identity's key 0 under Ignore), and the accumulator
// packs (key, 0xffffffff - index), so combining is one unsigned max: larger key first, then the
// smaller index. Values of up to 4 bytes pack into one 64-bit word; 8-byte values carry the key
// and the index word side by side. A zero or NaN result re-reads its element for its exact bits.
template <class N>
using key_t = std::conditional_t<sizeof(N) == 8, std::uint64_t, std::uint32_t>;
template <class K>
struct wide_key {  // 8-byte values: the key as two words (12 bytes: three shuffles), then the index
  std::uint32_t klo, khi, lo;
  __host__ __device__ K key() const { return (K(khi) << 32) | klo; }
};
template <class K>
using packed_acc_t = std::conditional_t<sizeof(K) == 4, std::uint64_t, wide_key<K>>;

template <class T, bool Max, bool Ignore = false>
struct op_arg_packed {
  using V = num_t<T>;
  using N = word_t<V>;
  using K = key_t<V>;
  static constexpr bool is_fp = std::is_floating_point_v<V>;
  static constexpr bool indexed = true, custom_fold = true, reads_input = true, warp_redux = true;
  // Four accumulators keep the f32 kernel at 40 registers (three 512-thread blocks per SM; two
  // blocks per SM measured 0.87 of CUB's speed). The variants measured are in docs/tuning.md.
  static constexpr int max_accs = 4;
  using acc_type = packed_acc_t<K>;
  using out_type = arg_out<V>;
  static constexpr K kTop = ~K(0);

  static __device__ __forceinline__ K key_of(N v) {
    K ord;
    if constexpr (is_fp) {
      if (v != v) return Ignore ? K(0) : kTop;
      v = add_rn(v, V(0));  // -0.0 -> +0.0
      K u;
      __builtin_memcpy(&u, &v, sizeof u);
      constexpr K sign = K(1) << (sizeof(K) * 8 - 1);
      ord = (u & sign) ? ~u : (u | sign);
    } else if constexpr (std::is_signed_v<N>) {
      ord = static_cast<K>(static_cast<std::make_signed_t<K>>(v)) ^ (K(1) << (sizeof(K) * 8 - 1));
    } else {
      ord = static_cast<K>(v);
    }
    return Max ? ord : K(~ord);
  }
  static __device__ __forceinline__ N value_of(K key) {
    const K ord = Max ? key : K(~key);
    if constexpr (is_fp) {
      constexpr K sign = K(1) << (sizeof(K) * 8 - 1);
      const K u = (ord & sign) ? (ord ^ sign) : ~ord;
      N v;
      __builtin_memcpy(&v, &u, sizeof v);
      return v;
    } else if constexpr (std::is_signed_v<N>) {
      return static_cast<N>(static_cast<std::make_signed_t<K>>(ord ^ (K(1) << (sizeof(K) * 8 - 1))));
    } else {
      return static_cast<N>(ord);
    }
  }
  static __host__ __device__ __forceinline__ acc_type pack(K key, std::uint64_t i) {
    const std::uint32_t lo = 0xffffffffu - static_cast<std::uint32_t>(i);
    if constexpr (sizeof(K) == 4) return (std::uint64_t(key) << 32) | lo;
    else return {static_cast<std::uint32_t>(key), static_cast<std::uint32_t>(std::uint64_t(key) >> 32), lo};
  }
  static __host__ __device__ acc_type identity() {
    if constexpr (sizeof(K) == 4) return 0;
    else return {0u, 0u, 0u};
  }
  static __device__ __forceinline__ bool is_identity(const acc_type& a) {
    if constexpr (sizeof(K) == 4) return a == 0;
    else return a.klo == 0 && a.khi == 0 && a.lo == 0;
  }
  static __device__ acc_type transform_at(T x, std::uint64_t i) {
    const N v = as_num(x);
    if constexpr (is_fp && Ignore) {
      if (v != v) return identity();
    }
    return pack(key_of(v), i);
  }
  static __device__ acc_type combine(acc_type a, acc_type b) {
    if constexpr (sizeof(K) == 4) return a > b ? a : b;
    else return (b.key() > a.key() || (b.key() == a.key() && b.lo > a.lo)) ? b : a;
  }
  // One vector, branch-free: its extreme by min/max (NaN-first under propagation), the first
  // position holding it by selects (a NaN matches only itself, so the first NaN), then one
  // combine. No lane of a warp takes a different path, which the earlier "test, then scan the
  // vector only if it may win" form could not avoid at 2^26 (docs/tuning.md).
  template <int VN>
  static __device__ __forceinline__ acc_type fold(acc_type acc, const T (&e)[VN], std::uint64_t base) {
    N m = static_cast<N>(as_num(e[0]));
#pragma unroll
    for (int k = 1; k < VN; ++k) m = pick_extreme<N, Max, Ignore>(m, static_cast<N>(as_num(e[k])));
    int first = VN - 1;
#pragma unroll
    for (int k = VN - 2; k >= 0; --k) {
      const N v = static_cast<N>(as_num(e[k]));
      bool hit = v == m;
      if constexpr (is_fp && !Ignore) hit = hit || v != v;
      first = hit ? k : first;
    }
    const K key = key_of(m);
    if constexpr (is_fp && Ignore) return combine(acc, key == 0 ? identity() : pack(key, base + first));  // all NaN
    else return combine(acc, pack(key, base + first));
  }
  // A warp's combine in three (or two) redux.sync maxima: the key words, then the index word
  // among the lanes holding the largest key. The same result as the shuffle tree (a max).
  static __device__ __forceinline__ acc_type warp_reduce(acc_type a) {
    if constexpr (sizeof(K) == 4) {
      const std::uint32_t ahi = static_cast<std::uint32_t>(a >> 32), alo = static_cast<std::uint32_t>(a);
      const std::uint32_t hi = __reduce_max_sync(0xffffffffu, ahi);
      const std::uint32_t lo = __reduce_max_sync(0xffffffffu, ahi == hi ? alo : 0u);
      return (std::uint64_t(hi) << 32) | lo;
    } else {
      const std::uint32_t khi = __reduce_max_sync(0xffffffffu, a.khi);
      const std::uint32_t klo = __reduce_max_sync(0xffffffffu, a.khi == khi ? a.klo : 0u);
      const std::uint32_t lo = __reduce_max_sync(0xffffffffu, a.khi == khi && a.klo == klo ? a.lo : 0u);
      return {klo, khi, lo};
    }
  }
  static __device__ out_type finalize(acc_type a, const T* d_in) {
    if (is_identity(a)) {
      if constexpr (is_fp) return {-1, V(__builtin_nan(""))};
      else return {-1, V(Max ? limits<V>::lowest() : limits<V>::highest())};
    }
    K key;
    std::uint32_t lo;
    if constexpr (sizeof(K) == 4) key = static_cast<K>(a >> 32), lo = static_cast<std::uint32_t>(a);
    else key = a.key(), lo = a.lo;
    const std::uint64_t idx = 0xffffffffu - lo;
    V v = static_cast<V>(value_of(key));
    if constexpr (is_fp) {
      if (v == V(0) || v != v) v = as_num(d_in[idx]);  // the sign of zero, the NaN's payload
    }
    return {static_cast<std::int64_t>(idx), v};
  }
};
// The largest n the packed form can index (index 0xffffffff is reserved for the identity).
inline constexpr std::uint64_t kPackedArgMaxN = 0xffffffffull;

// ---- compensated sums and dot products ------------------------------------------------------
// Neumaier-style: s carries the running sum, c the sum of every rounding error (TwoSum, and the
// FMA TwoProduct for dot: the Dot2 algorithm of Ogita, Rump and Oishi).
template <class N>
struct comp_acc {
  N s, c;
};
template <class N>
__device__ __forceinline__ comp_acc<N> comp_combine(comp_acc<N> a, comp_acc<N> b) {
  N e;
  const N s = two_sum(a.s, b.s, e);
  return {s, add_rn(add_rn(a.c, b.c), e)};
}
template <class N>
__host__ __device__ __forceinline__ N comp_result(comp_acc<N> a) {
  // An infinite sum leaves NaN in c (inf - inf inside TwoSum): the infinity is the answer.
  return (a.s - a.s != a.s - a.s && a.s == a.s) ? a.s : a.s + a.c;
}

template <class T>
struct op_sum_comp {
  using N = num_t<T>;
  static_assert(std::is_floating_point_v<N>);
  static constexpr bool custom_fold = true, heavy = true;
  using acc_type = comp_acc<N>;
  using out_type = N;
  static __host__ __device__ acc_type identity() { return {N(0), N(0)}; }
  static __device__ acc_type transform(T x) { return {as_num(x), N(0)}; }
  static __device__ acc_type combine(acc_type a, acc_type b) { return comp_combine(a, b); }
  template <int VN>
  static __device__ __forceinline__ acc_type fold(acc_type acc, const T (&e)[VN], std::uint64_t) {
#pragma unroll
    for (int k = 0; k < VN; ++k) {
      N err;
      acc.s = two_sum(acc.s, as_num(e[k]), err);
      acc.c = add_rn(acc.c, err);
    }
    return acc;
  }
  static __host__ __device__ out_type finalize(acc_type a) { return comp_result(a); }
};

// Mean: the base op's result divided by n in f64 (NaN for n = 0), rounded to Out.
template <class Base, class Out>
struct op_mean : Base {
  using out_type = Out;
  static constexpr bool needs_count = true;
  static __device__ out_type finalize(typename Base::acc_type a, std::uint64_t n) {
    if (n == 0) return Out(__builtin_nan(""));
    return static_cast<Out>(static_cast<double>(Base::finalize(a)) / static_cast<double>(n));
  }
};
template <class T>
using mean_out_t = std::conditional_t<is_float_v<T>, num_t<T>, double>;

// Integer mean: the sum in 128-bit two's complement (a 64-bit low word and a carry-counting high
// word), so no input of any length can wrap it; finalize converts it to f64 (lo and hi rounded
// separately, then added: within an ulp or so) and divides by n.
struct i128_acc {
  std::uint64_t lo;
  std::int64_t hi;
};
template <class T>
struct op_mean_int {
  static_assert(std::is_integral_v<T>);
  static constexpr bool custom_fold = true, needs_count = true;
  using acc_type = i128_acc;
  using out_type = double;
  static __host__ __device__ acc_type identity() { return {0, 0}; }
  static __device__ __forceinline__ acc_type add(acc_type a, std::int64_t hi, std::uint64_t lo) {
    const std::uint64_t s = a.lo + lo;
    return {s, a.hi + hi + (s < lo ? 1 : 0)};
  }
  static __device__ acc_type transform(T x) {
    if constexpr (std::is_signed_v<T>) return {static_cast<std::uint64_t>(std::int64_t(x)), std::int64_t(x) < 0 ? -1 : 0};
    else return {static_cast<std::uint64_t>(x), 0};
  }
  static __device__ acc_type combine(acc_type a, acc_type b) { return add(a, b.hi, b.lo); }
  template <int VN>
  static __device__ __forceinline__ acc_type fold(acc_type acc, const T (&e)[VN], std::uint64_t) {
    if constexpr (sizeof(T) <= 4) {  // a 16-byte vector's sum fits in 64 bits
      using W = std::conditional_t<std::is_signed_v<T>, std::int64_t, std::uint64_t>;
      W s = 0;
#pragma unroll
      for (int k = 0; k < VN; ++k) s += static_cast<W>(e[k]);
      return add(acc, std::is_signed_v<T> && s < 0 ? -1 : 0, static_cast<std::uint64_t>(s));
    } else {
#pragma unroll
      for (int k = 0; k < VN; ++k) acc = combine(acc, transform(e[k]));
      return acc;
    }
  }
  static __device__ out_type finalize(acc_type a, std::uint64_t n) {
    if (n == 0) return __builtin_nan("");
    // Fits in 64 bits: one exact-then-rounded conversion. Otherwise convert the magnitude (no
    // cancellation between the words) and restore the sign.
    if ((a.hi == 0 && a.lo < (1ull << 63)) || (a.hi == -1 && a.lo >= (1ull << 63)))
      return static_cast<double>(static_cast<std::int64_t>(a.lo)) / static_cast<double>(n);
    const bool neg = a.hi < 0;
    std::uint64_t lo = a.lo, hi = static_cast<std::uint64_t>(a.hi);
    if (neg) {
      lo = ~lo + 1;
      hi = ~hi + (lo == 0 ? 1 : 0);
    }
    const double mag = static_cast<double>(hi) * 0x1p64 + static_cast<double>(lo);
    return (neg ? -mag : mag) / static_cast<double>(n);
  }
};

// ---- dot ------------------------------------------------------------------------------------
template <class T>
struct op_dot {
  using N = num_t<T>;
  static constexpr bool binary = true, custom_fold = true;
  using acc_type = N;
  using out_type = N;
  static __host__ __device__ acc_type identity() { return N(0); }
  static __device__ acc_type transform(pair_elem<T> p) { return mul_rn(as_num(p.x), as_num(p.y)); }
  static __device__ acc_type combine(acc_type a, acc_type b) { return add_rn(a, b); }
  template <int VN>
  static __device__ __forceinline__ acc_type fold(acc_type acc, const pair_elem<T> (&e)[VN], std::uint64_t) {
#pragma unroll
    for (int k = 0; k < VN; ++k) acc = fma_rn(as_num(e[k].x), as_num(e[k].y), acc);
    return acc;
  }
  static __host__ __device__ out_type finalize(acc_type a) { return a; }
};

template <class T>
struct op_dot_comp {
  using N = num_t<T>;
  static constexpr bool binary = true, custom_fold = true;
  using acc_type = comp_acc<N>;
  using out_type = N;
  static __host__ __device__ acc_type identity() { return {N(0), N(0)}; }
  static __device__ acc_type transform(pair_elem<T> q) {
    const N x = as_num(q.x), y = as_num(q.y);
    const N p = mul_rn(x, y);
    return {p, fma_rn(x, y, -p)};
  }
  static __device__ acc_type combine(acc_type a, acc_type b) { return comp_combine(a, b); }
  template <int VN>
  static __device__ __forceinline__ acc_type fold(acc_type acc, const pair_elem<T> (&e)[VN], std::uint64_t) {
#pragma unroll
    for (int k = 0; k < VN; ++k) {
      const N x = as_num(e[k].x), y = as_num(e[k].y);
      const N p = mul_rn(x, y);
      const N pe = fma_rn(x, y, -p);
      N se;
      acc.s = two_sum(acc.s, p, se);
      acc.c = add_rn(acc.c, add_rn(se, pe));
    }
    return acc;
  }
  static __host__ __device__ out_type finalize(acc_type a) { return comp_result(a); }
};

// ---- sum of squares and the 2-norm ----------------------------------------------------------
// f32/f16/bf16 square and add in f64: no overflow or underflow is possible (|x|^2 <= 2^256).
template <class T, bool Sqrt>
struct op_sum_sq {
  using N = num_t<T>;
  static_assert(std::is_floating_point_v<N>);
  static constexpr bool custom_fold = true;
  using acc_type = double;
  using out_type = N;
  static __host__ __device__ acc_type identity() { return 0.0; }
  static __device__ acc_type transform(T x) {
    const double v = as_num(x);
    return mul_rn(v, v);
  }
  static __device__ acc_type combine(acc_type a, acc_type b) { return add_rn(a, b); }
  template <int VN>
  static __device__ __forceinline__ acc_type fold(acc_type acc, const T (&e)[VN], std::uint64_t) {
#pragma unroll
    for (int k = 0; k < VN; ++k) {
      const double v = as_num(e[k]);
      acc = fma_rn(v, v, acc);
    }
    return acc;
  }
  static __device__ out_type finalize(acc_type a) { return static_cast<N>(Sqrt ? sqrt(a) : a); }
};

// f64 2-norm by Blue's three accumulators (the constants of Anderson, "Safe scaling in the
// Level 1 BLAS", ACM TOMS 2017): big and small magnitudes are scaled before squaring.
struct blue_acc {
  double sml, med, big;
};
struct op_norm2_f64 {
  static constexpr double tsml = 0x1p-511, tbig = 0x1p486, ssml = 0x1p537, sbig = 0x1p-538;
  using acc_type = blue_acc;
  using out_type = double;
  static __host__ __device__ acc_type identity() { return {0.0, 0.0, 0.0}; }
  static __device__ acc_type transform(double x) {
    const double a = fabs(x);
    const bool big = a > tbig, sml = a < tsml;
    const double sa = a * (big ? sbig : sml ? ssml : 1.0);
    const double q = sa * sa;
    return {sml ? q : 0.0, (big || sml) ? 0.0 : q, big ? q : 0.0};
  }
  static __device__ acc_type combine(acc_type a, acc_type b) {
    return {a.sml + b.sml, a.med + b.med, a.big + b.big};
  }
  static __device__ out_type finalize(acc_type a) {
    double scl = 1.0, sumsq;
    if (a.big > 0) {
      if (a.med > 0 || a.med != a.med) a.big += (a.med * sbig) * sbig;
      scl = 1.0 / sbig;
      sumsq = a.big;
    } else if (a.sml > 0) {
      if (a.med > 0 || a.med != a.med) {
        const double m = sqrt(a.med), s = sqrt(a.sml) / ssml;
        const double ymin = m < s ? m : s, ymax = m < s ? s : m;
        sumsq = ymax * ymax * (1.0 + (ymin / ymax) * (ymin / ymax));
      } else {
        scl = 1.0 / ssml;
        sumsq = a.sml;
      }
    } else {
      sumsq = a.med;
    }
    return scl * sqrt(sumsq);
  }
};

}  // namespace tally::core
