// The host-side API: tables, names, result types, identities, value text, argument checks.
// These need no GPU and run in CI.
#include <gtest/gtest.h>

#include <cmath>

#include "support.hpp"

namespace tally::test {
namespace {

TEST(ApiCpu, DtypeNamesRoundTrip) {
  for (int i = 0; i < kDtypeCount; ++i) {
    const dtype t = static_cast<dtype>(i);
    ASSERT_EQ(parse_dtype(to_string(t)), t);
  }
  EXPECT_EQ(parse_dtype("float32"), dtype::f32);
  EXPECT_EQ(parse_dtype("int8"), dtype::i8);
  EXPECT_EQ(parse_dtype("bool"), dtype::b8);
  EXPECT_EQ(parse_dtype("f16"), dtype::f16);
  EXPECT_EQ(parse_dtype("bf16"), dtype::bf16);
  EXPECT_FALSE(parse_dtype("f128").has_value());
  EXPECT_EQ(dtype_size(dtype::f16), 2u);
  EXPECT_EQ(dtype_size(dtype::u16), 2u);
  EXPECT_EQ(dtype_size(dtype::f64), 8u);
  EXPECT_EQ(dtype_size(static_cast<dtype>(99)), 0u);
}

// The version, three ways: the headers' macros, the library's compiled-in answer and CMake's own
// reading of include/tally/version.hpp (project(), passed in as TALLY_TEST_PROJECT_VERSION).
TEST(ApiCpu, VersionAgreesEverywhere) {
  const version_info v = library_version();
  EXPECT_EQ(v.major, TALLY_VERSION_MAJOR);
  EXPECT_EQ(v.minor, TALLY_VERSION_MINOR);
  EXPECT_EQ(v.patch, TALLY_VERSION_PATCH);
  EXPECT_STREQ(v.text, TALLY_VERSION_STRING);
  EXPECT_STREQ(v.text, TALLY_TEST_PROJECT_VERSION);
  EXPECT_EQ(std::string(v.text),
            std::to_string(v.major) + "." + std::to_string(v.minor) + "." + std::to_string(v.patch));
  EXPECT_EQ(TALLY_VERSION, v.major * 10000 + v.minor * 100 + v.patch);
  static_assert(TALLY_VERSION_MINOR < 100 && TALLY_VERSION_PATCH < 100, "TALLY_VERSION's digits");
}

TEST(ApiCpu, OpNamesRoundTrip) {
  for (int i = 0; i < kOpCount; ++i) ASSERT_EQ(parse_op(to_string(static_cast<op>(i))), static_cast<op>(i));
  EXPECT_EQ(parse_op("argmax"), op::argmax);
  EXPECT_FALSE(parse_op("median").has_value());
}

TEST(ApiCpu, SupportMatrix) {
  EXPECT_TRUE(supports(dtype::i8, op::bit_xor));
  EXPECT_FALSE(supports(dtype::f32, op::bit_and));
  EXPECT_FALSE(supports(dtype::f64, op::bit_or));
  EXPECT_TRUE(supports(dtype::f32, op::all));
  EXPECT_FALSE(supports(dtype::b8, op::sum));
  EXPECT_TRUE(supports(dtype::b8, op::any));
  EXPECT_FALSE(supports(static_cast<dtype>(-1), op::sum));
}

TEST(ApiCpu, ResultTypes) {
  EXPECT_EQ(result_dtype(dtype::i8, op::sum), dtype::i64);
  EXPECT_EQ(result_dtype(dtype::u16, op::sum), dtype::u64);
  EXPECT_EQ(result_dtype(dtype::i32, op::prod), dtype::i64);
  EXPECT_EQ(result_dtype(dtype::f32, op::sum), dtype::f32);
  EXPECT_EQ(result_dtype(dtype::i16, op::max), dtype::i16);
  EXPECT_EQ(result_dtype(dtype::u8, op::bit_and), dtype::u8);
  EXPECT_EQ(result_dtype(dtype::f64, op::any), dtype::b8);
}

TEST(ApiCpu, UnsupportedPairsNameTheProblem) {
  try {
    result_dtype(dtype::f32, op::bit_and);
    FAIL() << "expected tally::error";
  } catch (const error& e) {
    EXPECT_NE(std::string(e.what()).find("op bit_and is not defined for dtype f32"), std::string::npos) << e.what();
  }
  try {
    result_dtype(static_cast<dtype>(42), op::sum);
    FAIL() << "expected tally::error";
  } catch (const error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown dtype (value 42)"), std::string::npos) << e.what();
  }
}

// Argument checks come before any GPU work, so they behave the same with and without a GPU.
TEST(ApiCpu, ArgumentChecksPrecedeTheGpu) {
  auto msg = [](auto&& fn) -> std::string {
    try {
      fn();
    } catch (const error& e) {
      return e.what();
    }
    return "";
  };
  alignas(16) static float data[4] = {1, 2, 3, 4};
  alignas(16) static float out[2];
  EXPECT_NE(msg([] { reduce(nullptr, 3, dtype::f32, op::sum, out); }).find("d_in is null but n = 3"), std::string::npos);
  EXPECT_NE(msg([] { reduce(data, 3, dtype::f32, op::sum, nullptr); }).find("d_out is null"), std::string::npos);
  EXPECT_NE(msg([] { reduce(data, 3, dtype::f64, op::bit_or, out); }).find("bitwise ops need an integer dtype"),
            std::string::npos);
  EXPECT_NE(msg([] { reduce(reinterpret_cast<const char*>(data) + 2, 1, dtype::f32, op::sum, out); })
                .find("is not aligned to 4 bytes"),
            std::string::npos);
  EXPECT_NE(msg([] { reduce(data, 1, dtype::i32, op::sum, reinterpret_cast<char*>(out) + 4); })
                .find("d_out"),
            std::string::npos);
}

// On a machine without a GPU every call that needs one says so.
TEST(ApiCpu, NoGpuGivesAClearError) {
  if (device_count() > 0) GTEST_SKIP() << "a GPU is present; this checks the no-GPU path";
  alignas(16) static float data[4] = {1, 2, 3, 4};
  alignas(16) static float out[2];
  for (auto fn : {+[] { reduce(data, 4, dtype::f32, op::sum, out); },
                  +[] { (void)reduce_value(data, 4, dtype::f32, op::sum); },
                  +[] { device_buffer b(64); }, +[] { (void)current_device(); }}) {
    try {
      fn();
      ADD_FAILURE() << "expected tally::error";
    } catch (const error& e) {
      EXPECT_NE(std::string(e.what()).find("no CUDA GPU is available"), std::string::npos) << e.what();
    }
  }
}

TEST(ApiCpu, IdentityValues) {
  EXPECT_EQ(identity(dtype::i8, op::sum).i, 0);
  EXPECT_EQ(identity(dtype::i8, op::sum).type, dtype::i64);
  EXPECT_EQ(identity(dtype::u32, op::prod).u, 1u);
  EXPECT_EQ(identity(dtype::i16, op::min).i, 32767);
  EXPECT_EQ(identity(dtype::i16, op::max).i, -32768);
  EXPECT_EQ(identity(dtype::u8, op::min).u, 255u);
  EXPECT_EQ(identity(dtype::u64, op::bit_and).u, ~0ull);
  EXPECT_EQ(identity(dtype::i32, op::bit_and).i, -1);
  EXPECT_TRUE(std::isinf(identity(dtype::f32, op::min).f) && identity(dtype::f32, op::min).f > 0);
  EXPECT_TRUE(std::isinf(identity(dtype::f64, op::max).f) && identity(dtype::f64, op::max).f < 0);
  EXPECT_EQ(identity(dtype::f32, op::all).i, 1);
  EXPECT_EQ(identity(dtype::f32, op::all).type, dtype::b8);
}

TEST(ApiCpu, ValueTextIsExact) {
  value v;
  v.type = dtype::i64;
  v.i = -9223372036854775807LL - 1;
  EXPECT_EQ(v.to_string(), "-9223372036854775808");
  v.type = dtype::u64;
  v.u = 18446744073709551615ull;
  EXPECT_EQ(v.to_string(), "18446744073709551615");
  v.type = dtype::f32;
  v.f = static_cast<double>(0.1f);
  EXPECT_EQ(v.to_string(), "0.1");  // shortest text that reads back to the same float
  v.type = dtype::f64;
  v.f = 0.1;
  EXPECT_EQ(v.to_string(), "0.1");
  v.f = 1.0 / 3.0;
  EXPECT_EQ(std::stod(v.to_string()), 1.0 / 3.0);
  v.f = std::nan("");
  EXPECT_EQ(v.to_string(), "nan");
  v.f = -INFINITY;
  EXPECT_EQ(v.to_string(), "-inf");
  v.type = dtype::b8;
  v.i = 1;
  EXPECT_EQ(v.to_string(), "true");
}

// The reference itself, on cases small enough to check by hand.
TEST(ReferenceCpu, HandChecked) {
  const std::int8_t a[] = {-128, 127, -1, 5};
  EXPECT_EQ(static_cast<std::int64_t>(compute_reference(a, 4, op::sum).bits), 3);
  EXPECT_EQ(static_cast<std::int64_t>(compute_reference(a, 4, op::min).bits), -128);
  EXPECT_EQ(compute_reference(a, 4, op::bit_xor).bits, to_bits<std::int8_t>(std::int8_t(-128 ^ 127 ^ -1 ^ 5)));
  const float f[] = {1e8f, 1.0f, -1e8f};
  EXPECT_EQ(compute_reference(f, 3, op::sum).exact, 1.0L);
  const double nan_in[] = {1.0, std::nan(""), 2.0};
  EXPECT_TRUE(compute_reference(nan_in, 3, op::max).nan);
  const std::uint32_t u[] = {0xffffffffu, 2};
  EXPECT_EQ(compute_reference(u, 2, op::prod).bits, 0x1fffffffeull);
}

}  // namespace
}  // namespace tally::test
