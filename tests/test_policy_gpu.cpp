// Both compiled shapes of every family give the right results: the policy uses one of them on a
// given GPU, so each is forced here in turn (core::force_depth) and checked against the reference
// and against the other.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "core/context.hpp"
#include "core/policy.hpp"
#include "core/tuning.hpp"
#include "numerics_reference.hpp"
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

// Unforced, an input that fits in the L2 takes the base shape even where the rule picks deep for
// its family (the f32 statistics on the H100 and H200); one past the L2 takes the rule's choice;
// a forced depth holds at every size. The results agree.
TEST(PolicyGpu, DeepShapeOnlyPastTheL2) {
  TALLY_REQUIRE_GPU();
  if (small_only()) GTEST_SKIP() << "large test skipped under TALLY_TEST_SMALL";
  const std::uint64_t l2 = core::current_context().info.l2_bytes;
  const std::uint64_t big = l2 / 4 + 4099, small = std::uint64_t(1) << 20;
  const auto h = small_ints<float>(big, test_seed() + 5);
  const device_buffer d = to_device(h);
  const stats past = stats_value(d.get(), big, dtype::f32);
  const bool rule_deep = core::last_launch().deep;
  const stats in_l2 = stats_value(d.get(), small, dtype::f32);
  EXPECT_FALSE(core::last_launch().deep) << "2^20 f32 fits in the L2";
  double sum = 0;
  for (std::uint64_t i = 0; i < small; ++i) sum += h[i];
  EXPECT_EQ(in_l2.sum, sum);
  {
    depth_guard g(1);
    const stats forced = stats_value(d.get(), small, dtype::f32);
    EXPECT_TRUE(core::last_launch().deep) << "a forced depth holds below the L2";
    EXPECT_EQ(forced.sum, sum);
    EXPECT_NEAR(forced.m2, in_l2.m2, 1e-12 * in_l2.m2);
  }
  double all = 0;
  for (const float x : h) all += x;
  EXPECT_EQ(past.sum, all);
  std::printf("stats f32 past the L2 (%llu B): %s shape\n", static_cast<unsigned long long>(big * 4),
              rule_deep ? "deep" : "base");
}

// Exact f32 and f64 sums and means where the launcher leaves the family's two shapes
// (launch.cuh, launch_exact): one deep block for an f32 input one deep round holds, more than a
// third full (5462-16384 elements; every thread's round, a partial one padded, takes the round's
// grid test), one 256-thread block for an f32 input of up to 4096 elements, 256-thread blocks on
// twice the grid where base's grid would hold a block in at most every second SM. At the edges of
// the windows and inside them, on data of a wide range (the grid tests fail: the general path
// adds the round, pads included, and each add of the per-element kernels is tested) and on small
// integers (the tests hold): the sum equals the exact sum rounded once (the independent
// reference), and so is the sum of the input one element on (a head off the vectors), and sum
// and mean are bitwise those of the same call forced to each depth (the exact result does not
// depend on the grid).
bool rule_deep_for_exact(dtype t) {  // the rule's depth for the family (then kept at every size)
  options ex;
  ex.mode = accuracy::exact;
  return core::plan(t, op::sum, 1, ex).deep;
}
template <class T>
void check_exact_small_shapes(dtype t, bool small_integers) {
  constexpr std::uint64_t vec = 16 / sizeof(T);
  const core::shape base = core::compiled_shape(sizeof(T), core::family::exact, core::depth::base);
  const core::shape deep = core::compiled_shape(sizeof(T), core::family::exact, core::depth::deep);
  const std::uint64_t base_round = std::uint64_t(base.block) * base.unroll * vec;
  const std::uint64_t deep_round = std::uint64_t(deep.block) * deep.unroll * vec;
  const std::uint64_t per_block = std::uint64_t(base.block) * vec;  // heavy ops: a vector a thread
  const std::uint64_t sms = static_cast<std::uint64_t>(core::current_context().sm_count);
  const std::uint64_t half_hi = sms / 2 * per_block;  // base's grid: at most sms / 2 blocks
  const std::uint64_t half_per_block = std::uint64_t(core::exact_half_shape().block) * vec;
  const bool one_round = std::is_same_v<T, float>;
  const std::uint64_t single_max = base_round * core::kSingleBlockRounds;
  // f32: one half-shape block up to one of its rounds (tuning.hpp, exact_half_single).
  const std::uint64_t half_single =
      core::exact_half_single(sizeof(T), 1) ? core::round_elements(core::exact_half_shape(), sizeof(T)) : 0;
  // f32: deep_round / 3 and one more (the one-round window's lower edge), 12293 (no thread holds
  // a whole round: each pads its partial one, and a scalar tail follows the vectors).
  std::vector<std::uint64_t> ns{1,
                                1000,
                                base_round / 2,
                                base_round / 2 + 3,
                                deep_round / 3,
                                deep_round / 3 + 1,
                                base_round,
                                base_round + 1,
                                deep_round * 3 / 4 + 5,
                                deep_round - base_round / 8,
                                deep_round,
                                deep_round + 1,
                                single_max + 1,
                                (single_max + half_hi) / 2 + 5,
                                half_hi,
                                half_hi + 1};
  const std::uint64_t top = *std::max_element(ns.begin(), ns.end());
  std::vector<T> h;
  if (small_integers) {
    h = small_ints<T>(top, test_seed() + 10);
  } else {
    std::mt19937_64 g(test_seed() + 9);
    std::uniform_real_distribution<double> u(-1.0, 1.0);
    h.resize(top);
    for (auto& x : h) {
      const int e = static_cast<int>(g() % 40) - 20;
      x = static_cast<T>(std::ldexp(u(g), e));
    }
  }
  const device_buffer d = to_device(h);
  options ex;
  ex.mode = accuracy::exact;
  const bool rule_deep = rule_deep_for_exact(t);
  for (std::uint64_t n : ns) {
    SCOPED_TRACE(testing::Message() << to_string(t) << " n " << n << " (" << sms << " SMs, "
                                    << (small_integers ? "small integers" : "wide range") << ")");
    const ref::exact_accumulator want = ref::exact_sum(h.data(), n);
    for (op o : {op::sum, op::mean}) {
      const value v = reduce_value(d.get(), n, t, o, nullptr, ex);
      const core::launch_record r = core::last_launch();
      const bool in_one_round = one_round && 3 * n > deep_round && n <= deep_round;
      const bool in_half_single = n <= half_single;
      const bool in_half = !in_one_round && (in_half_single || (n > single_max && n <= half_hi));
      if (rule_deep) {
        EXPECT_TRUE(r.deep);
        EXPECT_EQ(r.block, static_cast<unsigned>(deep.block));
      } else {
        EXPECT_EQ(r.deep, in_one_round);
        if (in_one_round) {
          EXPECT_EQ(r.blocks, 1u);
          EXPECT_EQ(r.unroll, static_cast<unsigned>(deep.unroll));
        }
        EXPECT_EQ(r.block, in_half ? static_cast<unsigned>(core::exact_half_shape().block) : 512u);
        if (in_half) {
          EXPECT_EQ(r.blocks, in_half_single ? 1u : (n + half_per_block - 1) / half_per_block);
          EXPECT_EQ(r.unroll, static_cast<unsigned>(core::exact_half_shape().unroll));
        }
      }
      if (o == op::sum) {
        if constexpr (std::is_same_v<T, float>) EXPECT_EQ(ref::bits_of(static_cast<float>(v.f)), ref::bits_of(want.to_float()));
        else EXPECT_EQ(ref::bits_of(v.f), ref::bits_of(want.to_double()));
      }
      // One element off the vectors' alignment (a head of 16 / sizeof(T) - 1 elements, which the
      // last block adds; the padded rounds start past it): the sum of h[1, n).
      if (o == op::sum && n > 1) {
        const void* off = static_cast<const char*>(d.get()) + sizeof(T);
        const value u = reduce_value(off, n - 1, t, o, nullptr, ex);
        const ref::exact_accumulator want1 = ref::exact_sum(h.data() + 1, n - 1);
        if constexpr (std::is_same_v<T, float>)
          EXPECT_EQ(ref::bits_of(static_cast<float>(u.f)), ref::bits_of(want1.to_float())) << "offset by one";
        else EXPECT_EQ(ref::bits_of(u.f), ref::bits_of(want1.to_double())) << "offset by one";
      }
      for (int forced : {0, 1}) {
        depth_guard gd(forced);
        const value w = reduce_value(d.get(), n, t, o, nullptr, ex);
        EXPECT_EQ(core::last_launch().deep, forced == 1);
        EXPECT_EQ(core::last_launch().block, 512u);
        EXPECT_EQ(value_bits(w), value_bits(v)) << "forced " << forced;
      }
    }
  }
}
TEST(PolicyGpu, ExactSumsInOneDeepBlockOrHalfBlocks) {
  TALLY_REQUIRE_GPU();
  for (bool small : {false, true}) {
    check_exact_small_shapes<float>(dtype::f32, small);
    check_exact_small_shapes<double>(dtype::f64, small);
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
// From eight L2s of bytes read up, the fast ops take the dynamic schedule (a resident grid takes
// chunks of whole rounds from a counter; each chunk's partial in its own slot, combined in chunk
// order). Small integers (float sums exact), one element off 16 bytes (a scalar head and tail);
// the maximum and the minimum twice, in different chunks (first index wins); called twice in a
// row (the counter is back at zero); random floats bitwise the same in a second call and in a
// captured graph; a small call right after.
struct dynamic_guard {
  explicit dynamic_guard(int d) { core::force_dynamic(d); }
  ~dynamic_guard() { core::force_dynamic(-1); }
};

template <class T>
void check_dynamic(dtype t, std::uint64_t n) {
  auto h = small_ints<T>(n, test_seed() + 77);
  const std::uint64_t i_min = n / 7, i_max = n / 3, i_max2 = n / 2 + 1, i_min2 = n - 1;
  h[i_max] = h[i_max2] = T(1000);
  h[i_min] = h[i_min2] = T(-1000);
  long long want = 0;
  for (const T& x : h) want += static_cast<long long>(x);
  device_buffer d(n * sizeof(T) + 16);
  d.upload(h.data(), n * sizeof(T), sizeof(T));
  const void* p = static_cast<const char*>(d.get()) + sizeof(T);
  for (int call = 0; call < 2; ++call) {
    SCOPED_TRACE(testing::Message() << to_string(t) << " n " << n << " call " << call);
    const value s = reduce_value(p, n, t, op::sum);
    EXPECT_TRUE(core::last_launch().dynamic) << "the dynamic schedule was used";
    if (core::forced_depth() >= 0) {
      EXPECT_EQ(core::last_launch().deep, core::forced_depth() == 1);
    }
    if constexpr (std::is_floating_point_v<T>) EXPECT_EQ(s.f, static_cast<double>(want));
    else EXPECT_EQ(s.i, want);
    EXPECT_EQ(reduce_value(p, n, t, op::argmax).index, static_cast<std::int64_t>(i_max));
    EXPECT_EQ(reduce_value(p, n, t, op::argmin).index, static_cast<std::int64_t>(i_min));
    if constexpr (std::is_floating_point_v<T>) {  // the compensated sum: chunks of several rounds
      options comp;
      comp.mode = accuracy::compensated;
      EXPECT_EQ(reduce_value(p, n, t, op::sum, nullptr, comp).f, static_cast<double>(want));
    }
    const value mx = reduce_value(p, n, t, op::max);
    if constexpr (std::is_floating_point_v<T>) EXPECT_EQ(mx.f, 1000.0);
    else EXPECT_EQ(mx.i, 1000);
  }
  const stats st = stats_value(p, n, t);
  EXPECT_EQ(st.count, n);
  EXPECT_EQ(st.sum, static_cast<double>(want));
  EXPECT_NEAR(st.mean, static_cast<double>(want) / static_cast<double>(n), 1e-9);
  double m2 = 0;
  const double mean = static_cast<double>(want) / static_cast<double>(n);
  for (const T& x : h) m2 += (static_cast<double>(x) - mean) * (static_cast<double>(x) - mean);
  EXPECT_NEAR(st.m2, m2, 1e-9 * m2);
  // A shorter call right after.
  const std::uint64_t m = std::min<std::uint64_t>(n, 1000);
  long long small = 0;
  for (std::uint64_t i = 0; i < m; ++i) small += static_cast<long long>(h[i]);
  const value v = reduce_value(p, m, t, op::sum);
  if constexpr (std::is_floating_point_v<T>) EXPECT_EQ(v.f, static_cast<double>(small));
  else EXPECT_EQ(v.i, small);
}

// The dynamic kernels at small sizes (forced: a base chunk is 128 KiB, so 2^20 + 77 f32 is nine
// chunks with a partial last one), in both shapes (base, deep), where the sanitizers run them.
TEST(PolicyGpu, DynamicScheduleSmallSizes) {
  TALLY_REQUIRE_GPU();
  dynamic_guard on(1);
  for (int d : {0, 1}) {
    depth_guard dg(d);
    for (std::uint64_t n : {std::uint64_t(10), std::uint64_t(70001), (std::uint64_t(1) << 20) + 77}) {
      SCOPED_TRACE(d ? "deep" : "base");
      check_dynamic<float>(dtype::f32, n);
      check_dynamic<double>(dtype::f64, n);
      check_dynamic<std::int32_t>(dtype::i32, n);
    }
  }
}

// 1- and 2-byte elements (16 and 8 per vector: the kernels whose partial round is taken one vector
// at a time, device.cuh) against host references: the widened sum, the maximum and its first index,
// the xor of the bits, any; in the dynamic schedule (forced at every size: a partial last chunk)
// and on the strided grid in both compiled shapes; one element off 16 bytes (a scalar head).
template <class T>
void check_narrow(dtype t, std::uint64_t n) {
  const auto h = random_vector<T>(n, test_seed() + 91, double(std::numeric_limits<T>::lowest()),
                                  double(std::numeric_limits<T>::max()));
  long long sum = 0;
  T mx = h[0], x = 0;
  std::int64_t imx = 0;
  bool any = false;
  for (std::uint64_t i = 0; i < n; ++i) {
    sum += static_cast<long long>(h[i]);
    if (h[i] > mx) mx = h[i], imx = static_cast<std::int64_t>(i);
    x = static_cast<T>(x ^ h[i]);
    any = any || h[i] != 0;
  }
  device_buffer d(n * sizeof(T) + 16);
  d.upload(h.data(), n * sizeof(T), sizeof(T));
  const void* p = static_cast<const char*>(d.get()) + sizeof(T);
  EXPECT_EQ(reduce_value(p, n, t, op::sum).as_double(), static_cast<double>(sum));
  const value m = reduce_value(p, n, t, op::argmax);
  EXPECT_EQ(m.index, imx);
  EXPECT_EQ(m.as_double(), static_cast<double>(mx));
  EXPECT_EQ(static_cast<T>(reduce_value(p, n, t, op::bit_xor).u), x);
  EXPECT_EQ(reduce_value(p, n, t, op::any).i != 0, any);
}

TEST(PolicyGpu, NarrowElementsInEverySchedule) {
  TALLY_REQUIRE_GPU();
  for (std::uint64_t n : {std::uint64_t(10), std::uint64_t(70001), (std::uint64_t(1) << 20) + 77}) {
    for (int sched : {1, 0}) {
      for (int depth : {0, 1}) {
        SCOPED_TRACE(testing::Message() << "n " << n << (sched ? " dynamic" : " strided")
                                        << (depth ? " deep" : " base"));
        dynamic_guard on(sched);
        depth_guard dg(depth);
        check_narrow<std::int8_t>(dtype::i8, n);
        check_narrow<std::uint8_t>(dtype::u8, n);
        check_narrow<std::int16_t>(dtype::i16, n);
      }
    }
  }
}

TEST(PolicyGpu, DynamicScheduleIsRightAndRepeatable) {
  TALLY_REQUIRE_GPU();
  if (small_only()) GTEST_SKIP() << "large test skipped under TALLY_TEST_SMALL";
  dynamic_guard on(1);  // whether or not this GPU's policy takes it
  const std::uint64_t bytes = core::kDynamicL2Multiple * core::current_context().info.l2_bytes + 4099;
  for (int d : {0, 1}) {  // both shapes
    SCOPED_TRACE(d ? "deep" : "base");
    depth_guard dg(d);
    check_dynamic<float>(dtype::f32, bytes / 4);
    check_dynamic<double>(dtype::f64, bytes / 8);
    check_dynamic<std::int32_t>(dtype::i32, bytes / 4);
  }

  // Random floats: the same bits twice, and in a captured graph on another stream.
  const std::uint64_t n = bytes / 4;
  const auto h = random_vector<float>(n, test_seed() + 78, -1.0, 1.0);
  double sum_ref = 0, abs_ref = 0;
  for (float x : h) sum_ref += x, abs_ref += std::fabs(x);
  device_buffer d = to_device(h), out(8);
  const value a = reduce_value(d.get(), n, dtype::f32, op::sum), b = reduce_value(d.get(), n, dtype::f32, op::sum);
  EXPECT_EQ(a.f, b.f);
  EXPECT_NEAR(a.f, sum_ref, 1e-5 * abs_ref);
  cudaStream_t st = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking), cudaSuccess);
  cudaGraph_t g = nullptr;
  cudaGraphExec_t ex = nullptr;
  ASSERT_EQ(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  reduce(d.get(), n, dtype::f32, op::sum, out.get(), st);
  ASSERT_EQ(cudaStreamEndCapture(st, &g), cudaSuccess);
  ASSERT_EQ(cudaGraphInstantiate(&ex, g, 0), cudaSuccess);
  for (int r = 0; r < 3; ++r) {
    ASSERT_EQ(cudaGraphLaunch(ex, st), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(st), cudaSuccess);
    float got = 0;
    out.download(&got, 4);
    EXPECT_EQ(static_cast<double>(got), a.f) << "replay " << r;
  }
  cudaGraphExecDestroy(ex);
  cudaGraphDestroy(g);
  cudaStreamDestroy(st);

  // dot: two inputs, eight L2s of bytes between them.
  const std::uint64_t m = bytes / 8;
  const auto x = small_ints<float>(m, test_seed() + 79), y = small_ints<float>(m, test_seed() + 80);
  double dot_ref = 0, dot_abs = 0;
  for (std::uint64_t i = 0; i < m; ++i) dot_ref += double(x[i]) * y[i], dot_abs += std::fabs(double(x[i]) * y[i]);
  device_buffer dx = to_device(x), dy = to_device(y);
  const value dv = dot_value(dx.get(), dy.get(), m, dtype::f32);
  EXPECT_TRUE(core::last_launch().dynamic);
  EXPECT_NEAR(dv.f, dot_ref, 1e-5 * dot_abs);
  EXPECT_EQ(dot_value(dx.get(), dy.get(), m, dtype::f32).f, dv.f);
}

TEST(PolicyGpu, ChoicesDescribeEveryExample) {
  TALLY_REQUIRE_GPU();
  const auto choices = core::policy_choices();
  ASSERT_EQ(choices.size(), 20u);
  const std::uint64_t l2 = core::current_context().info.l2_bytes;
  for (const core::family_choice& c : choices) {
    SCOPED_TRACE(c.example);
    EXPECT_FALSE(c.family.empty());
    EXPECT_GE(c.base.block, 32);
    EXPECT_GE(c.base_per_sm, 1);
    EXPECT_GT(c.base_regs, 0);
    EXPECT_FALSE(c.why.empty());
    const auto has = [&](const char* s) { return c.example.find(s) != std::string::npos; };
    const int elem = has("f64") ? 8 : has("f16") ? 2 : has("i8") ? 1 : 4;
    const std::uint64_t bytes = (std::uint64_t(elem) << (has("2^28") ? 28 : 24)) * (has("dot") ? 2 : 1);
    const bool exact = c.example.rfind("exact sum", 0) == 0;
    const bool stats = has("stats");  // keeps the strided schedule
    const core::device_policy& pol = core::policy_for(core::current_context());
    const core::family f = c.family == "plain"     ? core::family::plain
                           : c.family == "folding" ? core::family::folding
                           : c.family == "binary"  ? core::family::binary
                                                   : core::family::exact;
    EXPECT_EQ(c.dynamic, exact ? core::exact_dynamic(1, bytes, l2)
                               : !stats && core::uses_dynamic(pol, f, bytes, has("compensated")));
    EXPECT_EQ(c.dynamic, c.why.find("dynamic schedule") != std::string::npos);
    if (exact) {
      EXPECT_EQ(c.family, "exact");
    }
    if (c.dynamic) {
      EXPECT_EQ(c.deep.block, 0);
    } else {
      EXPECT_GE(c.deep.block, 32);
      EXPECT_GE(c.deep_per_sm, 1);
    }
  }
}

}  // namespace
}  // namespace tally::test
