// The numerics API on the host: names of the new dtypes, ops, NaN policies and accuracy modes,
// the support matrix and its refusals, result types and sizes, identities, stats arithmetic, and
// the independent reference (numerics_reference.hpp) checked on hand-worked cases. No GPU needed.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstddef>
#include <functional>
#include <string>

#include "numerics_reference.hpp"
#include "support.hpp"

namespace tally::test {
namespace {

using ref::bits_of;

static_assert(sizeof(indexed<float>) == 16 && sizeof(indexed<double>) == 16, "16-byte records");
static_assert(sizeof(indexed<std::int8_t>) == 16 && sizeof(indexed<std::uint64_t>) == 16,
              "16 bytes");
static_assert(offsetof(indexed<float>, value) == 8, "index first, then the value");
static_assert(sizeof(stats) == 48, "the documented 48-byte stats record");

constexpr dtype kFloatDtypes[] = {dtype::f16, dtype::bf16, dtype::f32, dtype::f64};
constexpr dtype kIntDtypes[] = {dtype::i8,  dtype::u8,  dtype::i16, dtype::u16,
                                dtype::i32, dtype::u32, dtype::i64, dtype::u64};

bool is_float_dtype(dtype t) {
  return t == dtype::f16 || t == dtype::bf16 || t == dtype::f32 || t == dtype::f64;
}

// The message names every word in `words` (the dtype, op, mode or policy at fault).
::testing::AssertionResult names_all(const std::string& msg,
                                     const std::vector<std::string>& words) {
  if (msg.empty())
    return ::testing::AssertionFailure() << "no message (nothing thrown / empty why)";
  for (const std::string& w : words)
    if (msg.find(w) == std::string::npos)
      return ::testing::AssertionFailure() << "'" << msg << "' does not name '" << w << "'";
  return ::testing::AssertionSuccess();
}

TEST(NumericsCpu, HalfDtypeNames) {
  for (dtype t : {dtype::f16, dtype::bf16}) {
    ASSERT_EQ(parse_dtype(to_string(t)), t);
    EXPECT_EQ(dtype_size(t), 2u);
  }
  EXPECT_STREQ(to_string(dtype::f16), "f16");
  EXPECT_STREQ(to_string(dtype::bf16), "bf16");
  EXPECT_EQ(parse_dtype("float16"), dtype::f16);
  EXPECT_EQ(parse_dtype("bfloat16"), dtype::bf16);
  EXPECT_FALSE(parse_dtype("f8").has_value());
}

TEST(NumericsCpu, NewOpNames) {
  for (op o : {op::argmin, op::argmax, op::sum_sq, op::norm2, op::mean}) {
    ASSERT_EQ(parse_op(to_string(o)), o) << to_string(o);
  }
  EXPECT_EQ(parse_op("argmin"), op::argmin);
  EXPECT_EQ(parse_op("argmax"), op::argmax);
  EXPECT_EQ(parse_op("sum_sq"), op::sum_sq);
  EXPECT_EQ(parse_op("norm2"), op::norm2);
  EXPECT_EQ(parse_op("mean"), op::mean);
  EXPECT_FALSE(parse_op("median").has_value());
}

TEST(NumericsCpu, PolicyAndModeNames) {
  EXPECT_STREQ(to_string(nan_policy::propagate), "propagate");
  EXPECT_STREQ(to_string(nan_policy::ignore), "ignore");
  EXPECT_STREQ(to_string(accuracy::fast), "fast");
  EXPECT_STREQ(to_string(accuracy::compensated), "compensated");
  EXPECT_STREQ(to_string(accuracy::exact), "exact");
  for (nan_policy p : {nan_policy::propagate, nan_policy::ignore})
    ASSERT_EQ(parse_nan_policy(to_string(p)), p);
  for (accuracy m : {accuracy::fast, accuracy::compensated, accuracy::exact})
    ASSERT_EQ(parse_accuracy(to_string(m)), m);
  EXPECT_FALSE(parse_nan_policy("skip").has_value());
  EXPECT_FALSE(parse_nan_policy("").has_value());
  EXPECT_FALSE(parse_accuracy("kahan").has_value());
  EXPECT_FALSE(parse_accuracy("").has_value());
  // Out-of-range values still give a printable name (noexcept, never null).
  EXPECT_NE(to_string(static_cast<nan_policy>(7)), nullptr);
  EXPECT_NE(to_string(static_cast<accuracy>(9)), nullptr);
  const options o;
  EXPECT_EQ(o.nan, nan_policy::propagate);
  EXPECT_EQ(o.mode, accuracy::fast);
}

TEST(NumericsCpu, SupportMatrixOfTheNewOps) {
  for (op o : {op::argmin, op::argmax}) {
    EXPECT_FALSE(supports(dtype::b8, o)) << to_string(o);
    for (dtype t : kIntDtypes) EXPECT_TRUE(supports(t, o)) << to_string(o) << " " << to_string(t);
    for (dtype t : kFloatDtypes) EXPECT_TRUE(supports(t, o)) << to_string(o) << " " << to_string(t);
  }
  for (op o : {op::sum_sq, op::norm2}) {
    EXPECT_FALSE(supports(dtype::b8, o));
    for (dtype t : kIntDtypes) EXPECT_FALSE(supports(t, o)) << to_string(o) << " " << to_string(t);
    for (dtype t : kFloatDtypes) EXPECT_TRUE(supports(t, o)) << to_string(o) << " " << to_string(t);
  }
  EXPECT_FALSE(supports(dtype::b8, op::mean));
  for (dtype t : kIntDtypes) EXPECT_TRUE(supports(t, op::mean)) << to_string(t);
  for (dtype t : {dtype::f16, dtype::bf16}) {
    for (op o : {op::sum, op::prod, op::min, op::max, op::all, op::any, op::mean})
      EXPECT_TRUE(supports(t, o)) << to_string(o) << " " << to_string(t);
    for (op o : {op::bit_and, op::bit_or, op::bit_xor})
      EXPECT_FALSE(supports(t, o)) << to_string(o);
  }
}

TEST(NumericsCpu, SupportMatrixWithOptions) {
  const options exact{nan_policy::propagate, accuracy::exact};
  const options comp{nan_policy::propagate, accuracy::compensated};
  const options ignore{nan_policy::ignore, accuracy::fast};
  for (dtype t : kFloatDtypes) {
    for (op o : {op::sum, op::mean}) {
      EXPECT_TRUE(supports(t, o, exact)) << to_string(o) << " " << to_string(t);
      EXPECT_TRUE(supports(t, o, comp)) << to_string(o) << " " << to_string(t);
      EXPECT_FALSE(supports(t, o, ignore)) << to_string(o) << " " << to_string(t);
    }
    for (op o : {op::min, op::max, op::argmin, op::argmax}) {
      EXPECT_TRUE(supports(t, o, ignore)) << to_string(o) << " " << to_string(t);
      EXPECT_FALSE(supports(t, o, exact)) << to_string(o) << " " << to_string(t);
      EXPECT_FALSE(supports(t, o, comp)) << to_string(o) << " " << to_string(t);
    }
    for (op o : {op::prod, op::sum_sq, op::norm2, op::all, op::any}) {
      EXPECT_FALSE(supports(t, o, exact)) << to_string(o) << " " << to_string(t);
      EXPECT_FALSE(supports(t, o, ignore)) << to_string(o) << " " << to_string(t);
    }
  }
  for (dtype t : kIntDtypes)
    for (op o : {op::sum, op::mean}) {
      EXPECT_FALSE(supports(t, o, exact)) << to_string(o) << " " << to_string(t);
      EXPECT_FALSE(supports(t, o, comp)) << to_string(o) << " " << to_string(t);
    }
  // supports() and why_unsupported() agree everywhere, and the default options are the 2-argument
  // form.
  for (int ti = 0; ti < kDtypeCount; ++ti)
    for (int oi = 0; oi < kOpCount; ++oi)
      for (nan_policy p : {nan_policy::propagate, nan_policy::ignore})
        for (accuracy m : {accuracy::fast, accuracy::compensated, accuracy::exact}) {
          const dtype t = static_cast<dtype>(ti);
          const op o = static_cast<op>(oi);
          const options opt{p, m};
          const bool ok = supports(t, o, opt);
          EXPECT_EQ(why_unsupported(t, o, opt).empty(), ok)
              << to_string(t) << " " << to_string(o) << " " << to_string(p) << " " << to_string(m)
              << ": why = '" << why_unsupported(t, o, opt) << "'";
          if (p == nan_policy::propagate && m == accuracy::fast) {
            EXPECT_EQ(supports(t, o), ok);
          }
          // An option never turns an unsupported pair into a supported one.
          if (!supports(t, o)) {
            EXPECT_FALSE(ok);
          }
        }
  EXPECT_FALSE(supports(static_cast<dtype>(42), op::sum, {}));
  EXPECT_FALSE(supports(dtype::f32, op::sum, options{static_cast<nan_policy>(7), accuracy::fast}));
  EXPECT_FALSE(
      supports(dtype::f32, op::sum, options{nan_policy::propagate, static_cast<accuracy>(9)}));
}

TEST(NumericsCpu, WhyUnsupportedNamesTheProblem) {
  const options exact{nan_policy::propagate, accuracy::exact};
  const options comp{nan_policy::propagate, accuracy::compensated};
  const options ignore{nan_policy::ignore, accuracy::fast};
  EXPECT_TRUE(names_all(why_unsupported(dtype::b8, op::argmax), {"argmax", "b8"}));
  EXPECT_TRUE(names_all(why_unsupported(dtype::b8, op::argmin), {"argmin", "b8"}));
  EXPECT_TRUE(names_all(why_unsupported(dtype::f16, op::bit_and), {"bit_and", "f16"}));
  EXPECT_TRUE(names_all(why_unsupported(dtype::bf16, op::bit_xor), {"bit_xor", "bf16"}));
  EXPECT_TRUE(names_all(why_unsupported(dtype::i32, op::sum, exact), {"exact", "i32"}));
  EXPECT_TRUE(names_all(why_unsupported(dtype::u8, op::mean, comp), {"compensated", "u8"}));
  EXPECT_TRUE(names_all(why_unsupported(dtype::f32, op::max, comp), {"compensated", "max"}));
  EXPECT_TRUE(names_all(why_unsupported(dtype::f64, op::argmax, exact), {"exact", "argmax"}));
  EXPECT_TRUE(names_all(why_unsupported(dtype::f32, op::min, exact), {"exact", "min"}));
  EXPECT_TRUE(names_all(why_unsupported(dtype::f32, op::sum, ignore), {"ignore", "sum"}));
  EXPECT_TRUE(names_all(why_unsupported(dtype::f64, op::mean, ignore), {"ignore", "mean"}));
  EXPECT_TRUE(names_all(why_unsupported(dtype::i32, op::sum_sq), {"sum_sq", "i32"}));
  EXPECT_TRUE(names_all(why_unsupported(dtype::u16, op::norm2), {"norm2", "u16"}));
  EXPECT_TRUE(names_all(why_unsupported(dtype::b8, op::mean), {"mean", "b8"}));
  EXPECT_EQ(why_unsupported(dtype::f16, op::sum, exact), "");
  EXPECT_EQ(why_unsupported(dtype::f32, op::argmin, ignore), "");
  EXPECT_FALSE(why_unsupported(static_cast<dtype>(42), op::sum).empty());
  EXPECT_FALSE(why_unsupported(dtype::f32, static_cast<op>(-1)).empty());
}

TEST(NumericsCpu, ResultTypesAndBytes) {
  EXPECT_EQ(result_dtype(dtype::f32, op::argmax), dtype::f32);
  EXPECT_EQ(result_bytes(dtype::f32, op::argmax), 16u);
  EXPECT_EQ(result_dtype(dtype::i8, op::argmin), dtype::i8);
  EXPECT_EQ(result_bytes(dtype::i8, op::argmin), 16u);
  EXPECT_EQ(result_dtype(dtype::u64, op::argmax), dtype::u64);
  EXPECT_EQ(result_dtype(dtype::f16, op::argmax), dtype::f32);
  EXPECT_EQ(result_dtype(dtype::bf16, op::argmin), dtype::f32);
  EXPECT_EQ(result_bytes(dtype::f64, op::argmin), 16u);
  EXPECT_EQ(result_dtype(dtype::f16, op::sum), dtype::f32);
  EXPECT_EQ(result_bytes(dtype::f16, op::sum), 4u);
  EXPECT_EQ(result_dtype(dtype::bf16, op::sum), dtype::f32);
  EXPECT_EQ(result_dtype(dtype::f16, op::prod), dtype::f32);
  EXPECT_EQ(result_dtype(dtype::f16, op::min), dtype::f32);
  EXPECT_EQ(result_dtype(dtype::bf16, op::max), dtype::f32);
  EXPECT_EQ(result_dtype(dtype::f16, op::any), dtype::b8);
  EXPECT_EQ(result_bytes(dtype::bf16, op::all), 1u);
  EXPECT_EQ(result_dtype(dtype::i32, op::mean), dtype::f64);
  EXPECT_EQ(result_bytes(dtype::i32, op::mean), 8u);
  EXPECT_EQ(result_dtype(dtype::u8, op::mean), dtype::f64);
  EXPECT_EQ(result_dtype(dtype::i64, op::mean), dtype::f64);
  EXPECT_EQ(result_dtype(dtype::f32, op::mean), dtype::f32);
  EXPECT_EQ(result_dtype(dtype::f16, op::mean), dtype::f32);
  EXPECT_EQ(result_dtype(dtype::f64, op::mean), dtype::f64);
  EXPECT_EQ(result_dtype(dtype::f64, op::norm2), dtype::f64);
  EXPECT_EQ(result_bytes(dtype::f64, op::norm2), 8u);
  EXPECT_EQ(result_dtype(dtype::f32, op::norm2), dtype::f32);
  EXPECT_EQ(result_dtype(dtype::f16, op::norm2), dtype::f32);
  EXPECT_EQ(result_dtype(dtype::bf16, op::sum_sq), dtype::f32);
  EXPECT_EQ(result_dtype(dtype::f64, op::sum_sq), dtype::f64);
  EXPECT_EQ(result_bytes(dtype::f32, op::sum_sq), 4u);
  // Every other supported pair writes exactly one element of its result type.
  for (int ti = 0; ti < kDtypeCount; ++ti)
    for (int oi = 0; oi < kOpCount; ++oi) {
      const dtype t = static_cast<dtype>(ti);
      const op o = static_cast<op>(oi);
      if (!supports(t, o)) {
        EXPECT_FALSE(error_of([&] { (void)result_bytes(t, o); }).empty())
            << to_string(t) << " " << to_string(o);
        continue;
      }
      if (o == op::argmin || o == op::argmax) continue;
      EXPECT_EQ(result_bytes(t, o), dtype_size(result_dtype(t, o)))
          << to_string(t) << " " << to_string(o);
    }
  EXPECT_TRUE(
      names_all(error_of([] { (void)result_dtype(dtype::b8, op::argmax); }), {"argmax", "b8"}));
  EXPECT_TRUE(
      names_all(error_of([] { (void)result_bytes(dtype::i16, op::norm2); }), {"norm2", "i16"}));
}

TEST(NumericsCpu, DotResultTypes) {
  EXPECT_EQ(dot_result_dtype(dtype::f16), dtype::f32);
  EXPECT_EQ(dot_result_dtype(dtype::bf16), dtype::f32);
  EXPECT_EQ(dot_result_dtype(dtype::f32), dtype::f32);
  EXPECT_EQ(dot_result_dtype(dtype::f64), dtype::f64);
  for (dtype t : {dtype::b8, dtype::i8, dtype::i32, dtype::u64})
    EXPECT_TRUE(names_all(error_of([t] { (void)dot_result_dtype(t); }), {to_string(t)}))
        << to_string(t);
  EXPECT_FALSE(error_of([] { (void)dot_result_dtype(static_cast<dtype>(42)); }).empty());
}

TEST(NumericsCpu, StatsVarianceArithmetic) {
  stats s;
  s.count = 5;
  s.m2 = 10.5;
  EXPECT_EQ(s.variance(), s.m2 / 5);
  EXPECT_EQ(s.variance(0), s.m2 / 5);
  EXPECT_EQ(s.variance(1), s.m2 / 4);
  EXPECT_EQ(s.stddev(1), std::sqrt(s.m2 / 4));
  EXPECT_EQ(s.stddev(), std::sqrt(s.m2 / 5));
  EXPECT_TRUE(std::isnan(s.variance(5)));
  EXPECT_TRUE(std::isnan(s.stddev(7)));
  EXPECT_TRUE(std::isnan(s.variance(-1))) << "no negative degrees of freedom";
  EXPECT_TRUE(std::isnan(s.stddev(-2)));
  s.count = 1;
  s.m2 = 0;
  EXPECT_EQ(s.variance(0), 0.0);
  EXPECT_TRUE(std::isnan(s.variance(1)));
  s.count = 0;
  EXPECT_TRUE(std::isnan(s.variance(0)));
  const stats fresh;
  EXPECT_EQ(fresh.count, 0u);
  EXPECT_EQ(fresh.sum, 0.0);
}

TEST(NumericsCpu, IdentitiesOfTheNewOps) {
  for (op o : {op::argmin, op::argmax}) {
    for (dtype t : {dtype::i8, dtype::u32, dtype::f16, dtype::bf16, dtype::f32, dtype::f64}) {
      const value v = identity(t, o);
      EXPECT_EQ(v.index, -1) << to_string(o) << " " << to_string(t);
      EXPECT_EQ(v.type, result_dtype(t, o)) << to_string(o) << " " << to_string(t);
      if (!is_float_dtype(t)) continue;
      const value w = identity(t, o, options{nan_policy::ignore, accuracy::fast});
      EXPECT_EQ(w.index, -1);
      EXPECT_TRUE(std::isnan(w.f)) << "ignore + n = 0 gives NaN: " << to_string(t);
    }
  }
  // Under ignore, an empty min/max is NaN (the header: "when every element is NaN (or n = 0)").
  EXPECT_TRUE(
      std::isnan(identity(dtype::f32, op::min, options{nan_policy::ignore, accuracy::fast}).f));
  EXPECT_TRUE(
      std::isnan(identity(dtype::f64, op::max, options{nan_policy::ignore, accuracy::fast}).f));
  // Non-indexed identities keep index -1.
  EXPECT_EQ(identity(dtype::f32, op::sum).index, -1);
  const value h = identity(dtype::f16, op::sum);
  EXPECT_EQ(h.type, dtype::f32);
  EXPECT_EQ(bits_of(h.f), bits_of(0.0));
  const value hm = identity(dtype::bf16, op::min);
  EXPECT_EQ(hm.type, dtype::f32);
  EXPECT_TRUE(std::isinf(hm.f) && hm.f > 0);
  EXPECT_EQ(identity(dtype::f64, op::sum_sq).f, 0.0);
  EXPECT_EQ(identity(dtype::f32, op::norm2).f, 0.0);
  EXPECT_EQ(identity(dtype::f32, op::sum_sq).type, dtype::f32);
  EXPECT_EQ(identity(dtype::f32, op::sum, options{nan_policy::propagate, accuracy::exact}).f, 0.0);
  // mean of nothing: 0 / 0.
  EXPECT_EQ(identity(dtype::i32, op::mean).type, dtype::f64);
  EXPECT_TRUE(std::isnan(identity(dtype::i32, op::mean).f));
  EXPECT_TRUE(std::isnan(identity(dtype::f32, op::mean).f));
  EXPECT_FALSE(error_of([] { (void)identity(dtype::b8, op::argmax); }).empty());
}

TEST(NumericsCpu, ValueEqualityIncludesTheIndex) {
  value a;
  a.type = dtype::f32;
  a.f = 7.0;
  a.index = 3;
  value b = a;
  EXPECT_TRUE(a == b);
  b.index = 4;
  EXPECT_FALSE(a == b);
  EXPECT_EQ(value().index, -1);
}

// Refused combinations throw before any GPU work. With a GPU present the same calls run in
// NumericsGpu.BadInputThenValidCall on device memory (host pointers must never reach a kernel).
TEST(NumericsCpu, RefusalsPrecedeTheGpu) {
  if (device_count() > 0)
    GTEST_SKIP() << "a GPU is present: NumericsGpu.BadInputThenValidCall covers this";
  alignas(16) static float data[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  alignas(16) static double out[8];
  const options exact{nan_policy::propagate, accuracy::exact};
  const options comp{nan_policy::propagate, accuracy::compensated};
  const options ignore{nan_policy::ignore, accuracy::fast};
  struct bad {
    std::function<void()> call;
    std::vector<std::string> words;
  };
  const bad cases[] = {
      {[] { reduce(data, 4, dtype::b8, op::argmax, out); }, {"argmax", "b8"}},
      {[] { reduce(data, 4, dtype::f16, op::bit_and, out); }, {"bit_and", "f16"}},
      {[&] { reduce(data, 4, dtype::i32, op::sum, out, nullptr, exact); }, {"exact", "i32"}},
      {[&] { reduce(data, 4, dtype::f32, op::max, out, nullptr, comp); }, {"compensated", "max"}},
      {[&] { reduce(data, 4, dtype::f32, op::argmax, out, nullptr, exact); }, {"exact", "argmax"}},
      {[&] { reduce(data, 4, dtype::f32, op::sum, out, nullptr, ignore); }, {"ignore", "sum"}},
      {[] { reduce(data, 4, dtype::i32, op::sum_sq, out); }, {"sum_sq", "i32"}},
      {[] { reduce(data, 4, dtype::u8, op::norm2, out); }, {"norm2", "u8"}},
      {[] { (void)reduce_value(data, 4, dtype::b8, op::argmin); }, {"argmin", "b8"}},
      {[] { reduce(nullptr, 4, dtype::f32, op::argmax, out); }, {"d_in"}},
      {[] { reduce(data, 4, dtype::f32, op::argmax, nullptr); }, {"d_out"}},
      {[] { reduce(data, 4, dtype::f32, op::argmax, reinterpret_cast<char*>(out) + 4); },
       {"d_out", "align"}},
      {[] { reduce(reinterpret_cast<const char*>(data) + 1, 4, dtype::f16, op::sum, out); },
       {"d_in", "align"}},
      {[] { dot(data, data, 4, dtype::i32, out); }, {"i32"}},
      {[] { dot(nullptr, data, 4, dtype::f32, out); }, {"d_x"}},
      {[] { dot(data, nullptr, 4, dtype::f32, out); }, {"d_y"}},
      {[] { dot(data, data, 4, dtype::f32, nullptr); }, {"d_out"}},
      {[] { dot(data, reinterpret_cast<const char*>(data) + 2, 4, dtype::f32, out); },
       {"d_y", "align"}},
      {[] { (void)dot_value(data, data, 4, dtype::b8); }, {"b8"}},
      {[] { reduce_stats(data, 4, dtype::b8, out); }, {"b8"}},
      {[] { reduce_stats(nullptr, 4, dtype::f32, out); }, {"d_in"}},
      {[] { reduce_stats(data, 4, dtype::f32, nullptr); }, {"d_out"}},
      {[] { reduce_stats(data, 4, dtype::f32, reinterpret_cast<char*>(out) + 4); },
       {"d_out", "align"}},
      {[] { (void)stats_value(data, 4, dtype::b8); }, {"b8"}},
  };
  for (std::size_t k = 0; k < sizeof cases / sizeof cases[0]; ++k) {
    const std::string msg = error_of(cases[k].call);
    EXPECT_TRUE(names_all(msg, cases[k].words)) << "case " << k;
    EXPECT_EQ(msg.find("no CUDA GPU"), std::string::npos)
        << "case " << k << ": checked after the GPU: " << msg;
  }
}

// ---------------------------------------------------------------------------------------------
// The reference itself, on cases worked by hand.

TEST(NumericsReferenceCpu, HalfConverters) {
  using ref::f16_to_float;
  using ref::float_to_f16;
  EXPECT_EQ(f16_to_float(0x3c00), 1.0f);
  EXPECT_EQ(f16_to_float(0xc000), -2.0f);
  EXPECT_EQ(f16_to_float(0x7bff), 65504.0f);
  EXPECT_EQ(f16_to_float(0x0400), 0x1p-14f);
  EXPECT_EQ(f16_to_float(0x0001), 0x1p-24f);
  EXPECT_EQ(f16_to_float(0x03ff), 1023 * 0x1p-24f);
  EXPECT_TRUE(std::isinf(f16_to_float(0xfc00)) && f16_to_float(0xfc00) < 0);
  EXPECT_TRUE(std::isnan(f16_to_float(0x7e00)));
  EXPECT_TRUE(std::signbit(f16_to_float(0x8000)) && f16_to_float(0x8000) == 0);
  // Every non-NaN half survives the round trip; NaNs stay NaN.
  for (std::uint32_t b = 0; b < 65536; ++b) {
    const float f = f16_to_float(static_cast<std::uint16_t>(b));
    if (std::isnan(f))
      ASSERT_TRUE(std::isnan(f16_to_float(float_to_f16(f)))) << b;
    else
      ASSERT_EQ(float_to_f16(f), b) << b;
  }
  EXPECT_EQ(float_to_f16(1.0f + 0x1p-11f), 0x3c00);             // tie: to even (down)
  EXPECT_EQ(float_to_f16(1.0f + 3 * 0x1p-11f), 0x3c02);         // tie: to even (up)
  EXPECT_EQ(float_to_f16(1.0f + 0x1p-11f + 0x1p-20f), 0x3c01);  // above the tie
  EXPECT_EQ(float_to_f16(65519.0f), 0x7bff);
  EXPECT_EQ(float_to_f16(65520.0f), 0x7c00);  // the tie above the largest half overflows
  EXPECT_EQ(float_to_f16(-1e6f), 0xfc00);
  EXPECT_EQ(float_to_f16(0x1p-25f), 0x0000);  // tie: to even (zero)
  EXPECT_EQ(float_to_f16(-0x1p-25f), 0x8000);
  EXPECT_EQ(float_to_f16(1.5f * 0x1p-25f), 0x0001);
  EXPECT_EQ(float_to_f16(3 * 0x1p-25f), 0x0002);         // tie between 1 and 2 quanta: to even
  EXPECT_EQ(float_to_f16(0x1p-14f - 0x1p-25f), 0x0400);  // rounds up into the normals
  // Nearest: no other half is closer than the chosen one (random floats in the half range).
  std::mt19937_64 rng(test_seed());
  for (int k = 0; k < 20000; ++k) {
    const float x = std::ldexp(static_cast<float>(rng() % (1u << 24)) / (1u << 24),
                               static_cast<int>(rng() % 40) - 24) *
                    ((rng() & 1) ? -1.0f : 1.0f);
    const std::uint16_t h = float_to_f16(x);
    const double d = std::fabs(double(f16_to_float(h)) - x);
    for (int step : {-1, 1}) {
      const auto nb = static_cast<std::uint16_t>((h & 0x7fff) + step);
      if ((h & 0x7fff) == 0 && step < 0) continue;
      const double alt =
          std::fabs(double(f16_to_float(static_cast<std::uint16_t>((h & 0x8000) | nb))) - x);
      ASSERT_LE(d, alt) << "x=" << x << " chose " << h;
    }
  }
}

TEST(NumericsReferenceCpu, BfloatConverters) {
  using ref::bf16_to_float;
  using ref::float_to_bf16;
  EXPECT_EQ(bf16_to_float(0x3f80), 1.0f);
  EXPECT_EQ(bf16_to_float(0xc0a0), -5.0f);
  EXPECT_EQ(float_to_bf16(1.0f + 0x1p-8f), 0x3f80);      // tie: to even (down)
  EXPECT_EQ(float_to_bf16(1.0f + 3 * 0x1p-8f), 0x3f82);  // tie: to even (up)
  EXPECT_EQ(float_to_bf16(1.0f + 0x1p-8f + 0x1p-20f), 0x3f81);
  EXPECT_EQ(float_to_bf16(FLT_MAX), 0x7f80);    // above the largest bf16 by more than half an ulp
  EXPECT_EQ(float_to_bf16(0x1p-133f), 0x0001);  // the smallest bf16 subnormal
  EXPECT_EQ(float_to_bf16(0x1p-134f), 0x0000);  // its half: tie to even
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(std::nanf("")))));
  for (std::uint32_t b = 0; b < 65536; ++b) {
    const float f = bf16_to_float(static_cast<std::uint16_t>(b));
    if (!std::isnan(f)) {
      ASSERT_EQ(float_to_bf16(f), b) << b;
    }
  }
}

template <class... D>
ref::exact_accumulator sum_of(D... xs) {
  ref::exact_accumulator a;
  (a.add(static_cast<double>(xs)), ...);
  return a;
}

TEST(NumericsReferenceCpu, ExactSumRoundsOnce) {
  EXPECT_EQ(sum_of(1e30f, 1.0f, -1e30f).to_float(), 1.0f);
  EXPECT_EQ(sum_of(1e300, 1.0, -1e300).to_double(), 1.0);
  EXPECT_EQ(sum_of(1.0f, 0x1p-24f).to_float(), 1.0f);                        // tie: even
  EXPECT_EQ(sum_of(1.0f + 0x1p-23f, 0x1p-24f).to_float(), 1.0f + 0x1p-22f);  // tie: even (up)
  EXPECT_EQ(sum_of(1.0f, 0x1p-24f, 0x1p-80f).to_float(), 1.0f + 0x1p-23f);   // sticky bit
  EXPECT_EQ(sum_of(-1.0f, -0x1p-24f, -0x1p-80f).to_float(), -1.0f - 0x1p-23f);
  EXPECT_EQ(sum_of(1.0f, 0x1p-24f, 0x1p-80f).to_double(), 1.0 + 0x1p-24);  // exact in double
  EXPECT_EQ(sum_of(-1.5, 0.25).to_double(), -1.25);
  EXPECT_EQ(sum_of(0x1p-1074, 0x1p-1074).to_double(), 0x1p-1073);
  EXPECT_EQ(sum_of(0x1.8p-126, -0x1p-126).to_double(), 0x1p-127);
  EXPECT_EQ(sum_of(0x1.8p-126, -0x1p-126).to_float(), 0x1p-127f);  // a subnormal float
  EXPECT_EQ(sum_of(0x1p-150).to_float(), 0.0f);                    // tie: even (zero)
  EXPECT_EQ(sum_of(0x1p-150, 0x1p-200).to_float(), 0x1p-149f);
  EXPECT_EQ(sum_of(3 * 0x1p-151).to_float(), 0x1p-149f);
  EXPECT_EQ(sum_of(DBL_MAX, DBL_MAX).to_double(), HUGE_VAL);
  EXPECT_EQ(sum_of(-DBL_MAX, -DBL_MAX).to_double(), -HUGE_VAL);
  EXPECT_EQ(sum_of(DBL_MAX, DBL_MAX, -DBL_MAX).to_double(), DBL_MAX);
  EXPECT_EQ(sum_of(FLT_MAX, FLT_MAX, FLT_MAX, FLT_MAX, -FLT_MAX, -FLT_MAX, -FLT_MAX).to_float(),
            FLT_MAX);
  EXPECT_EQ(sum_of(FLT_MAX, FLT_MAX).to_float(), HUGE_VALF);
  // The tie just above the largest float overflows, just below it does not.
  EXPECT_EQ(sum_of(FLT_MAX, 0x1p103).to_float(), HUGE_VALF);
  EXPECT_EQ(sum_of(FLT_MAX, 0x1p103, -0x1p50).to_float(), FLT_MAX);
  EXPECT_EQ(sum_of(HUGE_VAL, 1.0).to_double(), HUGE_VAL);
  EXPECT_TRUE(std::isnan(sum_of(HUGE_VAL, -HUGE_VAL).to_double()));
  EXPECT_TRUE(std::isnan(sum_of(1.0, std::nan("")).to_float()));
  EXPECT_EQ(bits_of(sum_of(1.0, -1.0).to_double()), bits_of(0.0));
  EXPECT_EQ(bits_of(sum_of(-0.0, -0.0).to_double()), bits_of(-0.0));
  EXPECT_EQ(bits_of(ref::exact_accumulator().to_double()), bits_of(0.0));
  // Against a compensated long double sum of random doubles: the same value.
  std::mt19937_64 rng(test_seed());
  for (int trial = 0; trial < 20; ++trial) {
    ref::exact_accumulator a;
    long double s = 0, c = 0;
    for (int k = 0; k < 2000; ++k) {
      const double v =
          std::ldexp(static_cast<double>(rng() >> 11), static_cast<int>(rng() % 40) - 80) *
          ((rng() & 1) ? -1 : 1);
      a.add(v);
      const long double t = s + v;
      c += std::fabs(s) >= std::fabs(v) ? (s - t) + v : (v - t) + s;
      s = t;
    }
    ASSERT_LE(ref::ulps_between(a.to_double(), static_cast<double>(s + c)), 1u)
        << "trial " << trial;
  }
}

TEST(NumericsReferenceCpu, ExactProducts) {
  ref::exact_accumulator a;
  a.add_product(1e200, 1e200);
  a.add_product(-1e200, 1e200);
  a.add_product(1.0, 1.0);
  EXPECT_EQ(a.to_double(), 1.0);
  ref::exact_accumulator tiny;
  tiny.add_product(1e-200, 1e-200);
  EXPECT_EQ(tiny.to_double(), 0.0);
  EXPECT_NEAR(static_cast<double>(tiny.approx() / 1e-400L), 1.0, 1e-15);
  ref::exact_accumulator sticky;  // 1 + 2^-53 is a tie; a product of 1e-400 breaks it upwards
  sticky.add_product(1.0, 1.0);
  sticky.add_product(0x1p-27, 0x1p-26);
  EXPECT_EQ(sticky.to_double(), 1.0);
  sticky.add_product(1e-200, 1e-200);
  EXPECT_EQ(sticky.to_double(), 1.0 + 0x1p-52);
  ref::exact_accumulator sub;  // 2^20 products of 2^-1080 each: a subnormal sum
  for (int k = 0; k < (1 << 20); ++k) sub.add_product(0x1p-540, 0x1p-540);
  EXPECT_EQ(sub.to_double(), 0x1p-1060);
  ref::exact_accumulator inf0;
  inf0.add_product(HUGE_VAL, 0.0);
  EXPECT_TRUE(std::isnan(inf0.to_double()));
  // f32 products summed, then rounded once to f32 (not via f64: 1 + 2^-24 + 2^-80).
  ref::exact_accumulator f;
  f.add_product(1.0f, 1.0f);
  f.add_product(0x1p-12f, 0x1p-12f);
  f.add_product(0x1p-40f, 0x1p-40f);
  EXPECT_EQ(f.to_float(), 1.0f + 0x1p-23f);
  EXPECT_EQ(static_cast<float>(f.to_double()), 1.0f);  // what rounding twice would give
}

TEST(NumericsReferenceCpu, ScansAndStats) {
  const float nan = std::nanf("");
  const float x[] = {3, 7, nan, 7, 1, nan, 1};
  EXPECT_EQ(ref::arg_extreme(x, 7, true, nan_policy::propagate).index, 2);
  EXPECT_EQ(ref::arg_extreme(x, 7, true, nan_policy::ignore).index, 1);
  EXPECT_EQ(ref::arg_extreme(x, 7, false, nan_policy::ignore).index, 4);
  EXPECT_EQ(ref::arg_extreme(x, 0, false, nan_policy::ignore).index, -1);
  const float all_nan[] = {nan, nan};
  EXPECT_EQ(ref::arg_extreme(all_nan, 2, false, nan_policy::ignore).index, -1);
  const float zeros[] = {0.0f, -0.0f, 0.0f};
  EXPECT_EQ(ref::arg_extreme(zeros, 3, false, nan_policy::propagate).index, 0);
  EXPECT_EQ(bits_of(ref::min_max(zeros, 3, false, nan_policy::propagate)), bits_of(-0.0));
  EXPECT_EQ(bits_of(ref::min_max(zeros, 3, true, nan_policy::propagate)), bits_of(0.0));
  EXPECT_TRUE(std::isnan(ref::min_max(x, 7, true, nan_policy::propagate)));
  EXPECT_EQ(ref::min_max(x, 7, true, nan_policy::ignore), 7.0);
  EXPECT_TRUE(std::isnan(ref::min_max(all_nan, 2, true, nan_policy::ignore)));
  const double d[] = {1, 2, 3, 4};
  const auto s = ref::two_pass_stats(d, 4, nan_policy::propagate);
  EXPECT_EQ(s.count, 4u);
  EXPECT_EQ(s.sum, 10.0L);
  EXPECT_EQ(s.mean, 2.5L);
  EXPECT_EQ(s.m2, 5.0L);
  const auto si = ref::two_pass_stats(x, 7, nan_policy::ignore);
  EXPECT_EQ(si.count, 5u);
  EXPECT_EQ(si.sum, 19.0L);
  EXPECT_FALSE(si.nan);
  const auto sp = ref::two_pass_stats(x, 7, nan_policy::propagate);
  EXPECT_TRUE(sp.nan);
  EXPECT_EQ(sp.count, 7u);
}

}  // namespace
}  // namespace tally::test
