// Host data and data in pieces (src/chunked): reduce/dot/stats of pageable host arrays and
// tally::reducer against the device path and independent references. The staging's chunk is
// set to 1 MiB here, so arrays of a few MiB cross several chunks (and the chunk boundaries are
// where the combine could go wrong).
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "numerics_reference.hpp"
#include "support.hpp"
#include "tally/tally.hpp"

namespace tally::test {
namespace {

using namespace ref;

// TALLY_CHUNK_MIB=1 for the scope of a test.
struct small_chunks {
  small_chunks() { setenv("TALLY_CHUNK_MIB", "1", 1); }
  ~small_chunks() { unsetenv("TALLY_CHUNK_MIB"); }
};

bool float_result(dtype r) { return r == dtype::f32 || r == dtype::f64; }

// Ops whose result does not depend on the order of the combine: the host path must give the
// device path's bits. Float sums, products and norms may differ by rounding only.
bool order_free(dtype t, op o) {
  const bool fl = t == dtype::f32 || t == dtype::f64 || t == dtype::f16 || t == dtype::bf16;
  if (!fl) return true;
  return o != op::sum && o != op::prod && o != op::sum_sq && o != op::norm2 && o != op::mean;
}

// Every supported op of dtype t on the host array h, against the same reduction of the device copy.
template <class T>
void compare_every_op(const std::vector<T>& h, dtype t) {
  const device_buffer d = to_device(h);
  for (int k = 0; k < kOpCount; ++k) {
    const op o = static_cast<op>(k);
    if (!supports(t, o)) continue;
    SCOPED_TRACE(std::string(to_string(t)) + " " + to_string(o));
    const value a = reduce_value(h.data(), h.size(), t, o), b = reduce_value(d.get(), h.size(), t, o);
    if (order_free(t, o)) {
      EXPECT_TRUE(a == b) << "host " << a.to_string() << " [" << a.index << "] device " << b.to_string() << " ["
                          << b.index << "]";
      continue;
    }
    ASSERT_TRUE(float_result(a.type));
    const double x = a.as_double(), y = b.as_double();
    if (std::isinf(x) || std::isinf(y) || x == 0 || y == 0) {
      EXPECT_EQ(x, y);
      continue;
    }
    const double tol = a.type == dtype::f32 ? 2e-5 : 1e-12;
    EXPECT_NEAR(x, y, tol * std::fabs(y)) << "host " << a.to_string() << " device " << b.to_string();
  }
}

TEST(ChunkedGpu, HostArraysGiveTheDevicePathsResultForEveryOp) {
  TALLY_REQUIRE_GPU();
  const small_chunks chunks;
  const std::uint64_t n = 700001;  // f32: 2.7 chunks of 1 MiB (also under the sanitizer: chunks are the point)
  const std::uint64_t seed = test_seed();
  compare_every_op(random_vector<std::int8_t>(n * 3, seed, -128, 127), dtype::i8);
  compare_every_op(random_vector<std::uint16_t>(n, seed + 1, 0, 65535), dtype::u16);
  compare_every_op(random_vector<std::int32_t>(n, seed + 2, -2e9, 2e9), dtype::i32);
  compare_every_op(random_vector<std::int64_t>(n, seed + 3, -9.2e18, 9.2e18), dtype::i64);
  compare_every_op(random_vector<std::uint64_t>(n, seed + 4, 0, 1.8e19), dtype::u64);
  compare_every_op(random_vector<float>(n, seed + 5, -1, 1), dtype::f32);
  compare_every_op(random_vector<double>(n / 2, seed + 6, -1, 1), dtype::f64);
  std::vector<std::uint16_t> half(n);
  const std::vector<float> src = random_vector<float>(n, seed + 7, -4, 4);
  for (std::uint64_t i = 0; i < n; ++i) half[i] = float_to_f16(src[i]);
  compare_every_op(half, dtype::f16);
  for (std::uint64_t i = 0; i < n; ++i) half[i] = float_to_bf16(src[i]);
  compare_every_op(half, dtype::bf16);
  std::vector<std::uint8_t> flags(n * 2, 1);
  flags[n + 5] = 0;
  compare_every_op(flags, dtype::b8);
}

TEST(ChunkedGpu, IntegerResultsMatchAnIndependentReference) {
  TALLY_REQUIRE_GPU();
  const small_chunks chunks;
  const std::uint64_t n = 600000;  // i64: 4.6 chunks
  std::vector<std::int64_t> h = random_vector<std::int64_t>(n, test_seed() + 11, -9.2e18, 9.2e18);
  for (op o : {op::sum, op::prod, op::min, op::max, op::bit_xor}) {
    const reference r = compute_reference(h.data(), n, o);
    EXPECT_EQ(value_bits(reduce_value(h.data(), n, dtype::i64, o)), r.bits) << to_string(o);
  }
  // The mean of values near 2^62: each chunk's 64-bit sum wraps; the high bits come back.
  for (auto& x : h) x = (std::int64_t(1) << 62) + (x >> 8);
  __int128 s = 0;
  for (const auto x : h) s += x;
  const device_buffer d = to_device(h);
  const double mean = reduce_value(h.data(), n, dtype::i64, op::mean).as_double();
  EXPECT_EQ(mean, reduce_value(d.get(), n, dtype::i64, op::mean).as_double());
  EXPECT_NEAR(mean, static_cast<double>(s) / static_cast<double>(n), 1e-15 * mean);
  std::vector<std::uint64_t> u(n, ~std::uint64_t(0) - 3);
  EXPECT_EQ(reduce_value(u.data(), n, dtype::u64, op::mean).as_double(), static_cast<double>(u[0]));
}

// Data whose exact sum needs far more than a double: huge terms that cancel, tiny ones between.
template <class T>
std::vector<T> hard_data(std::uint64_t n, std::uint64_t seed) {
  std::vector<T> v = random_vector<T>(n, seed, -1, 1);
  const T big = std::is_same_v<T, float> ? T(1e30) : T(1e300);
  for (std::uint64_t i = 0; i + 1 < n; i += 9973) v[i] = big, v[(i * 7 + 3) % n] = -big;
  for (std::uint64_t i = 5; i < n; i += 1021) v[i] = std::numeric_limits<T>::denorm_min();
  return v;
}

template <class T>
void exact_matches(std::uint64_t n, dtype t, std::uint64_t seed) {
  const std::vector<T> x = hard_data<T>(n, seed), y = random_vector<T>(n, seed + 1, -2, 2);
  const device_buffer dx = to_device(x), dy = to_device(y);
  options ex;
  ex.mode = accuracy::exact;
  const exact_accumulator ref = exact_sum(x.data(), n);
  const double want = std::is_same_v<T, float> ? double(ref.to_float()) : ref.to_double();
  const value host = reduce_value(x.data(), n, t, op::sum, nullptr, ex);
  EXPECT_EQ(bits_of(host.as_double()), bits_of(want)) << to_string(t) << " exact sum " << host.to_string();
  EXPECT_TRUE(host == reduce_value(dx.get(), n, t, op::sum, nullptr, ex));
  EXPECT_TRUE(reduce_value(x.data(), n, t, op::mean, nullptr, ex) == reduce_value(dx.get(), n, t, op::mean, nullptr, ex));
  // dot: both on the host, and one on each side.
  const exact_accumulator dref = exact_dot(x.data(), y.data(), n);
  const double dwant = std::is_same_v<T, float> ? double(dref.to_float()) : dref.to_double();
  EXPECT_EQ(bits_of(dot_value(x.data(), y.data(), n, t, nullptr, ex).as_double()), bits_of(dwant));
  EXPECT_EQ(bits_of(dot_value(dx.get(), y.data(), n, t, nullptr, ex).as_double()), bits_of(dwant));
  EXPECT_TRUE(dot_value(x.data(), dy.get(), n, t, nullptr, ex) == dot_value(dx.get(), dy.get(), n, t, nullptr, ex));
}

TEST(ChunkedGpu, ExactModeIsBitwiseTheDevicePathsAcrossChunks) {
  TALLY_REQUIRE_GPU();
  const small_chunks chunks;
  const std::uint64_t n = 900000, chunk = (1u << 20) / 4;
  exact_matches<float>(n, dtype::f32, test_seed() + 21);
  exact_matches<double>(n / 2, dtype::f64, test_seed() + 22);
  exact_matches<float>(2 * chunk + 5, dtype::f32, test_seed() + 23);  // a last chunk of 5: one block
  // Special values in one chunk and not the others.
  std::vector<float> s(n, 1.0f);
  s[n - 3] = std::numeric_limits<float>::infinity();
  options ex;
  ex.mode = accuracy::exact;
  EXPECT_EQ(reduce_value(s.data(), n, dtype::f32, op::sum, nullptr, ex).as_double(), INFINITY);
  s[7] = -std::numeric_limits<float>::infinity();
  EXPECT_TRUE(std::isnan(reduce_value(s.data(), n, dtype::f32, op::sum, nullptr, ex).as_double()));
}

TEST(ChunkedGpu, ArgmaxTiesAndNansAcrossChunksGiveTheFirstIndex) {
  TALLY_REQUIRE_GPU();
  const small_chunks chunks;
  const std::uint64_t chunk = (1u << 20) / 4, n = chunk * 4 + 77;
  std::vector<float> h(n, 0.5f);
  h[chunk * 2 + 9] = 9.0f;  // chunk 2
  h[chunk + 3] = 9.0f;      // chunk 1: the first of the tie
  h[chunk * 3 + 1] = -9.0f;
  h[chunk * 4 + 5] = -9.0f;
  EXPECT_EQ(reduce_value(h.data(), n, dtype::f32, op::argmax).index, std::int64_t(chunk + 3));
  EXPECT_EQ(reduce_value(h.data(), n, dtype::f32, op::argmin).index, std::int64_t(chunk * 3 + 1));
  h[chunk * 3 + 8] = NAN;
  h[chunk * 4 + 1] = NAN;
  const value p = reduce_value(h.data(), n, dtype::f32, op::argmax);
  EXPECT_EQ(p.index, std::int64_t(chunk * 3 + 8));
  EXPECT_TRUE(std::isnan(p.as_double()));
  options ig;
  ig.nan = nan_policy::ignore;
  EXPECT_EQ(reduce_value(h.data(), n, dtype::f32, op::argmax, nullptr, ig).index, std::int64_t(chunk + 3));
  // A chunk of NaNs only, under ignore, contributes nothing.
  std::fill(h.begin(), h.begin() + chunk, NAN);
  EXPECT_EQ(reduce_value(h.data(), n, dtype::f32, op::max, nullptr, ig).as_double(), 9.0);
  EXPECT_EQ(reduce_value(h.data(), n, dtype::f32, op::argmin, nullptr, ig).index, std::int64_t(chunk * 3 + 1));
}

TEST(ChunkedGpu, StatsOfHostMemory) {
  TALLY_REQUIRE_GPU();
  const small_chunks chunks;
  const std::uint64_t n = 800000;
  std::vector<float> h = random_vector<float>(n, test_seed() + 31, 100, 101);  // a mean far from 0
  long double s = 0, mn = INFINITY, mx = -INFINITY;
  for (float x : h) s += x, mn = std::min<long double>(mn, x), mx = std::max<long double>(mx, x);
  const long double mean = s / n;
  long double m2 = 0;
  for (float x : h) m2 += (x - mean) * (x - mean);
  const stats st = stats_value(h.data(), n, dtype::f32);
  EXPECT_EQ(st.count, n);
  EXPECT_EQ(st.min, static_cast<double>(mn));
  EXPECT_EQ(st.max, static_cast<double>(mx));
  EXPECT_NEAR(st.mean, static_cast<double>(mean), 1e-12 * 100);
  EXPECT_NEAR(st.m2, static_cast<double>(m2), 1e-9 * static_cast<double>(m2));
  h[n / 2] = NAN;
  options ig;
  ig.nan = nan_policy::ignore;
  EXPECT_EQ(stats_value(h.data(), n, dtype::f32, nullptr, ig).count, n - 1);
  EXPECT_TRUE(std::isnan(stats_value(h.data(), n, dtype::f32).mean));
}

// A producer of consecutive integers as f64 (element i = first + offset + i).
struct counting {
  std::uint64_t offset = 0;
  std::uint64_t fail_at = ~std::uint64_t(0);  // throw when asked for this element
};
void fill_counting(void* context, int, void* dst, std::uint64_t first, std::uint64_t count) {
  const auto* c = static_cast<const counting*>(context);
  if (c->fail_at >= first && c->fail_at < first + count) throw std::runtime_error("the producer failed on purpose");
  auto* d = static_cast<double*>(dst);
  for (std::uint64_t i = 0; i < count; ++i) d[i] = static_cast<double>(c->offset + first + i);
}

TEST(ChunkedGpu, ReducerTakesPiecesFromAnywhere) {
  TALLY_REQUIRE_GPU();
  const small_chunks chunks;
  const std::uint64_t m = 300000;  // per piece, f64: 2.3 chunks
  std::vector<double> all;
  auto piece = [&](std::uint64_t k) {
    std::vector<double> v(m);
    for (std::uint64_t i = 0; i < m; ++i) v[i] = static_cast<double>(k * m + i);
    all.insert(all.end(), v.begin(), v.end());
    return v;
  };
  options ex;
  ex.mode = accuracy::exact;
  reducer r = reducer::for_reduce(dtype::f64, op::sum, ex);
  reducer arg = reducer::for_reduce(dtype::f64, op::argmax);
  const std::vector<double> p0 = piece(0), p1 = piece(1), p2 = piece(2);
  const device_buffer d0 = to_device(p0);
  r.feed(d0.get(), m);  // device
  arg.feed(d0.get(), m);
  r.feed(p1.data(), m);  // pageable
  arg.feed(p1.data(), m);
  double* pinned = nullptr;
  ASSERT_EQ(cudaMallocHost(reinterpret_cast<void**>(&pinned), m * 8), cudaSuccess);
  std::memcpy(pinned, p2.data(), m * 8);
  r.feed(pinned, m);  // pinned: read in place
  arg.feed(pinned, m);
  counting c{3 * m};
  for (std::uint64_t i = 0; i < m; ++i) all.push_back(static_cast<double>(3 * m + i));
  r.feed_from(m, fill_counting, &c);  // a producer
  arg.feed_from(m, fill_counting, &c);
  EXPECT_EQ(r.count(), 4 * m);
  EXPECT_EQ(r.result().as_double(), exact_sum(all.data(), all.size()).to_double());
  const value a = arg.result();
  EXPECT_EQ(a.index, std::int64_t(4 * m - 1));
  EXPECT_EQ(a.as_double(), static_cast<double>(4 * m - 1));
  // More after a result, then a reset.
  r.feed(p1.data(), 1);
  EXPECT_EQ(r.result().as_double(), exact_sum(all.data(), all.size()).to_double() + p1[0]);
  r.reset();
  EXPECT_EQ(r.count(), 0u);
  EXPECT_EQ(r.result().as_double(), 0.0);
  ASSERT_EQ(cudaFreeHost(pinned), cudaSuccess);
  // A dot reducer and a stats reducer.
  reducer dr = reducer::for_dot(dtype::f64);
  dr.feed(p1.data(), d0.get(), m);
  long double want = 0;
  for (std::uint64_t i = 0; i < m; ++i) want += static_cast<long double>(p1[i]) * p0[i];
  EXPECT_NEAR(dr.result().as_double(), static_cast<double>(want), 1e-12 * static_cast<double>(want));
  reducer sr = reducer::for_stats(dtype::f64);
  sr.feed(p0.data(), m);
  sr.feed(d0.get(), m);
  const stats st = sr.stats_result();
  EXPECT_EQ(st.count, 2 * m);
  EXPECT_EQ(st.max, static_cast<double>(m - 1));
  EXPECT_NEAR(st.mean, (m - 1) / 2.0, 1e-9);
  // Wrong use says so.
  EXPECT_NE(error_of([&] { (void)sr.result(); }).find("stats_result"), std::string::npos);
  EXPECT_NE(error_of([&] { dr.feed(p0.data(), m); }).find("two inputs"), std::string::npos);
  options ig;
  ig.nan = nan_policy::ignore;
  EXPECT_NE(error_of([&] { (void)reducer::for_reduce(dtype::f32, op::sum, ig); }).find("ignore"), std::string::npos);
}

// More chunks than slots (a slot reused within one feed: the workers wait for its last copy), with
// one worker (the calling thread fills) and with eight.
TEST(ChunkedGpu, SlotsAreReusedWithOneWorkerOrMany) {
  TALLY_REQUIRE_GPU();
  const small_chunks chunks;
  const std::uint64_t n = std::uint64_t(8) << 20;  // f64: 64 chunks of 1 MiB
  std::vector<double> h(n);
  for (std::uint64_t i = 0; i < n; ++i) h[i] = static_cast<double>(i % 4099) - 2000.0;
  const double want = exact_sum(h.data(), n).to_double();
  options ex;
  ex.mode = accuracy::exact;
  for (const char* threads : {"1", "8"}) {
    setenv("TALLY_HOST_THREADS", threads, 1);
    EXPECT_EQ(reduce_value(h.data(), n, dtype::f64, op::sum, nullptr, ex).as_double(), want) << threads;
    counting c;
    reducer r = reducer::for_reduce(dtype::f64, op::argmax);
    r.feed_from(n, fill_counting, &c);
    EXPECT_EQ(r.result().index, std::int64_t(n - 1)) << threads;
  }
  unsetenv("TALLY_HOST_THREADS");
}

// More pieces than the partials array holds (1024): it drains to the host in order and goes on.
TEST(ChunkedGpu, ManyPiecesDrainInOrder) {
  TALLY_REQUIRE_GPU();
  const std::uint64_t pieces = 1100, m = 7;
  std::vector<std::int32_t> h(pieces * m);
  for (std::uint64_t i = 0; i < h.size(); ++i) h[i] = static_cast<std::int32_t>((i * 2654435761u) % 1000);
  h[1030 * m + 2] = 5000;  // the largest, in a piece after the first drain...
  h[3 * m + 4] = 5000;     // ...and its first occurrence before it
  const device_buffer d = to_device(h);
  reducer arg = reducer::for_reduce(dtype::i32, op::argmax);
  reducer sum = reducer::for_reduce(dtype::i32, op::sum);
  for (std::uint64_t k = 0; k < pieces; ++k) {
    arg.feed(static_cast<const std::int32_t*>(d.get()) + k * m, m);
    sum.feed(static_cast<const std::int32_t*>(d.get()) + k * m, m);
  }
  EXPECT_EQ(arg.result().index, std::int64_t(3 * m + 4));
  std::int64_t s = 0;
  for (auto x : h) s += x;
  EXPECT_EQ(sum.result().i, s);
}

TEST(ChunkedGpu, AProducersErrorStopsTheFeedAndNothingBreaks) {
  TALLY_REQUIRE_GPU();
  const small_chunks chunks;
  const std::uint64_t n = 1u << 20;  // f64: 8 chunks
  reducer r = reducer::for_reduce(dtype::f64, op::sum);
  counting c;
  c.fail_at = n / 2 + 5;
  // The producer's own exception comes back as it was thrown (here a std::runtime_error).
  std::string why;
  try {
    r.feed_from(n, fill_counting, &c);
  } catch (const std::exception& e) {
    why = e.what();
  }
  EXPECT_NE(why.find("failed on purpose"), std::string::npos) << why;
  r.reset();
  c.fail_at = ~std::uint64_t(0);
  r.feed_from(n, fill_counting, &c);
  EXPECT_EQ(r.result().as_double(), static_cast<double>(n) * (n - 1) / 2);
}

TEST(ChunkedGpu, HostDataIsRefusedInACaptureAndUnreadableRangesByName) {
  TALLY_REQUIRE_GPU();
  std::vector<float> h(4096, 1.0f);
  cudaStream_t s = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  device_buffer out(8);
  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  const std::string why =
      error_of([&] { reduce(h.data(), h.size(), dtype::f32, op::sum, out.get(), reinterpret_cast<stream_t>(s)); });
  cudaGraph_t g = nullptr;
  ASSERT_EQ(cudaStreamEndCapture(s, &g), cudaSuccess);
  if (g != nullptr) cudaGraphDestroy(g);
  EXPECT_NE(why.find("captured"), std::string::npos) << why;
  // A host array whose end runs into memory the process cannot read (a PROT_NONE page).
  const long page = sysconf(_SC_PAGESIZE);
  void* m = mmap(nullptr, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(m, MAP_FAILED);
  ASSERT_EQ(mprotect(static_cast<char*>(m) + page, page, PROT_NONE), 0);
  const auto* f = reinterpret_cast<const float*>(static_cast<char*>(m) + page - 64);
  EXPECT_EQ(reduce_value(f, 16, dtype::f32, op::sum).as_double(), 0.0);  // the last 64 readable bytes
  const std::string bad = error_of([&] { reduce_value(f, 17, dtype::f32, op::sum); });
  EXPECT_NE(bad.find("neither memory the GPU can read nor"), std::string::npos) << bad;
  munmap(m, 2 * page);
  EXPECT_EQ(reduce_value(h.data(), h.size(), dtype::f32, op::sum).as_double(), 4096.0);
  ASSERT_EQ(cudaStreamDestroy(s), cudaSuccess);
}

}  // namespace
}  // namespace tally::test
