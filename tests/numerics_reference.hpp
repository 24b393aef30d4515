// An independent exact reference for the numerics tests: no code from src/ is used.
//
//   - f16 / bf16 <-> float converters (round to nearest even, subnormals, overflow to inf);
//   - exact_accumulator: a fixed-point big integer covering 2^-2304 .. 2^2304, so that sums of
//     doubles and sums of products of two doubles are held exactly, then rounded once (to nearest,
//     ties to even) to f32, f64 or a long double approximation;
//   - CPU scans for argmin/argmax, min/max under a NaN policy, and two-pass statistics.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "tally/tally.hpp"

namespace tally::test::ref {

__extension__ typedef unsigned __int128 u128;
__extension__ typedef __int128 i128;

// ---------------------------------------------------------------------------------------------
// Bits.
inline std::uint32_t bits_of(float x) {
  std::uint32_t b;
  std::memcpy(&b, &x, 4);
  return b;
}
inline std::uint64_t bits_of(double x) {
  std::uint64_t b;
  std::memcpy(&b, &x, 8);
  return b;
}
inline float float_from_bits(std::uint32_t b) {
  float x;
  std::memcpy(&x, &b, 4);
  return x;
}
inline double double_from_bits(std::uint64_t b) {
  double x;
  std::memcpy(&x, &b, 8);
  return x;
}

// ---------------------------------------------------------------------------------------------
// Binary formats and rounding of a double into them.
struct format {
  int precision;  // significand bits, the hidden bit included
  int emin;       // exponent of the smallest normal number
  int emax;       // exponent of the largest finite number
};
inline constexpr format kHalf{11, -14, 15};
inline constexpr format kBfloat{8, -126, 127};
inline constexpr format kFloat{24, -126, 127};
inline constexpr format kDouble{53, -1022, 1023};

inline double max_finite(format f) {
  return std::ldexp(std::ldexp(1.0, f.precision) - 1, f.emax - f.precision + 1);
}

// x (finite or not) rounded to nearest, ties to even, into format f (narrower than double);
// the result is a double holding the rounded value exactly, or +-inf on overflow.
inline double round_to_format(double x, format f) {
  if (x == 0 || !std::isfinite(x)) return x;
  const int e = std::ilogb(x);
  const int q = std::max(e, f.emin) - (f.precision - 1);  // exponent of the last kept bit
  const double scaled = std::ldexp(x, -q);                // exact: a power-of-two scaling
  const double m = std::nearbyint(scaled);                // ties to even (default rounding mode)
  const double r = std::ldexp(m, q);
  if (std::fabs(r) > max_finite(f)) return std::copysign(HUGE_VAL, x);
  return r;
}

// ---------------------------------------------------------------------------------------------
// Half types, stored as their bits.
struct f16 {
  std::uint16_t bits;
};
struct bf16 {
  std::uint16_t bits;
};

inline float f16_to_float(std::uint16_t h) {
  const int e = (h >> 10) & 0x1f;
  const int m = h & 0x3ff;
  float v;
  if (e == 0)
    v = std::ldexp(static_cast<float>(m), -24);
  else if (e == 31)
    v = m ? std::numeric_limits<float>::quiet_NaN() : std::numeric_limits<float>::infinity();
  else
    v = std::ldexp(static_cast<float>(m + 1024), e - 25);
  return (h & 0x8000) ? -v : v;
}

inline std::uint16_t float_to_f16(float x) {
  const std::uint16_t sign = static_cast<std::uint16_t>((bits_of(x) >> 16) & 0x8000);
  if (std::isnan(x))
    return static_cast<std::uint16_t>(sign | 0x7e00 | ((bits_of(x) >> 13) & 0x3ff));
  const double r = round_to_format(x, kHalf);
  if (std::isinf(r)) return static_cast<std::uint16_t>(sign | 0x7c00);
  const double a = std::fabs(r);
  if (a == 0) return sign;
  if (a < 0x1p-14) return static_cast<std::uint16_t>(sign | static_cast<std::uint16_t>(a * 0x1p24));
  const int e = std::ilogb(a);
  const auto frac = static_cast<std::uint16_t>(std::ldexp(a, 10 - e) - 1024);
  return static_cast<std::uint16_t>(sign | ((e + 15) << 10) | frac);
}

inline float bf16_to_float(std::uint16_t h) {
  return float_from_bits(static_cast<std::uint32_t>(h) << 16);
}

inline std::uint16_t float_to_bf16(float x) {
  if (std::isnan(x)) return static_cast<std::uint16_t>((bits_of(x) >> 16) | 0x0040);
  const float r = static_cast<float>(round_to_format(x, kBfloat));  // exact: fits in a float
  return static_cast<std::uint16_t>(bits_of(r) >> 16);
}

// ---------------------------------------------------------------------------------------------
// Element types: the exact value of every element as a long double (64-bit significand, so
// exact for all 64-bit integers too), NaN tests, and making elements from doubles.
template <class T>
inline constexpr bool is_half_v = std::is_same_v<T, f16> || std::is_same_v<T, bf16>;
template <class T>
inline constexpr bool is_float_v = std::is_floating_point_v<T> || is_half_v<T>;

template <class T>
long double value_of(T x) {
  if constexpr (std::is_same_v<T, f16>)
    return f16_to_float(x.bits);
  else if constexpr (std::is_same_v<T, bf16>)
    return bf16_to_float(x.bits);
  else
    return static_cast<long double>(x);
}
template <class T>
double as_double(T x) {  // exact for every float-like type
  return static_cast<double>(value_of(x));
}
template <class T>
bool is_nan(T x) {
  if constexpr (is_float_v<T>)
    return std::isnan(value_of(x));
  else
    return false;
}
// The element nearest to x (round to nearest even for floats); integers: x must be in range.
template <class T>
T make(double x) {
  if constexpr (std::is_same_v<T, f16>)
    return f16{float_to_f16(static_cast<float>(x))};
  else if constexpr (std::is_same_v<T, bf16>)
    return bf16{float_to_bf16(static_cast<float>(x))};
  else
    return static_cast<T>(x);
}
// NB: make<f16>(x) rounds twice (double -> float -> half); callers pass values exact in float.

template <class T>
constexpr dtype dtype_of() {
  if constexpr (std::is_same_v<T, std::int8_t>)
    return dtype::i8;
  else if constexpr (std::is_same_v<T, std::uint8_t>)
    return dtype::u8;
  else if constexpr (std::is_same_v<T, std::int16_t>)
    return dtype::i16;
  else if constexpr (std::is_same_v<T, std::uint16_t>)
    return dtype::u16;
  else if constexpr (std::is_same_v<T, std::int32_t>)
    return dtype::i32;
  else if constexpr (std::is_same_v<T, std::uint32_t>)
    return dtype::u32;
  else if constexpr (std::is_same_v<T, std::int64_t>)
    return dtype::i64;
  else if constexpr (std::is_same_v<T, std::uint64_t>)
    return dtype::u64;
  else if constexpr (std::is_same_v<T, float>)
    return dtype::f32;
  else if constexpr (std::is_same_v<T, double>)
    return dtype::f64;
  else if constexpr (std::is_same_v<T, f16>)
    return dtype::f16;
  else
    return dtype::bf16;
}

// ---------------------------------------------------------------------------------------------
// Exact accumulation. The value is sum(c[i] * 2^(32 i + kLowExp)) with signed 64-bit chunks that
// hold 32 bits each once normalised; every add puts less than 2^32 into at most 2 chunks per
// 32-bit piece, so carries need propagating only every 2^28 adds.
class exact_accumulator {
 public:
  static constexpr int kLowExp = -2304;  // below the smallest product of two doubles, 2^-2148
  static constexpr int kChunks = 144;    // up to 2^2304, above 2^2048 * 2^64 elements

  exact_accumulator() : c_(kChunks, 0) {}

  void add(double x) {
    seen_ = true;
    if (std::isnan(x)) return void(nan_ = true);
    if (std::isinf(x)) return void(x > 0 ? pos_inf_ = true : neg_inf_ = true);
    if (!(x == 0 && std::signbit(x))) all_negative_zero_ = false;
    if (x == 0) return;
    int e;
    const std::uint64_t m = mantissa(x, &e);
    add_magnitude(m, e, std::signbit(x));
  }

  // Adds x * y exactly (an inf times 0 is NaN, as in IEEE).
  void add_product(double x, double y) {
    seen_ = true;
    if (std::isnan(x) || std::isnan(y)) return void(nan_ = true);
    const bool neg = std::signbit(x) != std::signbit(y);
    if (std::isinf(x) || std::isinf(y)) {
      if (x == 0 || y == 0) return void(nan_ = true);
      return void(neg ? neg_inf_ = true : pos_inf_ = true);
    }
    if (!(neg && (x == 0 || y == 0))) all_negative_zero_ = false;
    if (x == 0 || y == 0) return;
    int ex, ey;
    const std::uint64_t mx = mantissa(x, &ex), my = mantissa(y, &ey);
    add_magnitude(static_cast<u128>(mx) * my, ex + ey, neg);
  }

  // The exact value rounded once, ties to even; +-inf beyond the range; NaN for a NaN term or
  // for +inf and -inf together. An exact zero is +0 unless every term was -0 (as in IEEE).
  double to_double() const { return static_cast<double>(round(kDouble)); }
  float to_float() const {
    const long double r = round(kFloat);  // exact in a float, or +-inf
    return static_cast<float>(r);
  }
  // The value rounded to 63 significant bits (for tolerances, square roots, printing).
  long double approx() const { return round(format{63, -16382, 16383}); }

  bool nan() const { return nan_ || (pos_inf_ && neg_inf_); }

 private:
  static std::uint64_t mantissa(double x, int* exp) {  // |x| = m * 2^exp, x finite and non-zero
    const std::uint64_t b = bits_of(x);
    const int biased = static_cast<int>((b >> 52) & 0x7ff);
    const std::uint64_t frac = b & ((std::uint64_t(1) << 52) - 1);
    if (biased == 0) {
      *exp = -1074;
      return frac;
    }
    *exp = biased - 1075;
    return frac | (std::uint64_t(1) << 52);
  }

  void add_magnitude(u128 m, int exp, bool negative) {
    const int pos = exp - kLowExp;  // >= 0 by the choice of kLowExp
    const int idx = pos / 32, sh = pos % 32;
    for (int k = 0; k < 4; ++k) {
      const std::uint64_t piece = static_cast<std::uint64_t>(m >> (32 * k)) & 0xffffffffu;
      if (piece == 0) continue;
      const std::uint64_t v = piece << sh;  // < 2^63
      const auto lo = static_cast<std::int64_t>(v & 0xffffffffu);
      const auto hi = static_cast<std::int64_t>(v >> 32);
      if (negative) {
        c_[idx + k] -= lo;
        c_[idx + k + 1] -= hi;
      } else {
        c_[idx + k] += lo;
        c_[idx + k + 1] += hi;
      }
    }
    if (++adds_ == (std::uint64_t(1) << 28)) {
      normalise(c_);
      adds_ = 0;
    }
  }

  // Chunks 0..N-2 into [0, 2^32), the sign left in the top chunk.
  static void normalise(std::vector<std::int64_t>& c) {
    for (std::size_t i = 0; i + 1 < c.size(); ++i) {
      const std::int64_t carry =
          c[i] >= 0 ? c[i] / 4294967296LL : -((-c[i] + 4294967295LL) / 4294967296LL);
      c[i] -= carry * 4294967296LL;
      c[i + 1] += carry;
    }
  }

  long double round(format f) const {
    if (nan()) return std::numeric_limits<long double>::quiet_NaN();
    if (pos_inf_) return HUGE_VALL;
    if (neg_inf_) return -HUGE_VALL;
    std::vector<std::int64_t> t = c_;
    normalise(t);
    const bool negative = t.back() < 0;
    if (negative) {
      for (auto& x : t) x = -x;
      normalise(t);
    }
    auto bit = [&](long i) -> unsigned {
      if (i < 0 || i >= 32L * kChunks) return 0;
      return static_cast<unsigned>((static_cast<std::uint64_t>(t[i / 32]) >> (i % 32)) & 1u);
    };
    long top = -1;
    for (long i = kChunks - 1; i >= 0 && top < 0; --i)
      if (t[i] != 0)
        for (long b = 31; b >= 0; --b)
          if ((static_cast<std::uint64_t>(t[i]) >> b) & 1u) {
            top = 32 * i + b;
            break;
          }
    if (top < 0) return seen_ && all_negative_zero_ ? -0.0L : 0.0L;
    const long e_top = top + kLowExp;
    const long q = std::max<long>(e_top, f.emin) - (f.precision - 1);  // exponent of the last bit
    const long b = q - kLowExp;                                        // its bit index
    std::uint64_t m = 0;
    for (long i = top; i >= b; --i) m = (m << 1) | bit(i);
    const unsigned guard = bit(b - 1);
    bool sticky = false;
    for (long i = std::min<long>(b - 2, 32L * kChunks - 1); i >= 0 && !sticky; --i) {
      if (i % 32 == 31 && t[i / 32] == 0) {  // skip whole zero chunks
        i -= 31;
        continue;
      }
      sticky = bit(i) != 0;
    }
    if (guard && (sticky || (m & 1))) ++m;
    long double r = std::ldexp(static_cast<long double>(m), static_cast<int>(q));
    if (r > static_cast<long double>(
                std::ldexp(std::ldexp(1.0L, f.precision) - 1, f.emax - f.precision + 1)))
      r = HUGE_VALL;
    return negative ? -r : r;
  }

  std::vector<std::int64_t> c_;
  std::uint64_t adds_ = 0;
  bool nan_ = false, pos_inf_ = false, neg_inf_ = false;
  bool seen_ = false, all_negative_zero_ = true;
};

// The exact sum of x[0..n) and of x[i]*y[i].
template <class T>
exact_accumulator exact_sum(const T* x, std::uint64_t n) {
  exact_accumulator a;
  for (std::uint64_t i = 0; i < n; ++i) a.add(as_double(x[i]));
  return a;
}
template <class T>
exact_accumulator exact_dot(const T* x, const T* y, std::uint64_t n) {
  exact_accumulator a;
  for (std::uint64_t i = 0; i < n; ++i) a.add_product(as_double(x[i]), as_double(y[i]));
  return a;
}
template <class T>
exact_accumulator exact_sum_sq(const T* x, std::uint64_t n) {
  exact_accumulator a;
  for (std::uint64_t i = 0; i < n; ++i) a.add_product(as_double(x[i]), as_double(x[i]));
  return a;
}

// Sum of |x| (or |x*y|), for error bounds; relative error ~2^-64 per term is irrelevant there.
template <class T>
long double abs_sum(const T* x, std::uint64_t n) {
  long double s = 0;
  for (std::uint64_t i = 0; i < n; ++i) s += std::fabs(value_of(x[i]));
  return s;
}
template <class T>
long double abs_dot(const T* x, const T* y, std::uint64_t n) {
  long double s = 0;
  for (std::uint64_t i = 0; i < n; ++i) s += std::fabs(value_of(x[i]) * value_of(y[i]));
  return s;
}

// ---------------------------------------------------------------------------------------------
// Distances in units in the last place: how many representable values lie between a and b
// (0 when bitwise equal up to the sign of zero).
inline std::int64_t ordered(double x) {
  const auto b = static_cast<std::int64_t>(bits_of(x));
  return b < 0 ? std::numeric_limits<std::int64_t>::min() - b : b;
}
inline std::int64_t ordered(float x) {
  const auto b = static_cast<std::int32_t>(bits_of(x));
  return b < 0 ? std::numeric_limits<std::int32_t>::min() - b : b;
}
template <class F>
std::uint64_t ulps_between(F a, F b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b) ? 0 : ~std::uint64_t(0);
  const i128 d = static_cast<i128>(ordered(a)) - ordered(b);
  return static_cast<std::uint64_t>(d < 0 ? -d : d);
}

// ---------------------------------------------------------------------------------------------
// argmin / argmax: the first index of the extreme; under propagate the first NaN wins; under
// ignore NaNs are skipped and an all-NaN (or empty) input gives index -1. -0.0 == +0.0 here.
struct arg_result {
  std::int64_t index = -1;
};
template <class T>
arg_result arg_extreme(const T* x, std::uint64_t n, bool is_max, nan_policy p) {
  arg_result r;
  long double best = 0;
  for (std::uint64_t i = 0; i < n; ++i) {
    if (is_nan(x[i])) {
      if (p == nan_policy::propagate) return arg_result{static_cast<std::int64_t>(i)};
      continue;
    }
    const long double v = value_of(x[i]);
    if (r.index < 0 || (is_max ? v > best : v < best)) {
      r.index = static_cast<std::int64_t>(i);
      best = v;
    }
  }
  return r;
}

// min / max of floats: -0.0 < +0.0; NaN propagates or is skipped; empty or all-NaN under ignore
// gives NaN; empty under propagate gives the identity (+inf for min, -inf for max).
template <class T>
double min_max(const T* x, std::uint64_t n, bool is_max, nan_policy p) {
  double best = is_max ? -HUGE_VAL : HUGE_VAL;
  bool any = false;
  for (std::uint64_t i = 0; i < n; ++i) {
    const double v = as_double(x[i]);
    if (std::isnan(v)) {
      if (p == nan_policy::propagate) return std::numeric_limits<double>::quiet_NaN();
      continue;
    }
    any = true;
    const bool better = is_max
                            ? (v > best || (v == best && !std::signbit(v) && std::signbit(best)))
                            : (v < best || (v == best && std::signbit(v) && !std::signbit(best)));
    if (better) best = v;
  }
  if (!any && p == nan_policy::ignore) return std::numeric_limits<double>::quiet_NaN();
  return best;
}

// ---------------------------------------------------------------------------------------------
// Statistics, two passes in long double over the counted elements.
struct stats_ref {
  std::uint64_t count = 0;
  long double sum = 0, abs_sum = 0, min = 0, max = 0, mean = 0, m2 = 0;
  bool nan = false;  // a NaN was seen (propagate: everything but count is NaN)
};
template <class T>
stats_ref two_pass_stats(const T* x, std::uint64_t n, nan_policy p) {
  stats_ref r;
  exact_accumulator s;  // floats
  i128 int_sum = 0;     // integers, exactly
  bool first = true;
  for (std::uint64_t i = 0; i < n; ++i) {
    if (is_nan(x[i])) {
      r.nan = true;
      continue;
    }
    const long double v = value_of(x[i]);
    if constexpr (is_float_v<T>)
      s.add(as_double(x[i]));
    else
      int_sum += static_cast<i128>(x[i]);
    r.abs_sum += std::fabs(v);
    r.min = first ? v : std::min(r.min, v);
    r.max = first ? v : std::max(r.max, v);
    first = false;
    ++r.count;
  }
  if (p == nan_policy::ignore) r.nan = false;
  if (p == nan_policy::propagate) r.count = n;
  if (r.count == 0 || r.nan) return r;
  if constexpr (is_float_v<T>)
    r.sum = s.approx();
  else
    r.sum = static_cast<long double>(int_sum);
  r.mean = r.sum / static_cast<long double>(r.count);
  long double m2 = 0, c = 0;  // Neumaier-compensated sum of squared deviations
  for (std::uint64_t i = 0; i < n; ++i) {
    if (is_nan(x[i])) continue;
    const long double d = value_of(x[i]) - r.mean;
    const long double v = d * d, t = m2 + v;
    c += m2 >= v ? (m2 - t) + v : (v - t) + m2;
    m2 = t;
  }
  r.m2 = m2 + c;
  return r;
}

}  // namespace tally::test::ref
