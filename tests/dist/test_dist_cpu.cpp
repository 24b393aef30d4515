// The sharded reductions' records without a GPU: every rank's arguments checked (the same message
// on every rank), and the partials combined in the shards' order (src/dist/record.hpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "chunked/accumulation.hpp"
#include "core/exact.cuh"
#include "dist/device_exchange.hpp"
#include "dist/record.hpp"
#include "support.hpp"

namespace tally::test {
namespace {

using dist::header;

chunked::spec reduce_spec(dtype t, op o, accuracy m = accuracy::fast) {
  chunked::spec s{chunked::what::reduce, t, o, {}};
  s.opt.mode = m;
  return s;
}

// Records of `size` ranks for spec s, shard k = (n[k], first[k]).
struct records {
  std::vector<unsigned char> bytes;
  int size;
  records(const chunked::spec& s, const std::vector<std::uint64_t>& n, const std::vector<std::uint64_t>& first)
      : bytes(dist::record_bytes() * n.size()), size(static_cast<int>(n.size())) {
    for (int k = 0; k < size; ++k) {
      const header h = dist::make_header(s, k, size, n[k], first[k], "");
      std::memcpy(at(k), &h, sizeof h);
    }
  }
  unsigned char* at(int k) { return bytes.data() + static_cast<std::size_t>(k) * dist::record_bytes(); }
  header& head(int k) { return *reinterpret_cast<header*>(at(k)); }
  std::vector<header> headers() {
    std::vector<header> hs;
    for (int k = 0; k < size; ++k) hs.push_back(head(k));
    return hs;
  }
  void partial(const chunked::spec& s, int k, const value& v) {
    chunked::encode_result(s, v, at(k) + dist::kPartialOffset);
  }
  long long* carry(int k) { return reinterpret_cast<long long*>(at(k) + dist::kCarryOffset); }
};

TEST(DistCpu, RecordsHoldTheHeaderPartialAndExactAccumulator) {
  EXPECT_GE(dist::kPartialBytes, chunked::accumulation_memory::kMaxPartial);
  EXPECT_GE(dist::record_bytes(), dist::kCarryOffset + chunked::carry_bytes());
  EXPECT_EQ(dist::record_bytes() % 256, 0u);
}

TEST(DistCpu, EveryRankOfAGoodCallAgrees) {
  const auto s = reduce_spec(dtype::f32, op::sum);
  records r(s, {100, 0, 50}, {0, 7, 100});  // an empty shard may say any first element
  EXPECT_EQ(dist::check_headers(r.headers(), s), "");
}

TEST(DistCpu, ARankThatFailedIsNamedOnEveryRank) {
  const auto s = reduce_spec(dtype::f32, op::max);
  records r(s, {10, 10}, {0, 10});
  r.head(1) = dist::make_header(s, 1, 2, 10, 10, "tally::dist::reduce: the shard is a host pointer");
  EXPECT_EQ(dist::check_headers(r.headers(), s), "rank 1 failed: tally::dist::reduce: the shard is a host pointer");
}

TEST(DistCpu, RanksThatDisagreeAreRefused) {
  const auto s = reduce_spec(dtype::f32, op::sum);
  records r(s, {10, 10}, {0, 10});
  r.head(1) = dist::make_header(reduce_spec(dtype::f64, op::sum), 1, 2, 10, 10, "");
  EXPECT_EQ(dist::check_headers(r.headers(), s),
            "the ranks disagree: rank 0 called reduce(f32, sum, nan propagate, mode fast), rank 1 reduce(f64, sum, nan "
            "propagate, mode fast)");
  r.head(1) = dist::make_header(reduce_spec(dtype::f32, op::sum, accuracy::exact), 1, 2, 10, 10, "");
  EXPECT_NE(dist::check_headers(r.headers(), s).find("mode exact"), std::string::npos);
  // This rank's own call against rank 0's.
  records q(reduce_spec(dtype::f32, op::max), {10, 10}, {0, 10});
  EXPECT_NE(dist::check_headers(q.headers(), s).find("this rank reduce(f32, sum"), std::string::npos);
  // Not a tally record at all (another collective's bytes).
  r.head(1).magic = 0;
  EXPECT_EQ(dist::check_headers(r.headers(), s),
            "rank 1 sent no tally record of this version (it called another collective, or runs another tally)");
}

TEST(DistCpu, ShardsMustTileTheArray) {
  const auto s = reduce_spec(dtype::i32, op::sum);
  records overlap(s, {100, 100}, {0, 50});
  EXPECT_EQ(dist::check_headers(overlap.headers(), s),
            "the shards overlap: rank 1's [50, 150) and rank 0's [0, 100)");
  records gap(s, {100, 100}, {0, 101});
  EXPECT_EQ(dist::check_headers(gap.headers(), s),
            "the shards leave a gap: no rank holds elements [100, 101) (rank 1's shard is [101, 201))");
  records late(s, {100}, {5});
  EXPECT_NE(dist::check_headers(late.headers(), s).find("no rank holds elements [0, 5)"), std::string::npos);
  records reversed(s, {100, 100}, {100, 0});  // rank order need not be array order
  EXPECT_EQ(dist::check_headers(reversed.headers(), s), "");
}

value f32(double x) {
  value v;
  v.type = dtype::f32;
  v.f = x;
  return v;
}

// argmax over shards: global indices (first + the shard's own index), the first on ties whatever
// the rank order; empty shards are skipped.
TEST(DistCpu, ArgmaxGivesTheFirstGlobalIndex) {
  const auto s = reduce_spec(dtype::f32, op::argmax);
  for (bool reversed : {false, true}) {
    // The array: [0, 10) on one rank with its max 5.0 at local 3, [10, 20) on another with 5.0 at
    // local 2, and an empty third rank.
    const std::uint64_t a = reversed ? 1 : 0, b = reversed ? 0 : 1;
    records r(s, {10, 10, 0}, {0, 0, 0});
    r.head(static_cast<int>(a)).first = 0;
    r.head(static_cast<int>(b)).first = 10;
    value pa = f32(5.0), pb = f32(5.0);
    pa.index = 3, pb.index = 2;
    r.partial(s, static_cast<int>(a), pa);
    r.partial(s, static_cast<int>(b), pb);
    ASSERT_EQ(dist::check_headers(r.headers(), s), "");
    const value v = dist::combine(r.bytes.data(), r.size, s);
    EXPECT_EQ(v.index, 3) << reversed;
    EXPECT_EQ(v.f, 5.0);
    // A larger value in the second shard wins with its global index.
    pb.f = 6.0;
    r.partial(s, static_cast<int>(b), pb);
    EXPECT_EQ(dist::combine(r.bytes.data(), r.size, s).index, 12) << reversed;
  }
}

// Integer sums are exact: i32 shards' i64 partials add to the exact total.
TEST(DistCpu, IntegerSumsAreExact) {
  const auto s = reduce_spec(dtype::i32, op::sum);
  records r(s, {3, 4, 5}, {0, 3, 7});
  const std::int64_t parts[] = {(std::int64_t(1) << 40) + 7, -(std::int64_t(1) << 39), 123456789};
  for (int k = 0; k < 3; ++k) {
    value v;
    v.type = dtype::i64;
    v.i = parts[k];
    r.partial(s, k, v);
  }
  EXPECT_EQ(dist::combine(r.bytes.data(), r.size, s).i, parts[0] + parts[1] + parts[2]);
}

// The exact mode: the ranks' exact accumulators add without rounding, so any split of the same
// data over any number of ranks gives the same bits, the exact sum rounded once. Data: doubles
// whose exact sum is known (pairs x, -x cancel, leaving sum of small integers) plus terms that
// a float sum would lose.
TEST(DistCpu, ExactSumIsTheSameForAnySplit) {
  std::mt19937_64 rng(1234);
  std::uniform_real_distribution<double> u(-1e300, 1e300);
  std::vector<double> xs;
  for (int i = 0; i < 500; ++i) {
    const double x = u(rng);
    xs.push_back(x);
    xs.push_back(1.0 + i % 7);
    xs.push_back(-x);
  }
  xs.push_back(std::ldexp(1.0, -1000));  // below the sum's last bit: decides nothing, kept exactly
  std::shuffle(xs.begin(), xs.end(), rng);
  double known = 0;
  for (int i = 0; i < 500; ++i) known += 1.0 + i % 7;  // small integers: exact in double
  const auto s = reduce_spec(dtype::f64, op::sum, accuracy::exact);
  for (int ranks : {1, 2, 3, 7}) {
    std::vector<std::uint64_t> n(ranks), first(ranks);
    std::uint64_t at = 0;
    for (int k = 0; k < ranks; ++k) {
      n[k] = (xs.size() * (k + 1)) / ranks - at;
      first[k] = at;
      at += n[k];
    }
    records r(s, n, first);
    for (int k = 0; k < ranks; ++k) {
      std::memset(r.carry(k), 0, chunked::carry_bytes());
      for (std::uint64_t i = first[k]; i < first[k] + n[k]; ++i) core::exact::add(r.carry(k), xs[i]);
    }
    ASSERT_EQ(dist::check_headers(r.headers(), s), "");
    const value v = dist::combine(r.bytes.data(), r.size, s);
    // known + 2^-1000 rounds to known (ties cannot occur: 2^-1000 is far below half an ulp).
    EXPECT_EQ(v.f, known) << ranks << " ranks";
  }
}

// The stream-ordered calls' combine (a host function on the stream): the call read from the
// rank's own record, the result written as the core writes it; on a failure the message names the
// call and the rank, and the result is the documented failure value.
TEST(DistCpu, TheStreamOrderedCombineWritesTheResultOrTheFailure) {
  unsigned char out[dist::kResultBytes];
  {  // i32 argmax over two shards: the global index and the value, as tally::reduce writes them.
    const auto s = reduce_spec(dtype::i32, op::argmax);
    records r(s, {10, 10}, {0, 10});
    value a, b;
    a.type = b.type = dtype::i32;
    a.i = 7, a.index = 4;
    b.i = 9, b.index = 1;
    r.partial(s, 0, a);
    r.partial(s, 1, b);
    for (int rank : {0, 1}) {
      ASSERT_EQ(dist::combine_into(r.bytes.data(), r.size, rank, out), "");
      std::int64_t index = 0;
      std::int32_t v = 0;
      std::memcpy(&index, out, 8);
      std::memcpy(&v, out + 8, 4);
      EXPECT_EQ(index, 11);
      EXPECT_EQ(v, 9);
    }
  }
  {  // f64 exact sum: the carries added and rounded once, the same bits as combine().
    const auto s = reduce_spec(dtype::f64, op::sum, accuracy::exact);
    records r(s, {2, 1}, {0, 2});
    for (int k = 0; k < 2; ++k) std::memset(r.carry(k), 0, chunked::carry_bytes());
    core::exact::add(r.carry(0), 1e300);
    core::exact::add(r.carry(0), 3.0);
    core::exact::add(r.carry(1), -1e300);
    ASSERT_EQ(dist::combine_into(r.bytes.data(), r.size, 1, out), "");
    double got = 0;
    std::memcpy(&got, out, 8);
    EXPECT_EQ(got, 3.0);
    EXPECT_EQ(got, dist::combine(r.bytes.data(), r.size, s).f);
  }
  {  // stats: one tally::stats, the fold of the shards' records.
    chunked::spec s{chunked::what::stats, dtype::f32, op::sum, {}};
    records r(s, {2, 2}, {0, 2});
    const stats a{2, 3.0, 1.0, 2.0, 1.5, 0.5}, b{2, 7.0, 3.0, 4.0, 3.5, 0.5};
    std::memcpy(r.at(0) + dist::kPartialOffset, &a, sizeof a);
    std::memcpy(r.at(1) + dist::kPartialOffset, &b, sizeof b);
    ASSERT_EQ(dist::combine_into(r.bytes.data(), r.size, 0, out), "");
    stats st;
    std::memcpy(&st, out, sizeof st);
    EXPECT_EQ(st.count, 4u);
    EXPECT_EQ(st.sum, 10.0);
    EXPECT_EQ(st.min, 1.0);
    EXPECT_EQ(st.max, 4.0);
    EXPECT_EQ(st.mean, 2.5);
    EXPECT_EQ(st.m2, 5.0);  // 1, 2, 3, 4 about 2.5
  }
  {  // ranks that disagree: every rank's message, NaN for a float result
    const auto s = reduce_spec(dtype::f32, op::sum);
    records r(s, {10, 10}, {0, 10});
    r.head(1) = dist::make_header(reduce_spec(dtype::f32, op::max), 1, 2, 10, 10, "");
    for (int rank : {0, 1}) {
      const std::string e = dist::combine_into(r.bytes.data(), r.size, rank, out);
      EXPECT_EQ(e.rfind("tally::dist::reduce_async on rank " + std::to_string(rank) + " of 2: the ranks disagree", 0), 0u) << e;
      float f = 0;
      std::memcpy(&f, out, 4);
      EXPECT_TRUE(std::isnan(f));
    }
  }
  {  // a failed rank, argmin over integers: index -1 and zero
    const auto s = reduce_spec(dtype::i64, op::argmin);
    records r(s, {10, 10}, {0, 10});
    r.head(0) = dist::make_header(s, 0, 2, 10, 0, "the shard is a host pointer");
    const std::string e = dist::combine_into(r.bytes.data(), r.size, 1, out);
    EXPECT_NE(e.find("rank 0 failed: the shard is a host pointer"), std::string::npos) << e;
    std::int64_t index = 0, v = 1;
    std::memcpy(&index, out, 8);
    std::memcpy(&v, out + 8, 8);
    EXPECT_EQ(index, -1);
    EXPECT_EQ(v, 0);
  }
  {  // a gap between the shards, stats: count 0 and NaN fields
    chunked::spec s{chunked::what::stats, dtype::f64, op::sum, {}};
    records r(s, {10, 10}, {0, 11});
    const std::string e = dist::combine_into(r.bytes.data(), r.size, 0, out);
    EXPECT_NE(e.find("tally::dist::reduce_stats_async on rank 0 of 2: the shards leave a gap"), std::string::npos) << e;
    stats st;
    std::memcpy(&st, out, sizeof st);
    EXPECT_EQ(st.count, 0u);
    EXPECT_TRUE(std::isnan(st.mean) && std::isnan(st.m2) && std::isnan(st.sum));
  }
  {  // a record that is not tally's (another collective): said, not read as a call
    const auto s = reduce_spec(dtype::f32, op::sum);
    records r(s, {10, 10}, {0, 10});
    std::memset(r.at(1), 0, sizeof(header));
    EXPECT_NE(dist::combine_into(r.bytes.data(), r.size, 1, out).find("this rank's own record is malformed"), std::string::npos);
    EXPECT_NE(dist::combine_into(r.bytes.data(), r.size, 0, out).find("rank 1 sent no tally record"), std::string::npos);
  }
}

// The device exchange's flags (device_exchange.hpp): never 0 (the zeroed windows' and host words'
// first value), and each differs from the two before it across the 32-bit wrap, while the windows'
// half (the call's number % 2) alternates.
TEST(DistCpu, TheDeviceExchangeFlagsSkipZeroAndNeverRepeatTwoCallsApart) {
  for (unsigned int start : {0u, 1u, 0xFFFFFFF0u}) {
    unsigned int f[3] = {start, 0, 0};
    f[1] = dist::next_flag(f[0]);
    for (int k = 0; k < 40; ++k) {
      f[2] = dist::next_flag(f[1]);
      EXPECT_NE(f[2], 0u);
      EXPECT_NE(f[2], f[1]);
      EXPECT_NE(f[2], f[0]);
      f[0] = f[1];
      f[1] = f[2];
    }
  }
  EXPECT_EQ(dist::next_flag(0xFFFFFFFFu), 1u);
  EXPECT_EQ(dist::next_flag(0u), 1u);
  EXPECT_EQ(dist::next_flag(41u), 42u);
}

}  // namespace
}  // namespace tally::test
