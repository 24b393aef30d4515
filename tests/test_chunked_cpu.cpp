// The chunked layer's host-side fold (src/chunked/combine): partials written as the core writes
// them, folded in piece order, against independent references. No GPU needed.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "chunked/combine.hpp"
#include "chunked/staging.hpp"
#include "core/api_internal.hpp"
#include "core/exact.cuh"
#include "numerics_reference.hpp"
#include "support.hpp"

namespace tally::test {
namespace {

using chunked::combiner;
using chunked::spec;
using chunked::what;

// The bytes the core writes for a result value (as encode_result, checked against decode below).
std::vector<unsigned char> partial(const spec& s, const value& v) {
  std::vector<unsigned char> b(48);
  b.resize(chunked::encode_result(s, v, b.data()));
  return b;
}

value f32(double x) {
  value v;
  v.type = dtype::f32;
  v.f = static_cast<double>(static_cast<float>(x));
  return v;
}

TEST(ChunkedCpu, EncodedResultsDecodeBack) {
  for (const auto& [t, o] : {std::pair{dtype::i8, op::min}, {dtype::u16, op::max}, {dtype::i32, op::sum},
                             {dtype::f32, op::argmax}, {dtype::f64, op::sum}, {dtype::b8, op::all}}) {
    const spec s{what::reduce, t, o, {}};
    value v = identity(t, o);
    if (o == op::argmax) v.f = -2.5, v.index = 77;
    if (o == op::sum && t == dtype::i32) v.i = -123456789012;
    const std::vector<unsigned char> b = partial(s, v);
    EXPECT_TRUE(core::decode_value(t, o, b.data()) == v) << to_string(t) << " " << to_string(o);
  }
}

TEST(ChunkedCpu, ArgmaxFoldsIndicesTiesAndNans) {
  const spec s{what::reduce, dtype::f32, op::argmax, {}};
  combiner c(s);
  auto piece = [&](double x, std::int64_t i, std::uint64_t first) {
    value v = f32(x);
    v.index = i;
    c.fold(partial(s, v).data(), first, 100);
  };
  piece(3, 5, 0);
  piece(7, 2, 100);   // global 102
  piece(7, 0, 200);   // a tie: the first (102) stays
  piece(1, -1, 300);  // an empty piece
  value r = c.result(nullptr, 400);
  EXPECT_EQ(r.index, 102);
  EXPECT_EQ(r.as_double(), 7.0);
  piece(NAN, 9, 400);   // the first NaN wins under propagation
  piece(NAN, 1, 500);
  piece(99, 3, 600);
  r = c.result(nullptr, 700);
  EXPECT_EQ(r.index, 409);
  EXPECT_TRUE(std::isnan(r.as_double()));
  combiner e(s);
  EXPECT_EQ(e.result(nullptr, 0).index, -1);
}

TEST(ChunkedCpu, MinMaxOrderSignedZerosAndNanPolicies) {
  const spec s{what::reduce, dtype::f32, op::min, {}};
  combiner a(s), b(s);
  a.fold(partial(s, f32(0.0)).data(), 0, 1);
  a.fold(partial(s, f32(-0.0)).data(), 1, 1);
  b.fold(partial(s, f32(-0.0)).data(), 0, 1);
  b.fold(partial(s, f32(0.0)).data(), 1, 1);
  EXPECT_TRUE(std::signbit(a.result(nullptr, 2).as_double()));
  EXPECT_TRUE(std::signbit(b.result(nullptr, 2).as_double()));
  a.fold(partial(s, f32(NAN)).data(), 2, 1);
  a.fold(partial(s, f32(-5)).data(), 3, 1);
  EXPECT_TRUE(std::isnan(a.result(nullptr, 4).as_double()));
  spec si = s;
  si.opt.nan = nan_policy::ignore;
  combiner g(si);
  g.fold(partial(si, f32(NAN)).data(), 0, 1);  // an all-NaN piece
  EXPECT_TRUE(std::isnan(g.result(nullptr, 1).as_double()));
  g.fold(partial(si, f32(4)).data(), 1, 1);
  g.fold(partial(si, f32(NAN)).data(), 2, 1);
  g.fold(partial(si, f32(-1)).data(), 3, 1);
  EXPECT_EQ(g.result(nullptr, 4).as_double(), -1.0);
}

TEST(ChunkedCpu, WideIntegerMeanRecoversTheWrappedHighBits) {
  // Pieces of i64 values near 2^62: each piece's sum wraps modulo 2^64; its mean (rounded, as the
  // core gives it) brings the high bits back.
  const spec s{what::reduce, dtype::i64, op::mean, {}};
  combiner c(s);
  ASSERT_EQ(c.plan().partial_bytes, 16u);
  __int128 total = 0;
  std::uint64_t n = 0;
  for (int k = 0; k < 5; ++k) {
    const std::uint64_t count = 1000 + 37 * k;
    __int128 sum = 0;
    for (std::uint64_t i = 0; i < count; ++i) sum += (std::int64_t(1) << 62) + static_cast<std::int64_t>(i * 977 + k);
    if (k == 3) sum = -sum;  // a negative piece
    const std::uint64_t low = static_cast<std::uint64_t>(sum);
    const double mean = static_cast<double>(sum) / static_cast<double>(count);
    unsigned char b[16];
    std::memcpy(b, &low, 8);
    std::memcpy(b + 8, &mean, 8);
    c.fold(b, n, count);
    total += sum;
    n += count;
  }
  const double want = static_cast<double>(total) / static_cast<double>(n);
  EXPECT_NEAR(c.result(nullptr, n).as_double(), want, 1e-15 * std::fabs(want));
}

TEST(ChunkedCpu, Norm2OfHugePiecesDoesNotOverflow) {
  const spec s{what::reduce, dtype::f64, op::norm2, {}};
  combiner c(s);
  value v;
  v.type = dtype::f64;
  for (double x : {3e300, 0.0, 4e300}) {
    v.f = x;
    c.fold(partial(s, v).data(), 0, 1);
  }
  EXPECT_NEAR(c.result(nullptr, 3).as_double(), 5e300, 1e286);
}

TEST(ChunkedCpu, StatsMergeMatchesATwoPassReference) {
  const spec s{what::stats, dtype::f64, op::sum, {}};
  combiner c(s);
  const std::vector<double> x = random_vector<double>(10000, test_seed() + 41, 1e6, 1e6 + 1);
  std::uint64_t first = 0;
  for (std::uint64_t len : {1u, 999u, 0u, 5000u, 4000u}) {
    stats p;
    p.count = len;
    long double sum = 0;
    p.min = INFINITY, p.max = -INFINITY;
    for (std::uint64_t i = first; i < first + len; ++i) sum += x[i], p.min = std::min(p.min, x[i]), p.max = std::max(p.max, x[i]);
    p.sum = static_cast<double>(sum);
    p.mean = len ? p.sum / len : NAN;
    long double m2 = 0;
    for (std::uint64_t i = first; i < first + len; ++i) m2 += (x[i] - p.mean) * (x[i] - p.mean);
    p.m2 = static_cast<double>(m2);
    if (len == 0) p.min = p.max = NAN;
    unsigned char b[sizeof(stats)];
    std::memcpy(b, &p, sizeof p);
    c.fold(b, first, len);
    first += len;
  }
  long double sum = 0;
  for (double v : x) sum += v;
  const long double mean = sum / x.size();
  long double m2 = 0;
  for (double v : x) m2 += (v - mean) * (v - mean);
  const stats r = c.stats_result();
  EXPECT_EQ(r.count, x.size());
  EXPECT_NEAR(r.mean, static_cast<double>(mean), 1e-9);
  EXPECT_NEAR(r.m2, static_cast<double>(m2), 1e-9 * static_cast<double>(m2));
  EXPECT_EQ(r.min, *std::min_element(x.begin(), x.end()));
}

// A chunk with an infinite element, or chunks whose sums overflow together: m2 is NaN, the
// device's rule (docs/numerics.md), whatever Chan's update makes of the infinite means.
TEST(ChunkedCpu, StatsOfANonFiniteSumHaveNoM2) {
  const spec s{what::stats, dtype::f64, op::sum, {}};
  auto rec = [](std::uint64_t n, double sum, double mn, double mx, double m2) {
    stats p;
    p.count = n, p.sum = sum, p.min = mn, p.max = mx, p.mean = sum / n, p.m2 = m2;
    std::vector<unsigned char> b(sizeof p);
    std::memcpy(b.data(), &p, sizeof p);
    return b;
  };
  combiner inf(s);  // the infinite chunk first (taken whole), its m2 inf as a lane's could be
  inf.fold(rec(10, HUGE_VAL, 0, HUGE_VAL, HUGE_VAL).data(), 0, 10);
  inf.fold(rec(10, 5.0, -1, 1, 3.0).data(), 10, 10);
  inf.fold(rec(10, -2.0, -1, 1, 2.0).data(), 20, 10);
  const stats a = inf.stats_result();
  EXPECT_EQ(a.count, 30u);
  EXPECT_EQ(a.sum, HUGE_VAL);
  EXPECT_EQ(a.max, HUGE_VAL);
  EXPECT_EQ(a.min, -1.0);
  EXPECT_TRUE(std::isnan(a.m2));
  combiner over(s);  // two finite chunks, each 1e308 x 1, whose sum overflows
  over.fold(rec(1, 1e308, 1e308, 1e308, 0).data(), 0, 1);
  over.fold(rec(1, 1e308, 1e308, 1e308, 0).data(), 1, 1);
  const stats o = over.stats_result();
  EXPECT_EQ(o.sum, HUGE_VAL);
  EXPECT_TRUE(std::isnan(o.m2));
  combiner fine(s);  // finite: Chan's update as before
  fine.fold(rec(2, 2.0, 0, 2, 2.0).data(), 0, 2);
  fine.fold(rec(2, 6.0, 2, 4, 2.0).data(), 2, 2);
  EXPECT_DOUBLE_EQ(fine.stats_result().m2, 8.0);  // {0, 2} and {2, 4}: mean 2, m2 4 + 0 + 0 + 4
}

TEST(ChunkedCpu, ExactCarryRoundsOnceLikeTheReference) {
  // A carry as the device leaves it: normalised words of everything added, and the flags.
  const std::vector<double> x = {1e300, 3.0, -1e300, 1e-300, 0.1, -0.1, 2.0 / 3.0};
  std::vector<long long> carry(core::exact::kWords + 1, 0);
  ref::exact_accumulator want;
  for (double v : x) core::exact::add(carry.data(), v), want.add(v);
  core::exact::normalize(carry.data());
  for (dtype t : {dtype::f32, dtype::f64}) {
    spec s{what::reduce, t, op::sum, {}};
    s.opt.mode = accuracy::exact;
    combiner c(s);
    EXPECT_TRUE(c.plan().exact);
    const double r = c.result(carry.data(), x.size()).as_double();
    EXPECT_EQ(r, t == dtype::f32 ? double(want.to_float()) : want.to_double()) << to_string(t);
  }
  carry[core::exact::kWords] = core::exact::kPosInf | core::exact::kNegInf;
  spec s{what::dot, dtype::f64, op::sum, {}};
  s.opt.mode = accuracy::exact;
  EXPECT_TRUE(std::isnan(combiner(s).result(carry.data(), 1).as_double()));
}

TEST(ChunkedCpu, RefusedCombinationsNameTheReason) {
  spec s{what::reduce, dtype::i32, op::sum, {}};
  s.opt.mode = accuracy::exact;
  EXPECT_NE(error_of([&] { combiner c(s); }).find("reducer"), std::string::npos);
  spec d{what::dot, dtype::i32, op::sum, {}};
  EXPECT_NE(error_of([&] { combiner c(d); }).find("dot"), std::string::npos);
  spec st{what::stats, dtype::b8, op::sum, {}};
  EXPECT_NE(error_of([&] { combiner c(st); }).find("b8"), std::string::npos);
}

}  // namespace
}  // namespace tally::test

namespace tally::test {
namespace {
// The staging's chunks: the shape's 8 MiB for large feeds, halved (down to 1 MiB) while a feed
// holds fewer than 32 of them, from the feed's size alone; TALLY_CHUNK_MIB's size for every feed.
TEST(ChunkedCpu, ChunkSizeFollowsTheFeedNotTheHost) {
  chunked::staging_shape s;
  s.chunk_bytes = std::size_t(8) << 20;
  const std::uint64_t mib = std::uint64_t(1) << 20;
  EXPECT_EQ(chunked::chunk_elements(s, (std::uint64_t(4) << 30) / 4, 4), 8 * mib / 4);  // 4 GiB
  EXPECT_EQ(chunked::chunk_elements(s, 256 * mib / 4, 4), 8 * mib / 4);
  EXPECT_EQ(chunked::chunk_elements(s, 256 * mib / 4 - 1, 4), 4 * mib / 4);
  EXPECT_EQ(chunked::chunk_elements(s, 64 * mib / 8, 8), 2 * mib / 8);  // the reducer's 64 MiB feeds
  EXPECT_EQ(chunked::chunk_elements(s, 1000, 4), mib / 4);
  EXPECT_EQ(chunked::chunk_elements(s, 0, 2), mib / 2);
  for (int threads : {1, 12, 64}) {  // the threads never enter
    s.threads = threads;
    EXPECT_EQ(chunked::chunk_elements(s, 100 * mib / 4, 4), 2 * mib / 4);
  }
  s.chunk_forced = true;  // TALLY_CHUNK_MIB=8
  EXPECT_EQ(chunked::chunk_elements(s, 1000, 4), 8 * mib / 4);
}
}  // namespace
}  // namespace tally::test
