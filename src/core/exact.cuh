// Building blocks for an exactly rounded floating-point sum (ExBLAS style): each thread keeps a
// two-term floating-point expansion (fpe2) and flushes what does not fit into a long fixed-point
// "superaccumulator" (kWords signed 64-bit words); the accumulator is carry-normalised once and
// rounded once (round-to-nearest-even) to float or double. The result is the correctly rounded
// exact sum, so it is the same for any order, any split over threads and blocks, any GPU.
//
//   long long w[kWords] = {};  unsigned flags = 0;  fpe2 f{0, 0};
//   auto flush = [&](double y) { add(w, y); };
//   for (double x : xs) fpe_add(f, x, flags, flush);
//   fpe_finish(f, flush);  normalize(w);  double s = round_to<double>(w, flags);
//
// Everything here is __host__ __device__ and also compiles with a plain C++17 compiler (the CPU
// tests include it from a .cpp). No CUDA header or intrinsic is used outside __CUDA_ARCH__.
// Needs IEEE-754 arithmetic: never compile with fast math (see design.md, "Numerics rules").
#pragma once

#include <cfloat>
#include <cmath>
#include <cstring>

#include "core/host_device.hpp"

#if defined(__FAST_MATH__) || defined(__USE_FAST_MATH__)
#error "core/exact.cuh needs exact IEEE-754 arithmetic: do not build it with fast math"
#endif
#if !defined(__CUDA_ARCH__) && defined(FLT_EVAL_METHOD) && FLT_EVAL_METHOD != 0
#error "core/exact.cuh needs doubles evaluated in double precision (FLT_EVAL_METHOD == 0)"
#endif

namespace tally::core::exact {

// ---------------------------------------------------------------------------------------------
// The long accumulator. Word k holds a signed 64-bit count of units 2^(kLowExp + 32k).
//
// Range. Every value added is v * 2^scale with v a finite double, and
//  * lowest bit: the smallest unit that ever occurs is 2^-2148 (the product of two subnormals
//    2^-1074 * 2^-1074, see add_product); add() with scale >= -1100 goes down to 2^-2174.
//    kLowExp = -2176 = -68 * 32 is the first multiple of 32 at or below both.
//  * highest bit: |v| < 2^1024 with scale <= 1100 gives < 2^2124; products are < 2^2048.
//    add() touches at most words floor((e + 2176) / 32) + 0..2 where e <= 2071 is the exponent
//    of v's last mantissa bit, i.e. words <= 134.
//  * headroom: 2^40 such additions sum to < 2^2164. With kWords = 136 the normalised value has
//    135 words of 32 bits (bits up to 2^(-2176 + 135*32) = 2^2144) plus a signed 64-bit top
//    word, so anything below 2^(2144 + 62) = 2^2206 is representable: far more than needed.
//  136 words = 1088 bytes (a multiple of 16 bytes for vector copies).
//
// Carry headroom before normalising: each add_word delta has |delta| < 2^32, so any one word can
// take 2^31 deltas (or 2^31 normalised words of other accumulators) before it could overflow.
// Callers must normalize() (or keep counts below that) before adding more.
inline constexpr int kLowExp = -2176;  // exponent of word 0's unit (multiple of 32)
inline constexpr int kWords = 136;
static_assert(kLowExp % 32 == 0, "word units are 32-bit aligned");
static_assert(kLowExp <= -2148 && kLowExp <= -1074 - 1100, "covers the smallest unit");
static_assert(kLowExp + 32 * (kWords - 1) >= 2144, "covers |v * 2^scale| < 2^2144");

// Special values seen (NaN, +inf, -inf inputs), OR-ed together.
enum : unsigned { kNaN = 1, kPosInf = 2, kNegInf = 4 };

namespace detail {

using u64 = unsigned long long;
using u32 = unsigned int;

TALLY_HD inline u64 bits_of(double x) {
#ifdef __CUDA_ARCH__
  return static_cast<u64>(__double_as_longlong(x));
#else
  u64 b;
  std::memcpy(&b, &x, sizeof b);
  return b;
#endif
}
TALLY_HD inline double double_from_bits(u64 b) {
#ifdef __CUDA_ARCH__
  return __longlong_as_double(static_cast<long long>(b));
#else
  double x;
  std::memcpy(&x, &b, sizeof x);
  return x;
#endif
}
TALLY_HD inline float float_from_bits(u32 b) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(b);
#else
  float x;
  std::memcpy(&x, &b, sizeof x);
  return x;
#endif
}
// Number of leading zero bits of a nonzero 32-bit value.
TALLY_HD inline int clz32(u32 x) {
#ifdef __CUDA_ARCH__
  return __clz(static_cast<int>(x));
#else
  return __builtin_clz(x);
#endif
}
TALLY_HD inline double abs_d(double x) {
#ifdef __CUDA_ARCH__
  return fabs(x);
#else
  return std::fabs(x);
#endif
}

// Round-to-nearest double operations the compiler may not fuse or reassociate. On the device the
// _rn intrinsics are never contracted into FMAs; on the host the expressions contain no product
// to contract, and fast math is refused above, so plain operators are exact IEEE operations.
TALLY_HD inline double add_rn(double a, double b) {
#ifdef __CUDA_ARCH__
  return __dadd_rn(a, b);
#else
  return a + b;
#endif
}
TALLY_HD inline double sub_rn(double a, double b) {
#ifdef __CUDA_ARCH__
  return __dsub_rn(a, b);
#else
  return a - b;
#endif
}

// Knuth's TwoSum: s + e == a + b exactly (s = RN(a + b)), for any finite a, b whose sum and the
// intermediate differences do not overflow; exact also with subnormals (gradual underflow).
TALLY_HD inline double two_sum(double a, double b, double& e) {
  const double s = add_rn(a, b);
  const double bb = sub_rn(s, a);
  e = add_rn(sub_rn(a, sub_rn(s, bb)), sub_rn(b, bb));
  return s;
}

// |x| = m * 2^q with m an integer < 2^53 (m == 0 for zero); x must be finite.
TALLY_HD inline u64 decompose(double x, int& q, bool& negative) {
  const u64 b = bits_of(x);
  const int biased = static_cast<int>((b >> 52) & 0x7ff);
  u64 m = b & ((1ull << 52) - 1);
  if (biased != 0) m |= 1ull << 52;
  q = (biased != 0 ? biased : 1) - 1075;
  negative = (b >> 63) != 0;
  return m;
}

template <class R>
struct format;
template <>
struct format<double> {
  using bits = unsigned long long;
  static constexpr int p = 53, emin = -1022, emax = 1023;
  TALLY_HD static double from_bits(bits b) { return double_from_bits(b); }
};
template <>
struct format<float> {
  using bits = unsigned int;
  static constexpr int p = 24, emin = -126, emax = 127;
  TALLY_HD static float from_bits(bits b) { return float_from_bits(b); }
};

}  // namespace detail

// ---------------------------------------------------------------------------------------------
// Adds v * 2^scale exactly: add_word(k, delta) is called for at most 3 consecutive words k, each
// with 0 < |delta| < 2^32 (zero chunks are skipped); v is finite (any sign, subnormal or zero).
// Valid for scale in [-1100, 1100]; more generally whenever v * 2^scale is an integer multiple
// of 2^kLowExp and |v * 2^scale| < 2^2144 (add_product relies on this wider domain).
template <class AddWord>
TALLY_HD inline void add(double v, int scale, AddWord&& add_word) {
  int q;
  bool negative;
  detail::u64 m = detail::decompose(v, q, negative);
  if (m == 0) return;
  int pos = q + scale - kLowExp;  // bit position of m's unit above 2^kLowExp
  if (pos < 0) {
    // Only when v's encoding has trailing zero bits below 2^kLowExp (v * 2^scale is a multiple
    // of 2^kLowExp by precondition): drop them.
    const int drop = -pos;
    m = drop < 64 ? m >> drop : 0;
    pos = 0;
    if (m == 0) return;
  }
  const int k = pos >> 5, s = pos & 31;
  const detail::u64 mask = 0xffffffffull;
  const detail::u64 t0 = (m & mask) << s;                 // < 2^63
  const detail::u64 t1 = (t0 >> 32) + ((m >> 32) << s);   // < 2^31 + 2^52
  long long c0 = static_cast<long long>(t0 & mask);
  long long c1 = static_cast<long long>(t1 & mask);
  long long c2 = static_cast<long long>(t1 >> 32);        // < 2^21
  if (negative) {
    c0 = -c0;
    c1 = -c1;
    c2 = -c2;
  }
  if (c0 != 0) add_word(k, c0);
  if (c1 != 0) add_word(k + 1, c1);
  if (c2 != 0) add_word(k + 2, c2);
}

// Serial convenience: adds v * 2^scale into words[0..kWords).
TALLY_HD inline void add(long long* words, double v, int scale = 0) {
  add(v, scale, [words](int k, long long delta) { words[k] += delta; });
}

// ---------------------------------------------------------------------------------------------
// Carry-normalises in place: afterwards words[0..kWords-2] are in [0, 2^32) and the top word
// holds the sign; the value sum_k words[k] * 2^(kLowExp + 32k) is unchanged. Serial.
// No intermediate overflows for any input words; only the top word must not overflow (it
// cannot within the range documented at kWords).
TALLY_HD inline void normalize(long long* words) {
  long long carry = 0;  // |carry| <= 2^31 + 2
  for (int k = 0; k < kWords - 1; ++k) {
    const long long x = words[k];
    const long long lo = static_cast<long long>(static_cast<detail::u64>(x) & 0xffffffffull);
    const long long hi = x >> 32;  // floor(x / 2^32): arithmetic shift (g++, clang, nvcc)
    const long long t = lo + carry;
    words[k] = static_cast<long long>(static_cast<detail::u64>(t) & 0xffffffffull);
    carry = hi + (t >> 32);
  }
  words[kWords - 1] += carry;
}

// ---------------------------------------------------------------------------------------------
// Rounding. The exactly rounded (round-to-nearest, ties-to-even) value of a normalised
// accumulator as a float or double, rounded once from the exact value (a float result never goes
// via double). Subnormal results are correct; magnitudes that round beyond the largest finite
// value give +-inf. An exact zero gives +0.0; a nonzero value too small for the format rounds, as
// IEEE does, to a zero carrying its sign (-0.0 for a tiny negative value).
// flags: kNaN, or both kPosInf and kNegInf -> NaN; else kPosInf -> +inf; kNegInf -> -inf.
//
// Rounding needs only the magnitude's three leading 32-bit digits, whether anything nonzero lies
// below them, the sign and the position: lead_digits. round_to gathers them serially; the
// warp-parallel gatherer (exact_warp.cuh) hands the same record to the same round_digits, so
// both give the same bits.
struct lead_digits {
  bool negative = false;
  int h = -1;                                  // index of the leading nonzero magnitude digit (-1: zero)
  unsigned int d2 = 0, d1 = 0, d0 = 0;         // magnitude digits h, h-1, h-2 (0 below index 0)
  bool below = false;                          // any nonzero magnitude digit at index h-3 or lower
};

// The value as a (kWords + 1)-digit two's complement number of 32-bit digits x_k: the low
// kWords - 1 digits are the normalised words, the top word gives the last two digits.
TALLY_HD inline unsigned int raw_digit(const long long* w, int k) {
  const long long top = w[kWords - 1];
  if (k < kWords - 1) return static_cast<unsigned int>(w[k]);
  if (k == kWords - 1) return static_cast<unsigned int>(static_cast<unsigned long long>(top));
  return static_cast<unsigned int>(static_cast<unsigned long long>(top) >> 32);
}
inline constexpr int kDigits = kWords + 1;
// Magnitude digit k of a value whose lowest nonzero raw digit is j: for a negative value
// -x = ~x + 1, so digits below j stay 0, digit j becomes 2^32 - x_j, the digits above ~x_k.
TALLY_HD inline unsigned int magnitude_digit(unsigned int raw, int k, bool negative, int j) {
  if (!negative) return raw;
  if (k < j) return 0u;
  if (k == j) return 0u - raw;
  return ~raw;
}

// lead_digits of a normalised accumulator, serially.
TALLY_HD inline lead_digits leading_digits(const long long* w) {
  lead_digits g;
  g.negative = w[kWords - 1] < 0;
  int j = 0;
  if (g.negative)
    while (raw_digit(w, j) == 0) ++j;  // terminates: the top digit of a negative value is nonzero
  auto mag = [&](int k) { return magnitude_digit(raw_digit(w, k), k, g.negative, j); };
  int h = kDigits - 1;
  while (h >= 0 && mag(h) == 0) --h;
  g.h = h;
  if (h < 0) return g;
  g.d2 = mag(h);
  g.d1 = h >= 1 ? mag(h - 1) : 0u;
  g.d0 = h >= 2 ? mag(h - 2) : 0u;
  for (int k = h - 3; k >= 0 && !g.below; --k) g.below = mag(k) != 0;
  return g;
}

// The value of the special flags, if any: true and *r set when flags decide the result.
template <class R>
TALLY_HD bool special_result(unsigned flags, R& r) {
  using F = detail::format<R>;
  using B = typename F::bits;
  constexpr int kBits = static_cast<int>(sizeof(B) * 8);
  constexpr B kSign = B(1) << (kBits - 1);
  constexpr B kInf = B((F::emax - F::emin + 2)) << (F::p - 1);  // exponent field all ones
  if ((flags & kNaN) != 0 || ((flags & kPosInf) != 0 && (flags & kNegInf) != 0)) {
    r = F::from_bits(kInf | (B(1) << (F::p - 2)));  // quiet NaN
    return true;
  }
  if ((flags & kPosInf) != 0) {
    r = F::from_bits(kInf);
    return true;
  }
  if ((flags & kNegInf) != 0) {
    r = F::from_bits(kSign | kInf);
    return true;
  }
  return false;
}

// The rounded value from its leading digits.
template <class R>
TALLY_HD R round_digits(const lead_digits& g, unsigned flags) {
  using F = detail::format<R>;
  using B = typename F::bits;
  using detail::u64;
  constexpr int kBits = static_cast<int>(sizeof(B) * 8);
  constexpr B kSign = B(1) << (kBits - 1);
  constexpr B kInf = B((F::emax - F::emin + 2)) << (F::p - 1);
  R special;
  if (special_result<R>(flags, special)) return special;
  if (g.h < 0) return F::from_bits(B(0));  // exact zero -> +0.0

  // The 64 bits from the leading one down, and a sticky bit for everything below them.
  const int lz = detail::clz32(g.d2);
  u64 hi64 = ((static_cast<u64>(g.d2) << 32) | g.d1) << lz;
  if (lz > 0) hi64 |= static_cast<u64>(g.d0) >> (32 - lz);
  const bool sticky = (static_cast<u64>(g.d0) & ((1ull << (32 - lz)) - 1)) != 0 || g.below;
  const int lead = kLowExp + 32 * g.h + 31 - lz;  // exponent of the leading one

  const B sign = g.negative ? kSign : B(0);
  if (lead > F::emax) return F::from_bits(sign | kInf);
  constexpr int qmin = F::emin - F::p + 1;  // quantum (last-bit exponent) of subnormals
  const int q = lead - F::p + 1 > qmin ? lead - F::p + 1 : qmin;
  const int keep = lead - q + 1;  // mantissa bits kept, <= p
  u64 mant;
  if (keep >= 1) {
    mant = hi64 >> (64 - keep);
    const u64 rem = hi64 << keep;  // the bits below the kept ones, round bit first
    const bool round = (rem >> 63) != 0;
    const bool rest = (rem << 1) != 0 || sticky;
    if (round && (rest || (mant & 1) != 0)) ++mant;
  } else if (keep == 0) {
    // Value in [2^(q-1), 2^q): rounds to 2^q unless it is exactly the tie 2^(q-1) (-> 0, even).
    mant = ((hi64 << 1) != 0 || sticky) ? 1 : 0;
  } else {
    mant = 0;  // below half the smallest subnormal
  }
  // mant * 2^q in IEEE encoding. The biased exponent of mant * 2^q with mant in [2^(p-1), 2^p)
  // is q - qmin + 1; adding mant (whose bit p-1 is the implicit one) counts that extra 1. The same
  // formula is right for subnormals (q == qmin, mant < 2^(p-1)), for a rounding carry to
  // mant == 2^p (the exponent steps up), and yields exactly the infinity pattern on overflow.
  const B bits = static_cast<B>((static_cast<u64>(q - qmin) << (F::p - 1)) + mant);
  return F::from_bits(sign | bits);
}

// The exactly rounded value of a normalised accumulator (serial).
template <class R>
TALLY_HD R round_to(const long long* w, unsigned flags) {
  R special;
  if (special_result<R>(flags, special)) return special;
  return round_digits<R>(leading_digits(w), flags);
}

// The exactly rounded value of a0 + a1 (two finite doubles whose exact sum is the whole value:
// nothing was flushed to an accumulator), the same bits as round_to of an accumulator holding
// a0 + a1. A double result is one IEEE addition (correctly rounded by definition). A float
// result rounds a0 + a1 to double with round-to-odd (RN, then one step toward the exact value
// when the rounding was inexact and landed on an even significand), then to float: with 53 >=
// 24 + 2 bits, rounding an odd-rounded value again gives the correctly rounded result, ties,
// subnormals and the overflow threshold included (Boldo and Melquiond, "When double rounding is
// odd"). An exact zero is +0.0 (a0 and a1 are never -0.0 in an fpe2: they start at +0.0 and RN
// sums of opposite values are +0.0).
template <class R>
TALLY_HD R round_pair(double a0, double a1, unsigned flags) {
  R special;
  if (special_result<R>(flags, special)) return special;
  double e;
  const double s = detail::two_sum(a0, a1, e);
  if constexpr (sizeof(R) == 8) {
    return s;
  } else {
    double odd = s;
    detail::u64 b = detail::bits_of(s);
    if (e != 0.0 && (b & 1) == 0) {
      // s != 0 here (a nonzero exact sum of doubles is at least 2^-1074 in magnitude). Step the
      // magnitude up when e has s's sign, down otherwise; both stay finite (|s| <= 2^1001).
      const bool same_sign = (e > 0.0) == (s > 0.0);
      b = same_sign ? b + 1 : b - 1;
      odd = detail::double_from_bits(b);
    }
    return static_cast<float>(odd);
  }
}

// ---------------------------------------------------------------------------------------------
// Per-thread floating-point expansion: the exact running value is a0 + a1 (plus whatever was
// flushed into the accumulator). Invariants: a0, a1 finite, |a0| < 2^1000.
struct fpe2 {
  double a0, a1;
};

inline constexpr double kFpeLimit = 0x1p1000;

namespace detail {
// Rare path of fpe_add: x is NaN/inf, or a0 + x reached 2^1000 (or overflowed).
template <class Flush>
TALLY_HD void fpe_add_rare(fpe2& f, double x, unsigned& flags, Flush& flush) {
  const u64 b = bits_of(x);
  if (((b >> 52) & 0x7ff) == 0x7ff) {  // special: record it; a0 stays as it is
    if ((b & ((1ull << 52) - 1)) != 0) flags |= kNaN;
    else flags |= (b >> 63) != 0 ? kNegInf : kPosInf;
    return;
  }
  if (f.a0 != 0.0) flush(f.a0);
  f.a0 = 0.0;
  flush(x);
}
}  // namespace detail

// Adds x exactly: (a0, e) = TwoSum(a0, x); (a1, e2) = TwoSum(a1, e); e2 != 0 -> flush(e2).
// Guard (one test): if |a0 + x| is not below 2^1000 (x NaN/inf, overflow, or just huge), x does
// not enter the expansion: a NaN/inf is recorded in flags (a0 unchanged); a finite x is flushed
// together with the old a0 (then a0 = 0). With |a0| < 2^1000 and |a0 + x| < 2^1000 every
// intermediate of TwoSum is below 2^1002, so it cannot overflow and is exact. a1 only collects
// rounding errors of a0 (each < 2^947), so it cannot come near overflow.
// flush(double y) must add y (finite) to the superaccumulator, e.g. add(words, y).
template <class Flush>
TALLY_HD inline void fpe_add(fpe2& f, double x, unsigned& flags, Flush&& flush) {
  const double s = detail::add_rn(f.a0, x);
  if (!(detail::abs_d(s) < kFpeLimit)) {  // false for NaN too
    detail::fpe_add_rare(f, x, flags, flush);
    return;
  }
  const double bb = detail::sub_rn(s, f.a0);
  const double e = detail::add_rn(detail::sub_rn(f.a0, detail::sub_rn(s, bb)), detail::sub_rn(x, bb));
  f.a0 = s;
  double e2;
  f.a1 = detail::two_sum(f.a1, e, e2);
  if (e2 != 0.0) flush(e2);
}

// The fast path for values that usually fit in a0 alone (f32, f16 and bf16 inputs widened to
// f64: their 24 significant bits rarely reach below a0's last bit): one add and an exactness
// test, and the general fpe_add only when the add was inexact. The test: of s - a0 and s - x, the
// one whose subtrahend is the larger in magnitude is computed exactly (Dekker), so both equal to
// the other operand means s == a0 + x; an overflowing, infinite or NaN s fails it. Inputs must
// keep |a0| below 2^1000 (|x| < 2^129 and fewer than 2^800 of them: any f32/f16/bf16 data).
template <class Flush>
TALLY_HD inline void fpe_add_narrow(fpe2& f, double x, unsigned& flags, Flush&& flush) {
  const double s = detail::add_rn(f.a0, x);
  if (detail::sub_rn(s, f.a0) == x && detail::sub_rn(s, x) == f.a0) {
    f.a0 = s;
    return;
  }
  fpe_add(f, x, flags, flush);
}

// Adds another expansion's two terms (merging threads or blocks). g must satisfy the invariants.
template <class Flush>
TALLY_HD inline void fpe_merge(fpe2& f, const fpe2& g, unsigned& flags, Flush&& flush) {
  fpe_add(f, g.a0, flags, flush);
  fpe_add(f, g.a1, flags, flush);
}

// True when s = add_rn(a, b) is a + b exactly and below the expansion's limit: fpe_merge_fast's
// test.
TALLY_HD inline bool merge_add_is_exact(double s, double a, double b) {
  return detail::abs_d(s) < kFpeLimit && detail::sub_rn(s, a) == b && detail::sub_rn(s, b) == a;
}

// fpe_merge with a fast path for the usual case of f32/f16/bf16 data (and of sparse f64 data):
// g's low term is zero and f.a0 + g.a0 is exact and below the limit, so the merge is one add and
// the exactness test of fpe_add_narrow. Otherwise the general merge.
template <class Flush>
TALLY_HD inline void fpe_merge_fast(fpe2& f, const fpe2& g, unsigned& flags, Flush&& flush) {
  if (g.a1 == 0.0) {
    const double s = detail::add_rn(f.a0, g.a0);
    if (merge_add_is_exact(s, f.a0, g.a0)) {
      f.a0 = s;
      return;
    }
    fpe_add(f, g.a0, flags, flush);
    return;
  }
  fpe_merge(f, g, flags, flush);
}

// Flushes both terms into the accumulator and clears the expansion (end of a thread's work).
template <class Flush>
TALLY_HD inline void fpe_finish(fpe2& f, Flush&& flush) {
  if (f.a0 != 0.0) flush(f.a0);
  if (f.a1 != 0.0) flush(f.a1);
  f.a0 = 0.0;
  f.a1 = 0.0;
}

// ---------------------------------------------------------------------------------------------
// TwoProduct: p = RN(a * b), e = a * b - p (one FMA). Exact (p + e == a * b) when
// two_prod_exact_range says so.
TALLY_HD inline void two_prod(double a, double b, double& p, double& e) {
#ifdef __CUDA_ARCH__
  p = __dmul_rn(a, b);
  e = __fma_rn(a, b, -p);
#else
  p = a * b;
  e = std::fma(a, b, -p);
#endif
}

// True when 2^-960 <= |p| < 2^1000, which guarantees that two_prod was exact for finite a, b:
// write a = A 2^qa, b = B 2^qb with integers A, B in [2^52, 2^53) (subnormals too, qa may then
// be < -1074). a*b = AB 2^(qa+qb) with AB < 2^106, so |p| <= 2^(106+qa+qb), i.e.
// qa + qb >= log2|p| - 106 >= -1066 here. p is normal, so it and hence e = ab - p are multiples of
// 2^(qa+qb) >= 2^-1066, and |e| <= ulp(p)/2 <= 2^(qa+qb+53): e is representable, so the FMA
// computes it exactly (the exact bound would be |p| >= 2^-968; -960 leaves margin). p finite
// means no overflow; the 2^1000 cap is fpe_add's limit, so p and e also pass fpe_add's fast path
// (e < 2^947). p == 0 returns false (it may be an underflow): use the 3-argument form or
// add_product, which returns at once for a zero factor.
TALLY_HD inline bool two_prod_exact_range(double p) {
  const double ap = detail::abs_d(p);
  return ap >= 0x1p-960 && ap < kFpeLimit;
}
// Same, and also true when p == 0 because a or b is zero (then e == 0 and the product is exact).
TALLY_HD inline bool two_prod_exact_range(double a, double b, double p) {
  return two_prod_exact_range(p) || a == 0.0 || b == 0.0;
}

// Adds a * b exactly into the accumulator (a, b finite; any magnitudes, zero and subnormals
// included): with |a| = A 2^qa, |b| = B 2^qb (integers A, B < 2^53, qa, qb >= -1074), two_prod
// of the integers A and B is exact (p, e integers, |p| <= 2^106), and p * 2^(qa+qb), e *
// 2^(qa+qb) are multiples of 2^-2148 and below 2^2048: inside add()'s domain.
template <class AddWord>
TALLY_HD inline void add_product(double a, double b, AddWord&& add_word) {
  int qa, qb;
  bool na, nb;
  const detail::u64 ma = detail::decompose(a, qa, na);
  const detail::u64 mb = detail::decompose(b, qb, nb);
  if (ma == 0 || mb == 0) return;
  double p, e;
  two_prod(static_cast<double>(ma), static_cast<double>(mb), p, e);  // integers < 2^53: exact
  if (na != nb) {
    p = -p;
    e = -e;
  }
  add(p, qa + qb, add_word);
  add(e, qa + qb, add_word);
}

// One term of an exact dot product: the fast path puts p and e into the expansion; products
// outside the exact range (underflow, overflow, zero factor) go straight to the accumulator;
// NaN/inf factors are recorded in flags (inf * 0 -> NaN, inf * x -> signed inf, as IEEE).
template <class Flush, class AddWord>
TALLY_HD inline void fpe_add_product(fpe2& f, double a, double b, unsigned& flags, Flush&& flush,
                                     AddWord&& add_word) {
  double p, e;
  two_prod(a, b, p, e);
  if (two_prod_exact_range(p)) {
    fpe_add(f, p, flags, flush);
    fpe_add(f, e, flags, flush);
    return;
  }
  if (((detail::bits_of(a) >> 52) & 0x7ff) == 0x7ff || ((detail::bits_of(b) >> 52) & 0x7ff) == 0x7ff)
    fpe_add(f, p, flags, flush);  // p is NaN or +-inf: recorded in flags
  else
    add_product(a, b, add_word);
}

}  // namespace tally::core::exact
