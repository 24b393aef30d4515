// Every op x dtype against the CPU reference, at the sizes where the kernel changes its plan.
// The original ops (kOps) on the integer, f32 and f64 dtypes; the half types and the ops added with
// them (argmin/argmax, sum_sq, norm2, mean) are covered by test_numerics_gpu.cpp.
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <set>
#include <sstream>

#include "core/context.hpp"
#include "core/tuning.hpp"
#include "support.hpp"

namespace tally::test {
namespace {

constexpr op kOps[] = {op::sum, op::prod, op::min, op::max, op::bit_and,
                       op::bit_or, op::bit_xor, op::all, op::any};

// Sizes where the plan changes: tiny, warp and block edges, one-block limit, grid capacity.
template <class T>
std::vector<std::uint64_t> plan_edges(dtype t) {
  std::set<std::uint64_t> s = {0, 1, 2, 3, 31, 32, 33, 127, 128, 129, 1023, 1024, 1025};
  const core::grid_edges e = core::plan_edges(t, op::sum);
  for (std::uint64_t b : {e.single_block_max, e.single_block_max * 2}) s.insert({b - 1, b, b + 1});
  // Grid capacity: one block per SM is reached at `one_per_sm`; the full resident grid is
  // allowed from `full_grid` on.
  s.insert({e.one_per_sm - 1, e.one_per_sm, e.one_per_sm + 1});
  if (!small_only()) s.insert({e.full_grid - 1, e.full_grid, e.full_grid + 1});
  if (!small_only()) s.insert({(1u << 24) - 1, 1u << 24, (1u << 24) + 1});
  std::mt19937_64 rng(test_seed());
  for (int k = 0; k < 3; ++k) s.insert(rng() % (small_only() ? 70000 : 3000000));
  std::vector<std::uint64_t> out;
  for (auto n : s)
    if (!small_only() || n <= (1u << 16)) out.push_back(n);
  return out;
}

template <class T>
std::string where(dtype t, op o, std::uint64_t n, std::uint64_t offset, const char* data) {
  std::ostringstream m;
  m << to_string(o) << " " << to_string(t) << " n=" << n << " offset=" << offset << " data=" << data
    << " seed=" << test_seed() << " grid=" << core::plan(t, o, n).blocks;
  return m.str();
}

// Reduces h[0..n) (placed `offset` elements into a device buffer) with every op of dtype t.
// exact_floats: the data's every partial sum is exact, so float results must equal the exact sum.
template <class T>
void check_ops(dtype t, const std::vector<T>& h, std::uint64_t offset, const char* data,
               std::initializer_list<op> ops = {}, bool exact_floats = false) {
  const std::uint64_t n = h.size();
  device_buffer d((n + offset) * sizeof(T) + 16);
  if (n) d.upload(h.data(), n * sizeof(T), offset * sizeof(T));
  const T* d_in = static_cast<const T*>(d.get()) + offset;
  std::vector<op> list(ops);
  if (list.empty()) list.assign(std::begin(kOps), std::end(kOps));
  for (op o : list) {
    if (!supports(t, o)) continue;
    const std::string ctx = where<T>(t, o, n, offset, data);
    const value v = reduce_value(d_in, n, t, o);
    ASSERT_EQ(v.type, result_dtype(t, o)) << ctx;
    const reference r = compute_reference(h.data(), n, o);
    if (!r.is_float) {
      ASSERT_EQ(value_bits(v), r.bits) << ctx;
      continue;
    }
    if (r.nan) {
      ASSERT_TRUE(std::isnan(v.f)) << ctx;
      continue;
    }
    if (o == op::sum && exact_floats) {
      ASSERT_EQ(static_cast<long double>(v.f), r.exact) << ctx << " got " << v.to_string();
    } else if (o == op::sum) {
      // Tree of height h: longest chain of adds any element passes through (per-thread
      // sequence, vector fold, warp and block trees, partials) bounded generously but finitely.
      const auto plan = core::plan(t, o, n);
      const long double per_thread = std::ceil(static_cast<long double>(n) / (plan.blocks * plan.block));
      const long double height = per_thread + 16 + 2 * 11 + 13;
      const long double u = sizeof(T) == 4 ? 0x1p-24L : 0x1p-53L;
      const long double bound = gamma_h(height, u) * r.abs_sum + ulp_of<T>(r.exact);
      ASSERT_LE(std::fabs(static_cast<long double>(v.f) - r.exact), bound) << ctx << " got " << v.to_string();
    } else {
      // min/max are exact; prod data is chosen so that its product is exact.
      ASSERT_EQ(static_cast<long double>(v.f), r.exact) << ctx << " got " << v.to_string();
    }
  }
}

// Products that stay exact and in range: +-1 with as many 2s (3s for integers) as halves.
template <class T>
std::vector<T> unit_data(std::uint64_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<T> v(n);
  for (std::uint64_t i = 0; i < n; ++i) {
    const bool neg = std::is_signed_v<T> && (rng() & 1);
    v[i] = static_cast<T>(neg ? -1 : 1);
  }
  for (std::uint64_t k = 0; k + 1 < n && k < 20; k += 2) {
    if constexpr (std::is_floating_point_v<T>) {
      v[rng() % n] = T(2);
      v[rng() % n] = T(0.5);
    } else {
      v[rng() % n] = T(3);
    }
  }
  return v;
}

template <class T>
void run_dtype(dtype t) {
  constexpr bool is_float = std::is_floating_point_v<T>;
  const double lo = is_float ? -1.0 : double(std::numeric_limits<T>::lowest());
  const double hi = is_float ? 1.0 : double(std::numeric_limits<T>::max());
  std::uint64_t seed = test_seed();
  {
    const auto probe = random_vector<T>(64, seed, lo, hi);
    ASSERT_GT(std::set<T>(probe.begin(), probe.end()).size(), 32u) << "random data generator is broken";
  }
  for (std::uint64_t n : plan_edges<T>(t)) {
    check_ops<T>(t, random_vector<T>(n, ++seed, lo, hi), 0, "random",
                 {op::sum, op::min, op::max, op::bit_and, op::bit_or, op::bit_xor, op::any});
    check_ops<T>(t, unit_data<T>(n, ++seed), 0, "unit", {op::prod, op::all});
    // all/any with exactly one zero, and with exactly one non-zero.
    if (n) {
      std::vector<T> ones(n, T(1)), zeros(n, T(0));
      ones[seed % n] = T(0);
      zeros[(seed * 7) % n] = T(1);
      check_ops<T>(t, ones, 0, "one-zero", {op::all, op::any, op::min, op::prod});
      check_ops<T>(t, zeros, 0, "one-nonzero", {op::all, op::any, op::max, op::bit_or});
    }
    if constexpr (is_float) {
      // Small integers as floats: every partial sum is exact, so the result must be bitwise.
      const double r = n <= (1u << 20) ? 8 : 1;
      std::vector<T> ints = random_vector<T>(n, ++seed, 0, 1);
      std::mt19937_64 rng(seed);
      for (auto& x : ints) x = static_cast<T>(static_cast<long long>(rng() % (2 * (long long)r + 1)) - (long long)r);
      check_ops<T>(t, ints, 0, "small-ints", {op::sum}, true);
    }
  }
}

TEST(ReduceGpu, Int8) { TALLY_REQUIRE_GPU(); run_dtype<std::int8_t>(dtype::i8); }
TEST(ReduceGpu, UInt8) { TALLY_REQUIRE_GPU(); run_dtype<std::uint8_t>(dtype::u8); }
TEST(ReduceGpu, Int16) { TALLY_REQUIRE_GPU(); run_dtype<std::int16_t>(dtype::i16); }
TEST(ReduceGpu, UInt16) { TALLY_REQUIRE_GPU(); run_dtype<std::uint16_t>(dtype::u16); }
TEST(ReduceGpu, Int32) { TALLY_REQUIRE_GPU(); run_dtype<std::int32_t>(dtype::i32); }
TEST(ReduceGpu, UInt32) { TALLY_REQUIRE_GPU(); run_dtype<std::uint32_t>(dtype::u32); }
TEST(ReduceGpu, Int64) { TALLY_REQUIRE_GPU(); run_dtype<std::int64_t>(dtype::i64); }
TEST(ReduceGpu, UInt64) { TALLY_REQUIRE_GPU(); run_dtype<std::uint64_t>(dtype::u64); }
TEST(ReduceGpu, Float32) { TALLY_REQUIRE_GPU(); run_dtype<float>(dtype::f32); }
TEST(ReduceGpu, Float64) { TALLY_REQUIRE_GPU(); run_dtype<double>(dtype::f64); }

TEST(ReduceGpu, Bool8AllAny) {
  TALLY_REQUIRE_GPU();
  for (std::uint64_t n : {1ull, 33ull, 1025ull, 70001ull}) {
    std::vector<std::uint8_t> v(n, 1);
    check_ops<std::uint8_t>(dtype::b8, v, 0, "all-true");
    v[n / 2] = 0;
    check_ops<std::uint8_t>(dtype::b8, v, 0, "one-false");
    std::fill(v.begin(), v.end(), 0);
    check_ops<std::uint8_t>(dtype::b8, v, 0, "all-false");
    v[n - 1] = 2;  // any non-zero byte is true
    check_ops<std::uint8_t>(dtype::b8, v, 0, "last-true");
  }
}

// Input pointers 1, 2 and 3 elements past an aligned address: scalar head, vector body, tail.
template <class T>
void run_offsets(dtype t) {
  const double lo = std::is_floating_point_v<T> ? -1.0 : -100.0;
  for (std::uint64_t offset : {1, 2, 3})
    for (std::uint64_t n : {1ull, 5ull, 17ull, 33ull, 1025ull, 70001ull, 1000003ull}) {
      if (small_only() && n > 70001) continue;
      check_ops<T>(t, random_vector<T>(n, test_seed() + n + offset, lo, 100.0), offset, "random",
                   {op::sum, op::min, op::max, op::bit_xor});
    }
}
TEST(ReduceGpu, MisalignedInt8) { TALLY_REQUIRE_GPU(); run_offsets<std::int8_t>(dtype::i8); }
TEST(ReduceGpu, MisalignedInt16) { TALLY_REQUIRE_GPU(); run_offsets<std::int16_t>(dtype::i16); }
TEST(ReduceGpu, MisalignedInt32) { TALLY_REQUIRE_GPU(); run_offsets<std::int32_t>(dtype::i32); }
TEST(ReduceGpu, MisalignedUInt64) { TALLY_REQUIRE_GPU(); run_offsets<std::uint64_t>(dtype::u64); }
TEST(ReduceGpu, MisalignedFloat32) { TALLY_REQUIRE_GPU(); run_offsets<float>(dtype::f32); }
TEST(ReduceGpu, MisalignedFloat64) { TALLY_REQUIRE_GPU(); run_offsets<double>(dtype::f64); }

TEST(ReduceGpu, NaNPropagatesThroughMinMaxAndSum) {
  TALLY_REQUIRE_GPU();
  for (std::uint64_t n : {1ull, 100ull, 100000ull}) {
    for (std::uint64_t pos : {std::uint64_t(0), n / 2, n - 1}) {
      auto v = random_vector<float>(n, pos + 3, -1, 1);
      v[pos] = std::numeric_limits<float>::quiet_NaN();
      check_ops<float>(dtype::f32, v, 0, "nan", {op::min, op::max, op::sum});
      auto w = random_vector<double>(n, pos + 4, -1, 1);
      w[pos] = std::numeric_limits<double>::quiet_NaN();
      check_ops<double>(dtype::f64, w, 0, "nan", {op::min, op::max, op::sum});
    }
  }
}

// Every dtype and every op (argmin/argmax included: index -1), through the host convenience.
TEST(ReduceGpu, EmptyInputGivesIdentity) {
  TALLY_REQUIRE_GPU();
  device_buffer out(16);
  for (int ti = 0; ti < kDtypeCount; ++ti)
    for (int oi = 0; oi < kOpCount; ++oi) {
      const dtype t = static_cast<dtype>(ti);
      const op o = static_cast<op>(oi);
      if (!supports(t, o)) continue;
      const value v = reduce_value(nullptr, 0, t, o);  // null input is fine when n = 0
      const value id = identity(t, o);
      const bool float_result = id.type == dtype::f32 || id.type == dtype::f64;
      if (float_result && std::isnan(id.f)) {  // mean of nothing: any NaN (payloads differ)
        EXPECT_EQ(v.type, id.type) << to_string(o) << " " << to_string(t);
        EXPECT_TRUE(std::isnan(v.f)) << to_string(o) << " " << to_string(t) << " got " << v.to_string();
        EXPECT_EQ(v.index, id.index) << to_string(o) << " " << to_string(t);
        continue;
      }
      EXPECT_EQ(v, id) << to_string(o) << " " << to_string(t) << " got " << v.to_string();
    }
}

}  // namespace
}  // namespace tally::test
