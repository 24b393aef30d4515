// Both compiled shapes of every family give the right results: the policy uses one of them on a
// given GPU, so each is forced here in turn (core::force_depth) and checked against the reference
// and against the other.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>

#include "core/context.hpp"
#include "core/policy.hpp"
#include "core/tuning.hpp"
#include "support.hpp"

namespace tally::test {
namespace {

struct depth_guard {
  explicit depth_guard(int d) { core::force_depth(d); }
  ~depth_guard() { core::force_depth(-1); }
};

std::vector<std::uint64_t> sizes() {
  if (small_only()) return {1, 1000, 70001};
  return {1, 1000, 70001, (std::uint64_t(1) << 20) + 3, (std::uint64_t(1) << 25) + 17};
}

// Small integers as T: every float sum of them is exact, so float results must be exact too.
template <class T>
std::vector<T> small_ints(std::uint64_t n, std::uint64_t seed) {
  std::mt19937_64 g(seed);
  std::vector<T> v(n);
  for (auto& x : v) x = static_cast<T>(static_cast<int>(g() % 201) - 100);
  return v;
}

template <class T>
void check_depths(dtype t) {
  for (std::uint64_t n : sizes()) {
    const auto h = small_ints<T>(n, test_seed() + n);
    device_buffer d(n * sizeof(T) + 16);
    d.upload(h.data(), n * sizeof(T), sizeof(T));  // one element off 16 bytes: a scalar head as well
    const void* p = static_cast<const char*>(d.get()) + sizeof(T);
    struct result {
      value sum, mx, amax, exact, mean_exact;
      stats st;
    } r[2];
    for (int depth : {0, 1}) {
      depth_guard g(depth);
      r[depth].sum = reduce_value(p, n, t, op::sum);
      r[depth].mx = reduce_value(p, n, t, op::max);
      r[depth].amax = reduce_value(p, n, t, op::argmax);
      r[depth].st = stats_value(p, n, t);
      if constexpr (std::is_floating_point_v<T>) {
        options ex;
        ex.mode = accuracy::exact;
        r[depth].exact = reduce_value(p, n, t, op::sum, nullptr, ex);
        r[depth].mean_exact = reduce_value(p, n, t, op::mean, nullptr, ex);
      }
      EXPECT_EQ(core::last_launch().deep, depth == 1) << "the forced shape was used";
    }
    const reference sum = compute_reference(h.data(), n, op::sum);
    const reference mx = compute_reference(h.data(), n, op::max);
    const std::string where = std::string(to_string(t)) + " n=" + std::to_string(n) + " seed=" + std::to_string(test_seed());
    for (int depth : {0, 1}) {
      SCOPED_TRACE(where + (depth ? " deep" : " base"));
      if (sum.is_float) {
        EXPECT_EQ(static_cast<long double>(r[depth].sum.f), sum.exact);
        EXPECT_EQ(static_cast<long double>(r[depth].mx.f), mx.exact);
        EXPECT_EQ(static_cast<long double>(r[depth].exact.f), sum.exact);
      } else {
        EXPECT_EQ(value_bits(r[depth].sum), sum.bits);
        EXPECT_EQ(value_bits(r[depth].mx), mx.bits);
      }
      EXPECT_EQ(r[depth].st.count, n);
      EXPECT_EQ(static_cast<long double>(r[depth].st.sum), sum.is_float ? sum.exact : static_cast<long double>(
                                                                                    static_cast<std::int64_t>(sum.bits)));
    }
    EXPECT_EQ(r[0].amax.index, r[1].amax.index) << where;
    EXPECT_TRUE(r[0].exact == r[1].exact) << where;
    EXPECT_TRUE(r[0].mean_exact == r[1].mean_exact) << where;
    EXPECT_EQ(r[0].st.min, r[1].st.min) << where;
    EXPECT_EQ(r[0].st.max, r[1].st.max) << where;
    EXPECT_NEAR(r[0].st.m2, r[1].st.m2, 1e-12 * std::fabs(r[0].st.m2) + 1e-300) << where;
  }
}

TEST(PolicyGpu, BothShapesAgreeInt8) {
  TALLY_REQUIRE_GPU();
  check_depths<std::int8_t>(dtype::i8);
}
TEST(PolicyGpu, BothShapesAgreeInt32) {
  TALLY_REQUIRE_GPU();
  check_depths<std::int32_t>(dtype::i32);
}
TEST(PolicyGpu, BothShapesAgreeInt64) {
  TALLY_REQUIRE_GPU();
  check_depths<std::int64_t>(dtype::i64);
}
TEST(PolicyGpu, BothShapesAgreeFloat32) {
  TALLY_REQUIRE_GPU();
  check_depths<float>(dtype::f32);
}
TEST(PolicyGpu, BothShapesAgreeFloat64) {
  TALLY_REQUIRE_GPU();
  check_depths<double>(dtype::f64);
}

// Dot: fast within rounding of each other, exact bitwise equal.
TEST(PolicyGpu, BothShapesAgreeDot) {
  TALLY_REQUIRE_GPU();
  for (std::uint64_t n : sizes()) {
    const auto x = random_vector<float>(n, test_seed() + 1, -1, 1), y = random_vector<float>(n, test_seed() + 2, -1, 1);
    device_buffer dx(n * 4), dy(n * 4);
    dx.upload(x.data(), n * 4);
    dy.upload(y.data(), n * 4);
    value fast[2], exact[2];
    for (int depth : {0, 1}) {
      depth_guard g(depth);
      fast[depth] = dot_value(dx.get(), dy.get(), n, dtype::f32);
      options ex;
      ex.mode = accuracy::exact;
      exact[depth] = dot_value(dx.get(), dy.get(), n, dtype::f32, nullptr, ex);
    }
    long double ref = 0, mag = 0;
    for (std::uint64_t i = 0; i < n; ++i) ref += (long double)x[i] * y[i], mag += std::fabs((long double)x[i] * y[i]);
    for (int depth : {0, 1}) EXPECT_LE(std::fabs(fast[depth].f - ref), 1e-5L * mag + 1e-30L) << "n=" << n;
    EXPECT_TRUE(exact[0] == exact[1]) << "n=" << n;
    EXPECT_LE(std::fabs(exact[0].f - ref), std::fabs(ref) * 1.2e-7L + 1e-30L) << "n=" << n;
  }
}

// `tally bench tune`'s table of choices, from the launchers' dry runs: every example names a
// family and a compiled shape that fits; the exact sum at 2^28 (past eight times the L2 of any
// GPU with less than 128 MiB of it) describes the dynamic schedule's one shape, at 2^24 the
// strided kernel's two (the dry run of the dynamic launcher once described nothing).
TEST(PolicyGpu, ChoicesDescribeEveryExample) {
  TALLY_REQUIRE_GPU();
  const auto choices = core::policy_choices();
  ASSERT_EQ(choices.size(), 15u);
  const std::uint64_t l2 = core::current_context().info.l2_bytes;
  for (const core::family_choice& c : choices) {
    SCOPED_TRACE(c.example);
    EXPECT_FALSE(c.family.empty());
    EXPECT_GE(c.base.block, 32);
    EXPECT_GE(c.base_per_sm, 1);
    EXPECT_GT(c.base_regs, 0);
    EXPECT_FALSE(c.why.empty());
    const bool dynamic = c.deep.block == 0;
    if (c.example.rfind("exact sum", 0) == 0) {
      EXPECT_EQ(c.family, "exact");
      const bool big = c.example.find("2^24") == std::string::npos;
      const std::uint64_t bytes = (std::uint64_t(4) << (big ? 28 : 24)) * (c.example.find("f64") != std::string::npos ? 2 : 1);
      EXPECT_EQ(dynamic, core::exact_dynamic(1, bytes, l2));
      EXPECT_EQ(dynamic, c.why.find("dynamic schedule") != std::string::npos);
    } else {
      EXPECT_FALSE(dynamic);
      EXPECT_GE(c.deep_per_sm, 1);
    }
  }
}

}  // namespace
}  // namespace tally::test
