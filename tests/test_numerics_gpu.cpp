// The numerics features on the GPU, against the independent reference in numerics_reference.hpp:
// argmin/argmax, min/max under a NaN policy, half-precision inputs, dot, the accuracy modes of
// sum and mean, sum_sq and norm2, fused statistics, bad input, and graph capture.
//
// Fast-mode bounds: |got - exact| <= gamma_h * sum|x| + ulp(exact), h = ceil(n / 256) + 64: the
// core's blocks have at least 256 threads (each thread's chain is at most n / 256 long) and the
// folds, warp, block and partials trees add far less than 64 levels.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <functional>
#include <iomanip>
#include <memory>
#include <numeric>
#include <sstream>
#include <string>
#include <utility>

#include "core/context.hpp"
#include "core/policy.hpp"
#include "core/tuning.hpp"
#include "numerics_reference.hpp"
#include "support.hpp"

namespace tally::test {
namespace {

using ref::as_double;
using ref::bf16;
using ref::bits_of;
using ref::f16;
using ref::is_float_v;
using ref::value_of;

constexpr std::uint64_t kSmallLimit = std::uint64_t(1) << 16;
constexpr options kIgnore{nan_policy::ignore, accuracy::fast};
constexpr accuracy kModes[] = {accuracy::fast, accuracy::compensated, accuracy::exact};

options with_mode(accuracy m) {
  return options{nan_policy::propagate, m};
}

// The sizes to run: all of them, or those up to 2^16 under TALLY_TEST_SMALL.
std::vector<std::uint64_t> sizes(std::initializer_list<std::uint64_t> all) {
  std::vector<std::uint64_t> out;
  for (auto n : all)
    if (!small_only() || n <= kSmallLimit) out.push_back(n);
  return out;
}

// Result types: f64 for f64 inputs, f32 for f32, f16 and bf16.
template <class T>
using acc_t = std::conditional_t<std::is_same_v<T, double>, double, float>;
// The exact value rounded once to R.
template <class R>
R rounded(const ref::exact_accumulator& s) {
  if constexpr (std::is_same_v<R, double>)
    return s.to_double();
  else
    return s.to_float();
}
template <class T>
constexpr long double unit_roundoff() {
  return std::is_same_v<T, double> ? 0x1p-53L : 0x1p-24L;
}

long double height(std::uint64_t n) {
  return std::ceil(static_cast<long double>(n) / 256) + 64;
}

std::string hex(double x) {
  std::ostringstream s;
  s << std::hexfloat << x << " (" << std::defaultfloat << std::setprecision(17) << x << ")";
  return s.str();
}

// Bitwise equality of float results (held in doubles); any NaN matches a NaN.
::testing::AssertionResult same_bits(double got, double want) {
  if (std::isnan(want)) {
    if (std::isnan(got)) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "got " << hex(got) << ", want NaN";
  }
  if (bits_of(got) == bits_of(want)) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "got " << hex(got) << ", want " << hex(want);
}

template <class R>
::testing::AssertionResult within_ulps(double got, R want, std::uint64_t ulps) {
  const std::uint64_t d = ref::ulps_between(static_cast<R>(got), want);
  if (static_cast<double>(static_cast<R>(got)) == got && d <= ulps)
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "got " << hex(got) << ", want " << hex(want) << ": " << d
                                       << " ulps apart (at most " << ulps << ")";
}

::testing::AssertionResult within(long double got, long double want, long double bound) {
  if (std::isfinite(got) && std::fabs(got - want) <= bound) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "got " << hex(static_cast<double>(got)) << ", want " << hex(static_cast<double>(want))
         << ", error " << static_cast<double>(std::fabs(got - want)) << " > bound "
         << static_cast<double>(bound);
}

// ---------------------------------------------------------------------------------------------
// Data.
struct rng_t {
  std::uint64_t s;
  explicit rng_t(std::uint64_t seed) : s(seed * 0x9e3779b97f4a7c15ull + 0x632be59bd9b4e019ull) {}
  std::uint64_t next() {  // splitmix64
    std::uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  double unit() { return static_cast<double>(next() >> 11) * 0x1p-53; }  // [0, 1)
  std::uint64_t below(std::uint64_t m) { return next() % m; }
  bool coin() { return next() & 1; }
};

// Integers in [lo, hi]; floats in [lo, hi) rounded to T.
template <class T>
std::vector<T> uniform(std::uint64_t n, std::uint64_t seed, double lo, double hi) {
  rng_t r(seed);
  std::vector<T> v(n);
  if constexpr (is_float_v<T>) {
    for (auto& x : v) x = ref::make<T>(lo + (hi - lo) * r.unit());
  } else {
    const auto l = static_cast<long long>(lo), h = static_cast<long long>(hi);
    const auto span = static_cast<std::uint64_t>(h - l) + 1;
    for (auto& x : v) x = static_cast<T>(l + static_cast<long long>(r.below(span)));
  }
  return v;
}

// Integers over their whole range.
template <class T>
std::vector<T> full_range(std::uint64_t n, std::uint64_t seed) {
  rng_t r(seed);
  std::vector<T> v(n);
  for (auto& x : v) {
    const std::uint64_t b = r.next();
    std::memcpy(&x, &b, sizeof(T));
  }
  return v;
}

// Random signs and magnitudes (1 + u) * 2^e, e uniform in [emin, emax], rounded to T.
template <class T>
std::vector<T> mixed(std::uint64_t n, std::uint64_t seed, int emin, int emax) {
  rng_t r(seed);
  std::vector<T> v(n);
  for (auto& x : v) {
    const int e = emin + static_cast<int>(r.below(static_cast<std::uint64_t>(emax - emin + 1)));
    x = ref::make<T>(std::ldexp(1.0 + r.unit(), e) * (r.coin() ? -1 : 1));
  }
  return v;
}

// The exponent range of mixed() per type: wide, without overflowing the exact sum.
template <class T>
std::pair<int, int> wide_exponents() {
  if constexpr (std::is_same_v<T, f16>)
    return {-24, 14};
  else if constexpr (std::is_same_v<T, double>)
    return {-1070, 1000};
  else
    return {-140, 100};  // f32, bf16: subnormals included
}

template <class T>
T nan_of() {
  return ref::make<T>(std::numeric_limits<double>::quiet_NaN());
}
template <class T>
T inf_of(bool negative) {
  return ref::make<T>(negative ? -HUGE_VAL : HUGE_VAL);
}

// A device copy of h, `offset` elements past an aligned address, `zeros_after` zeros behind it.
template <class T>
struct on_device {
  device_buffer buf;
  const T* ptr = nullptr;
  explicit on_device(const std::vector<T>& h, std::uint64_t offset = 0,
                     std::uint64_t zeros_after = 0)
      : buf((offset + h.size() + zeros_after) * sizeof(T) + 16) {
    const std::vector<T> zeros(std::max(offset, zeros_after), ref::make<T>(0.0));
    if (offset) buf.upload(zeros.data(), offset * sizeof(T));
    if (!h.empty()) buf.upload(h.data(), h.size() * sizeof(T), offset * sizeof(T));
    if (zeros_after)
      buf.upload(zeros.data(), zeros_after * sizeof(T), (offset + h.size()) * sizeof(T));
    ptr = static_cast<const T*>(buf.get()) + offset;
  }
  const void* get() const { return ptr; }
};

template <class T>
void shuffle(std::vector<T>& v, std::uint64_t seed) {
  rng_t r(seed);
  for (std::uint64_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[r.below(i)]);
}

// The element a result value should hold: bitwise for floats (any NaN for NaN), exact for ints.
template <class T>
::testing::AssertionResult holds(const value& v, T x) {
  if constexpr (is_float_v<T>) {
    return same_bits(v.f, as_double(x));
  } else {
    if (value_bits(v) == to_bits(x)) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "got " << v.to_string() << ", want " << +x;
  }
}

#define TRACE(...) SCOPED_TRACE(::testing::Message() << __VA_ARGS__ << " seed=" << test_seed())

// =============================================================================================
// argmin / argmax

// Reduces h (at `offset`) with argmin and argmax under policy p and checks index and value.
template <class T>
void check_arg(const std::vector<T>& h, std::uint64_t offset, nan_policy p, const char* data) {
  const dtype t = ref::dtype_of<T>();
  const std::uint64_t n = h.size();
  on_device<T> d(h, offset);
  for (op o : {op::argmin, op::argmax}) {
    TRACE(to_string(o) << " " << to_string(t) << " n=" << n << " offset=" << offset
                       << " nan=" << to_string(p) << " data=" << data);
    const value v = reduce_value(d.get(), n, t, o, nullptr, options{p, accuracy::fast});
    const auto r = ref::arg_extreme(h.data(), n, o == op::argmax, p);
    ASSERT_EQ(v.type, result_dtype(t, o));
    ASSERT_EQ(v.index, r.index) << "got value " << v.to_string();
    if (r.index >= 0) {
      ASSERT_TRUE(holds(v, h[static_cast<std::size_t>(r.index)]));
    } else if constexpr (is_float_v<T>) {
      if (n > 0 || p == nan_policy::ignore) {
        ASSERT_TRUE(std::isnan(v.f)) << v.to_string();
      }
    }
    if (n == 0) {
      ASSERT_EQ(v.index, identity(t, o, options{p, accuracy::fast}).index);
    }
  }
}

// Narrow ranges give many ties; the extremes are then repeated all over the input.
template <class T>
std::vector<T> narrow(std::uint64_t n, std::uint64_t seed) {
  if constexpr (std::is_unsigned_v<T>)
    return uniform<T>(n, seed, 0, 40);
  else
    return uniform<T>(n, seed, -20, 20);
}

template <class T>
void run_arg_random() {
  std::uint64_t seed = test_seed();
  for (std::uint64_t n :
       sizes({0, 1, 2, 31, 32, 33, 1000, 4099, 65537, (1u << 20) + 3, (1u << 24) + 5})) {
    auto tied = narrow<T>(n, ++seed);
    if constexpr (is_float_v<T>) {  // integral values as floats: many ties too
      for (auto& x : tied) x = ref::make<T>(std::round(as_double(x)));
    }
    check_arg(tied, 0, nan_policy::propagate, "narrow");
    if (n > (1u << 20) + 3) continue;  // one pass is enough at 2^24
    if constexpr (is_float_v<T>)
      check_arg(uniform<T>(n, ++seed, -1, 1), 0, nan_policy::propagate, "uniform");
    else
      check_arg(full_range<T>(n, ++seed), 0, nan_policy::propagate, "full-range");
    if (n == 1000 || n == 4099 || n == 65537)
      for (std::uint64_t offset : {1, 2, 3})
        check_arg(tied, offset, nan_policy::propagate, "narrow");
    if constexpr (is_float_v<T>) check_arg(tied, 0, nan_policy::ignore, "narrow, no NaN");
  }
}

TEST(NumericsGpu, ArgMinMaxInt8) {
  TALLY_REQUIRE_GPU();
  run_arg_random<std::int8_t>();
}
TEST(NumericsGpu, ArgMinMaxUInt8) {
  TALLY_REQUIRE_GPU();
  run_arg_random<std::uint8_t>();
}
TEST(NumericsGpu, ArgMinMaxInt16) {
  TALLY_REQUIRE_GPU();
  run_arg_random<std::int16_t>();
}
TEST(NumericsGpu, ArgMinMaxUInt16) {
  TALLY_REQUIRE_GPU();
  run_arg_random<std::uint16_t>();
}
TEST(NumericsGpu, ArgMinMaxInt32) {
  TALLY_REQUIRE_GPU();
  run_arg_random<std::int32_t>();
}
TEST(NumericsGpu, ArgMinMaxUInt32) {
  TALLY_REQUIRE_GPU();
  run_arg_random<std::uint32_t>();
}
TEST(NumericsGpu, ArgMinMaxInt64) {
  TALLY_REQUIRE_GPU();
  run_arg_random<std::int64_t>();
}
TEST(NumericsGpu, ArgMinMaxUInt64) {
  TALLY_REQUIRE_GPU();
  run_arg_random<std::uint64_t>();
}
TEST(NumericsGpu, ArgMinMaxFloat16) {
  TALLY_REQUIRE_GPU();
  run_arg_random<f16>();
}
TEST(NumericsGpu, ArgMinMaxBfloat16) {
  TALLY_REQUIRE_GPU();
  run_arg_random<bf16>();
}
TEST(NumericsGpu, ArgMinMaxFloat32) {
  TALLY_REQUIRE_GPU();
  run_arg_random<float>();
}
TEST(NumericsGpu, ArgMinMaxFloat64) {
  TALLY_REQUIRE_GPU();
  run_arg_random<double>();
}

// The extreme repeated at block boundaries and both ends: the first index wins wherever the
// copies land in the grid; all-equal input gives index 0.
template <class T>
void run_arg_ties() {
  for (std::uint64_t n : sizes({kSmallLimit, (1u << 20) + 3})) {
    const auto base = std::is_unsigned_v<T> ? uniform<T>(n, test_seed() + n, 10, 50)
                                            : uniform<T>(n, test_seed() + n, -50, 50);
    const T hi = ref::make<T>(100), lo = ref::make<T>(std::is_unsigned_v<T> ? 0 : -100);
    const std::vector<std::uint64_t> where = {0, 4095, 4096, 65535, n - 1};
    for (std::size_t first = 0; first < where.size(); ++first) {
      auto h = base;
      for (std::size_t k = first; k < where.size(); ++k) {
        h[where[k]] = hi;
        h[where[k] + 2 < n ? where[k] + 2 : where[k] - 2] = lo;  // the minimum's copies nearby
      }
      check_arg(h, 0, nan_policy::propagate, "repeated extremes");
    }
    check_arg(std::vector<T>(n, ref::make<T>(7)), 0, nan_policy::propagate, "all equal");
    auto ends = base;
    ends.front() = hi;
    ends.back() = lo;
    check_arg(ends, 0, nan_policy::propagate, "max first, min last");
    std::swap(ends.front(), ends.back());
    check_arg(ends, 0, nan_policy::propagate, "min first, max last");
    check_arg(ends, 3, nan_policy::propagate, "min first, max last");
  }
}

TEST(NumericsGpu, ArgTiesGoToTheFirstIndex) {
  TALLY_REQUIRE_GPU();
  run_arg_ties<std::int8_t>();
  run_arg_ties<std::uint8_t>();
  run_arg_ties<std::int16_t>();
  run_arg_ties<std::uint16_t>();
  run_arg_ties<std::int32_t>();
  run_arg_ties<std::uint32_t>();
  run_arg_ties<std::int64_t>();
  run_arg_ties<std::uint64_t>();
  run_arg_ties<f16>();
  run_arg_ties<bf16>();
  run_arg_ties<float>();
  run_arg_ties<double>();
}

// NaN: propagate gives the first NaN's index; ignore skips NaNs; all-NaN gives -1 under ignore.
template <class T>
void run_arg_nan() {
  const T nan = nan_of<T>();
  for (std::uint64_t n : sizes({1, 2, 33, 4099, 65537, (1u << 20) + 3})) {
    const auto base = uniform<T>(n, test_seed() + n, -1, 1);
    rng_t r(test_seed() + 7 * n);
    const std::vector<std::vector<std::uint64_t>> placements = {
        {0}, {n / 2}, {n - 1}, {n / 2, n - 1}, {n - 1, 0}, {r.below(n), r.below(n), r.below(n)}};
    for (const auto& at : placements) {
      auto h = base;
      for (auto i : at) h[i] = nan;
      for (nan_policy p : {nan_policy::propagate, nan_policy::ignore})
        check_arg(h, 0, p, "NaNs placed");
    }
    auto every_third = base;
    for (std::uint64_t i = 1; i < n; i += 3) every_third[i] = nan;
    for (nan_policy p : {nan_policy::propagate, nan_policy::ignore})
      check_arg(every_third, 0, p, "every third NaN");
    const std::vector<T> all_nan(n, nan);
    for (nan_policy p : {nan_policy::propagate, nan_policy::ignore})
      check_arg(all_nan, 0, p, "all NaN");
  }
  for (nan_policy p : {nan_policy::propagate, nan_policy::ignore})
    check_arg(std::vector<T>{}, 0, p, "empty");
}

TEST(NumericsGpu, ArgNaN) {
  TALLY_REQUIRE_GPU();
  run_arg_nan<f16>();
  run_arg_nan<bf16>();
  run_arg_nan<float>();
  run_arg_nan<double>();
}

// Infinities, and signed zeros (-0.0 == +0.0 for argmin/argmax: ties go to the first index).
template <class T>
void run_arg_specials() {
  for (std::uint64_t n : sizes({5, 1000, 65537})) {
    auto h = uniform<T>(n, test_seed() + n, -1, 1);
    h[n / 3] = inf_of<T>(true);
    h[n - 1] = inf_of<T>(true);
    h[n / 4] = inf_of<T>(false);
    h[1] = inf_of<T>(false);
    for (nan_policy p : {nan_policy::propagate, nan_policy::ignore})
      check_arg(h, 0, p, "infinities");
    rng_t r(test_seed() + n);
    std::vector<T> zeros(n);
    for (auto& x : zeros) x = ref::make<T>(r.coin() ? -0.0 : 0.0);
    check_arg(zeros, 0, nan_policy::propagate, "signed zeros");
    zeros[0] = ref::make<T>(0.0);
    check_arg(zeros, 0, nan_policy::propagate, "+0 first, then signed zeros");
    zeros[0] = ref::make<T>(-0.0);
    check_arg(zeros, 0, nan_policy::propagate, "-0 first, then signed zeros");
    zeros[0] = nan_of<T>();
    check_arg(zeros, 0, nan_policy::ignore, "NaN first, then signed zeros");
  }
}

TEST(NumericsGpu, ArgInfinitiesAndSignedZeros) {
  TALLY_REQUIRE_GPU();
  run_arg_specials<f16>();
  run_arg_specials<bf16>();
  run_arg_specials<float>();
  run_arg_specials<double>();
}

// More than 2^32 one-byte elements, the extremes placed past 2^32.
TEST(LargeGpu, ArgMinMaxInt8PastTwoToThe32) {
  TALLY_REQUIRE_GPU();
  if (small_only()) GTEST_SKIP() << "large test skipped under TALLY_TEST_SMALL";
  const std::uint64_t n = (std::uint64_t(1) << 32) + 4099, two32 = std::uint64_t(1) << 32;
  std::unique_ptr<std::int8_t[]> h(new std::int8_t[n]);
  rng_t r(test_seed());
  for (std::uint64_t i = 0; i + 8 <= n; i += 8) {
    const std::uint64_t b = r.next() & 0x3f3f3f3f3f3f3f3full;  // values 0..63
    std::memcpy(h.get() + i, &b, 8);
  }
  for (std::uint64_t i = n / 8 * 8; i < n; ++i) h[i] = static_cast<std::int8_t>(r.below(64));
  for (std::uint64_t i : {two32 + 17, two32 + 1000, n - 1}) h[i] = 127;
  for (std::uint64_t i : {two32 + 5, n - 2}) h[i] = -128;
  device_buffer d(n);
  d.upload(h.get(), n);
  const std::int64_t imax = std::max_element(h.get(), h.get() + n) - h.get();  // the first largest
  const std::int64_t imin = std::min_element(h.get(), h.get() + n) - h.get();
  ASSERT_GT(imax, 0);
  ASSERT_GT(imin, 0);
  for (std::int64_t offset : {0, 1}) {  // from 1 on: the same extremes, one index lower
    const auto* p = static_cast<const std::int8_t*>(d.get()) + offset;
    TRACE("n=" << n - offset << " offset=" << offset);
    const value vmax = reduce_value(p, n - offset, dtype::i8, op::argmax);
    const value vmin = reduce_value(p, n - offset, dtype::i8, op::argmin);
    EXPECT_EQ(vmax.index, imax - offset);
    EXPECT_EQ(vmax.i, h[imax]);
    EXPECT_EQ(vmin.index, imin - offset);
    EXPECT_EQ(vmin.i, h[imin]);
    EXPECT_GT(static_cast<std::uint64_t>(vmax.index + offset), two32);
    EXPECT_GT(static_cast<std::uint64_t>(vmin.index + offset), two32);
  }
}

// =============================================================================================
// min / max under the NaN policies, and independence of the combine order.

template <class T>
void check_min_max(const std::vector<T>& h, nan_policy p, const char* data,
                   std::uint64_t offset = 0) {
  const dtype t = ref::dtype_of<T>();
  on_device<T> d(h, offset);
  for (op o : {op::min, op::max}) {
    TRACE(to_string(o) << " " << to_string(t) << " n=" << h.size() << " offset=" << offset
                       << " nan=" << to_string(p) << " data=" << data);
    const value v = reduce_value(d.get(), h.size(), t, o, nullptr, options{p, accuracy::fast});
    ASSERT_EQ(v.type, result_dtype(t, o));
    ASSERT_TRUE(same_bits(v.f, ref::min_max(h.data(), h.size(), o == op::max, p)));
  }
}

template <class T>
void run_min_max_nan() {
  const T nan = nan_of<T>();
  for (std::uint64_t n : sizes({1, 33, 4099, 65537, (1u << 20) + 3})) {
    auto h = uniform<T>(n, test_seed() + n, -100, 100);
    rng_t r(test_seed() + 3 * n);
    for (auto& x : h)
      if (r.below(10) == 0) x = nan;
    for (nan_policy p : {nan_policy::propagate, nan_policy::ignore}) check_min_max(h, p, "10% NaN");
    h.front() = nan;
    h.back() = nan;
    check_min_max(h, nan_policy::ignore, "NaN at both ends", 1);
    check_min_max(std::vector<T>(n, nan), nan_policy::ignore, "all NaN");
    check_min_max(std::vector<T>(n, nan), nan_policy::propagate, "all NaN");
  }
  check_min_max(std::vector<T>{}, nan_policy::ignore, "empty");
}

TEST(NumericsGpu, MinMaxNanIgnore) {
  TALLY_REQUIRE_GPU();
  run_min_max_nan<f16>();
  run_min_max_nan<bf16>();
  run_min_max_nan<float>();
  run_min_max_nan<double>();
}

// Data made of +-0.0 (and values on one side of zero, and NaNs under ignore): min must be -0.0
// and max +0.0 whatever the order, so the bits are the same for every permutation.
template <class T>
void run_signed_zero_order() {
  for (std::uint64_t n : sizes({1000, 65537, (1u << 20) + 3})) {
    for (int side : {-1, 0, 1})
      for (bool with_nan : {false, true}) {
        rng_t r(test_seed() + n + 10 * (side + 1) + with_nan);
        std::vector<T> h(n);
        for (auto& x : h) {
          const std::uint64_t k = r.below(16);
          if (with_nan && k == 0)
            x = nan_of<T>();
          else if (side != 0 && k < 4)
            x = ref::make<T>(side * static_cast<double>(1 + r.below(5)));
          else
            x = ref::make<T>(r.coin() ? -0.0 : 0.0);
        }
        const nan_policy p = with_nan ? nan_policy::ignore : nan_policy::propagate;
        const int perms = n > kSmallLimit + 1 ? 2 : 5;  // 5 permutations below 2^20, 2 above
        for (int perm = 0; perm <= perms; ++perm) {
          if (perm) shuffle(h, test_seed() + perm);
          check_min_max(h, p,
                        side < 0   ? "zeros and negatives"
                        : side > 0 ? "zeros and positives"
                                   : "zeros");
        }
      }
  }
}

TEST(NumericsGpu, MinMaxSignedZerosAnyOrder) {
  TALLY_REQUIRE_GPU();
  run_signed_zero_order<f16>();
  run_signed_zero_order<bf16>();
  run_signed_zero_order<float>();
  run_signed_zero_order<double>();
}

// =============================================================================================
// Sums and means: every accuracy mode against the exact reference.

// The exactly rounded mean: (exact sum rounded to f64) / n, rounded to the result type.
template <class T>
double exact_mean(const ref::exact_accumulator& s, std::uint64_t n) {
  const double q = s.to_double() / static_cast<double>(n);
  return static_cast<double>(static_cast<acc_t<T>>(q));
}

// Checks sum and mean of h in every accuracy mode: exact bitwise, compensated within `comp_ulps`
// (plus the second-order term), fast within the gamma bound.
template <class T>
void check_sum_modes(const std::vector<T>& h, const char* data, std::uint64_t offset = 0,
                     std::uint64_t comp_ulps = 4) {
  using R = acc_t<T>;
  const dtype t = ref::dtype_of<T>();
  const std::uint64_t n = h.size();
  on_device<T> d(h, offset);
  const ref::exact_accumulator s = ref::exact_sum(h.data(), n);
  const R want = rounded<R>(s);
  const long double exact = s.approx(), abs = ref::abs_sum(h.data(), n), u = unit_roundoff<T>();
  const long double g = gamma_h(height(n), u);
  for (accuracy m : kModes) {
    TRACE("sum " << to_string(t) << " mode=" << to_string(m) << " n=" << n << " offset=" << offset
                 << " data=" << data);
    const value v = reduce_value(d.get(), n, t, op::sum, nullptr, with_mode(m));
    ASSERT_EQ(v.type, result_dtype(t, op::sum));
    if (m == accuracy::exact || s.nan() || !std::isfinite(want)) {
      ASSERT_TRUE(same_bits(v.f, want));
    } else if (m == accuracy::compensated) {
      const long double second_order = 2 * g * g * abs;
      if (second_order < ulp_of<R>(exact))
        ASSERT_TRUE(within_ulps<R>(v.f, want, comp_ulps));
      else
        ASSERT_TRUE(within(v.f, exact, comp_ulps * ulp_of<R>(exact) + second_order));
    } else {
      ASSERT_TRUE(within(v.f, exact, g * abs + ulp_of<R>(exact)));
    }
    if (n == 0) continue;
    const value mean = reduce_value(d.get(), n, t, op::mean, nullptr, with_mode(m));
    ASSERT_EQ(mean.type, result_dtype(t, op::mean));
    const double want_mean = exact_mean<T>(s, n);
    if (m == accuracy::exact || s.nan() || !std::isfinite(want_mean)) {
      ASSERT_TRUE(same_bits(mean.f, want_mean)) << "mean";
    } else if (!std::isfinite(want)) {
      // The sum overflows the result type but sum / n does not: only exact mode (which divides
      // the f64-rounded exact sum) promises a finite mean.
    } else {
      const long double e = exact / n;
      const long double b =
          m == accuracy::fast ? g * abs : comp_ulps * ulp_of<R>(exact) + 2 * g * g * abs;
      ASSERT_TRUE(within(mean.f, e, b / n + 2 * ulp_of<R>(e))) << "mean";
    }
  }
}

// f16/bf16 ones: every partial sum is an exact small integer, in f32 as in the reference.
TEST(NumericsGpu, HalfSumOfOnesIsExact) {
  TALLY_REQUIRE_GPU();
  for (std::uint64_t n : sizes({65535, 70000, 1u << 20})) {
    check_sum_modes(std::vector<f16>(n, ref::make<f16>(1.0)), "ones");
    check_sum_modes(std::vector<bf16>(n, ref::make<bf16>(1.0)), "ones");
    // Also in fast mode, bitwise: an f16 accumulator would stop at 2048, bf16 at 256.
    for (dtype t : {dtype::f16, dtype::bf16}) {
      const std::vector<std::uint16_t> ones(n, t == dtype::f16 ? 0x3c00 : 0x3f80);
      device_buffer d(n * 2);
      d.upload(ones.data(), n * 2);
      const value v = reduce_value(d.get(), n, t, op::sum);
      EXPECT_EQ(v.type, dtype::f32);
      EXPECT_EQ(v.f, static_cast<double>(
                         ref::exact_sum(std::vector<double>(n, 1.0).data(), n).to_float()))
          << to_string(t) << " n=" << n;
    }
  }
}

template <class T>
void run_half_random() {
  std::uint64_t seed = test_seed();
  for (std::uint64_t n : sizes({1, 33, 1000, 4099, 65537, (1u << 20) + 3})) {
    const std::vector<std::uint64_t> offsets =
        n <= 65537 ? std::vector<std::uint64_t>{0, 1, 2, 3} : std::vector<std::uint64_t>{0};
    for (auto offset : offsets) {
      const auto signed_data = uniform<T>(n, ++seed, -1, 1);
      check_sum_modes(signed_data, "uniform [-1, 1)", offset);
      // Non-negative: at 2^20 the sum passes 65504, where an f16 accumulator would overflow.
      const auto positive = uniform<T>(n, ++seed, 0, 1);
      check_sum_modes(positive, "uniform [0, 1)", offset);
      check_min_max(signed_data, nan_policy::propagate, "uniform [-1, 1)", offset);
      check_min_max(positive, nan_policy::ignore, "uniform [0, 1)", offset);
    }
  }
}

TEST(NumericsGpu, HalfRandomSumMinMaxMean) {
  TALLY_REQUIRE_GPU();
  run_half_random<f16>();
  run_half_random<bf16>();
}

// Random signs and exponents over a wide range (subnormals included).
template <class T>
void run_sum_mixed() {
  const auto [emin, emax] = wide_exponents<T>();
  std::uint64_t seed = test_seed();
  for (std::uint64_t n : sizes({1, 2, 33, 1000, 4099, 65537, (1u << 20) + 3})) {
    check_sum_modes(mixed<T>(n, ++seed, emin, emax), "mixed magnitudes");
    // A narrower range: the sum is not dominated by one element.
    check_sum_modes(mixed<T>(n, ++seed, -8, 8), "mixed magnitudes 2^-8..2^8", n % 4);
  }
  check_sum_modes(std::vector<T>{}, "empty");
}

TEST(NumericsGpu, SumMixedMagnitudesFloat16) {
  TALLY_REQUIRE_GPU();
  run_sum_mixed<f16>();
}
TEST(NumericsGpu, SumMixedMagnitudesBfloat16) {
  TALLY_REQUIRE_GPU();
  run_sum_mixed<bf16>();
}
TEST(NumericsGpu, SumMixedMagnitudesFloat32) {
  TALLY_REQUIRE_GPU();
  run_sum_mixed<float>();
}
TEST(NumericsGpu, SumMixedMagnitudesFloat64) {
  TALLY_REQUIRE_GPU();
  run_sum_mixed<double>();
}

// [B, s, -B] repeated: s is lost next to B in the accumulation type, so fast loses it; exact and
// compensated keep it. B has one magnitude, so compensation captures every error exactly.
template <class T>
std::vector<T> cancelling_triples(std::uint64_t triples, std::uint64_t seed, double big,
                                  double small) {
  rng_t r(seed);
  std::vector<T> h;
  h.reserve(3 * triples);
  for (std::uint64_t k = 0; k < triples; ++k) {
    const double b = r.coin() ? big : -big;
    h.push_back(ref::make<T>(b));
    h.push_back(ref::make<T>(small * static_cast<double>(1 + r.below(3))));
    h.push_back(ref::make<T>(-b));
  }
  return h;
}

// big, small: big + small == big in acc_t<T>. Powers of two, so that any sum of +-big is exact
// (with big = 1e30 the threads' partial sums k * 1e30 round, and compensation, rightly, only
// promises a few ulps of that error relative to sum|x|).
template <class T>
std::pair<double, double> cancellation_scales() {
  if constexpr (std::is_same_v<T, f16>)
    return {32768.0, 0x1p-14};
  else if constexpr (std::is_same_v<T, double>)
    return {0x1p1000, 1.0};
  else
    return {0x1p100, 1.0};  // f32, bf16
}

template <class T>
void run_sum_cancellation() {
  using R = acc_t<T>;
  const dtype t = ref::dtype_of<T>();
  const auto [big, small] = cancellation_scales<T>();
  {  // the plain case: [B, 1, -B] -> 1 in exact mode (B = 1e30 for f32 and bf16, 1e300 for f64)
    const double b = std::is_same_v<T, double> ? 1e300 : std::is_same_v<T, f16> ? big : 1e30;
    const std::vector<T> h = {ref::make<T>(b), ref::make<T>(small), ref::make<T>(-b)};
    check_sum_modes(h, "B, s, -B");
    check_sum_modes(std::vector<T>{h[1], h[0], h[2]}, "s, B, -B");
  }
  for (std::uint64_t n : sizes({3000, 150000})) {
    const std::uint64_t triples = n / 3;
    const auto h = cancelling_triples<T>(triples, test_seed() + triples, big, small);
    TRACE("cancelling triples " << to_string(t) << " n=" << h.size());
    check_sum_modes(h, "cancelling triples");
    on_device<T> d(h);
    const R want = rounded<R>(ref::exact_sum(h.data(), h.size()));
    const value fast = reduce_value(d.get(), h.size(), t, op::sum);
    const value comp =
        reduce_value(d.get(), h.size(), t, op::sum, nullptr, with_mode(accuracy::compensated));
    const value exact =
        reduce_value(d.get(), h.size(), t, op::sum, nullptr, with_mode(accuracy::exact));
    EXPECT_TRUE(same_bits(exact.f, want));
    EXPECT_TRUE(within_ulps<R>(comp.f, want, 4)) << "compensated";
    EXPECT_GT(ref::ulps_between(static_cast<R>(fast.f), want), 1000u)
        << "fast mode kept the small terms: got " << hex(fast.f) << ", exact " << hex(want)
        << " (the data are meant to defeat plain summation)";
    // Interleaved with the same triples shuffled: exact still exact.
    auto mixed_up = h;
    shuffle(mixed_up, test_seed());
    check_sum_modes(mixed_up, "cancelling triples, shuffled", 0, ~std::uint64_t(0) >> 1);
  }
}

TEST(NumericsGpu, SumCancellationFastLosesExactKeeps) {
  TALLY_REQUIRE_GPU();
  run_sum_cancellation<f16>();
  run_sum_cancellation<bf16>();
  run_sum_cancellation<float>();
  run_sum_cancellation<double>();
}

// Sums of subnormals (exact in every order: no flush to zero allowed) and subnormal results.
template <class T>
void run_subnormals() {
  const double quantum = std::is_same_v<T, f16>     ? 0x1p-24
                         : std::is_same_v<T, bf16>  ? 0x1p-133
                         : std::is_same_v<T, float> ? 0x1p-149
                                                    : 0x1p-1074;
  const int steps = std::is_same_v<T, bf16> ? 127 : 1023;  // subnormal significands
  for (std::uint64_t n : sizes({1, 33, 1000, 8191})) {
    rng_t r(test_seed() + n);
    std::vector<T> h(n);
    for (auto& x : h)
      x = ref::make<T>(quantum * static_cast<double>(r.below(steps) + 1) * (r.coin() ? -1 : 1));
    check_sum_modes(h, "subnormals", n % 4, 0);
    for (auto& x : h) x = ref::make<T>(std::fabs(as_double(x)));
    check_sum_modes(h, "positive subnormals", 0, 0);
  }
  // Normal inputs, subnormal result: 1.5 * 2^emin - 2^emin.
  const double tiny = std::is_same_v<T, f16>      ? 0x1p-14
                      : std::is_same_v<T, double> ? 0x1p-1022
                                                  : 0x1p-126;
  check_sum_modes(std::vector<T>{ref::make<T>(1.5 * tiny), ref::make<T>(-tiny)}, "subnormal result",
                  0, 0);
  check_sum_modes(
      std::vector<T>{ref::make<T>(1.5 * tiny), ref::make<T>(-tiny), ref::make<T>(quantum)},
      "subnormal result", 1, 0);
}

TEST(NumericsGpu, SumSubnormals) {
  TALLY_REQUIRE_GPU();
  run_subnormals<f16>();
  run_subnormals<bf16>();
  run_subnormals<float>();
  run_subnormals<double>();
}

// +inf alone, +inf with -inf, NaN anywhere: the same answer in every mode.
template <class T>
void run_sum_specials() {
  for (std::uint64_t n : sizes({1, 3, 4099, 65537})) {
    const auto base = uniform<T>(n, test_seed() + n, -1, 1);
    for (std::uint64_t at : {std::uint64_t(0), n / 2, n - 1}) {
      auto h = base;
      h[at] = inf_of<T>(false);
      check_sum_modes(h, "+inf");
      h[at] = inf_of<T>(true);
      check_sum_modes(h, "-inf");
      h[at] = nan_of<T>();
      check_sum_modes(h, "NaN");
      if (n > 1) {
        h[at] = inf_of<T>(false);
        h[(at + n / 3 + 1) % n] = inf_of<T>(true);
        check_sum_modes(h, "+inf and -inf");
      }
    }
  }
}

TEST(NumericsGpu, SumInfinitiesAndNaN) {
  TALLY_REQUIRE_GPU();
  run_sum_specials<f16>();
  run_sum_specials<bf16>();
  run_sum_specials<float>();
  run_sum_specials<double>();
}

// Beyond the range: DBL_MAX + DBL_MAX -> +inf in every mode; in exact mode the exact sum decides
// (DBL_MAX, DBL_MAX, -DBL_MAX -> DBL_MAX; 4 FLT_MAX - 3 FLT_MAX -> FLT_MAX).
TEST(NumericsGpu, SumOverflow) {
  TALLY_REQUIRE_GPU();
  check_sum_modes(std::vector<double>{DBL_MAX, DBL_MAX}, "DBL_MAX twice");
  check_sum_modes(std::vector<double>{-DBL_MAX, 1.0, -DBL_MAX}, "-DBL_MAX twice");
  check_sum_modes(std::vector<float>{FLT_MAX, FLT_MAX}, "FLT_MAX twice");
  const std::uint16_t bf16_max = 0x7f7f;
  check_sum_modes(std::vector<bf16>{{bf16_max}, {bf16_max}}, "largest bf16 twice");
  auto exact_only = [](auto h, const char* what) {
    using T = typename decltype(h)::value_type;
    const dtype t = ref::dtype_of<T>();
    on_device<T> d(h);
    const ref::exact_accumulator s = ref::exact_sum(h.data(), h.size());
    const double want = rounded<acc_t<T>>(s);
    TRACE(what << " " << to_string(t));
    const value v =
        reduce_value(d.get(), h.size(), t, op::sum, nullptr, with_mode(accuracy::exact));
    EXPECT_TRUE(same_bits(v.f, want));
    EXPECT_TRUE(std::isfinite(want)) << "the reference says the exact sum is in range";
  };
  exact_only(std::vector<double>{DBL_MAX, DBL_MAX, -DBL_MAX}, "DBL_MAX, DBL_MAX, -DBL_MAX");
  exact_only(std::vector<double>{DBL_MAX, 1e300, DBL_MAX, -DBL_MAX, -DBL_MAX},
             "in and out of range");
  exact_only(std::vector<float>{FLT_MAX, FLT_MAX, FLT_MAX, FLT_MAX, -FLT_MAX, -FLT_MAX, -FLT_MAX},
             "4 FLT_MAX - 3 FLT_MAX");
  exact_only(std::vector<bf16>{{bf16_max}, {bf16_max}, {bf16_max}, {0xff7f}, {0xff7f}},
             "3 bf16 max - 2 bf16 max");
  // Spread over a grid: 2^16 copies of FLT_MAX, then as many of -FLT_MAX, then 1.
  if (small_only()) return;
  std::vector<float> spread(std::size_t(1) << 16, FLT_MAX);
  spread.insert(spread.end(), std::size_t(1) << 16, -FLT_MAX);
  spread.push_back(1.0f);
  exact_only(spread, "2^16 FLT_MAX, 2^16 -FLT_MAX, 1");
}

// Exact mode: the same bits for any order of the elements and any launch shape (pointer offsets,
// padding zeros that change the grid, one block vs many, streams, graph replay).
struct stream_guard {
  cudaStream_t s = nullptr;
  stream_guard() { EXPECT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess); }
  ~stream_guard() {
    release_stream(reinterpret_cast<stream_t>(s));
    cudaStreamDestroy(s);
  }
  stream_t get() const { return reinterpret_cast<stream_t>(s); }
};

template <class T>
void run_exact_invariance() {
  using R = acc_t<T>;
  const dtype t = ref::dtype_of<T>();
  const auto [emin, emax] = wide_exponents<T>();
  const std::uint64_t n = small_only() ? 30011 : 1000003;
  auto h = mixed<T>(n, test_seed(), emin, emax);
  const ref::exact_accumulator s = ref::exact_sum(h.data(), n);
  const double want = rounded<R>(s);
  const double want_mean = exact_mean<T>(s, n);
  const options ex = with_mode(accuracy::exact);
  auto check = [&](const void* p, std::uint64_t count, stream_t st, const std::string& how) {
    TRACE("exact sum " << to_string(t) << " n=" << count << " " << how);
    ASSERT_TRUE(same_bits(reduce_value(p, count, t, op::sum, st, ex).f, want));
    ASSERT_TRUE(same_bits(reduce_value(p, count, t, op::mean, st, ex).f,
                          count == n ? want_mean : exact_mean<T>(s, count)))
        << "mean";
  };
  for (std::uint64_t offset : {0, 1, 2, 3}) {
    on_device<T> d(h, offset);
    check(d.get(), n, nullptr, "offset " + std::to_string(offset));
  }
  for (std::uint64_t zeros : {std::uint64_t(1) << 14, std::uint64_t(1) << 20}) {
    if (small_only() && n + zeros > kSmallLimit) continue;
    on_device<T> d(h, 1, zeros);
    check(d.get(), n + zeros, nullptr, "with " + std::to_string(zeros) + " zeros appended");
  }
  {  // zeros in front: the values land on other threads and blocks
    std::vector<T> front(std::size_t(1) << 14, ref::make<T>(0.0));
    front.insert(front.end(), h.begin(), h.end());
    on_device<T> d(front);
    check(d.get(), front.size(), nullptr, "with 2^14 zeros in front");
  }
  {  // one block vs many: the first 1000 elements alone, then padded to 2^20
    std::vector<T> head(h.begin(), h.begin() + 1000);
    const ref::exact_accumulator hs = ref::exact_sum(head.data(), head.size());
    const double hw = rounded<R>(hs);
    for (std::uint64_t zeros : {std::uint64_t(0), std::uint64_t(1) << 16, std::uint64_t(1) << 20}) {
      if (small_only() && 1000 + zeros > kSmallLimit) continue;
      on_device<T> d(head, 0, zeros);
      TRACE("exact sum " << to_string(t) << " of 1000 elements + " << zeros << " zeros");
      ASSERT_TRUE(same_bits(reduce_value(d.get(), 1000 + zeros, t, op::sum, nullptr, ex).f, hw));
    }
  }
  for (int perm = 1; perm <= 5; ++perm) {
    shuffle(h, test_seed() + 100 + perm);
    on_device<T> d(h);
    check(d.get(), n, nullptr, "permutation " + std::to_string(perm));
  }
  on_device<T> d(h);
  stream_guard s1, s2;
  check(d.get(), n, s1.get(), "stream 1");
  check(d.get(), n, s2.get(), "stream 2");
  check(d.get(), n, reinterpret_cast<stream_t>(cudaStreamPerThread), "per-thread default stream");
  // Stream-ordered form, on two streams at once.
  device_buffer out(16);
  reduce(d.get(), n, t, op::sum, out.get(), s1.get(), ex);
  reduce(d.get(), n, t, op::sum, static_cast<char*>(out.get()) + 8, s2.get(), ex);
  ASSERT_EQ(cudaStreamSynchronize(s1.s), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s2.s), cudaSuccess);
  for (int k = 0; k < 2; ++k) {
    double got;
    if constexpr (std::is_same_v<R, double>) {
      out.download(&got, 8, 8 * k);
    } else {
      float f;
      out.download(&f, 4, 8 * k);
      got = f;
    }
    EXPECT_TRUE(same_bits(got, want)) << "stream-ordered call " << k;
  }
}

TEST(NumericsGpu, ExactSumIsOrderAndLaunchIndependentFloat16) {
  TALLY_REQUIRE_GPU();
  run_exact_invariance<f16>();
}
TEST(NumericsGpu, ExactSumIsOrderAndLaunchIndependentBfloat16) {
  TALLY_REQUIRE_GPU();
  run_exact_invariance<bf16>();
}
TEST(NumericsGpu, ExactSumIsOrderAndLaunchIndependentFloat32) {
  TALLY_REQUIRE_GPU();
  run_exact_invariance<float>();
}
TEST(NumericsGpu, ExactSumIsOrderAndLaunchIndependentFloat64) {
  TALLY_REQUIRE_GPU();
  run_exact_invariance<double>();
}

// The narrow inputs' round test (exact_grid_round): a round's adds are taken as exact when the
// accumulator and the round's elements share a grid 2^g and the sum stays below 2^(g + 53); every
// other round is redone by the general path. Data that sits on either side of that bound: exponent
// windows from 20 to 60 bits (narrower than the f64 significand, about equal, wider), all positive
// (the sums climb through binades) or mixed signs (they cancel), and a NaN or an infinity alone
// in one round while the rest stays finite. Each against the exact reference, bit for bit.
template <class T>
void run_exact_grid_bounds() {
  using R = acc_t<T>;
  const dtype t = ref::dtype_of<T>();
  const std::uint64_t n = small_only() ? 40009 : (std::uint64_t(1) << 21) + 77;
  const options ex = with_mode(accuracy::exact);
  const int top = std::is_same_v<T, f16> ? 14 : 60;
  for (int span : {20, 28, 29, 30, 40, 53, 60}) {
    for (bool positive : {true, false}) {
      auto h = mixed<T>(n, test_seed() + std::uint64_t(span) * 2 + positive, top - span, top);
      if (positive)
        for (auto& x : h) x = ref::make<T>(std::fabs(as_double(x)));
      const ref::exact_accumulator s = ref::exact_sum(h.data(), n);
      TRACE("exact sum " << to_string(t) << " exponents [" << top - span << ", " << top << "]"
                         << (positive ? " positive" : " mixed signs"));
      on_device<T> d(h, 1);
      ASSERT_TRUE(same_bits(reduce_value(d.get(), n, t, op::sum, nullptr, ex).f, rounded<R>(s)));
    }
  }
  auto h = mixed<T>(n, test_seed() + 999, -10, 10);
  for (const T special : {nan_of<T>(), inf_of<T>(false), inf_of<T>(true)}) {
    auto g = h;
    g[n / 2 + 5] = special;
    const ref::exact_accumulator s = ref::exact_sum(g.data(), n);
    TRACE("exact sum " << to_string(t) << " with one " << as_double(special));
    on_device<T> d(g);
    ASSERT_TRUE(same_bits(reduce_value(d.get(), n, t, op::sum, nullptr, ex).f, rounded<R>(s)));
  }
}

TEST(NumericsGpu, ExactSumRoundTestBoundsFloat32) {
  TALLY_REQUIRE_GPU();
  run_exact_grid_bounds<float>();
}
TEST(NumericsGpu, ExactSumRoundTestBoundsHalf) {
  TALLY_REQUIRE_GPU();
  run_exact_grid_bounds<f16>();
  run_exact_grid_bounds<bf16>();
}

// From eight times the L2 up the exact sum takes its dynamic schedule (blocks take chunks of
// rounds from a counter that the kernel's last block resets): 512 MiB + 77 elements (past eight
// times the H100's and the H200's L2) with exponents spread over 40 bits (many rounds take the
// general path), a scalar head, called twice in a row (the counter must be back at zero) and as
// a mean; f64 too. Against the exact reference, bit for bit, with the policy's chunks, with
// chunks of 1-7 rounds with and without a tail of one-round chunks (policy.hpp,
// force_exact_chunks; 3 rounds without a tail leave whole rounds to the vector loop), and in the
// strided grid (force_dynamic(kDynamicOff), `--schedule strided`).
template <class T>
void run_exact_dynamic() {
  using R = acc_t<T>;
  const dtype t = ref::dtype_of<T>();
  const std::uint64_t n = (std::uint64_t(512) << 20) / sizeof(T) + 77;
  auto h = mixed<T>(n, test_seed() + 4242, -20, 20);
  const ref::exact_accumulator s = ref::exact_sum(h.data(), n);
  const options ex = with_mode(accuracy::exact);
  on_device<T> d(h, 1);
  for (int call = 0; call < 2; ++call) {
    TRACE("exact sum " << to_string(t) << " n=" << n << " call " << call);
    ASSERT_TRUE(same_bits(reduce_value(d.get(), n, t, op::sum, nullptr, ex).f, rounded<R>(s)));
  }
  struct restore {
    ~restore() { core::force_exact_chunks(-1, -1); }
  } restore_chunks;
  const std::pair<int, int> chunks[] = {{1, 0}, {2, 0}, {3, 0}, {3, 3}, {4, 2}, {2, 5}, {7, 1}};
  for (const auto& [rounds, tail] : chunks) {
    core::force_exact_chunks(rounds, tail);
    TRACE("exact sum " << to_string(t) << " n=" << n << " chunks of " << rounds << " rounds, tail shift " << tail);
    ASSERT_TRUE(same_bits(reduce_value(d.get(), n, t, op::sum, nullptr, ex).f, rounded<R>(s)));
  }
  core::force_exact_chunks(-1, -1);
  EXPECT_TRUE(core::last_launch().dynamic);
  {
    struct restore {
      ~restore() { core::force_dynamic(core::kDynamicByPolicy); }
    } restore_schedule;
    core::force_dynamic(core::kDynamicOff);
    TRACE("exact sum " << to_string(t) << " n=" << n << " in the strided grid");
    ASSERT_TRUE(same_bits(reduce_value(d.get(), n, t, op::sum, nullptr, ex).f, rounded<R>(s)));
    EXPECT_FALSE(core::last_launch().dynamic);
  }
  ASSERT_TRUE(same_bits(reduce_value(d.get(), n, t, op::mean, nullptr, ex).f, exact_mean<T>(s, n))) << "mean";
  // A prefix that stays in the L2 (the strided layout) right after: the counter was reset.
  const std::uint64_t m = 100003;
  const ref::exact_accumulator sm = ref::exact_sum(h.data(), m);
  ASSERT_TRUE(same_bits(reduce_value(d.get(), m, t, op::sum, nullptr, ex).f, rounded<R>(sm))) << "prefix";
}

TEST(NumericsGpu, ExactSumDynamicSchedule) {
  TALLY_REQUIRE_GPU();
  if (small_only()) GTEST_SKIP() << "large test skipped under TALLY_TEST_SMALL";
  run_exact_dynamic<float>();
  run_exact_dynamic<double>();
}

// The global accumulator between calls: a multi-block exact sum whose blocks flush (magnitudes
// from 2^-1000 to 2^1000: every block adds words into the global accumulator and flags its
// partial), then sums that flush nothing, then the flushing one again, then one where a single
// block flushes: each bitwise its reference. A word the last block left behind, or a flag lost
// in a merge (the last block then not reading the words), shows in the next result.
TEST(NumericsGpu, ExactSumLeavesTheGlobalAccumulatorClean) {
  TALLY_REQUIRE_GPU();
  const std::uint64_t n = small_only() ? (1u << 16) + 7 : (1u << 20) + 7;
  rng_t r(test_seed() + 71);
  std::vector<double> wide(n);
  for (auto& x : wide) x = std::ldexp(static_cast<double>(r.below(1u << 20)) - 524288.0, static_cast<int>(r.below(2001)) - 1000);
  std::vector<double> plain(n, 0.5), one_flush(n, 0.25);
  one_flush[n / 2] = 0x1p900;
  one_flush[n / 2 + 1] = 0x1p-900;
  on_device<double> dw(wide), dp(plain), d1(one_flush);
  std::vector<float> fplain(n, 1.5f);
  on_device<float> dfp(fplain);
  const double want_wide = rounded<double>(ref::exact_sum(wide.data(), n));
  const double want_one = rounded<double>(ref::exact_sum(one_flush.data(), n));
  for (int round = 0; round < 3; ++round) {
    const value a = reduce_value(dw.get(), n, dtype::f64, op::sum, nullptr, with_mode(accuracy::exact));
    EXPECT_TRUE(same_bits(a.f, want_wide)) << "wide, round " << round << ": " << hex(a.f) << " vs " << hex(want_wide);
    const value b = reduce_value(dp.get(), n, dtype::f64, op::sum, nullptr, with_mode(accuracy::exact));
    EXPECT_EQ(b.f, 0.5 * static_cast<double>(n)) << "plain f64 after the wide sum, round " << round;
    const value c = reduce_value(dfp.get(), n, dtype::f32, op::sum, nullptr, with_mode(accuracy::exact));
    EXPECT_EQ(c.f, static_cast<double>(static_cast<float>(1.5 * static_cast<double>(n)))) << "plain f32, round " << round;
    const value d = reduce_value(d1.get(), n, dtype::f64, op::sum, nullptr, with_mode(accuracy::exact));
    EXPECT_TRUE(same_bits(d.f, want_one)) << "one block flushing, round " << round;
  }
}

// Exact f32 (and bf16) sums round once to f32, not via f64: 1 + 2^-24 + 2^-80 -> 1 + 2^-23.
TEST(NumericsGpu, ExactSumRoundsOnceNotTwice) {
  TALLY_REQUIRE_GPU();
  check_sum_modes(std::vector<float>{1.0f, 0x1p-24f, 0x1p-80f}, "1 + 2^-24 + 2^-80");
  check_sum_modes(std::vector<float>{-0x1p-80f, -1.0f, -0x1p-24f}, "-(1 + 2^-24 + 2^-80)");
  check_sum_modes(
      std::vector<bf16>{ref::make<bf16>(1.0), ref::make<bf16>(0x1p-24), ref::make<bf16>(0x1p-80)},
      "1 + 2^-24 + 2^-80");
  check_sum_modes(std::vector<double>{1.0, 0x1p-53, 0x1p-1000}, "1 + 2^-53 + 2^-1000");
  check_sum_modes(std::vector<double>{1.0, 0x1p-53}, "1 + 2^-53: a tie, to even");
  check_sum_modes(std::vector<double>{1.0 + 0x1p-52, 0x1p-53},
                  "(1 + 2^-52) + 2^-53: a tie, to even");
}

// Integer means: the exact 64-bit sum / n (every sum here is below 2^53, so exact in f64).
template <class T>
void run_mean_int() {
  const dtype t = ref::dtype_of<T>();
  for (std::uint64_t n : sizes({1, 2, 33, 1000, 65537, (1u << 20) + 3})) {
    const auto h = sizeof(T) == 8 ? (std::is_signed_v<T>
                                         ? uniform<T>(n, test_seed() + n, -(1ll << 30), 1ll << 30)
                                         : uniform<T>(n, test_seed() + n, 0, 1ll << 31))
                                  : full_range<T>(n, test_seed() + n);
    ref::i128 s = 0;
    for (const T& x : h) s += static_cast<ref::i128>(x);
    const double want = static_cast<double>(s) / static_cast<double>(n);
    TRACE("mean " << to_string(t) << " n=" << n);
    on_device<T> d(h, n % 3);
    const value v = reduce_value(d.get(), n, t, op::mean);
    ASSERT_EQ(v.type, dtype::f64);
    ASSERT_TRUE(same_bits(v.f, want));
  }
  const value empty = reduce_value(nullptr, 0, t, op::mean);
  EXPECT_TRUE(std::isnan(empty.f)) << "mean of nothing is 0 / 0";
}

TEST(NumericsGpu, MeanIntegers) {
  TALLY_REQUIRE_GPU();
  run_mean_int<std::int8_t>();
  run_mean_int<std::uint8_t>();
  run_mean_int<std::int16_t>();
  run_mean_int<std::uint16_t>();
  run_mean_int<std::int32_t>();
  run_mean_int<std::uint32_t>();
  run_mean_int<std::int64_t>();
  run_mean_int<std::uint64_t>();
}

// =============================================================================================
// dot

template <class T>
void check_dot(const std::vector<T>& x, const std::vector<T>& y, std::uint64_t ox, std::uint64_t oy,
               const char* data, bool check_bounds = true) {
  using R = acc_t<T>;
  const dtype t = ref::dtype_of<T>();
  const std::uint64_t n = x.size();
  on_device<T> dx(x, ox), dy(y, oy);
  const ref::exact_accumulator s = ref::exact_dot(x.data(), y.data(), n);
  const double want = rounded<R>(s);
  const long double exact = s.approx(), abs = ref::abs_dot(x.data(), y.data(), n),
                    u = unit_roundoff<T>();
  const long double g = gamma_h(height(n) + 1, u);
  // Products below the subnormal range lose up to half the smallest subnormal each, in any mode
  // but exact (no compensation can recover what underflow drops).
  const long double underflow = static_cast<long double>(n) * std::numeric_limits<R>::denorm_min();
  for (accuracy m : kModes) {
    TRACE("dot " << to_string(t) << " mode=" << to_string(m) << " n=" << n << " x offset=" << ox
                 << " y offset=" << oy << " data=" << data);
    const value v = dot_value(dx.get(), dy.get(), n, t, nullptr, with_mode(m));
    ASSERT_EQ(v.type, dot_result_dtype(t));
    if (m == accuracy::exact || s.nan() || !std::isfinite(want)) {
      ASSERT_TRUE(same_bits(v.f, want));
    } else if (!check_bounds) {
      // Hard cases (overflowing products, massive cancellation): only exact mode promises anything.
    } else if (m == accuracy::compensated) {
      // Products may be rounded (u * sum|xy|: the header only promises compensated sums).
      const long double prod_err = is_float_v<T> && !ref::is_half_v<T> ? u * abs : 0;
      ASSERT_TRUE(
          within(v.f, exact, 4 * ulp_of<R>(exact) + 2 * g * g * abs + prod_err + underflow));
    } else {
      ASSERT_TRUE(within(v.f, exact, g * abs + ulp_of<R>(exact) + underflow));
    }
  }
}

template <class T>
void run_dot_random() {
  std::uint64_t seed = test_seed();
  for (std::uint64_t n : sizes({0, 1, 2, 33, 1000, 4099, 65537, (1u << 20) + 3})) {
    const auto x = uniform<T>(n, ++seed, -1, 1), y = uniform<T>(n, ++seed, -1, 1);
    check_dot(x, y, 0, 0, "uniform");
    const auto [emin, emax] = wide_exponents<T>();
    const int lo = std::max(emin, std::is_same_v<T, double> ? -500 : -60), hi = std::min(emax, 40);
    const auto mx = mixed<T>(n, ++seed, lo / 2, hi / 2);
    const auto my = mixed<T>(n, ++seed, lo / 2, hi / 2);
    check_dot(mx, my, 0, 0, "mixed magnitudes");
  }
  // Misaligned x and y, independently: every pair of offsets 0..3.
  for (std::uint64_t n : sizes({1000, 4099, 65537})) {
    const auto x = uniform<T>(n, ++seed, -1, 1), y = uniform<T>(n, ++seed, -1, 1);
    for (std::uint64_t ox = 0; ox < 4; ++ox)
      for (std::uint64_t oy = 0; oy < 4; ++oy) check_dot(x, y, ox, oy, "uniform, misaligned");
  }
}

TEST(NumericsGpu, DotFloat16) {
  TALLY_REQUIRE_GPU();
  run_dot_random<f16>();
}
TEST(NumericsGpu, DotBfloat16) {
  TALLY_REQUIRE_GPU();
  run_dot_random<bf16>();
}
TEST(NumericsGpu, DotFloat32) {
  TALLY_REQUIRE_GPU();
  run_dot_random<float>();
}
TEST(NumericsGpu, DotFloat64) {
  TALLY_REQUIRE_GPU();
  run_dot_random<double>();
}

// Ill-conditioned: x.y = sum of [P, s, -P] triples with exact products (y random powers of two,
// x = product / y). Fast loses the small products; compensated stays within a few ulps; exact
// is exact.
template <class T>
void run_dot_ill_conditioned() {
  using R = acc_t<T>;
  const dtype t = ref::dtype_of<T>();
  // big product P = 2^pe, split as x = 2^(pe - k), y = 2^k with k in [klo, khi]; small s * 2^se.
  int pe, klo, khi, se_x, se_y;
  if constexpr (std::is_same_v<T, f16>)
    pe = 26, klo = 11, khi = 15, se_x = -14, se_y = -10;
  else if constexpr (std::is_same_v<T, double>)
    pe = 990, klo = 400, khi = 600, se_x = -10, se_y = -10;
  else
    pe = 100, klo = 30, khi = 70, se_x = -10, se_y = -10;
  for (std::uint64_t n3 : sizes({3000, 150000})) {
    const std::uint64_t triples = n3 / 3;
    rng_t r(test_seed() + triples);
    std::vector<T> x, y;
    for (std::uint64_t k = 0; k < triples; ++k) {
      const double sign = r.coin() ? 1 : -1;
      const int e1 = klo + static_cast<int>(r.below(static_cast<std::uint64_t>(khi - klo + 1)));
      const int e2 = klo + static_cast<int>(r.below(static_cast<std::uint64_t>(khi - klo + 1)));
      x.push_back(ref::make<T>(sign * std::ldexp(1.0, pe - e1)));
      y.push_back(ref::make<T>(std::ldexp(1.0, e1)));
      x.push_back(ref::make<T>(std::ldexp(static_cast<double>(1 + r.below(3)), se_x)));
      y.push_back(ref::make<T>(std::ldexp(r.coin() ? 1.0 : -1.0, se_y)));
      x.push_back(ref::make<T>(-sign * std::ldexp(1.0, pe - e2)));
      y.push_back(ref::make<T>(std::ldexp(1.0, e2)));
    }
    const std::uint64_t n = x.size();
    TRACE("ill-conditioned dot " << to_string(t) << " n=" << n);
    check_dot(x, y, 0, 0, "ill-conditioned", false);
    on_device<T> dx(x), dy(y, 1);
    const ref::exact_accumulator s = ref::exact_dot(x.data(), y.data(), n);
    const R want = rounded<R>(s);
    const value fast = dot_value(dx.get(), dy.get(), n, t);
    const value comp =
        dot_value(dx.get(), dy.get(), n, t, nullptr, with_mode(accuracy::compensated));
    const value exact = dot_value(dx.get(), dy.get(), n, t, nullptr, with_mode(accuracy::exact));
    EXPECT_TRUE(same_bits(exact.f, want));
    EXPECT_TRUE(within_ulps<R>(comp.f, want, 4)) << "compensated";
    EXPECT_GT(ref::ulps_between(static_cast<R>(fast.f), want), 1000u)
        << "fast mode kept the small products: got " << hex(fast.f) << ", exact " << hex(want);
  }
}

TEST(NumericsGpu, DotIllConditionedFastLosesCompensatedKeeps) {
  TALLY_REQUIRE_GPU();
  run_dot_ill_conditioned<f16>();
  run_dot_ill_conditioned<bf16>();
  run_dot_ill_conditioned<float>();
  run_dot_ill_conditioned<double>();
}

// Exact dot: the exactly rounded result, bitwise, on the hard cases.
TEST(NumericsGpu, DotExactHardCases) {
  TALLY_REQUIRE_GPU();
  check_dot<float>({1e30f, 1.0f, -1e30f}, {1.0f, 1.0f, 1.0f}, 0, 0, "1e30 + 1 - 1e30", false);
  check_dot<double>({1e300, 1.0, -1e300}, {1.0, 1.0, 1.0}, 1, 2, "1e300 + 1 - 1e300", false);
  check_dot<bf16>({ref::make<bf16>(1e30), ref::make<bf16>(1.0), ref::make<bf16>(-1e30)},
                  {ref::make<bf16>(1.0), ref::make<bf16>(1.0), ref::make<bf16>(1.0)}, 0, 3,
                  "1e30 + 1 - 1e30", false);
  // Products beyond the range that cancel: 1e200^2 - 1e200^2 + 1 -> 1.
  check_dot<double>({1e200, 1e200, 1.0}, {1e200, -1e200, 1.0}, 0, 0, "huge products cancel", false);
  // Products below the subnormal range: 1e-200^2, and 2^16 of 2^-1080 that add up to 2^-1064.
  check_dot<double>({1e-200, 1.0}, {1e-200, 1.0}, 0, 0, "1 + 1e-400", false);
  check_dot<double>(std::vector<double>(1 << 16, 0x1p-540), std::vector<double>(1 << 16, 0x1p-540),
                    0, 1, "2^16 products of 2^-1080", false);
  check_dot<double>({1e-160, 3e-165}, {1e-160, 7e-160}, 0, 0, "subnormal result", false);
  // The tie 1 + 2^-53 broken by a product far below: rounds up.
  check_dot<double>({1.0, 0x1p-27, 1e-200}, {1.0, 0x1p-26, 1e-200}, 0, 0,
                    "tie broken by a tiny product", false);
  // f32: the exact result rounded once to f32 (1 + 2^-24 + 2^-80 -> 1 + 2^-23), not via f64.
  check_dot<float>({1.0f, 0x1p-12f, 0x1p-40f}, {1.0f, 0x1p-12f, 0x1p-40f}, 0, 0,
                   "1 + 2^-24 + 2^-80", false);
  check_dot<bf16>({ref::make<bf16>(1.0), ref::make<bf16>(0x1p-12), ref::make<bf16>(0x1p-40)},
                  {ref::make<bf16>(1.0), ref::make<bf16>(0x1p-12), ref::make<bf16>(0x1p-40)}, 1, 0,
                  "1 + 2^-24 + 2^-80", false);
  check_dot<f16>({ref::make<f16>(65504.0), ref::make<f16>(0x1p-24), ref::make<f16>(-65504.0)},
                 {ref::make<f16>(65504.0), ref::make<f16>(0x1p-24), ref::make<f16>(65504.0)}, 2, 1,
                 "65504^2 + 2^-48 - 65504^2", false);
  // Specials: inf, inf - inf, inf * 0, NaN.
  check_dot<float>({HUGE_VALF, 1.0f}, {1.0f, 1.0f}, 0, 0, "inf");
  check_dot<float>({HUGE_VALF, HUGE_VALF}, {1.0f, -1.0f}, 0, 0, "inf - inf");
  check_dot<double>({HUGE_VAL, 1.0}, {0.0, 1.0}, 0, 0, "inf * 0");
  check_dot<double>({std::nan(""), 1.0}, {1.0, 1.0}, 0, 0, "NaN");
  // Empty: 0.
  check_dot<float>({}, {}, 0, 0, "empty");
  check_dot<f16>({}, {}, 0, 0, "empty");
  check_dot<double>({}, {}, 1, 3, "empty");
}

// =============================================================================================
// sum_sq and norm2

template <class T>
void check_norms(const std::vector<T>& h, const char* data, std::uint64_t offset = 0) {
  using R = acc_t<T>;
  const dtype t = ref::dtype_of<T>();
  const std::uint64_t n = h.size();
  on_device<T> d(h, offset);
  const ref::exact_accumulator s = ref::exact_sum_sq(h.data(), n);
  const long double ss = s.approx(), norm = std::sqrt(ss);
  const long double g = gamma_h(height(n) + 1, 0x1p-53L);  // accumulated in f64
  TRACE(to_string(t) << " n=" << n << " offset=" << offset << " data=" << data);
  const value vs = reduce_value(d.get(), n, t, op::sum_sq);
  ASSERT_EQ(vs.type, result_dtype(t, op::sum_sq));
  const double want_ss = rounded<R>(s);
  if (s.nan() || !std::isfinite(want_ss))
    ASSERT_TRUE(same_bits(vs.f, want_ss)) << "sum_sq";
  else
    ASSERT_TRUE(within(vs.f, ss, g * ss + ulp_of<R>(ss))) << "sum_sq";
  const value vn = reduce_value(d.get(), n, t, op::norm2);
  ASSERT_EQ(vn.type, result_dtype(t, op::norm2));
  const long double max_r = std::numeric_limits<R>::max();
  if (s.nan())
    ASSERT_TRUE(std::isnan(vn.f)) << "norm2";
  else if (norm > max_r * (1 + 0x1p-20L))
    ASSERT_TRUE(std::isinf(vn.f) && vn.f > 0) << "norm2";
  else if (norm > max_r)
    return;  // within rounding of the largest finite value: either answer
  else
    ASSERT_TRUE(within(vn.f, norm, (g + 8 * 0x1p-53L) * norm + ulp_of<R>(norm))) << "norm2";
}

template <class T>
void run_norms() {
  std::uint64_t seed = test_seed();
  for (std::uint64_t n : sizes({0, 1, 33, 1000, 65537, (1u << 20) + 3})) {
    check_norms(uniform<T>(n, ++seed, -2, 2), "uniform [-2, 2)", n % 4);
    check_norms(mixed<T>(n, ++seed, -8, 8), "mixed magnitudes");
  }
  // Large and small values whose squares leave the range of the result type (or of f64).
  std::vector<double> scales;
  if constexpr (std::is_same_v<T, double>)
    scales = {1e200, 1e-200, 1e300, 1e-300, 0x1p-1074};
  else if constexpr (std::is_same_v<T, f16>)
    scales = {65504.0, 0x1p-24};
  else
    scales = {1e30, 1e-30, 1e38, 0x1p-149};
  for (double sc : scales)
    for (std::uint64_t n : sizes({1, 4, 1000, 65537})) {
      auto h = std::vector<T>(n, ref::make<T>(sc));
      check_norms(h, "constant extreme");
      rng_t r(seed + n);
      for (auto& x : h) x = ref::make<T>(sc * (1 + r.below(4)) / 4 * (r.coin() ? -1 : 1));
      check_norms(h, "extreme, random signs");
    }
  check_norms(std::vector<T>{ref::make<T>(1.0), nan_of<T>()}, "NaN");
  check_norms(std::vector<T>{ref::make<T>(1.0), inf_of<T>(true)}, "-inf");
}

TEST(NumericsGpu, SumSqNorm2Float16) {
  TALLY_REQUIRE_GPU();
  run_norms<f16>();
}
TEST(NumericsGpu, SumSqNorm2Bfloat16) {
  TALLY_REQUIRE_GPU();
  run_norms<bf16>();
}
TEST(NumericsGpu, SumSqNorm2Float32) {
  TALLY_REQUIRE_GPU();
  run_norms<float>();
}
TEST(NumericsGpu, SumSqNorm2Float64) {
  TALLY_REQUIRE_GPU();
  run_norms<double>();
}

// norm2 of f64 1e200 is 1e200 * sqrt(n) (squares far beyond f64), of 1e-200 is 1e-200 * sqrt(n).
TEST(NumericsGpu, Norm2NeitherOverflowsNorUnderflows) {
  TALLY_REQUIRE_GPU();
  for (std::uint64_t n : sizes({1000, 65537})) {
    for (double sc : {1e200, 1e-200}) {
      const std::vector<double> h(n, sc);
      on_device<double> d(h);
      const value v = reduce_value(d.get(), n, dtype::f64, op::norm2);
      const long double want = std::sqrt(ref::exact_sum_sq(h.data(), n).approx());
      EXPECT_TRUE(std::isfinite(v.f) && v.f > 0) << v.to_string();
      EXPECT_TRUE(within(v.f, want, 1e-14L * want)) << "f64 " << sc << " n=" << n;
    }
    const std::vector<float> hf(n, 1e30f);
    on_device<float> df(hf);
    const value vf = reduce_value(df.get(), n, dtype::f32, op::norm2);
    const long double wf = std::sqrt(ref::exact_sum_sq(hf.data(), n).approx());
    EXPECT_TRUE(within(vf.f, wf, 1e-6L * wf)) << "f32 1e30 n=" << n;
    const value sq = reduce_value(df.get(), n, dtype::f32, op::sum_sq);
    EXPECT_TRUE(std::isinf(sq.f) && sq.f > 0)
        << "sum_sq of 1e30 floats overflows f32: " << sq.to_string();
  }
}

// =============================================================================================
// stats

template <class T>
void check_stats(const std::vector<T>& h, nan_policy p, const char* data,
                 long double var_rel = 1e-10L, std::uint64_t offset = 0) {
  const dtype t = ref::dtype_of<T>();
  const std::uint64_t n = h.size();
  on_device<T> d(h, offset);
  TRACE("stats " << to_string(t) << " n=" << n << " offset=" << offset << " nan=" << to_string(p)
                 << " data=" << data);
  const stats s = stats_value(d.get(), n, t, nullptr, options{p, accuracy::fast});
  const ref::stats_ref r = ref::two_pass_stats(h.data(), n, p);
  ASSERT_EQ(s.count, r.count);
  if (r.nan) {
    EXPECT_TRUE(std::isnan(s.sum) && std::isnan(s.mean) && std::isnan(s.min) && std::isnan(s.max) &&
                std::isnan(s.m2))
        << "sum " << s.sum << " mean " << s.mean << " min " << s.min << " max " << s.max << " m2 "
        << s.m2;
    return;
  }
  if (r.count == 0) {
    EXPECT_EQ(s.sum, 0.0);
    EXPECT_TRUE(std::isnan(s.min) && std::isnan(s.max) && std::isnan(s.mean));
    EXPECT_TRUE(std::isnan(s.variance(0)));
    return;
  }
  const long double g = gamma_h(height(n) + 4, 0x1p-53L);
  const long double sum_bound = g * r.abs_sum + ulp_of<double>(r.sum);
  EXPECT_TRUE(within(s.sum, r.sum, sum_bound)) << "sum";
  EXPECT_TRUE(within(s.mean, r.mean, sum_bound / r.count + 2 * ulp_of<double>(r.mean))) << "mean";
  EXPECT_EQ(s.min, static_cast<double>(r.min));
  EXPECT_EQ(s.max, static_cast<double>(r.max));
  EXPECT_TRUE(within(s.m2, r.m2, var_rel * r.m2 + 1e-300L)) << "m2";
  for (int ddof : {0, 1}) {
    if (r.count <= static_cast<std::uint64_t>(ddof)) {
      EXPECT_TRUE(std::isnan(s.variance(ddof)));
      continue;
    }
    const long double var = r.m2 / static_cast<long double>(r.count - ddof);
    EXPECT_TRUE(within(s.variance(ddof), var, var_rel * var + 1e-300L))
        << "variance(" << ddof << ")";
    EXPECT_TRUE(within(s.stddev(ddof), std::sqrt(var), var_rel * std::sqrt(var) + 1e-300L))
        << "stddev(" << ddof << ")";
  }
}

template <class T>
void run_stats() {
  std::uint64_t seed = test_seed();
  for (std::uint64_t n : sizes({0, 1, 2, 33, 1000, 65537, (1u << 20) + 3})) {
    std::vector<T> h;
    if constexpr (is_float_v<T>)
      h = uniform<T>(n, ++seed, -1, 1);
    else if constexpr (sizeof(T) == 8)
      h = uniform<T>(n, ++seed, std::is_signed_v<T> ? -(1ll << 40) : 0, 1ll << 40);
    else
      h = full_range<T>(n, ++seed);
    check_stats(h, nan_policy::propagate, "random", 1e-10L, n % 4);
  }
  if constexpr (is_float_v<T>) {
    // A large mean and a small spread: naive sum-of-squares loses everything here. f64: within
    // 1e-14 of m2 (a worst-case bound of about (a thread's count + log2 of the threads + 5) x 2^-53
    // there, 4e-15 at 2^20); a block merge that dropped the re-centred s1 read 2e-14 to 3e-13 on
    // such data in an emulation of the kernel's arithmetic (scripts/stats-centre-study.py).
    const double offset = std::is_same_v<T, double> ? 1e6 : std::is_same_v<T, float> ? 1e3 : 100;
    const long double tight = std::is_same_v<T, double> ? 1e-14L : 1e-10L;
    for (std::uint64_t n : sizes({1000, 65537, (1u << 20) + 3})) {
      check_stats(uniform<T>(n, ++seed, offset, offset + 1), nan_policy::propagate,
                  "large mean, spread 1", tight);
      check_stats(uniform<T>(n, ++seed, -offset - 1, -offset), nan_policy::propagate,
                  "large negative mean", tight);
    }
    // NaNs: propagate poisons everything but count; ignore skips them.
    for (std::uint64_t n : sizes({1, 33, 4099, 65537})) {
      auto h = uniform<T>(n, ++seed, -1, 1);
      h[n / 2] = nan_of<T>();
      if (n > 2) h[0] = nan_of<T>();
      for (nan_policy p : {nan_policy::propagate, nan_policy::ignore}) check_stats(h, p, "NaNs");
      std::fill(h.begin(), h.end(), nan_of<T>());
      for (nan_policy p : {nan_policy::propagate, nan_policy::ignore}) check_stats(h, p, "all NaN");
    }
    check_stats(std::vector<T>{}, nan_policy::ignore, "empty");
  }
}

TEST(NumericsGpu, StatsInt8) {
  TALLY_REQUIRE_GPU();
  run_stats<std::int8_t>();
}
TEST(NumericsGpu, StatsUInt8) {
  TALLY_REQUIRE_GPU();
  run_stats<std::uint8_t>();
}
TEST(NumericsGpu, StatsInt16) {
  TALLY_REQUIRE_GPU();
  run_stats<std::int16_t>();
}
TEST(NumericsGpu, StatsUInt16) {
  TALLY_REQUIRE_GPU();
  run_stats<std::uint16_t>();
}
TEST(NumericsGpu, StatsInt32) {
  TALLY_REQUIRE_GPU();
  run_stats<std::int32_t>();
}
TEST(NumericsGpu, StatsUInt32) {
  TALLY_REQUIRE_GPU();
  run_stats<std::uint32_t>();
}
TEST(NumericsGpu, StatsInt64) {
  TALLY_REQUIRE_GPU();
  run_stats<std::int64_t>();
}
TEST(NumericsGpu, StatsUInt64) {
  TALLY_REQUIRE_GPU();
  run_stats<std::uint64_t>();
}
TEST(NumericsGpu, StatsFloat16) {
  TALLY_REQUIRE_GPU();
  run_stats<f16>();
}
TEST(NumericsGpu, StatsBfloat16) {
  TALLY_REQUIRE_GPU();
  run_stats<bf16>();
}
TEST(NumericsGpu, StatsFloat32) {
  TALLY_REQUIRE_GPU();
  run_stats<float>();
}
TEST(NumericsGpu, StatsFloat64) {
  TALLY_REQUIRE_GPU();
  run_stats<double>();
}

// From 2 x the L2 up the f64 statistics take their pipelined kernel (core/tuning.hpp,
// pipeline_rounds): against the two-pass reference there too, a large mean, a misaligned start,
// and NaNs under both policies.
TEST(NumericsGpu, StatsFloat64PastTwiceTheL2) {
  TALLY_REQUIRE_GPU();
  if (small_only()) GTEST_SKIP() << "large test skipped under TALLY_TEST_SMALL";
  int dev = 0, l2 = 0;
  ASSERT_EQ(cudaGetDevice(&dev), cudaSuccess);
  ASSERT_EQ(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev), cudaSuccess);
  const std::uint64_t n = 2 * std::uint64_t(l2) / sizeof(double) + 1234567;
  std::uint64_t seed = test_seed();
  // Within 1e-13 of m2 (a thread's count is about 200 here: a worst case near 2.5e-14).
  check_stats(uniform<double>(n, ++seed, 1e6, 1e6 + 1), nan_policy::propagate, "large mean, past 2 x L2", 1e-13L, 1);
  EXPECT_TRUE(core::last_launch().pipelined) << "the pipelined twin ran";
  auto h = uniform<double>(n, ++seed, -1, 1);
  h[n / 3] = nan_of<double>();
  for (nan_policy p : {nan_policy::propagate, nan_policy::ignore}) {
    check_stats(h, p, "a NaN, past 2 x L2");
    EXPECT_TRUE(core::last_launch().pipelined) << "the pipelined twin ran";
  }
  check_stats(uniform<double>(n / 4, ++seed, -1, 1), nan_policy::propagate, "below 2 x L2");
  EXPECT_FALSE(core::last_launch().pipelined) << "the plain kernel below 2 x L2";
}

// The f32 and f64 statistics take 256-thread blocks (tuning.hpp, stats_narrow_shape) where the
// base shape's grid would hold a block in at most every second SM (and, where it is one block,
// where the narrow grid is one block or at least kStatsSplitBlocks), the base shape elsewhere or
// under a forced depth. At the window's edges and inside it, under both NaN policies and a large
// mean: the shape the rule names ran, and the results agree with the two-pass reference.
template <class T>
void run_stats_narrow_window() {
  const dtype t = ref::dtype_of<T>();
  constexpr std::uint64_t vn = 16 / sizeof(T);
  const core::shape base = core::compiled_shape(sizeof(T), core::family::folding, core::depth::base);
  const core::shape narrow = core::stats_narrow_shape(sizeof(T));
  const std::uint64_t sms = static_cast<std::uint64_t>(core::current_context().sm_count);
  const std::uint64_t base_single = std::uint64_t(base.block) * base.unroll * vn * core::kSingleBlockRounds;
  const std::uint64_t narrow_single = std::uint64_t(narrow.block) * narrow.unroll * vn * core::kSingleBlockRounds;
  const std::uint64_t narrow_per_block = std::uint64_t(narrow.block) * vn;  // a vector a thread
  const std::uint64_t base_per_block = std::uint64_t(base.block) * vn;
  // The last input of kStatsSplitBlocks - 1 narrow blocks (f64: 15872 elements; f32's is past its
  // one base block).
  const std::uint64_t split = (core::kStatsSplitBlocks - 1) * narrow_per_block;
  const std::uint64_t hi = sms / 2 * base_per_block;  // base's grid: sms / 2 blocks
  std::uint64_t seed = test_seed() + 77;
  for (std::uint64_t n : sizes({1, 33, 1000, narrow_single, narrow_single + 1, split, split + 1, base_single,
                                base_single + 1, (base_single + hi) / 2 + 3, hi, hi + 1})) {
    TRACE("stats " << to_string(t) << " narrow window, n=" << n << " (" << sms << " SMs)");
    // The rule (tuning.hpp, stats_narrow_blocks) on the grids' sizes, each capped at one block an SM.
    const std::uint64_t narrow_blocks = n <= narrow_single ? 1 : (n + narrow_per_block - 1) / narrow_per_block;
    const std::uint64_t base_blocks =
        std::min<std::uint64_t>(n <= base_single ? 1 : (n + base_per_block - 1) / base_per_block, sms);
    const std::uint64_t narrow_capped = std::min<std::uint64_t>(narrow_blocks, sms);
    const bool in = 2 * base_blocks <= sms &&
                    (base_blocks > 1 || narrow_capped == 1 || narrow_capped >= core::kStatsSplitBlocks);
    auto h = uniform<T>(n, ++seed, 1e3, 1e3 + 1);
    check_stats(h, nan_policy::propagate, "large mean", 1e-10L, n % 3);
    const core::launch_record r = core::last_launch();
    EXPECT_EQ(r.block, in ? static_cast<unsigned>(narrow.block) : static_cast<unsigned>(base.block));
    if (in) {
      EXPECT_EQ(r.unroll, static_cast<unsigned>(narrow.unroll));
      EXPECT_EQ(r.blocks, narrow_blocks);
    }
    if (n > 2) h[n / 2] = nan_of<T>();
    for (nan_policy p : {nan_policy::ignore, nan_policy::propagate}) check_stats(h, p, "a NaN");
    {
      struct forced {
        forced() { core::force_depth(0); }
        ~forced() { core::force_depth(-1); }
      } f;
      h[n / 2] = T(1e3);
      check_stats(h, nan_policy::propagate, "forced base", 1e-10L, n % 3);
      EXPECT_EQ(core::last_launch().block, static_cast<unsigned>(base.block)) << "a forced depth keeps its shape";
    }
  }
}
TEST(NumericsGpu, StatsInNarrowBlocksAtSmallSizes) {
  TALLY_REQUIRE_GPU();
  run_stats_narrow_window<float>();
  run_stats_narrow_window<double>();
}

// Whole warps that count nothing: every 16-byte vector whose index is below 32 modulo 256 is NaN,
// which in the strided layout of 512-thread blocks is warps 0 and 8's whole share of every block
// and round, and of 256-thread blocks (the statistics' narrow blocks at small sizes) warp 0's
// (the block merge skips a warp without a counted element under ignore: its entry must be the
// empty one); under propagate, every warp counts them. Other layouts see scattered NaNs.
template <class T>
void run_stats_nan_warps() {
  constexpr std::uint64_t vn = 16 / sizeof(T);
  std::uint64_t seed = test_seed();
  for (std::uint64_t n : sizes({4096, 1u << 14, (1u << 16) + 5, (1u << 20) + 3})) {
    auto h = uniform<T>(n, ++seed, 5, 6);
    for (std::uint64_t i = 0; i < n; ++i)
      if ((i / vn) % 256 < 32) h[i] = nan_of<T>();
    check_stats(h, nan_policy::ignore, "NaN warps");
    check_stats(h, nan_policy::propagate, "NaN warps");
  }
}
TEST(NumericsGpu, StatsWithWholeWarpsOfNaN) {
  TALLY_REQUIRE_GPU();
  run_stats_nan_warps<float>();
  run_stats_nan_warps<double>();
}

// Constant data: the merges' centres (warp and block means through an approximate reciprocal)
// are the value or an ulp or a few from it, so m2 is 0 or about n x (a few ulps)^2, never more
// (a two-pass variance of a constant f64 array, numpy's, is not exactly 0 either).
template <class T>
void run_stats_constant(T v) {
  const dtype t = ref::dtype_of<T>();
  const long double x = static_cast<long double>(v), u = ulp_of<double>(static_cast<double>(v));
  for (std::uint64_t n : sizes({1, 33, 4099, 65537, (1u << 20) + 3})) {
    TRACE("stats of constant " << to_string(t) << " n=" << n);
    on_device<T> d(std::vector<T>(n, v));
    const stats s = stats_value(d.get(), n, t);
    ASSERT_EQ(s.count, n);
    EXPECT_EQ(s.min, static_cast<double>(x));
    EXPECT_EQ(s.max, static_cast<double>(x));
    const long double sum_bound = gamma_h(height(n) + 4, 0x1p-53L) * n * std::fabs(x);
    EXPECT_TRUE(within(s.sum, n * x, sum_bound + ulp_of<double>(static_cast<double>(n * x))));
    EXPECT_TRUE(within(s.mean, x, sum_bound / n + 2 * u)) << "mean";
    EXPECT_GE(s.m2, 0.0);
    EXPECT_LE(static_cast<long double>(s.m2), 16.0L * n * u * u) << "m2";
  }
}
TEST(NumericsGpu, StatsOfConstantData) {
  TALLY_REQUIRE_GPU();
  run_stats_constant<float>(0.1f);
  run_stats_constant<double>(1e6 + 0.1);
  run_stats_constant<double>(-3.0e-300);
  run_stats_constant<std::int32_t>(7);
}

// An outlier as the first element (the first thread's, warp's and block's centre candidate):
// the merge in means keeps m2 to about (a thread's count + log2 of the threads + 5) x 2^-53 of
// itself (1.0e-14 measured for f64 at 2^22 on an H200, 2026-11-28); a centre shared by a whole
// block would lose up to n_b times that there (docs/tuning.md, "a pinned centre"). Held to
// 1e-13; twice the same bits.
template <class T>
void run_stats_outlier_first(double outlier) {
  std::uint64_t seed = test_seed() + 77;
  for (std::uint64_t n : sizes({2, 33, 4099, 65537, (1u << 20) + 3, (1u << 22) + 1})) {
    std::vector<T> h = uniform<T>(n, ++seed, -1, 1);
    h[0] = ref::make<T>(outlier);
    check_stats(h, nan_policy::propagate, "outlier first", 1e-13L);
    on_device<T> d(h);
    const stats a = stats_value(d.get(), n, ref::dtype_of<T>()), b = stats_value(d.get(), n, ref::dtype_of<T>());
    EXPECT_EQ(bits_of(a.m2), bits_of(b.m2)) << "n=" << n;
    EXPECT_EQ(bits_of(a.sum), bits_of(b.sum)) << "n=" << n;
  }
}
TEST(NumericsGpu, StatsWithAnOutlierFirst) {
  TALLY_REQUIRE_GPU();
  run_stats_outlier_first<float>(1e8);
  run_stats_outlier_first<float>(1e4);
  run_stats_outlier_first<f16>(1e4);
  run_stats_outlier_first<bf16>(1e8);
  run_stats_outlier_first<double>(1e8);
}

// Infinities and signed zeros (docs/numerics.md, "NaN, signed zeros and ties"): an infinite
// element makes the sum and the mean that infinity (NaN when both signs occur), min and max stay
// exact, and m2 is NaN (the re-centred sums are inf or NaN by the order of the merges, so the
// rule is applied at the end); so is m2 of f64 data whose sum overflows. Zeros: min of {+0, -0}
// is -0, max +0, and a zero sum is +0.0 as for the other sums. Sizes from one element to several
// blocks, the infinity at the start, the middle and the end; NaN ignored beside it.
template <class T>
void run_stats_special() {
  const dtype t = ref::dtype_of<T>();
  for (std::uint64_t n : sizes({1, 2, 33, 4099, 65537, (1u << 20) + 3})) {
    auto base = uniform<T>(n, test_seed() + n, -1, 1);
    for (std::uint64_t at : {std::uint64_t(0), n / 2, n - 1}) {
      for (int both = 0; both < 2; ++both) {
        if (both && n < 2) continue;
        auto h = base;
        h[at] = inf_of<T>(false);
        const std::uint64_t other = at == 0 ? n - 1 : 0;
        if (both) h[other] = inf_of<T>(true);
        long double lo = INFINITY, hi = -INFINITY;
        for (const T& v : h) lo = std::min(lo, ref::value_of(v)), hi = std::max(hi, ref::value_of(v));
        for (nan_policy p : {nan_policy::propagate, nan_policy::ignore}) {
          TRACE("stats " << to_string(t) << " n=" << n << " +inf at " << at << (both ? " and -inf" : "")
                         << " nan=" << to_string(p));
          on_device<T> d(h);
          const stats s = stats_value(d.get(), n, t, nullptr, options{p, accuracy::fast});
          ASSERT_EQ(s.count, n);
          if (both) {
            EXPECT_TRUE(std::isnan(s.sum) && std::isnan(s.mean)) << s.sum << " " << s.mean;
          } else {
            EXPECT_EQ(s.sum, INFINITY);
            EXPECT_EQ(s.mean, INFINITY);
          }
          EXPECT_EQ(s.min, static_cast<double>(lo));
          EXPECT_EQ(s.max, static_cast<double>(hi));
          EXPECT_TRUE(std::isnan(s.m2)) << "m2 " << s.m2;
          EXPECT_TRUE(std::isnan(s.variance(1)));
        }
      }
    }
    if (n < 2) continue;
    TRACE("stats " << to_string(t) << " n=" << n << ": a NaN beside -inf; zeros");
    // A NaN beside the infinity: ignored, the infinity's rule; propagated, all NaN.
    auto h = base;
    h[0] = nan_of<T>();
    h[n - 1] = inf_of<T>(true);
    on_device<T> d(h);
    const stats si = stats_value(d.get(), n, t, nullptr, options{nan_policy::ignore, accuracy::fast});
    EXPECT_EQ(si.count, n - 1);
    EXPECT_EQ(si.sum, -INFINITY);
    EXPECT_EQ(si.min, -INFINITY);
    EXPECT_TRUE(std::isnan(si.m2));
    const stats sp = stats_value(d.get(), n, t, nullptr, options{nan_policy::propagate, accuracy::fast});
    EXPECT_TRUE(std::isnan(sp.sum) && std::isnan(sp.min) && std::isnan(sp.max) && std::isnan(sp.m2));
    // Zeros: all -0.0, then -0.0 and +0.0 mixed.
    std::vector<T> z(n, ref::make<T>(-0.0));
    on_device<T> dz(z);
    const stats s0 = stats_value(dz.get(), n, t);
    EXPECT_EQ(s0.count, n);
    EXPECT_TRUE(s0.min == 0 && std::signbit(s0.min) && s0.max == 0 && std::signbit(s0.max))
        << "min " << s0.min << " max " << s0.max;
    EXPECT_TRUE(s0.sum == 0 && !std::signbit(s0.sum)) << "a zero sum is +0.0";
    EXPECT_TRUE(s0.mean == 0 && !std::signbit(s0.mean));
    EXPECT_EQ(s0.m2, 0.0);
    for (std::uint64_t i = 0; i < n; i += 3) z[i] = ref::make<T>(0.0);
    on_device<T> dm(z);
    const stats sm = stats_value(dm.get(), n, t);
    EXPECT_TRUE(sm.min == 0 && std::signbit(sm.min)) << "min of {+0, -0} is -0";
    EXPECT_TRUE(sm.max == 0 && !std::signbit(sm.max)) << "max of {+0, -0} is +0";
    EXPECT_EQ(sm.m2, 0.0);
  }
}
TEST(NumericsGpu, StatsOfInfinitiesAndSignedZeros) {
  TALLY_REQUIRE_GPU();
  run_stats_special<f16>();
  run_stats_special<bf16>();
  run_stats_special<float>();
  run_stats_special<double>();
}

// f64 data whose sum overflows: the sum and the mean are +inf, min and max exact, m2 NaN by rule
// (every element 1e308: the true m2 is 0, but the mean that centres the merges overflows;
// numpy's var gives inf here).
TEST(NumericsGpu, StatsOfAnOverflowingSum) {
  TALLY_REQUIRE_GPU();
  for (std::uint64_t n : sizes({2, 33, 4099, (1u << 20) + 3})) {
    TRACE("n=" << n);
    on_device<double> d(std::vector<double>(n, 1e308));
    const stats s = stats_value(d.get(), n, dtype::f64);
    EXPECT_EQ(s.count, n);
    EXPECT_EQ(s.sum, INFINITY);
    EXPECT_EQ(s.mean, INFINITY);
    EXPECT_EQ(s.min, 1e308);
    EXPECT_EQ(s.max, 1e308);
    EXPECT_TRUE(std::isnan(s.m2)) << s.m2;
  }
}

// The stream-ordered form writes the same 48-byte record.
TEST(NumericsGpu, ReduceStatsWritesTheRecord) {
  TALLY_REQUIRE_GPU();
  const auto h = uniform<double>(12345, test_seed(), 1e6, 1e6 + 1);
  on_device<double> d(h);
  device_buffer out(sizeof(stats));
  reduce_stats(d.get(), h.size(), dtype::f64, out.get());
  stats got;
  out.download(&got, sizeof got);
  const stats want = stats_value(d.get(), h.size(), dtype::f64);
  EXPECT_EQ(got.count, want.count);
  EXPECT_EQ(bits_of(got.sum), bits_of(want.sum));
  EXPECT_EQ(bits_of(got.m2), bits_of(want.m2));
  EXPECT_EQ(got.min, *std::min_element(h.begin(), h.end()));
  EXPECT_EQ(got.max, *std::max_element(h.begin(), h.end()));
  const ref::stats_ref r = ref::two_pass_stats(h.data(), h.size(), nan_policy::propagate);
  EXPECT_TRUE(within(got.variance(1), r.m2 / (r.count - 1), 1e-10L * r.m2 / (r.count - 1)));
}

// =============================================================================================
// Bad input with a GPU present: a clear tally::error, and the device stays usable.

::testing::AssertionResult names_all(const std::string& msg,
                                     const std::vector<std::string>& words) {
  if (msg.empty()) return ::testing::AssertionFailure() << "nothing thrown";
  for (const auto& w : words)
    if (msg.find(w) == std::string::npos)
      return ::testing::AssertionFailure() << "'" << msg << "' does not name '" << w << "'";
  return ::testing::AssertionSuccess();
}

TEST(NumericsGpu, BadInputThenValidCall) {
  TALLY_REQUIRE_GPU();
  const auto h = uniform<float>(1000, test_seed(), -1, 1);
  on_device<float> d(h);
  device_buffer out(64);
  const float* x = static_cast<const float*>(d.get());
  char* o = static_cast<char*>(out.get());
  const char* xb = reinterpret_cast<const char*>(x);
  const auto want = ref::arg_extreme(h.data(), h.size(), true, nan_policy::propagate);
  const options exact = with_mode(accuracy::exact), comp = with_mode(accuracy::compensated);
  struct bad {
    std::function<void()> call;
    std::vector<std::string> words;
  };
  const bad cases[] = {
      {[&] { reduce(nullptr, 10, dtype::f32, op::argmax, o); }, {"d_in"}},
      {[&] { reduce(x, 10, dtype::f32, op::argmax, nullptr); }, {"d_out"}},
      {[&] { reduce(x, 10, dtype::f32, op::argmax, o + 4); }, {"d_out", "align"}},
      {[&] { reduce(xb + 1, 10, dtype::f16, op::sum, o); }, {"d_in", "align"}},
      {[&] { reduce(xb + 2, 10, dtype::f32, op::sum, o, nullptr, exact); }, {"d_in", "align"}},
      {[&] { reduce(x, 10, dtype::b8, op::argmax, o); }, {"argmax", "b8"}},
      {[&] { reduce(x, 10, dtype::f16, op::bit_and, o); }, {"bit_and", "f16"}},
      {[&] { reduce(x, 10, dtype::bf16, op::bit_or, o); }, {"bit_or", "bf16"}},
      {[&] { reduce(x, 10, dtype::i32, op::sum, o, nullptr, exact); }, {"exact", "i32"}},
      {[&] { reduce(x, 10, dtype::f32, op::max, o, nullptr, comp); }, {"compensated", "max"}},
      {[&] { reduce(x, 10, dtype::f32, op::argmax, o, nullptr, exact); }, {"exact", "argmax"}},
      {[&] { reduce(x, 10, dtype::f32, op::sum, o, nullptr, kIgnore); }, {"ignore", "sum"}},
      {[&] { reduce(x, 10, dtype::i32, op::sum_sq, o); }, {"sum_sq", "i32"}},
      {[&] { reduce(x, 10, dtype::u8, op::norm2, o); }, {"norm2", "u8"}},
      {[&] {
         reduce(x, 10, dtype::f32, op::sum, o, nullptr,
                options{static_cast<nan_policy>(7), accuracy::fast});
       },
       {"nan_policy", "7"}},
      {[&] {
         reduce(x, 10, dtype::f32, op::sum, o, nullptr,
                options{nan_policy::propagate, static_cast<accuracy>(9)});
       },
       {"accuracy", "9"}},
      {[&] { (void)reduce_value(x, 10, dtype::b8, op::argmin); }, {"argmin", "b8"}},
      {[&] { (void)reduce_value(x, 10, dtype::f64, op::mean, nullptr, kIgnore); },
       {"ignore", "mean"}},
      {[&] { dot(nullptr, x, 10, dtype::f32, o); }, {"d_x"}},
      {[&] { dot(x, nullptr, 10, dtype::f32, o); }, {"d_y"}},
      {[&] { dot(x, x, 10, dtype::f32, nullptr); }, {"d_out"}},
      {[&] { dot(x, xb + 2, 10, dtype::f32, o); }, {"d_y", "align"}},
      {[&] { dot(xb + 4, x, 10, dtype::f64, o); }, {"d_x", "align"}},
      {[&] { dot(x, x, 10, dtype::f64, o + 4); }, {"d_out", "align"}},
      {[&] { dot(x, x, 10, dtype::i32, o); }, {"i32"}},
      {[&] { (void)dot_value(x, nullptr, 10, dtype::f32); }, {"d_y"}},
      {[&] { (void)dot_value(x, x, 10, dtype::b8); }, {"b8"}},
      {[&] { reduce_stats(nullptr, 10, dtype::f32, o); }, {"d_in"}},
      {[&] { reduce_stats(x, 10, dtype::f32, nullptr); }, {"d_out"}},
      {[&] { reduce_stats(x, 10, dtype::f32, o + 4); }, {"d_out", "align"}},
      {[&] { reduce_stats(x, 10, dtype::b8, o); }, {"b8"}},
      {[&] { (void)stats_value(x, 10, dtype::b8); }, {"b8"}},
      {[&] { (void)stats_value(xb + 1, 10, dtype::i16); }, {"d_in", "align"}},
  };
  for (std::size_t k = 0; k < sizeof cases / sizeof cases[0]; ++k) {
    std::string msg;
    try {
      cases[k].call();
    } catch (const error& e) {
      msg = e.what();
    }
    EXPECT_TRUE(names_all(msg, cases[k].words)) << "case " << k;
    // The next valid call works.
    const value v = reduce_value(x, h.size(), dtype::f32, op::argmax);
    ASSERT_EQ(v.index, want.index) << "after case " << k;
    ASSERT_TRUE(holds(v, h[static_cast<std::size_t>(want.index)])) << "after case " << k;
  }
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

// =============================================================================================
// Graph capture: argmax, exact sum, exact dot and stats captured once and replayed over new data.
TEST(NumericsGpu, GraphCaptureAndReplay) {
  TALLY_REQUIRE_GPU();
  const std::uint64_t n = small_only() ? 40000 : 3000017;
  stream_guard s;
  device_buffer dx(n * sizeof(float)), dy(n * sizeof(float)), out(256);
  const std::vector<unsigned char> zeros(256, 0);
  out.upload(zeros.data(), zeros.size());  // the gaps between the results are read back too
  char* o = static_cast<char*>(out.get());
  const options ex = with_mode(accuracy::exact);
  cudaGraph_t g = nullptr;
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaStreamBeginCapture(s.s, cudaStreamCaptureModeGlobal), cudaSuccess);
  reduce(dx.get(), n, dtype::f32, op::argmax, o, s.get());
  reduce(dx.get(), n, dtype::f32, op::argmin, o + 16, s.get(), kIgnore);
  reduce(dx.get(), n, dtype::f32, op::sum, o + 32, s.get(), ex);
  dot(dx.get(), dy.get(), n, dtype::f32, o + 40, s.get(), ex);
  reduce_stats(dx.get(), n, dtype::f32, o + 64, s.get());
  reduce(dx.get(), n, dtype::f32, op::mean, o + 112, s.get(), ex);
  ASSERT_EQ(cudaStreamEndCapture(s.s, &g), cudaSuccess);
  ASSERT_EQ(cudaGraphInstantiate(&exec, g, 0), cudaSuccess);
  for (int replay = 0; replay < 3; ++replay) {
    TRACE("replay " << replay << " n=" << n);
    auto hx = mixed<float>(n, test_seed() + 10 * replay, -30, 30);
    const auto hy = mixed<float>(n, test_seed() + 10 * replay + 1, -30, 30);
    hx[n - 1 - replay] = std::nanf("");  // argmin under ignore skips it; argmax stops at it
    dx.upload(hx.data(), n * sizeof(float));
    dy.upload(hy.data(), n * sizeof(float));
    ASSERT_EQ(cudaGraphLaunch(exec, s.s), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(s.s), cudaSuccess);
    unsigned char h_out[256];
    out.download(h_out, sizeof h_out);
    indexed<float> amax, amin;
    std::memcpy(&amax, h_out, 16);
    std::memcpy(&amin, h_out + 16, 16);
    const auto rmax = ref::arg_extreme(hx.data(), n, true, nan_policy::propagate);
    const auto rmin = ref::arg_extreme(hx.data(), n, false, nan_policy::ignore);
    EXPECT_EQ(amax.index, rmax.index);
    EXPECT_TRUE(std::isnan(amax.value));
    EXPECT_EQ(amin.index, rmin.index);
    EXPECT_EQ(bits_of(amin.value), bits_of(hx[static_cast<std::size_t>(rmin.index)]));
    float sum, dotv, mean;
    std::memcpy(&sum, h_out + 32, 4);
    std::memcpy(&dotv, h_out + 40, 4);
    std::memcpy(&mean, h_out + 112, 4);
    EXPECT_TRUE(std::isnan(sum)) << "a NaN in the data";
    EXPECT_TRUE(std::isnan(mean)) << "a NaN in the data";
    stats st;
    std::memcpy(&st, h_out + 64, sizeof st);
    EXPECT_EQ(st.count, n);
    EXPECT_TRUE(std::isnan(st.m2));
    // The dot over the clean part: replace the NaN and replay once more.
    hx[n - 1 - replay] = 0.5f;
    dx.upload(hx.data(), n * sizeof(float));
    ASSERT_EQ(cudaGraphLaunch(exec, s.s), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(s.s), cudaSuccess);
    out.download(h_out, sizeof h_out);
    std::memcpy(&amax, h_out, 16);
    std::memcpy(&sum, h_out + 32, 4);
    std::memcpy(&dotv, h_out + 40, 4);
    std::memcpy(&mean, h_out + 112, 4);
    std::memcpy(&st, h_out + 64, sizeof st);
    const auto r2 = ref::arg_extreme(hx.data(), n, true, nan_policy::propagate);
    EXPECT_EQ(amax.index, r2.index);
    EXPECT_EQ(bits_of(amax.value), bits_of(hx[static_cast<std::size_t>(r2.index)]));
    const ref::exact_accumulator es = ref::exact_sum(hx.data(), n);
    EXPECT_EQ(bits_of(sum), bits_of(es.to_float()));
    EXPECT_EQ(bits_of(mean), bits_of(static_cast<float>(es.to_double() / static_cast<double>(n))));
    EXPECT_EQ(bits_of(dotv), bits_of(ref::exact_dot(hx.data(), hy.data(), n).to_float()));
    const ref::stats_ref rs = ref::two_pass_stats(hx.data(), n, nan_policy::propagate);
    EXPECT_EQ(st.count, n);
    EXPECT_EQ(st.min, static_cast<double>(rs.min));
    EXPECT_EQ(st.max, static_cast<double>(rs.max));
    EXPECT_TRUE(within(st.m2, rs.m2, 1e-10L * rs.m2));
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(g);
}

}  // namespace
}  // namespace tally::test

namespace tally::test {
namespace {

// Integer means never wrap: the sum is kept in 128 bits (review finding: a 64-bit sum wrapped).
TEST(NumericsGpu, MeanIntegersDoNotWrap) {
  TALLY_REQUIRE_GPU();
  const std::vector<std::uint64_t> u = {1ull << 63, 1ull << 63, 1ull << 63};
  on_device<std::uint64_t> du(u);
  EXPECT_EQ(reduce_value(du.get(), u.size(), dtype::u64, op::mean).f, 0x1p63);
  const std::int64_t big = std::numeric_limits<std::int64_t>::max(), small = std::numeric_limits<std::int64_t>::min();
  const std::vector<std::int64_t> i = {big, big, big, big};
  on_device<std::int64_t> di(i);
  const double want = static_cast<double>(static_cast<long double>(big));  // 2^63 after rounding
  EXPECT_EQ(reduce_value(di.get(), i.size(), dtype::i64, op::mean).f, want);
  const std::vector<std::int64_t> j = {small, small, small};
  on_device<std::int64_t> dj(j);
  EXPECT_EQ(reduce_value(dj.get(), j.size(), dtype::i64, op::mean).f, -0x1p63);
  // Many elements near the top of u32 (past 2^32 in the sum) and a mixed-sign i64 pattern.
  std::vector<std::uint32_t> w(100003, 0xffffffffu);
  on_device<std::uint32_t> dw(w);
  EXPECT_EQ(reduce_value(dw.get(), w.size(), dtype::u32, op::mean).f, 4294967295.0);
}

// stats under nan_policy::ignore with NaNs in front of every thread's data: the shift must be the
// first *number* each accumulator counts (review finding: it stayed 0 and m2 cancelled).
TEST(NumericsGpu, StatsIgnoreWithLeadingNaNsKeepsVariance) {
  TALLY_REQUIRE_GPU();
  const std::uint64_t n = small_only() ? (1u << 15) : (1u << 21);
  std::vector<double> h(n);
  rng_t r(test_seed());
  long double sum = 0;
  std::uint64_t count = 0;
  std::vector<double> vals;
  for (std::uint64_t i = 0; i < n; ++i) {
    if (i < n / 4 || i % 4 == 0) {
      h[i] = std::numeric_limits<double>::quiet_NaN();
    } else {
      h[i] = 1.7e9 + static_cast<double>(r.below(1u << 20)) / (1u << 20);
      sum += h[i];
      ++count;
      vals.push_back(h[i]);
    }
  }
  const long double mean = sum / count;
  long double m2 = 0;
  for (double v : vals) m2 += (v - mean) * (v - mean);
  on_device<double> d(h);
  const stats s = stats_value(d.get(), n, dtype::f64, nullptr, options{nan_policy::ignore, accuracy::fast});
  SCOPED_TRACE("n=" + std::to_string(n) + " seed=" + std::to_string(test_seed()));
  EXPECT_EQ(s.count, count);
  EXPECT_NEAR(s.mean, static_cast<double>(mean), 1e-6);
  EXPECT_NEAR(s.variance(), static_cast<double>(m2 / count), 1e-6 * static_cast<double>(m2 / count));
  EXPECT_NEAR(s.variance(1), static_cast<double>(m2 / (count - 1)), 1e-6 * static_cast<double>(m2 / count));
}

}  // namespace
}  // namespace tally::test
