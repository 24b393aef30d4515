// `tally reduce FILE.npy --axis K -o OUT.npy` (src/cli/axis): the axis rule and N-d .npy files
// without a GPU; the whole path (file in, reduce_axis, file out) against a CPU reference with one.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "cli/axis.hpp"
#include "io/npy.hpp"
#include "support.hpp"

namespace tally::test {
namespace {

std::string temp_path(const std::string& name) {
  return ::testing::TempDir() + "tally_axis_" + std::to_string(::getpid()) + "_" + name;
}

TEST(CliAxisCpu, AxesOfAShape) {
  const std::vector<std::uint64_t> s{2, 3, 4, 5};
  auto p = cli::plan_axes(s, false, {1});
  EXPECT_EQ(p.axis, 1);
  EXPECT_EQ(p.count, 1);
  EXPECT_EQ(p.out_shape, (std::vector<std::uint64_t>{2, 4, 5}));
  EXPECT_EQ(p.results, 40u);
  p = cli::plan_axes(s, false, {-1, -2});  // adjacent, any order, from the end
  EXPECT_EQ(p.axis, 2);
  EXPECT_EQ(p.count, 2);
  EXPECT_EQ(p.out_shape, (std::vector<std::uint64_t>{2, 3}));
  // Fortran order: memory holds the reversed shape; axis 1 of (2,3,4,5) is axis 2 of (5,4,3,2).
  p = cli::plan_axes(s, true, {1});
  EXPECT_EQ(p.dims, (std::vector<std::uint64_t>{5, 4, 3, 2}));
  EXPECT_EQ(p.axis, 2);
  EXPECT_EQ(p.out_shape, (std::vector<std::uint64_t>{2, 4, 5}));
  p = cli::plan_axes(s, false, {0, 1, 2, 3});  // everything: a 0-d result
  EXPECT_TRUE(p.out_shape.empty());
  EXPECT_EQ(p.results, 1u);
  EXPECT_NE(error_of([&] { cli::plan_axes(s, false, {4}); }).find("--axis 4: out of range for an array of 4 dimensions (2, 3, 4, 5)"),
            std::string::npos);
  EXPECT_NE(error_of([&] { cli::plan_axes(s, false, {-5}); }).find("out of range"), std::string::npos);
  EXPECT_NE(error_of([&] { cli::plan_axes(s, false, {1, -3}); }).find("axis 1 is given twice"), std::string::npos);
  EXPECT_NE(error_of([&] { cli::plan_axes(s, false, {0, 2}); }).find("axes 0 and 2 are not adjacent"), std::string::npos);
  EXPECT_NE(error_of([&] { cli::plan_axes({}, false, {0}); }).find("0-d"), std::string::npos);
  EXPECT_NE(error_of([&] { cli::plan_axes(s, false, {}); }).find("at least one axis"), std::string::npos);
}

TEST(CliAxisCpu, NdNpyRoundTrip) {
  const std::vector<std::int32_t> v{1, 2, 3, 4, 5, 6};
  for (bool fortran : {false, true}) {
    for (const auto& shape : {std::vector<std::uint64_t>{2, 3}, std::vector<std::uint64_t>{6},
                              std::vector<std::uint64_t>{1, 2, 3}}) {
      const std::string path = temp_path("rt.npy");
      io::write_npy(path, dtype::i32, v.data(), shape, fortran);
      const io::loaded_array a = io::read_npy(path);
      EXPECT_EQ(a.shape, shape);
      EXPECT_EQ(a.fortran_order, fortran);
      EXPECT_EQ(a.count, 6u);
      EXPECT_EQ(std::memcmp(a.bytes.data(), v.data(), 24), 0);
      std::remove(path.c_str());
    }
  }
  const std::string path = temp_path("scalar.npy");
  io::write_npy(path, dtype::i32, v.data(), {});
  const io::loaded_array a = io::read_npy(path);
  EXPECT_TRUE(a.shape.empty());
  EXPECT_EQ(a.count, 1u);
  std::remove(path.c_str());
  EXPECT_NE(error_of([&] { io::make_npy(dtype::bf16, v.data(), std::vector<std::uint64_t>{1}); }).find("bf16 has no numpy dtype"),
            std::string::npos);
  EXPECT_NE(error_of([&] { io::write_npy("/nonexistent-dir/x.npy", dtype::i32, v.data(), {1}); }).find("cannot write"),
            std::string::npos);
}

// A (3, 4, 5) array in C and in Fortran order, reduced along each axis and pairs of adjacent
// axes with sum and argmax, written to a .npy and read back against the reference.
TEST(CliAxisGpu, ReduceAlongAxesToNpy) {
  TALLY_REQUIRE_GPU();
  const std::vector<std::uint64_t> shape{3, 4, 5};
  std::vector<std::int32_t> x(60);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<std::int32_t>((i * 37 + 11) % 23) - 11;
  for (bool fortran : {false, true}) {
    // Element (i, j, k) lives at i*20 + j*5 + k in C order, i + 3j + 12k in Fortran order.
    auto at = [&](std::uint64_t i, std::uint64_t j, std::uint64_t k) {
      return x[fortran ? i + 3 * j + 12 * k : i * 20 + j * 5 + k];
    };
    io::loaded_array a{dtype::i32, 60, {}, shape, fortran};
    a.bytes.resize(240);
    std::memcpy(a.bytes.data(), x.data(), 240);
    for (const std::vector<int>& axes : {std::vector<int>{0}, {1}, {2}, {0, 1}, {1, 2}}) {
      for (op o : {op::sum, op::argmax}) {
        const std::string path = temp_path("out.npy");
        cli::reduce_along_axes(a, "x.npy", o, {}, axes, {path, false, true});
        const io::loaded_array r = io::read_npy(path);
        std::remove(path.c_str());
        const cli::axis_plan p = cli::plan_axes(shape, fortran, axes);
        ASSERT_EQ(r.shape, p.out_shape);
        EXPECT_EQ(r.fortran_order, fortran);
        EXPECT_EQ(r.type, o == op::sum ? result_dtype(dtype::i32, op::sum) : dtype::i64);
        // The reference: for every kept index, walk the reduced axes in memory order.
        const int lo = std::min(axes.front(), axes.back()), hi = std::max(axes.front(), axes.back());
        std::uint64_t idx[3];
        std::uint64_t checked = 0;
        for (idx[0] = 0; idx[0] < 3; ++idx[0])
          for (idx[1] = 0; idx[1] < 4; ++idx[1])
            for (idx[2] = 0; idx[2] < 5; ++idx[2]) {
              bool first = true;  // visit each kept index once: reduced coordinates all zero
              for (int d = lo; d <= hi; ++d) first = first && idx[d] == 0;
              if (!first) continue;
              // Reduced positions in memory order (C: last axis fastest; Fortran: first fastest).
              std::vector<std::int64_t> vals;
              std::uint64_t rc[3] = {idx[0], idx[1], idx[2]};
              const std::uint64_t n_lo = shape[lo], n_hi = shape[hi];
              const std::uint64_t total = lo == hi ? n_lo : n_lo * n_hi;
              for (std::uint64_t t = 0; t < total; ++t) {
                if (lo == hi) rc[lo] = t;
                else if (!fortran) rc[lo] = t / n_hi, rc[hi] = t % n_hi;
                else rc[lo] = t % n_lo, rc[hi] = t / n_lo;
                vals.push_back(at(rc[0], rc[1], rc[2]));
              }
              std::int64_t want = 0, best = 0;
              for (std::size_t t = 0; t < vals.size(); ++t) {
                want += vals[t];
                if (vals[t] > vals[best]) best = static_cast<std::int64_t>(t);
              }
              if (o == op::argmax) want = best;
              // The result's position: the kept coordinates in the output's memory order.
              std::uint64_t pos = 0, mul = 1;
              std::vector<std::uint64_t> kc, kd;
              for (int d = 0; d < 3; ++d)
                if (d < lo || d > hi) kc.push_back(idx[d]), kd.push_back(shape[d]);
              if (!fortran)
                for (std::size_t q = kc.size(); q-- > 0;) pos += kc[q] * mul, mul *= kd[q];
              else
                for (std::size_t q = 0; q < kc.size(); ++q) pos += kc[q] * mul, mul *= kd[q];
              std::int64_t got = 0;
              if (r.type == dtype::i64) std::memcpy(&got, r.bytes.data() + 8 * pos, 8);
              else {
                std::int32_t g32 = 0;
                std::memcpy(&g32, r.bytes.data() + 4 * pos, 4);
                got = g32;
              }
              EXPECT_EQ(got, want) << "axes " << axes.front() << (axes.size() > 1 ? "+" : "") << " fortran "
                                   << fortran << " " << to_string(o) << " at " << idx[0] << "," << idx[1] << ","
                                   << idx[2];
              ++checked;
            }
        EXPECT_EQ(checked, p.results);
      }
    }
  }
}

}  // namespace
}  // namespace tally::test
