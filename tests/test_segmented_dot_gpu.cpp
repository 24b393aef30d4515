// dot_rows (src/segmented, binary problems) against the independent exact reference of
// numerics_reference.hpp: every float dtype, the three modes, short rows (lane groups), long rows
// (split blocks, exact launches), row strides that break 16-byte alignment, x and y with
// different alignments; exact mode bitwise equal to the reference and to dot() of each row pair.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "numerics_reference.hpp"
#include "segmented/problem.hpp"
#include "segmented/segmented.hpp"
#include "support.hpp"
#include "tally/tally.hpp"

namespace tally::test {
namespace {

using ref::as_double;
using ref::bf16;
using ref::bits_of;
using ref::exact_accumulator;
using ref::f16;
using ref::make;

struct dot_shape {
  std::uint64_t rows, cols, ldx, ldy;
  std::uint64_t x_shift = 0;  // elements: x starts this far into its buffer (alignment)
};

// Values with spread exponents, exact in every dtype of the test (8 significant bits, exponents
// that fit f16), so each product and the reference are exact.
std::vector<double> spread_values(std::uint64_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<double> v(n);
  for (auto& x : v) {
    const double m = static_cast<double>(static_cast<int>(rng() % 255) - 127);
    x = std::ldexp(m, static_cast<int>(rng() % 12) - 10);
  }
  return v;
}

template <class T>
std::vector<unsigned char> encode(const std::vector<double>& v) {
  std::vector<unsigned char> out(v.size() * sizeof(T));
  for (std::size_t i = 0; i < v.size(); ++i) {
    const T e = make<T>(v[i]);
    std::memcpy(out.data() + i * sizeof(T), &e, sizeof(T));
  }
  return out;
}

template <class T>
void dot_rows_case(dtype t, const dot_shape& s) {
  const std::uint64_t span_x = s.rows == 0 ? 0 : (s.rows - 1) * s.ldx + s.cols;
  const std::uint64_t span_y = s.rows == 0 ? 0 : (s.rows - 1) * s.ldy + s.cols;
  const auto xv = spread_values(span_x + s.x_shift + 1, test_seed() + s.cols * 7 + s.rows);
  const auto yv = spread_values(span_y + 1, test_seed() + s.cols * 13 + s.rows + 1);
  const auto xb = encode<T>(xv), yb = encode<T>(yv);
  device_buffer dx(xb.size()), dy(yb.size());
  dx.upload(xb.data(), xb.size());
  dy.upload(yb.data(), yb.size());
  const dtype r = dot_result_dtype(t);
  device_buffer out(std::max<std::uint64_t>(s.rows, 1) * dtype_size(r));
  const char* x0 = static_cast<const char*>(dx.get()) + s.x_shift * sizeof(T);
  const std::string shape = std::string(to_string(t)) + " " + std::to_string(s.rows) + "x" + std::to_string(s.cols) +
                            " ldx " + std::to_string(s.ldx) + " ldy " + std::to_string(s.ldy) + " shift " +
                            std::to_string(s.x_shift);
  for (accuracy m : {accuracy::fast, accuracy::compensated, accuracy::exact}) {
    options opt;
    opt.mode = m;
    dot_rows(x0, dy.get(), s.rows, s.cols, s.ldx, s.ldy, t, out.get(), nullptr, opt);
    const std::string plan = seg::to_string(seg::last_plan().how);
    const auto got = results_to_values(out.get(), s.rows, r, op::sum);
    for (std::uint64_t row = 0; row < s.rows; ++row) {
      exact_accumulator acc;
      long double abs_sum = 0;
      for (std::uint64_t k = 0; k < s.cols; ++k) {
        const double a = as_double(make<T>(xv[s.x_shift + row * s.ldx + k])), b = as_double(make<T>(yv[row * s.ldy + k]));
        acc.add_product(a, b);
        abs_sum += std::fabs(static_cast<long double>(a) * b);
      }
      const double want = r == dtype::f32 ? static_cast<double>(acc.to_float()) : acc.to_double();
      const double g = got[row].as_double();
      const std::string where = shape + " " + to_string(m) + " (" + plan + ") row " + std::to_string(row);
      if (m == accuracy::exact) {
        ASSERT_EQ(bits_of(g), bits_of(want)) << where << ": got " << g << ", want " << want;
        if (row % 7 == 0) {  // and bitwise the 1-D exact dot of that pair of rows
          const value one = dot_value(x0 + row * s.ldx * sizeof(T), static_cast<const char*>(dy.get()) + row * s.ldy * sizeof(T),
                                      s.cols, t, nullptr, opt);
          ASSERT_EQ(bits_of(g), bits_of(one.as_double())) << where << ": dot() gives " << one.to_string();
        }
      } else {
        // Error bound of a tree of height <= cols plus the final rounding (numerics rules).
        const double u = r == dtype::f32 ? 0x1p-24 : 0x1p-53;
        const double h = static_cast<double>(s.cols) + 1;
        const double bound = h * u / (1 - h * u) * static_cast<double>(abs_sum) + std::fabs(want) * u * 2;
        ASSERT_LE(std::fabs(g - want), bound) << where << ": got " << g << ", want " << want << " (seed " << test_seed()
                                               << ")";
      }
    }
  }
}

template <class T>
void dot_rows_suite(dtype t) {
  const std::uint64_t long_cols = small_only() ? 70001 : (1u << 21) + 3;
  const std::vector<dot_shape> shapes{
      {1, 1, 1, 1},       {5, 0, 3, 3},        {0, 7, 7, 7},       {33, 17, 17, 17},      {64, 16, 16, 16},
      {100, 33, 35, 40},  {7, 1000, 1001, 1003, 1}, {3, 4096, 4096, 4096},
      {2, long_cols, long_cols + 1, long_cols, 3}, {80, 5000, 5000, 5000}};
  for (const dot_shape& s : shapes) dot_rows_case<T>(t, s);
}

TEST(SegmentedDotGpu, RowsF32) { TALLY_REQUIRE_GPU(); dot_rows_suite<float>(dtype::f32); }
TEST(SegmentedDotGpu, RowsF64) { TALLY_REQUIRE_GPU(); dot_rows_suite<double>(dtype::f64); }
TEST(SegmentedDotGpu, RowsF16) { TALLY_REQUIRE_GPU(); dot_rows_suite<f16>(dtype::f16); }
TEST(SegmentedDotGpu, RowsBf16) { TALLY_REQUIRE_GPU(); dot_rows_suite<bf16>(dtype::bf16); }

// Few very long rows in exact mode take the 1-D exact launches; the same bits as dot().
TEST(SegmentedDotGpu, ExactLongRowsAsOneDimensionalLaunches) {
  TALLY_REQUIRE_GPU();
  if (small_only()) GTEST_SKIP() << "small sizes only (sanitizer run)";
  dot_rows_case<float>(dtype::f32, {3, (1u << 22) + 9, (1u << 22) + 9, (1u << 22) + 12});
}

TEST(SegmentedDotGpu, BadArguments) {
  TALLY_REQUIRE_GPU();
  device_buffer x(64 * 4), y(128 * 4), out(64 * 4);
  EXPECT_NE(error_of([&] { dot_rows(x.get(), y.get(), 4, 8, 8, 8, dtype::i32, out.get()); }).find("dot needs f16, bf16, f32 or f64"),
            std::string::npos);
  EXPECT_NE(error_of([&] { dot_rows(x.get(), y.get(), 4, 8, 8, 7, dtype::f32, out.get()); }).find("ldy 7"),
            std::string::npos);
  EXPECT_NE(error_of([&] { dot_rows(x.get(), nullptr, 4, 8, 8, 8, dtype::f32, out.get()); }).find("d_y is null"),
            std::string::npos);
  options ig;
  ig.nan = nan_policy::ignore;
  EXPECT_FALSE(error_of([&] { dot_rows(x.get(), y.get(), 4, 8, 8, 8, dtype::f32, out.get(), nullptr, ig); }).empty());
  // 9 rows of 8 floats reach past the 64-float allocation of y: refused, naming d_y.
  const std::string why = error_of([&] { dot_rows(x.get(), y.get(), 9, 8, 7 + 1, 8, dtype::f32, out.get()); });
  EXPECT_NE(why.find("d_x"), std::string::npos) << why;
}

}  // namespace
}  // namespace tally::test
