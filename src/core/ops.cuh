// Reduction operators: identity, per-element transform, combine and finalize, one struct each.
// The kernel sees only this interface, so argmin/argmax (an accumulator carrying an index),
// NaN policies and fused transforms (dot, statistics) plug in as new structs.
//
//   op_sum<int8_t>: transform(-3) -> uint64 0xfff...fd, combine adds mod 2^64, finalize -> int64 -3
#pragma once

#include <cstdint>
#include <type_traits>

namespace tally::core {

// Integer sums and products run in unsigned 64-bit arithmetic: wrap-around is defined there,
// and two's complement makes the bits identical to a signed sum.
template <class T>
using wide_int_t = std::conditional_t<std::is_signed_v<T>, std::int64_t, std::uint64_t>;

// Sum and product share everything but the identity and the combine.
template <class T, int Identity, class Combine>
struct op_arith {
  static constexpr bool is_float = std::is_floating_point_v<T>;
  using acc_type = std::conditional_t<is_float, T, std::uint64_t>;
  using out_type = std::conditional_t<is_float, T, wide_int_t<T>>;
  static __host__ __device__ acc_type identity() { return acc_type(Identity); }
  static __device__ acc_type transform(T x) {
    if constexpr (is_float) return x;
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

// min/max propagate NaN: once either side is NaN the result is NaN. The combine order is fixed,
// so which NaN payload survives is fixed too.
template <class T>
struct op_min {
  using acc_type = word_t<T>;
  using out_type = T;
  static __host__ __device__ acc_type identity() { return limits<T>::highest(); }
  static __device__ acc_type transform(T x) { return x; }
  static __device__ acc_type combine(acc_type a, acc_type b) {
    if constexpr (std::is_floating_point_v<T>) return (a < b || a != a) ? a : b;
    else return b < a ? b : a;
  }
  static __host__ __device__ out_type finalize(acc_type a) { return static_cast<T>(a); }
};

template <class T>
struct op_max {
  using acc_type = word_t<T>;
  using out_type = T;
  static __host__ __device__ acc_type identity() { return limits<T>::lowest(); }
  static __device__ acc_type transform(T x) { return x; }
  static __device__ acc_type combine(acc_type a, acc_type b) {
    if constexpr (std::is_floating_point_v<T>) return (a > b || a != a) ? a : b;
    else return b > a ? b : a;
  }
  static __host__ __device__ out_type finalize(acc_type a) { return static_cast<T>(a); }
};

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
  static __device__ acc_type transform(T x) { return x != T(0) ? 1u : 0u; }
  static __device__ acc_type combine(acc_type a, acc_type b) { return All ? (a & b) : (a | b); }
  static __host__ __device__ out_type finalize(acc_type a) { return static_cast<out_type>(a); }
};
template <class T>
using op_all = op_logical<T, true>;
template <class T>
using op_any = op_logical<T, false>;

}  // namespace tally::core
