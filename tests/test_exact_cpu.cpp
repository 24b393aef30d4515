// The exact-sum building blocks (core/exact.cuh) on the host: expansion, superaccumulator,
// normalisation, correct rounding to float and double, exact products. No GPU needed.
//
// Everything is checked against an independent reference written here: a two's complement big
// integer of 64-bit limbs in units of 2^-2240 (filled from frexp/ldexp and unsigned __int128
// products, not from bit fields), rounded bit by bit and converted with ldexp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "core/exact.cuh"

namespace tally::test {
namespace {

namespace ex = tally::core::exact;
__extension__ typedef unsigned __int128 u128;

std::uint64_t bits64(double x) {
  std::uint64_t b;
  std::memcpy(&b, &x, sizeof b);
  return b;
}
std::uint32_t bits32(float x) {
  std::uint32_t b;
  std::memcpy(&b, &x, sizeof b);
  return b;
}

// ---------------------------------------------------------------------------------------------
// Reference: value = sum_i limb[i] * 2^(kRefLow + 64 i), two's complement over all limbs.
class RefSum {
 public:
  static constexpr int kRefLow = -2240;  // below every unit used here (smallest is 2^-2176)
  static constexpr int kLimbs = 76;      // up to 2^(−2240 + 4864) = 2^2624: far above any test

  RefSum() : limb_(kLimbs, 0) {}

  // Adds (negative ? -1 : 1) * mag * 2^exp exactly; exp >= kRefLow.
  void add_scaled(u128 mag, int exp, bool negative) {
    if (mag == 0) return;
    const int shift = exp - kRefLow;
    EXPECT_GE(shift, 0);
    // mag << shift as limbs (mag spans at most 3 limbs after shifting).
    std::vector<std::uint64_t> t(kLimbs, 0);
    const int w = shift / 64, b = shift % 64;
    const std::uint64_t lo = static_cast<std::uint64_t>(mag), hi = static_cast<std::uint64_t>(mag >> 64);
    auto put = [&](int i, std::uint64_t v) {
      if (v == 0) return;
      ASSERT_LT(i, kLimbs);
      t[i] |= v;
    };
    if (b == 0) {
      put(w, lo);
      put(w + 1, hi);
    } else {
      put(w, lo << b);
      put(w + 1, (lo >> (64 - b)) | (hi << b));
      put(w + 2, hi >> (64 - b));
    }
    if (negative) {  // two's complement negation of t
      bool carry = true;
      for (auto& v : t) {
        v = ~v;
        if (carry) carry = (++v == 0);
      }
    }
    u128 c = 0;
    for (int i = 0; i < kLimbs; ++i) {
      c += static_cast<u128>(limb_[i]) + t[i];
      limb_[i] = static_cast<std::uint64_t>(c);
      c >>= 64;
    }
  }
  // x * 2^scale, x finite.
  void add(double x, int scale = 0) {
    if (x == 0) return;
    int e;
    const double m = std::frexp(std::fabs(x), &e);  // |x| = m 2^e, m in [0.5, 1)
    const auto mant = static_cast<std::uint64_t>(std::ldexp(m, 53));  // exact: 53 bits at most
    add_scaled(mant, e - 53 + scale, x < 0);
  }
  void add_product(double a, double b) {
    if (a == 0 || b == 0) return;
    int ea, eb;
    const auto ma = static_cast<std::uint64_t>(std::ldexp(std::frexp(std::fabs(a), &ea), 53));
    const auto mb = static_cast<std::uint64_t>(std::ldexp(std::frexp(std::fabs(b), &eb), 53));
    add_scaled(static_cast<u128>(ma) * mb, ea + eb - 106, (a < 0) != (b < 0));
  }
  // The value of an accumulator's words (normalised or not).
  static RefSum from_words(const long long* w) {
    RefSum r;
    for (int k = 0; k < ex::kWords; ++k) {
      const long long v = w[k];
      const u128 mag = v < 0 ? static_cast<u128>(-static_cast<__int128>(v)) : static_cast<u128>(v);
      r.add_scaled(mag, ex::kLowExp + 32 * k, v < 0);
    }
    return r;
  }

  bool negative() const { return (limb_.back() >> 63) != 0; }
  bool is_zero() const {
    return std::all_of(limb_.begin(), limb_.end(), [](std::uint64_t v) { return v == 0; });
  }
  bool operator==(const RefSum& o) const { return limb_ == o.limb_; }

  // Round to nearest, ties to even, by looking at bits one at a time.
  template <class R>
  R round() const {
    std::vector<std::uint64_t> m = limb_;
    const bool neg = negative();
    if (neg) {
      bool carry = true;
      for (auto& v : m) {
        v = ~v;
        if (carry) carry = (++v == 0);
      }
    }
    auto bit = [&](long i) -> int { return i < 0 ? 0 : static_cast<int>((m[i / 64] >> (i % 64)) & 1); };
    long topbit = -1;
    for (long i = 64L * kLimbs - 1; i >= 0; --i)
      if (bit(i)) {
        topbit = i;
        break;
      }
    if (topbit < 0) return R(0);
    constexpr int p = std::numeric_limits<R>::digits;
    constexpr int emin = std::numeric_limits<R>::min_exponent - 1;
    const long lead = topbit + kRefLow;
    const long qexp = std::max(lead - p + 1, static_cast<long>(emin - p + 1));
    const long qi = qexp - kRefLow;  // bit index of the last kept bit
    std::uint64_t mant = 0;
    for (long i = topbit; i >= qi; --i) mant = (mant << 1) | static_cast<std::uint64_t>(bit(i));
    const int round_bit = bit(qi - 1);
    bool sticky = false;
    for (long i = qi - 2; i >= 0 && !sticky; --i) sticky = bit(i) != 0;
    if (round_bit && (sticky || (mant & 1))) ++mant;
    const R r = std::ldexp(static_cast<R>(mant), static_cast<int>(qexp));  // overflow -> inf
    return neg ? -r : r;
  }

 private:
  std::vector<std::uint64_t> limb_;
};

// ---------------------------------------------------------------------------------------------
// Drivers for the code under test.

// Straight into the accumulator (no expansion).
struct Direct {
  long long w[ex::kWords] = {};
  void add(double x, int scale = 0) { ex::add(w, x, scale); }
  template <class R>
  R result() const {
    long long n[ex::kWords];
    std::memcpy(n, w, sizeof n);
    ex::normalize(n);
    return ex::round_to<R>(n, 0);
  }
};

// One "thread": fpe_add into an expansion that flushes into a (block's) accumulator.
struct Thread {
  ex::fpe2 f{0.0, 0.0};
  unsigned flags = 0;
  long long w[ex::kWords] = {};
  long flushes = 0;
  auto flusher() {
    return [this](double y) {
      EXPECT_TRUE(std::isfinite(y));
      ++flushes;
      ex::add(w, y);
    };
  }
  void push(double x) {
    ex::fpe_add(f, x, flags, flusher());
    EXPECT_LT(std::fabs(f.a0), 0x1p1000);
    EXPECT_TRUE(std::isfinite(f.a1));
  }
  void push_product(double a, double b) {
    ex::fpe_add_product(f, a, b, flags, flusher(), [this](int k, long long d) { w[k] += d; });
  }
  template <class R>
  R result() {
    ex::fpe_finish(f, flusher());
    ex::normalize(w);
    return ex::round_to<R>(w, flags);
  }
};

template <class R>
void expect_same_bits(R got, R want, const char* what) {
  if constexpr (sizeof(R) == 8)
    EXPECT_EQ(bits64(got), bits64(want)) << what << ": got " << got << " want " << want;
  else
    EXPECT_EQ(bits32(got), bits32(want)) << what << ": got " << got << " want " << want;
}

// Checks one input list every way: direct adds, the expansion, the reference; float and double.
void check_sum(const std::vector<double>& xs, const char* what) {
  RefSum ref;
  Direct d;
  Thread t;
  for (double x : xs) {
    ref.add(x);
    d.add(x);
    t.push(x);
  }
  // Exact accumulator contents first (independent of rounding).
  long long n[ex::kWords];
  std::memcpy(n, d.w, sizeof n);
  EXPECT_TRUE(RefSum::from_words(n) == ref) << what << ": raw accumulator value";
  ex::normalize(n);
  EXPECT_TRUE(RefSum::from_words(n) == ref) << what << ": normalised accumulator value";
  const double rd = ref.round<double>();
  const float rf = ref.round<float>();
  expect_same_bits(d.result<double>(), rd, what);
  expect_same_bits(d.result<float>(), rf, what);
  Thread t2 = t;
  expect_same_bits(t.result<double>(), rd, what);
  expect_same_bits(t2.result<float>(), rf, what);
}

double sum_double(const std::vector<double>& xs) {
  Thread t;
  for (double x : xs) t.push(x);
  return t.result<double>();
}
float sum_float(const std::vector<double>& xs) {
  Thread t;
  for (double x : xs) t.push(x);
  return t.result<float>();
}

// Random finite double: uniform exponent field in [lo, hi] (biased, 0 = subnormal), random
// fraction and sign.
double random_double(std::mt19937_64& g, int lo = 0, int hi = 2046) {
  const std::uint64_t e = std::uniform_int_distribution<std::uint64_t>(lo, hi)(g);
  const std::uint64_t b = (g() & 0x800fffffffffffffull) | (e << 52);
  double x;
  std::memcpy(&x, &b, sizeof x);
  return x;
}

// ---------------------------------------------------------------------------------------------

TEST(ExactCpu, LayoutCoversTheRange) {
  static_assert(ex::kLowExp % 32 == 0);
  // Smallest product of two subnormals and the smallest scaled add must land on a unit >= word 0.
  EXPECT_LE(ex::kLowExp, -2148);
  EXPECT_LE(ex::kLowExp, -1074 - 1100);
  // The largest add (DBL_MAX * 2^1100 < 2^2124) lands below the top word's unit, and 2^40 of them
  // (< 2^2164) fit the normalised form (32-bit words, then a signed 64-bit top word).
  EXPECT_GE(ex::kLowExp + 32 * (ex::kWords - 1), 2124);
  EXPECT_GE(ex::kLowExp + 32 * (ex::kWords - 1) + 62, 2124 + 40);
}

TEST(ExactCpu, AddSplitsIntoAtMostThreeSmallChunks) {
  std::mt19937_64 g(1);
  std::vector<std::pair<double, int>> cases = {
      {DBL_MAX, 1100}, {-DBL_MAX, 1100}, {std::ldexp(1.0, -1074), -1100}, {-DBL_MIN, -1100},
      {1.0, 0},        {-1.0, 0},        {0.0, 5},                          {-0.0, 0}};
  for (int i = 0; i < 20000; ++i)
    cases.emplace_back(random_double(g), std::uniform_int_distribution<int>(-1100, 1100)(g));
  for (const auto& c : cases) {
    const double v = c.first;
    const int scale = c.second;
    long long w[ex::kWords] = {};
    int calls = 0, last_k = -1;
    ex::add(v, scale, [&](int k, long long delta) {
      ++calls;
      ASSERT_GE(k, 0);
      ASSERT_LT(k, ex::kWords);
      ASSERT_GT(k, last_k);  // each word at most once, increasing
      last_k = k;
      ASSERT_NE(delta, 0);
      ASSERT_LT(delta < 0 ? -delta : delta, 1LL << 32);
      ASSERT_TRUE(v < 0 ? delta < 0 : delta > 0);
      w[k] += delta;
    });
    ASSERT_LE(calls, 3);
    if (v == 0) {
      ASSERT_EQ(calls, 0);
    }
    RefSum ref;
    ref.add(v, scale);
    ASSERT_TRUE(RefSum::from_words(w) == ref) << v << " * 2^" << scale;
  }
}

TEST(ExactCpu, NormalizeKeepsValueAndRanges) {
  std::mt19937_64 g(2);
  for (int trial = 0; trial < 200; ++trial) {
    long long w[ex::kWords];
    for (int k = 0; k < ex::kWords - 1; ++k) {
      // Mostly huge words of both signs (worst carries), sometimes zero or -1 runs.
      const int kind = static_cast<int>(g() % 4);
      w[k] = kind == 0 ? 0 : kind == 1 ? -1 : static_cast<long long>(g()) >> 1;
    }
    w[ex::kWords - 1] = static_cast<long long>(g() % 2001) - 1000;
    const RefSum before = RefSum::from_words(w);
    ex::normalize(w);
    for (int k = 0; k < ex::kWords - 1; ++k) {
      ASSERT_GE(w[k], 0);
      ASSERT_LT(w[k], 1LL << 32);
    }
    ASSERT_TRUE(RefSum::from_words(w) == before);
    ASSERT_EQ(w[ex::kWords - 1] < 0, before.negative());
    long long again[ex::kWords];
    std::memcpy(again, w, sizeof w);
    ex::normalize(again);
    ASSERT_EQ(0, std::memcmp(again, w, sizeof w)) << "normalize is idempotent";
  }
  // Extreme words: INT64_MIN / INT64_MAX everywhere below the top.
  long long w[ex::kWords];
  for (int k = 0; k < ex::kWords - 1; ++k) w[k] = (k % 2) ? LLONG_MIN : LLONG_MAX;
  w[ex::kWords - 1] = 0;
  const RefSum before = RefSum::from_words(w);
  ex::normalize(w);
  EXPECT_TRUE(RefSum::from_words(w) == before);
}

TEST(ExactCpu, Cancellation) {
  EXPECT_EQ(sum_double({1e30, 1.0, -1e30}), 1.0);
  EXPECT_EQ(sum_float({1e30, 1.0, -1e30}), 1.0f);
  EXPECT_EQ(sum_double({1e308, 1e308, -1e308}), 1e308);
  EXPECT_EQ(sum_double({-1e308, -1e308, 1e308}), -1e308);
  EXPECT_EQ(sum_double({1e308, 1e-308, -1e308}), 1e-308);
  EXPECT_EQ(sum_double({0.1, 0.2, -0.3}), 0x1p-55);  // exact value of the three doubles
  EXPECT_EQ(sum_double({1.0, 0x1p-1074, -1.0}), 0x1p-1074);
  EXPECT_EQ(sum_double({3.0, -3.0}), 0.0);
  EXPECT_EQ(bits64(sum_double({3.0, -3.0})), bits64(0.0)) << "exact zero is +0.0";
  EXPECT_EQ(bits64(sum_double({-0.0, -0.0})), bits64(0.0));
  EXPECT_EQ(bits64(sum_double({})), bits64(0.0));
  check_sum({1e30, 1.0, -1e30}, "1e30 + 1 - 1e30");
  check_sum({1e308, 1e308, -1e308}, "1e308 + 1e308 - 1e308");
}

TEST(ExactCpu, MixedMagnitudes) {
  EXPECT_EQ(sum_double({1e300, 1e-300, -1e300, 1e-300}), 2e-300);
  EXPECT_EQ(sum_double({0x1p53, 1.0, 1.0}), 0x1p53 + 2.0);  // naive left-to-right gives 2^53
  EXPECT_EQ(sum_double({1.0, 0x1p-100, 0x1p-100, -1.0}), 0x1p-99);
  // 2^60 ones added one at a time would be impossible; 1000 ones next to 2^80 are not lost.
  std::vector<double> xs{0x1p80};
  for (int i = 0; i < 1000; ++i) xs.push_back(1.0);
  xs.push_back(-0x1p80);
  EXPECT_EQ(sum_double(xs), 1000.0);
  check_sum(xs, "2^80 + 1000 ones - 2^80");
  check_sum({DBL_MAX, DBL_MIN, 0x1p-1074, -DBL_MAX, 1e-320}, "extremes");
}

TEST(ExactCpu, SubnormalInputsAndResults) {
  const double tiny = 0x1p-1074;
  EXPECT_EQ(sum_double({tiny, tiny}), 0x1p-1073);
  EXPECT_EQ(sum_double({DBL_MIN, -tiny}), DBL_MIN - tiny);  // largest subnormal
  EXPECT_EQ(sum_double({DBL_MIN - tiny, tiny}), DBL_MIN);   // carry into the exponent field
  EXPECT_EQ(sum_double({-tiny, -tiny, -tiny}), -3 * tiny);
  // Half the smallest subnormal: 2^-1075 (via scale -1).
  auto dsum = [](std::vector<std::pair<double, int>> v) {
    Direct d;
    for (auto [x, s] : v) d.add(x, s);
    return d.result<double>();
  };
  EXPECT_EQ(bits64(dsum({{tiny, -1}})), bits64(0.0)) << "tie 2^-1075 -> 0 (even)";
  EXPECT_EQ(bits64(dsum({{-tiny, -1}})), bits64(-0.0)) << "tiny negative rounds to -0";
  EXPECT_EQ(dsum({{3 * tiny, -1}}), 2 * tiny) << "tie 1.5 ulp -> 2 ulp";
  EXPECT_EQ(dsum({{tiny, -1}, {tiny, -2}}), tiny) << "0.75 ulp -> 1 ulp";
  EXPECT_EQ(dsum({{tiny, -1}, {tiny, -1100}}), tiny) << "just above the tie";
  EXPECT_EQ(dsum({{DBL_MIN - tiny, 0}, {tiny, -1}}), DBL_MIN) << "tie at the subnormal top -> even";
  EXPECT_EQ(dsum({{DBL_MIN - 2 * tiny, 0}, {tiny, -1}}), DBL_MIN - 2 * tiny) << "tie -> even (down)";
  // Float subnormals: 2^-149 is the smallest.
  const double ft = 0x1p-149;
  EXPECT_EQ(bits32(sum_float({ft / 2})), bits32(0.0f));
  EXPECT_EQ(bits32(sum_float({-ft / 2})), bits32(-0.0f));
  EXPECT_EQ(sum_float({3 * ft / 2}), 0x1p-148f);
  EXPECT_EQ(sum_float({ft / 2, tiny}), 0x1p-149f);
  EXPECT_EQ(sum_float({0x1p-126 - ft, ft / 2}), 0x1p-126f);
  EXPECT_EQ(sum_float({1e-320, 1e-320}), 0.0f);
  EXPECT_EQ(sum_float({0x1p-130, 0x1p-131}), static_cast<float>(0x1p-130 + 0x1p-131));
  check_sum({tiny, tiny}, "2^-1074 + 2^-1074");
  // A negative accumulator with a long borrow chain: -2^-2174 (every word below the top all ones).
  Direct d;
  d.add(-tiny, -1100);
  d.add(1.0);
  EXPECT_EQ(d.result<double>(), 1.0);
  EXPECT_EQ(d.result<float>(), 1.0f);
  d.add(-1.0);
  EXPECT_EQ(bits64(d.result<double>()), bits64(-0.0));
  d.add(-1.0);
  EXPECT_EQ(d.result<double>(), -1.0);
  d.add(2 * tiny, -1100);
  d.add(0x1p-53);
  EXPECT_EQ(d.result<double>(), -1.0 + 0x1p-53) << "negative: -1 + 2^-53 exactly";
  check_sum({1e-310, -3e-315, 7e-320, 0x1p-1074}, "subnormals");
}

TEST(ExactCpu, Overflow) {
  EXPECT_EQ(sum_double({DBL_MAX, DBL_MAX}), HUGE_VAL);
  EXPECT_EQ(sum_double({-DBL_MAX, -DBL_MAX}), -HUGE_VAL);
  EXPECT_EQ(sum_double({DBL_MAX, DBL_MAX, -DBL_MAX}), DBL_MAX);
  EXPECT_EQ(sum_double({DBL_MAX, DBL_MAX, DBL_MAX, -DBL_MAX, -DBL_MAX}), DBL_MAX);
  // Half an ulp above DBL_MAX is a tie; DBL_MAX's mantissa is odd, so it rounds up to inf.
  EXPECT_EQ(sum_double({DBL_MAX, 0x1p970}), HUGE_VAL);
  EXPECT_EQ(sum_double({DBL_MAX, 0x1p970, -0x1p-1074}), DBL_MAX);
  EXPECT_EQ(sum_double({DBL_MAX, 0x1p969}), DBL_MAX);
  // Float: FLT_MAX + half an ulp (2^103) -> inf; just below -> FLT_MAX.
  const double fmax = FLT_MAX;
  EXPECT_EQ(sum_float({fmax, 0x1p103}), HUGE_VALF);
  EXPECT_EQ(sum_float({fmax, 0x1p103, -0x1p-1074}), FLT_MAX);
  EXPECT_EQ(sum_float({-fmax, -0x1p103}), -HUGE_VALF);
  EXPECT_EQ(sum_float({1e39}), HUGE_VALF);
  EXPECT_EQ(sum_float({1e39, -1e39, 1.5}), 1.5f);
  // Many maxima: the accumulator has headroom far beyond a double.
  std::vector<double> xs(5000, DBL_MAX);
  for (int i = 0; i < 4999; ++i) xs.push_back(-DBL_MAX);
  EXPECT_EQ(sum_double(xs), DBL_MAX);
  check_sum({DBL_MAX, DBL_MAX, -DBL_MAX}, "DBL_MAX + DBL_MAX - DBL_MAX");
}

TEST(ExactCpu, TiesToEvenDouble) {
  const double u = 0x1p-53;  // half an ulp of 1
  EXPECT_EQ(sum_double({1.0, u}), 1.0);
  EXPECT_EQ(sum_double({1.0, 3 * u}), 1.0 + 0x1p-51);
  EXPECT_EQ(sum_double({1.0, u, 0x1p-1074}), 1.0 + 0x1p-52) << "just above the tie";
  EXPECT_EQ(sum_double({1.0, u, -0x1p-1074}), 1.0) << "just below the tie";
  EXPECT_EQ(sum_double({-1.0, -3 * u}), -(1.0 + 0x1p-51));
  EXPECT_EQ(sum_double({1.0, -u}), 1.0 - 0x1p-53) << "exact: below 1 the ulp halves";
  EXPECT_EQ(sum_double({1.0, -u / 2}), 1.0) << "tie just below 1 -> 1 (even)";
  EXPECT_EQ(sum_double({1.0, -3 * u / 2}), 1.0 - 0x1p-52) << "tie -> even (down to 1 - 2^-52)";
  EXPECT_EQ(sum_double({1.0, -u / 4}), 1.0);
  EXPECT_EQ(sum_double({0x1p53, 1.0}), 0x1p53) << "tie at 2^53 + 1 -> even";
  EXPECT_EQ(sum_double({0x1p53, 3.0}), 0x1p53 + 4.0);
  EXPECT_EQ(sum_double({0x1p53 - 1.0, 0.5}), 0x1p53) << "tie with carry into the exponent";
}

TEST(ExactCpu, TiesToEvenFloat) {
  const double u = 0x1p-24;  // half a float ulp of 1
  EXPECT_EQ(sum_float({1.0, u}), 1.0f);
  EXPECT_EQ(sum_float({1.0, 3 * u}), 1.0f + 0x1p-22f);
  EXPECT_EQ(sum_float({1.0, u, 0x1p-1074}), 1.0f + 0x1p-23f);
  EXPECT_EQ(sum_float({1.0, u, -0x1p-1074}), 1.0f);
  EXPECT_EQ(sum_float({-1.0, -3 * u}), -(1.0f + 0x1p-22f));
  EXPECT_EQ(sum_float({16777216.0, 1.0}), 16777216.0f);
  EXPECT_EQ(sum_float({16777216.0, 3.0}), 16777220.0f);
}

TEST(ExactCpu, FloatIsNotDoubleRounded) {
  // 1 + 2^-24 + 2^-60: rounding to double first gives 1 + 2^-24 (a float tie -> 1), but the exact
  // value is above the float tie, so the right float is 1 + 2^-23.
  const std::vector<double> xs{1.0, 0x1p-24, 0x1p-60};
  const float via_double = static_cast<float>(sum_double(xs));
  EXPECT_EQ(via_double, 1.0f) << "the case must double-round to be a test";
  EXPECT_EQ(sum_float(xs), 1.0f + 0x1p-23f);
  // Mirror: just below the tie, via double rounds up to the tie and then to even... construct one.
  const std::vector<double> ys{1.0, 0x1p-23, 0x1p-24, -0x1p-60};  // 1 + 3*2^-24 - tiny
  EXPECT_EQ(static_cast<float>(sum_double(ys)), 1.0f + 0x1p-22f) << "double-rounds up";
  EXPECT_EQ(sum_float(ys), 1.0f + 0x1p-23f);
  // Randomised: f + half ulp(f) + delta with |delta| far below a double ulp.
  std::mt19937_64 g(3);
  for (int i = 0; i < 2000; ++i) {
    const float f = std::ldexp(1.0f + static_cast<float>(g() % (1u << 23)) * 0x1p-23f,
                               static_cast<int>(g() % 200) - 100);
    const double half = std::ldexp(static_cast<double>(std::nextafter(f, HUGE_VALF)) - f, -1);
    const int dsign = static_cast<int>(g() % 3) - 1;
    const double delta = dsign * std::ldexp(static_cast<double>(f), -70);
    const std::vector<double> v{f, half, delta};
    const float want = dsign > 0 ? std::nextafter(f, HUGE_VALF)
                       : dsign < 0 ? f
                                   : ((bits32(f) & 1) ? std::nextafter(f, HUGE_VALF) : f);
    ASSERT_EQ(bits32(sum_float(v)), bits32(want)) << f << " + " << half << " + " << delta;
    RefSum ref;
    for (double x : v) ref.add(x);
    ASSERT_EQ(bits32(ref.round<float>()), bits32(want)) << "reference";
  }
}

TEST(ExactCpu, SpecialValueFlags) {
  const double inf = HUGE_VAL, nan = std::nan("");
  EXPECT_TRUE(std::isnan(sum_double({1.0, nan, 2.0})));
  EXPECT_TRUE(std::isnan(sum_float({1.0, nan, 2.0})));
  EXPECT_EQ(sum_double({1.0, inf, -1e308}), inf);
  EXPECT_EQ(sum_double({1.0, -inf, 1e308, 1e308}), -inf);
  EXPECT_EQ(sum_float({-inf}), -HUGE_VALF);
  EXPECT_TRUE(std::isnan(sum_double({inf, -inf})));
  EXPECT_TRUE(std::isnan(sum_double({inf, 1.0, nan})));
  EXPECT_EQ(sum_double({inf, inf, 1.0}), inf);
  // Flags recorded, finite values around them still summed exactly into the accumulator.
  Thread t;
  for (double x : {1e308, inf, 1e308, -1e308, -inf, 3.0}) t.push(x);
  EXPECT_EQ(t.flags, static_cast<unsigned>(ex::kPosInf | ex::kNegInf));
  ex::fpe_finish(t.f, t.flusher());
  ex::normalize(t.w);
  EXPECT_EQ(ex::round_to<double>(t.w, 0), 1e308 + 3.0);
  EXPECT_TRUE(std::isnan(ex::round_to<double>(t.w, t.flags)));
  EXPECT_EQ(ex::round_to<double>(t.w, ex::kPosInf), inf);
  EXPECT_EQ(ex::round_to<float>(t.w, ex::kNegInf), -HUGE_VALF);
  EXPECT_TRUE(std::isnan(ex::round_to<float>(t.w, ex::kNaN | ex::kPosInf)));
}

TEST(ExactCpu, GuardKeepsExpansionBounded) {
  // Sums that would overflow a double on the way are exact, and a0 stays below 2^1000.
  Thread t;
  for (int i = 0; i < 100; ++i) t.push(DBL_MAX);
  for (int i = 0; i < 100; ++i) t.push(-DBL_MAX);
  t.push(0x1p999);
  t.push(0x1p999);  // a0 would reach 2^1000: goes to the accumulator
  t.push(-0x1p1000);
  t.push(0.5);
  EXPECT_EQ(t.flags, 0u);
  EXPECT_GT(t.flushes, 0);
  EXPECT_EQ(t.result<double>(), 0.5);
}

std::vector<double> random_values(std::mt19937_64& g, int n, int lo, int hi) {
  std::vector<double> xs(n);
  for (auto& x : xs) x = random_double(g, lo, hi);
  return xs;
}

TEST(ExactCpu, RandomSumsMatchReference) {
  std::mt19937_64 g(4);
  for (int trial = 0; trial < 40; ++trial) {
    // Whole range, a narrow range (many significant bits interact), the float range, and
    // subnormal-heavy inputs.
    const int lo[] = {0, 1000, 1023 - 126, 0};
    const int hi[] = {2046, 1060, 1023 + 127, 40};
    const int kind = trial % 4;
    std::vector<double> xs = random_values(g, 3000, lo[kind], hi[kind]);
    check_sum(xs, "random");
    // Heavy cancellation: add the negation of most of the values, in a shuffled order, so the
    // result is a small remainder many orders below the inputs (often subnormal for kind 3).
    std::vector<double> ys = xs;
    for (size_t i = 0; i + 3 < xs.size(); ++i) ys.push_back(-xs[i]);
    std::shuffle(ys.begin(), ys.end(), g);
    check_sum(ys, "random with cancellation");
  }
}

TEST(ExactCpu, RandomNearTiesMatchReference) {
  // Results that sit within a few units of the last place of a rounding boundary, for both
  // formats: a random value, its half ulp, and a random tiny perturbation, mixed with junk that
  // cancels.
  std::mt19937_64 g(5);
  for (int trial = 0; trial < 3000; ++trial) {
    const bool as_float = trial % 2 == 0;
    const int e = static_cast<int>(g() % (as_float ? 300 : 2000)) - (as_float ? 150 : 1000);
    const int p = as_float ? 24 : 53;  // base has p significant bits: base + half_ulp is a tie
    const double base = std::ldexp(1.0 + static_cast<double>(g() % (1ull << (p - 1))) * std::ldexp(1.0, 1 - p), e);
    const double half_ulp = std::ldexp(1.0, e - p);
    const double junk = random_double(g, 1000, 1100);
    std::vector<double> xs{junk, base, half_ulp, -junk};
    if (g() % 2) xs.push_back(std::ldexp(static_cast<double>(static_cast<int>(g() % 7) - 3), e - 90));
    std::shuffle(xs.begin(), xs.end(), g);
    RefSum ref;
    for (double x : xs) ref.add(x);
    if (as_float)
      ASSERT_EQ(bits32(sum_float(xs)), bits32(ref.round<float>())) << trial;
    else
      ASSERT_EQ(bits64(sum_double(xs)), bits64(ref.round<double>())) << trial;
  }
}

TEST(ExactCpu, PermutationInvariance) {
  std::mt19937_64 g(6);
  std::vector<double> xs = random_values(g, 5000, 0, 2046);
  std::vector<double> narrow = random_values(g, 5000, 1000, 1050);
  for (size_t i = 0; i < 4000; ++i) narrow.push_back(-narrow[i] * 0.75);
  for (auto* v : {&xs, &narrow}) {
    const double d0 = sum_double(*v);
    const float f0 = sum_float(*v);
    RefSum ref;
    for (double x : *v) ref.add(x);
    EXPECT_EQ(bits64(d0), bits64(ref.round<double>()));
    EXPECT_EQ(bits32(f0), bits32(ref.round<float>()));
    for (int rep = 0; rep < 10; ++rep) {
      std::shuffle(v->begin(), v->end(), g);
      ASSERT_EQ(bits64(sum_double(*v)), bits64(d0));
      ASSERT_EQ(bits32(sum_float(*v)), bits32(f0));
    }
    std::reverse(v->begin(), v->end());
    ASSERT_EQ(bits64(sum_double(*v)), bits64(d0));
  }
}

// Simulates the GPU structure: threads with their own expansions, several blocks each with its
// own accumulator, expansions merged in a tree, normalised block accumulators added word by
// word into a global one.
TEST(ExactCpu, MergeThreadsAndBlocks) {
  std::mt19937_64 g(7);
  for (int trial = 0; trial < 20; ++trial) {
    const int lo = trial % 2 ? 0 : 1010, hi = trial % 2 ? 2046 : 1040;
    std::vector<double> xs = random_values(g, 4096, lo, hi);
    for (int i = 0; i < 3000; ++i) xs.push_back(-xs[static_cast<size_t>(g() % 4096)]);
    RefSum ref;
    for (double x : xs) ref.add(x);

    constexpr int kBlocks = 3, kThreads = 8;
    std::vector<std::vector<long long>> block(kBlocks, std::vector<long long>(ex::kWords, 0));
    unsigned flags = 0;
    for (int b = 0; b < kBlocks; ++b) {
      long long* w = block[b].data();
      auto flush = [w](double y) { ex::add(w, y); };
      std::vector<ex::fpe2> th(kThreads, ex::fpe2{0.0, 0.0});
      for (size_t i = static_cast<size_t>(b); i < xs.size(); i += kBlocks)  // grid-stride-like
        ex::fpe_add(th[(i / kBlocks) % kThreads], xs[i], flags, flush);
      for (int stride = 1; stride < kThreads; stride *= 2)  // tree merge
        for (int t = 0; t + stride < kThreads; t += 2 * stride) ex::fpe_merge(th[t], th[t + stride], flags, flush);
      ex::fpe_finish(th[0], flush);
      ex::normalize(w);
    }
    long long global[ex::kWords] = {};
    for (int b = 0; b < kBlocks; ++b)
      for (int k = 0; k < ex::kWords; ++k) global[k] += block[b][k];
    ASSERT_TRUE(RefSum::from_words(global) == ref);
    ex::normalize(global);
    ASSERT_TRUE(RefSum::from_words(global) == ref);
    EXPECT_EQ(flags, 0u);
    ASSERT_EQ(bits64(ex::round_to<double>(global, 0)), bits64(ref.round<double>()));
    ASSERT_EQ(bits32(ex::round_to<float>(global, 0)), bits32(ref.round<float>()));
  }
}

TEST(ExactCpu, MergeMatchesSequentialAndIsExact) {
  ex::fpe2 a{0.0, 0.0}, b{0.0, 0.0};
  unsigned flags = 0;
  long long w[ex::kWords] = {};
  auto flush = [&](double y) { ex::add(w, y); };
  ex::fpe_add(a, 1e30, flags, flush);
  ex::fpe_add(a, 1.0, flags, flush);
  ex::fpe_add(b, -1e30, flags, flush);
  ex::fpe_add(b, 0x1p-40, flags, flush);
  ex::fpe_merge(a, b, flags, flush);
  RefSum pair, want;
  pair.add(a.a0);
  pair.add(a.a1);
  want.add(1.0 + 0x1p-40);
  EXPECT_TRUE(pair == want) << a.a0 << " + " << a.a1;
  ex::fpe_finish(a, flush);
  EXPECT_EQ(a.a0, 0.0);
  EXPECT_EQ(a.a1, 0.0);
  ex::normalize(w);
  EXPECT_EQ(ex::round_to<double>(w, flags), 1.0 + 0x1p-40);
  // Merging an expansion holding a special value's neighbours: flags combine by OR.
  unsigned f2 = ex::kPosInf;
  ex::fpe2 c{0.0, 0.0};
  ex::fpe_add(c, -HUGE_VAL, f2, flush);
  EXPECT_EQ(f2, static_cast<unsigned>(ex::kPosInf | ex::kNegInf));
}

TEST(ExactCpu, TwoProdExactInRange) {
  std::mt19937_64 g(8);
  // Random products whose |p| falls in [2^-960, 2^1000): p + e is exactly a * b.
  int checked = 0;
  for (int i = 0; i < 20000; ++i) {
    const double a = random_double(g, 1023 - 600, 1023 + 600);
    double b = random_double(g, 1023 - 600, 1023 + 600);
    if (i % 4 == 0) b = std::ldexp(random_double(g, 1023, 1023), -960 - std::ilogb(a) + static_cast<int>(g() % 3));
    double p, e;
    ex::two_prod(a, b, p, e);
    if (!ex::two_prod_exact_range(p)) continue;
    ++checked;
    RefSum exact, split;
    exact.add_product(a, b);
    split.add(p);
    split.add(e);
    ASSERT_TRUE(exact == split) << a << " * " << b;
  }
  EXPECT_GT(checked, 10000);
  // Boundaries of the helper.
  EXPECT_TRUE(ex::two_prod_exact_range(0x1p-960));
  EXPECT_TRUE(ex::two_prod_exact_range(-0x1p-960));
  EXPECT_FALSE(ex::two_prod_exact_range(std::nextafter(0x1p-960, 0.0)));
  EXPECT_TRUE(ex::two_prod_exact_range(std::nextafter(0x1p1000, 0.0)));
  EXPECT_FALSE(ex::two_prod_exact_range(0x1p1000));
  EXPECT_FALSE(ex::two_prod_exact_range(0.0));
  EXPECT_FALSE(ex::two_prod_exact_range(HUGE_VAL));
  EXPECT_FALSE(ex::two_prod_exact_range(std::nan("")));
  EXPECT_TRUE(ex::two_prod_exact_range(0.0, 5.0, 0.0));
  EXPECT_TRUE(ex::two_prod_exact_range(-3.0, -0.0, -0.0));
  EXPECT_FALSE(ex::two_prod_exact_range(1e-200, 1e-200, 0.0));
  // Why a lower bound is needed: this product's error (2^-1104) is below 2^-1074, so e is inexact.
  const double a = 1.0 + 0x1p-52, tinyb = std::ldexp(1.0 + 0x1p-52, -1000);
  double p, e;
  ex::two_prod(a, tinyb, p, e);
  RefSum exact, split;
  exact.add_product(a, tinyb);
  split.add(p);
  split.add(e);
  EXPECT_FALSE(exact == split);
  EXPECT_FALSE(ex::two_prod_exact_range(p));
}

TEST(ExactCpu, AddProductTinyAndHuge) {
  // 1e-200 * 1e-200 (about 1e-400, far below the smallest double) summed 10^6 times.
  {
    Direct d;
    for (int i = 0; i < 1000000; ++i) ex::add_product(1e-200, 1e-200, [&](int k, long long v) { d.w[k] += v; });
    int ea;
    const auto m = static_cast<std::uint64_t>(std::ldexp(std::frexp(1e-200, &ea), 53));
    RefSum ref;
    ref.add_scaled(static_cast<u128>(m) * m * 1000000u, 2 * ea - 106, false);
    long long n[ex::kWords];
    std::memcpy(n, d.w, sizeof n);
    ex::normalize(n);
    EXPECT_TRUE(RefSum::from_words(n) == ref) << "exact accumulator value";
    EXPECT_FALSE(ref.is_zero());
    EXPECT_EQ(bits64(d.result<double>()), bits64(0.0)) << "1e-394 rounds to +0";
    for (int i = 0; i < 1000000; ++i) ex::add_product(-1e-200, 1e-200, [&](int k, long long v) { d.w[k] += v; });
    d.add(0x1p-1074);
    EXPECT_EQ(d.result<double>(), 0x1p-1074) << "the products cancel exactly";
  }
  // 1e-160 * 1e-160 = 1e-320 (subnormal, the naive product loses most bits) summed 10^6 times.
  {
    Direct d;
    for (int i = 0; i < 1000000; ++i) ex::add_product(1e-160, 1e-160, [&](int k, long long v) { d.w[k] += v; });
    int ea;
    const auto m = static_cast<std::uint64_t>(std::ldexp(std::frexp(1e-160, &ea), 53));
    RefSum ref;
    ref.add_scaled(static_cast<u128>(m) * m * 1000000u, 2 * ea - 106, false);
    const double want = ref.round<double>();
    EXPECT_EQ(bits64(d.result<double>()), bits64(want));
    EXPECT_NEAR(want, 1e-314, 1e-323);
    EXPECT_NE(want, 1000000 * (1e-160 * 1e-160)) << "naive products would differ";
  }
  // Huge: 1e200 * 1e200 - 1e200 * 1e200 + 1 = 1.
  {
    Thread t;
    t.push_product(1e200, 1e200);
    t.push_product(-1e200, 1e200);
    t.push_product(1.0, 1.0);
    EXPECT_EQ(t.flags, 0u);
    EXPECT_EQ(t.result<double>(), 1.0);
  }
  {
    Thread t;
    t.push_product(DBL_MAX, DBL_MAX);
    t.push_product(DBL_MAX, -DBL_MAX);
    t.push_product(DBL_MAX, 2.0);  // overflows as a double product, 2 DBL_MAX exactly here
    t.push_product(-DBL_MAX, 1.0);
    EXPECT_EQ(t.result<double>(), DBL_MAX);
  }
  // Extremes of the range: smallest subnormal squared, and products of subnormals with huge values.
  {
    const double tiny = 0x1p-1074;
    Direct d;
    auto aw = [&](int k, long long v) { d.w[k] += v; };
    ex::add_product(tiny, tiny, aw);
    ex::add_product(tiny, 0x1p1023, aw);
    ex::add_product(-tiny, 0x1p1023, aw);
    RefSum ref;
    ref.add_scaled(1, -2148, false);
    long long n[ex::kWords];
    std::memcpy(n, d.w, sizeof n);
    ex::normalize(n);
    EXPECT_TRUE(RefSum::from_words(n) == ref);
    ex::add_product(tiny, 0x1p1023, aw);
    EXPECT_EQ(d.result<double>(), 0x1p-51);
  }
}

TEST(ExactCpu, RandomDotProductsMatchReference) {
  std::mt19937_64 g(9);
  for (int trial = 0; trial < 30; ++trial) {
    // Whole range (zero, subnormal, overflowing and underflowing products), and a normal range.
    const bool wide = trial % 2 == 0;
    Thread t;
    RefSum ref;
    std::vector<std::pair<double, double>> terms;
    for (int i = 0; i < 2000; ++i) {
      double a = wide ? random_double(g) : random_double(g, 900, 1100);
      double b = wide ? random_double(g) : random_double(g, 900, 1100);
      if (i % 97 == 0) a = 0.0;
      terms.emplace_back(a, b);
      if (i % 3 == 0 && std::isfinite(b * (1.0 + 0x1p-52)))
        terms.emplace_back(-a, b * (1.0 + 0x1p-52));  // near-cancelling partner
    }
    for (auto [a, b] : terms) {
      t.push_product(a, b);
      ref.add_product(a, b);
    }
    EXPECT_EQ(t.flags, 0u);
    Thread t2 = t;
    ex::fpe2 f = t.f;
    long long w[ex::kWords];
    std::memcpy(w, t.w, sizeof w);
    ex::fpe_finish(f, [&](double y) { ex::add(w, y); });
    EXPECT_TRUE(RefSum::from_words(w) == ref) << "exact accumulator value, trial " << trial;
    ASSERT_EQ(bits64(t.result<double>()), bits64(ref.round<double>())) << trial;
    ASSERT_EQ(bits32(t2.result<float>()), bits32(ref.round<float>())) << trial;
  }
}

TEST(ExactCpu, ProductSpecialValues) {
  const double inf = HUGE_VAL, nan = std::nan("");
  auto dot = [](std::vector<std::pair<double, double>> v) {
    Thread t;
    for (auto [a, b] : v) t.push_product(a, b);
    return t.result<double>();
  };
  EXPECT_TRUE(std::isnan(dot({{inf, 0.0}, {1.0, 1.0}})));
  EXPECT_TRUE(std::isnan(dot({{nan, 1.0}})));
  EXPECT_EQ(dot({{inf, 2.0}, {1.0, 1.0}}), inf);
  EXPECT_EQ(dot({{inf, -1e-300}}), -inf);
  EXPECT_TRUE(std::isnan(dot({{inf, 1.0}, {-1.0, inf}})));
  EXPECT_EQ(dot({{1e300, 1e300}, {-1e300, 1e300}}), 0.0);
  EXPECT_EQ(bits64(dot({{-1e-200, 1e-200}})), bits64(-0.0)) << "IEEE-like sign of an underflow";
  EXPECT_EQ(bits64(dot({{-0.0, 1.0}})), bits64(0.0)) << "exact zero is +0";
}

}  // namespace
}  // namespace tally::test

namespace tally::test {
namespace {

// fpe_add_narrow (the f32/f16/bf16 fast path): same exact sum as fpe_add and the reference, on
// float-valued data that usually fits a0, data that does not (wide exponents, cancellation), and
// special values.
TEST(ExactCpu, NarrowFastPathIsExact) {
  std::mt19937_64 g(77);
  for (int round = 0; round < 12; ++round) {
    std::vector<double> xs;
    std::uniform_real_distribution<float> u(-1.f, 1.f);
    std::uniform_int_distribution<int> e(-140, 120);
    for (int i = 0; i < 4000; ++i) {
      float x = u(g);
      if (round % 3 == 1) x = std::ldexp(x, e(g));         // exponents across the f32 range
      if (round % 3 == 2 && i % 7 == 0) x = i % 2 ? 3e38f : -3e38f;  // large, cancelling
      xs.push_back(x);
    }
    RefSum ref;
    ex::fpe2 f{0.0, 0.0};
    unsigned flags = 0;
    long long w[ex::kWords] = {};
    long flushes = 0;
    auto flush = [&](double y) {
      ++flushes;
      ex::add(w, y);
    };
    for (double x : xs) {
      ref.add(x);
      ex::fpe_add_narrow(f, x, flags, flush);
    }
    ex::fpe_finish(f, flush);
    ex::normalize(w);
    expect_same_bits(ex::round_to<float>(w, flags), ref.round<float>(), "narrow path, float");
    expect_same_bits(ex::round_to<double>(w, flags), ref.round<double>(), "narrow path, double");
    if (round % 3 == 0) {
      EXPECT_LE(flushes, 4) << "uniform floats should almost never leave a0";
    }
  }
  // Special values still reach the flags.
  ex::fpe2 f{0.0, 0.0};
  unsigned flags = 0;
  long long w[ex::kWords] = {};
  auto flush = [&](double y) { ex::add(w, y); };
  ex::fpe_add_narrow(f, 1.0, flags, flush);
  ex::fpe_add_narrow(f, std::numeric_limits<double>::infinity(), flags, flush);
  EXPECT_EQ(flags, unsigned(ex::kPosInf));
  ex::fpe_add_narrow(f, -std::numeric_limits<double>::infinity(), flags, flush);
  ex::fpe_add_narrow(f, std::nan(""), flags, flush);
  EXPECT_EQ(flags, unsigned(ex::kPosInf | ex::kNegInf | ex::kNaN));
  EXPECT_EQ(f.a0, 1.0);
}


// round_pair (the kernel's shortcut when nothing was flushed): the exactly rounded a0 + a1, the
// same bits as the reference and as round_to of an accumulator holding a0 + a1; ties, near ties,
// subnormal float results, the float overflow threshold, cancellation to zero and specials.
TEST(ExactCpu, RoundPairMatchesTheAccumulator) {
  auto check = [](double a0, double a1, unsigned flags, const char* what) {
    RefSum ref;
    ref.add(a0);
    ref.add(a1);
    long long w[ex::kWords] = {};
    ex::add(w, a0);
    ex::add(w, a1);
    ex::normalize(w);
    expect_same_bits(ex::round_pair<double>(a0, a1, flags), ex::round_to<double>(w, flags), what);
    expect_same_bits(ex::round_pair<float>(a0, a1, flags), ex::round_to<float>(w, flags), what);
    if (flags == 0) {
      expect_same_bits(ex::round_pair<double>(a0, a1, 0), ref.round<double>(), what);
      expect_same_bits(ex::round_pair<float>(a0, a1, 0), ref.round<float>(), what);
    }
  };
  // Float ties broken only by a1: 1 + 2^-24 is a tie between 1 and 1 + 2^-23.
  check(1.0 + 0x1p-24, 0x1p-80, 0, "tie, a1 above");
  check(1.0 + 0x1p-24, -0x1p-80, 0, "tie, a1 below");
  check(1.0 + 0x1p-24, 0.0, 0, "exact tie to even");
  check(1.0 + 3 * 0x1p-24, 0.0, 0, "exact tie to even, odd neighbour");
  check(-(1.0 + 0x1p-24), -0x1p-80, 0, "negative tie, a1 beyond");
  check(-(1.0 + 0x1p-24), 0x1p-80, 0, "negative tie, a1 toward zero");
  check(0x1p-24, -0x1p-90, 0, "a power of two stepping down");
  // Double ties: a0 + a1 exactly halfway between doubles.
  check(1.0, 0x1p-53, 0, "double tie");
  check(1.0 + 0x1p-52, 0x1p-53, 0, "double tie to even");
  // Float subnormals and the overflow threshold.
  check(0x1p-149 * 1.5, 0x1p-200, 0, "float subnormal, above a tie");
  check(0x1p-149 * 1.5, -0x1p-200, 0, "float subnormal, below a tie");
  check(0x1p-150, 0.0, 0, "half the smallest float subnormal");
  check(0x1p-150, 0x1p-300, 0, "just above half the smallest float subnormal");
  const double fmax = static_cast<double>(FLT_MAX);
  check(fmax + 0x1p103, 0.0, 0, "float overflow threshold (a tie: to infinity)");
  check(fmax + 0x1p103, -0x1p-60, 0, "just below the float overflow threshold");
  check(1e300, 1e283, 0, "beyond float");
  // Zero and specials.
  check(0.0, 0.0, 0, "zero");
  check(1.5, 0.0, ex::kNaN, "NaN flag");
  check(1.5, 0.0, ex::kPosInf, "+inf flag");
  check(1.5, 0.0, ex::kPosInf | ex::kNegInf, "both infinities");
  // Random pairs as the expansion leaves them: a1 below half an ulp of a0, or any a1.
  std::mt19937_64 g(2026);
  for (int i = 0; i < 20000; ++i) {
    const double a0 = random_double(g, 1, 2020);
    double a1 = std::ldexp(random_double(g, 1000, 1023), std::ilogb(a0) - 53 - int(g() % 40));
    if (i % 5 == 0) a1 = random_double(g, 1, 2020) * 0x1p-30;
    if (!std::isfinite(a0 + a1) || std::fabs(a0) >= 0x1p1000 || std::fabs(a1) >= 0x1p947) continue;
    // Near float ties: round a0 to a float tie, then perturb with a1.
    if (i % 3 == 0) {
      const float f = static_cast<float>(a0);
      if (std::isfinite(f) && f != 0.0f) {
        const double t = static_cast<double>(f) + std::ldexp(1.0, std::ilogb(f) - 24);
        check(t, a1, 0, "random near a float tie");
        continue;
      }
    }
    check(a0, a1, 0, "random pair");
  }
}

// fpe_merge_fast: the same exact value as fpe_merge, whichever path it takes.
TEST(ExactCpu, FastMergeIsExact) {
  std::mt19937_64 g(31);
  for (int round = 0; round < 2000; ++round) {
    const int kind = round % 4;
    auto make = [&](ex::fpe2& f) {
      f = {0.0, 0.0};
      unsigned fl = 0;
      long long sink[ex::kWords] = {};
      auto flush = [&](double y) { ex::add(sink, y); };
      const int m = 1 + int(g() % 30);
      for (int i = 0; i < m; ++i) {
        double x = kind == 0 ? double(std::uniform_real_distribution<float>(-1, 1)(g)) : random_double(g, 900, 1100);
        if (kind == 3) x = random_double(g, 1, 2040) * 0x1p-40;
        ex::fpe_add(f, x, fl, flush);
      }
      return RefSum::from_words(sink);
    };
    ex::fpe2 a, b;
    RefSum lost_a = make(a), lost_b = make(b);
    (void)lost_a;
    (void)lost_b;
    RefSum want;
    want.add(a.a0);
    want.add(a.a1);
    want.add(b.a0);
    want.add(b.a1);
    long long w[ex::kWords] = {};
    unsigned flags = 0;
    ex::fpe2 f = a;
    ex::fpe_merge_fast(f, b, flags, [&](double y) { ex::add(w, y); });
    ex::add(w, f.a0);
    ex::add(w, f.a1);
    EXPECT_TRUE(RefSum::from_words(w) == want) << "round " << round;
    EXPECT_LT(std::fabs(f.a0), 0x1p1000);
  }
}

}  // namespace
}  // namespace tally::test
