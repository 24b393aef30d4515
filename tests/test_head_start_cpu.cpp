// The host's share of a head start (src/cpu/exact_sum, src/chunked/head_start): exact sums of
// float16, bfloat16, float32 and float64 on the CPU, split over accumulators and pieces at
// unaligned addresses, against the independent exact reference (numerics_reference.hpp); the
// combiner adding such a sum to the GPU's carry. No GPU needed.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "chunked/combine.hpp"
#include "chunked/head_start.hpp"
#include "core/exact.cuh"
#include "cpu/exact_sum.hpp"
#include "numerics_reference.hpp"

namespace tally::test {
namespace {

namespace ex = core::exact;

// Elements of every kind: wide exponents both signs, subnormals, zeros of both signs, runs of one
// exponent, and pairs that cancel.
template <class T>
std::vector<T> mixed(std::size_t n, std::uint32_t seed) {
  std::mt19937_64 g(seed);
  std::vector<T> x(n);
  double lo = -30, hi = 30;
  if constexpr (std::is_same_v<T, float>) lo = -149, hi = 126;
  if constexpr (std::is_same_v<T, double>) lo = -1074, hi = 1000;
  if constexpr (std::is_same_v<T, ref::f16>) lo = -24, hi = 14;
  if constexpr (std::is_same_v<T, ref::bf16>) lo = -133, hi = 126;
  std::uniform_real_distribution<double> u(1, 2), ex(lo, hi);
  for (std::size_t i = 0; i < n; ++i) {
    const int kind = static_cast<int>(g() % 16);
    double v;
    if (kind == 0) v = 0.0;
    else if (kind == 1) v = -0.0;
    else if (kind < 6) v = std::ldexp(u(g), static_cast<int>(lo) + static_cast<int>(g() % 8));  // subnormal/small
    else if (kind < 10) v = std::ldexp(u(g), 3);  // a run of one exponent
    else v = std::ldexp(u(g), static_cast<int>(ex(g)));
    if (g() & 1) v = -v;
    x[i] = ref::make<T>(v);
    if (kind == 15 && i > 0) x[i] = ref::make<T>(-ref::as_double(x[i - 1]));  // cancels its neighbour
  }
  return x;
}

template <class T>
dtype type_of() {
  return ref::dtype_of<T>();
}

// Rounds an accumulator as the result dtype of a sum of T (double for f64, float otherwise).
template <class T>
double rounded(const long long* w, unsigned flags) {
  if constexpr (std::is_same_v<T, double>) return ex::round_to<double>(w, flags);
  else return static_cast<double>(ex::round_to<float>(w, flags));
}
template <class T>
double reference(const std::vector<T>& x) {
  const ref::exact_accumulator a = ref::exact_sum(x.data(), x.size());
  if constexpr (std::is_same_v<T, double>) return a.to_double();
  else return static_cast<double>(a.to_float());
}
bool same(double a, double b) {  // the same value: bits, except that any NaN matches any NaN and +0 matches -0
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  if (a == 0 && b == 0) return true;
  std::uint64_t x, y;
  std::memcpy(&x, &a, 8);
  std::memcpy(&y, &b, 8);
  return x == y;
}

template <class T>
void check_split_sums() {
  for (std::size_t n : {std::size_t(1), std::size_t(7), std::size_t(1000), std::size_t(100003)}) {
    const std::vector<T> x = mixed<T>(n, static_cast<std::uint32_t>(n * 31 + sizeof(T)));
    // Three accumulators take random pieces (unaligned: a byte buffer one byte off), then merge.
    std::vector<unsigned char> bytes(x.size() * sizeof(T) + 1);
    std::memcpy(bytes.data() + 1, x.data(), x.size() * sizeof(T));
    std::mt19937 g(static_cast<std::uint32_t>(n));
    cpu::exact_sum a(type_of<T>()), b(type_of<T>()), c(type_of<T>());
    cpu::exact_sum* acc[3] = {&a, &b, &c};
    for (std::size_t at = 0; at < n;) {
      const std::size_t len = std::min<std::size_t>(n - at, 1 + g() % 5000);
      acc[g() % 3]->add(bytes.data() + 1 + at * sizeof(T), len);
      at += len;
    }
    b.merge(c);
    a.merge(b);
    EXPECT_EQ(a.count(), n);
    EXPECT_EQ(a.flags(), 0u);
    const double want = reference(x), got = rounded<T>(a.words(), a.flags());
    EXPECT_TRUE(same(got, want)) << to_string(type_of<T>()) << " n=" << n << ": " << got << " want " << want;
  }
}

TEST(HeadStartCpu, ExactSumOfSplitPiecesIsTheReferenceF32) { check_split_sums<float>(); }
TEST(HeadStartCpu, ExactSumOfSplitPiecesIsTheReferenceF64) { check_split_sums<double>(); }
TEST(HeadStartCpu, ExactSumOfSplitPiecesIsTheReferenceF16) { check_split_sums<ref::f16>(); }
TEST(HeadStartCpu, ExactSumOfSplitPiecesIsTheReferenceBf16) { check_split_sums<ref::bf16>(); }

TEST(HeadStartCpu, ExactSumCancelsAndOverflowsAsTheReference) {
  const float big = std::numeric_limits<float>::max(), tiny = std::numeric_limits<float>::denorm_min();
  const std::vector<std::vector<float>> cases = {
      {big, tiny, -big},                       // only the subnormal survives
      {big, big, -big},                        // an intermediate beyond float's range, exact
      {big, big},                              // rounds to +inf
      {1.0f, std::ldexp(1.0f, -24), std::ldexp(1.0f, -60)},  // a tie broken by a far bit
      {1.0f, std::ldexp(1.0f, -24)},           // a tie to even
  };
  for (const std::vector<float>& x : cases) {
    cpu::exact_sum s(dtype::f32);
    s.add(x.data(), x.size());
    const double want = reference(x), got = rounded<float>(s.words(), s.flags());
    EXPECT_TRUE(same(got, want)) << got << " want " << want;
  }
  // Many elements of the largest significand in one bin (2^20 of them: a bin of about 2^44).
  std::vector<float> run(1 << 20, std::nextafter(2.0f, 0.0f));
  cpu::exact_sum s(dtype::f32);
  s.add(run.data(), run.size());
  EXPECT_TRUE(same(rounded<float>(s.words(), s.flags()), reference(run)));
}

TEST(HeadStartCpu, ExactSumRecordsNansAndInfinities) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  auto flags_of = [](std::vector<float> x) {
    cpu::exact_sum s(dtype::f32);
    s.add(x.data(), x.size());
    return s.flags();
  };
  EXPECT_EQ(flags_of({1, nan, 2}), unsigned(ex::kNaN));
  EXPECT_EQ(flags_of({1, inf}), unsigned(ex::kPosInf));
  EXPECT_EQ(flags_of({-inf, 3}), unsigned(ex::kNegInf));
  EXPECT_EQ(flags_of({-inf, inf}), unsigned(ex::kNegInf | ex::kPosInf));
  cpu::exact_sum s(dtype::f32);
  const std::vector<float> x = {1, -inf, inf};
  s.add(x.data(), x.size());
  EXPECT_TRUE(std::isnan(rounded<float>(s.words(), s.flags())));
  // A float16 NaN and infinity (exponent field all ones, 5 bits).
  const std::uint16_t h[3] = {0x7c00, 0x3c00, 0xfe00};
  cpu::exact_sum hs(dtype::f16);
  hs.add(h, 2);
  EXPECT_EQ(hs.flags(), unsigned(ex::kPosInf));
  hs.add(h + 2, 1);
  EXPECT_EQ(hs.flags(), unsigned(ex::kPosInf | ex::kNaN));
}

TEST(HeadStartCpu, ExactSumRefusesOtherDtypes) {
  EXPECT_THROW(cpu::exact_sum(dtype::i32), error);
  EXPECT_FALSE(cpu::exact_sum_takes(dtype::u8));
  EXPECT_TRUE(cpu::exact_sum_takes(dtype::bf16));
}

// The GPU's carry (here all zero, as after the device took nothing) plus the host's share, in the
// combiner: the exact sum, and for mean the exact sum over n.
TEST(HeadStartCpu, CombinerAddsTheHostShareToTheCarry) {
  const std::vector<float> x = mixed<float>(5000, 3);
  cpu::exact_sum s(dtype::f32);
  s.add(x.data(), x.size());
  std::vector<long long> carry(chunked::carry_bytes() / sizeof(long long), 0);
  chunked::spec sum{chunked::what::reduce, dtype::f32, op::sum, {}};
  sum.opt.mode = accuracy::exact;
  chunked::combiner c(sum);
  c.add_exact(s.words(), s.flags());
  EXPECT_TRUE(same(c.result(carry.data(), x.size()).f, reference(x)));
  // Half in the carry (as the GPU would leave it, unnormalised is fine), half from the host.
  cpu::exact_sum first(dtype::f32), second(dtype::f32);
  first.add(x.data(), 2500);
  second.add(x.data() + 2500, 2500);
  std::memcpy(carry.data(), first.words(), ex::kWords * sizeof(long long));
  chunked::combiner d(sum);
  d.add_exact(second.words(), second.flags());
  EXPECT_TRUE(same(d.result(carry.data(), x.size()).f, reference(x)));
  chunked::spec mean = sum;
  mean.o = op::mean;
  chunked::combiner m(mean);
  m.add_exact(s.words(), s.flags());
  const ref::exact_accumulator a = ref::exact_sum(x.data(), x.size());
  std::fill(carry.begin(), carry.end(), 0);
  const value mv = m.result(carry.data(), x.size());
  double want = a.to_double() / static_cast<double>(x.size());
  if (mv.type == dtype::f32) want = static_cast<float>(want);
  EXPECT_EQ(mv.f, want);
  // Not for plans that are not exact.
  chunked::combiner fast({chunked::what::reduce, dtype::f32, op::max, {}});
  EXPECT_THROW(fast.add_exact(s.words(), s.flags()), error);
}

TEST(HeadStartCpu, AppliesToFloatSumsAndMeansOnly) {
  using chunked::spec;
  using chunked::what;
  EXPECT_TRUE(chunked::head_start_applies(spec{what::reduce, dtype::f32, op::sum, {}}));
  EXPECT_TRUE(chunked::head_start_applies(spec{what::reduce, dtype::bf16, op::mean, {}}));
  EXPECT_TRUE(chunked::head_start_applies(spec{what::reduce, dtype::f64, op::sum, {}}));
  EXPECT_FALSE(chunked::head_start_applies(spec{what::reduce, dtype::f32, op::max, {}}));
  EXPECT_FALSE(chunked::head_start_applies(spec{what::reduce, dtype::i32, op::sum, {}}));
  EXPECT_FALSE(chunked::head_start_applies(spec{what::dot, dtype::f32, op::sum, {}}));
  EXPECT_FALSE(chunked::head_start_applies(spec{what::stats, dtype::f32, op::sum, {}}));
}

}  // namespace
}  // namespace tally::test
