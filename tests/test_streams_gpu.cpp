// Determinism, streams, graphs, sizes past 2^32, and errors that leave the process usable.
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <thread>

#include "bench/probe.hpp"
#include "core/context.hpp"
#include "support.hpp"

namespace tally::test {
namespace {

struct stream_guard {
  cudaStream_t s = nullptr;
  explicit stream_guard(unsigned flags = cudaStreamNonBlocking) {
    EXPECT_EQ(cudaStreamCreateWithFlags(&s, flags), cudaSuccess);
  }
  ~stream_guard() { cudaStreamDestroy(s); }
  stream_t get() const { return reinterpret_cast<stream_t>(s); }
};

double read_f64(const device_buffer& b) {
  double x;
  b.download(&x, 8);
  return x;
}

TEST(DeterminismGpu, HundredRunsAreBitwiseIdentical) {
  TALLY_REQUIRE_GPU();
  const std::uint64_t n = small_only() ? 50000 : (1u << 22) + 77;
  const auto hf = random_vector<float>(n, test_seed(), -1e3, 1e3);
  const auto hd = random_vector<double>(n, test_seed() + 1, -1e3, 1e3);
  device_buffer df = to_device(hf), dd = to_device(hd);
  const value f0 = reduce_value(df.get(), n, dtype::f32, op::sum);
  const value d0 = reduce_value(dd.get(), n, dtype::f64, op::sum);
  for (int r = 0; r < 100; ++r) {
    ASSERT_EQ(reduce_value(df.get(), n, dtype::f32, op::sum), f0) << "run " << r;
    ASSERT_EQ(reduce_value(dd.get(), n, dtype::f64, op::sum), d0) << "run " << r;
  }
}

TEST(StreamsGpu, NonDefaultStream) {
  TALLY_REQUIRE_GPU();
  stream_guard s;
  const auto h = random_vector<std::int32_t>(123457, test_seed(), -1000, 1000);
  device_buffer d = to_device(h);
  device_buffer out(8);
  reduce(d.get(), h.size(), dtype::i32, op::sum, out.get(), s.get());
  ASSERT_EQ(cudaStreamSynchronize(s.s), cudaSuccess);
  std::int64_t got = 0;
  out.download(&got, 8);
  EXPECT_EQ(static_cast<std::uint64_t>(got), compute_reference(h.data(), h.size(), op::sum).bits);
  // The blocking form on the same stream, and on the per-thread default stream.
  EXPECT_EQ(reduce_value(d.get(), h.size(), dtype::i32, op::max, s.get()).i,
            *std::max_element(h.begin(), h.end()));
  EXPECT_EQ(reduce_value(d.get(), h.size(), dtype::i32, op::min, reinterpret_cast<stream_t>(cudaStreamPerThread)).i,
            *std::min_element(h.begin(), h.end()));
}

// Captured once (workspaces are allocated inside the capture), replayed over new data.
TEST(StreamsGpu, GraphCaptureAndReplay) {
  TALLY_REQUIRE_GPU();
  stream_guard s;
  const std::uint64_t n = small_only() ? 40000 : 3000017;
  device_buffer d(n * sizeof(double)), out(8);
  cudaGraph_t g = nullptr;
  cudaGraphExec_t exec = nullptr;
  const std::size_t before = core::workspaces_created();
  ASSERT_EQ(cudaStreamBeginCapture(s.s, cudaStreamCaptureModeGlobal), cudaSuccess);
  reduce(d.get(), n, dtype::f64, op::sum, out.get(), s.get());
  reduce(d.get(), n, dtype::f64, op::sum, out.get(), s.get());  // twice: the counter resets
  ASSERT_EQ(cudaStreamEndCapture(s.s, &g), cudaSuccess);
  EXPECT_EQ(core::workspaces_created(), before + 2);  // allocated inside the capture
  ASSERT_EQ(cudaGraphInstantiate(&exec, g, 0), cudaSuccess);
  for (int r = 0; r < 5; ++r) {
    // Small integers: the sum is exact, so each replay must match it exactly.
    auto h = random_vector<double>(n, test_seed() + r, 0, 1);
    std::mt19937_64 rng(r);
    for (auto& x : h) x = static_cast<double>(static_cast<int>(rng() % 17) - 8);
    d.upload(h.data(), n * sizeof(double));
    ASSERT_EQ(cudaGraphLaunch(exec, s.s), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(s.s), cudaSuccess);
    EXPECT_EQ(read_f64(out), static_cast<double>(compute_reference(h.data(), n, op::sum).exact)) << "replay " << r;
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(g);
}

// Two graphs captured on one stream (different n, so different grids) and replayed at the same
// time on two other streams: each captured call owns its workspace, so they never share a counter.
TEST(StreamsGpu, GraphsFromOneStreamReplayConcurrently) {
  TALLY_REQUIRE_GPU();
  const std::uint64_t na = small_only() ? 30011 : 1000003, nb = small_only() ? 60013 : 5000011;
  const auto ha = random_vector<std::int32_t>(na, test_seed() + 21, -1000, 1000);
  const auto hb = random_vector<std::int32_t>(nb, test_seed() + 22, -1000, 1000);
  device_buffer da = to_device(ha), db = to_device(hb), oa(8), ob(8);
  stream_guard cap, s1, s2;
  cudaGraph_t ga = nullptr, gb = nullptr;
  cudaGraphExec_t ea = nullptr, eb = nullptr;
  const std::size_t before = core::workspaces_created();
  ASSERT_EQ(cudaStreamBeginCapture(cap.s, cudaStreamCaptureModeGlobal), cudaSuccess);
  reduce(da.get(), na, dtype::i32, op::sum, oa.get(), cap.get());
  ASSERT_EQ(cudaStreamEndCapture(cap.s, &ga), cudaSuccess);
  ASSERT_EQ(cudaStreamBeginCapture(cap.s, cudaStreamCaptureModeGlobal), cudaSuccess);
  reduce(db.get(), nb, dtype::i32, op::sum, ob.get(), cap.get());
  ASSERT_EQ(cudaStreamEndCapture(cap.s, &gb), cudaSuccess);
  EXPECT_EQ(core::workspaces_created(), before + 2) << "each captured call gets its own workspace";
  ASSERT_EQ(cudaGraphInstantiate(&ea, ga, 0), cudaSuccess);
  ASSERT_EQ(cudaGraphInstantiate(&eb, gb, 0), cudaSuccess);
  for (int r = 0; r < (small_only() ? 3 : 30); ++r) {
    ASSERT_EQ(cudaGraphLaunch(ea, s1.s), cudaSuccess);
    ASSERT_EQ(cudaGraphLaunch(eb, s2.s), cudaSuccess);
  }
  ASSERT_EQ(cudaStreamSynchronize(s1.s), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s2.s), cudaSuccess);
  std::int64_t a = 0, b = 0;
  oa.download(&a, 8);
  ob.download(&b, 8);
  EXPECT_EQ(static_cast<std::uint64_t>(a), compute_reference(ha.data(), na, op::sum).bits);
  EXPECT_EQ(static_cast<std::uint64_t>(b), compute_reference(hb.data(), nb, op::sum).bits);
  // The capture stream itself still works directly afterwards, and after release_stream.
  EXPECT_EQ(reduce_value(db.get(), nb, dtype::i32, op::sum, cap.get()).i, b);
  release_stream(cap.get());
  EXPECT_EQ(reduce_value(da.get(), na, dtype::i32, op::sum, cap.get()).i, a);
  cudaGraphExecDestroy(ea);
  cudaGraphExecDestroy(eb);
  cudaGraphDestroy(ga);
  cudaGraphDestroy(gb);
}

// Two streams reducing different inputs at once, interleaved, from two host threads.
TEST(StreamsGpu, TwoStreamsConcurrently) {
  TALLY_REQUIRE_GPU();
  const std::uint64_t n = small_only() ? 30000 : (1u << 22) + 3;
  const auto ha = random_vector<std::int64_t>(n, test_seed(), -1000000, 1000000);
  const auto hb = random_vector<std::int64_t>(n, test_seed() + 9, -1000000, 1000000);
  const std::uint64_t ra = compute_reference(ha.data(), n, op::sum).bits;
  const std::uint64_t rb = compute_reference(hb.data(), n, op::sum).bits;
  device_buffer da = to_device(ha), db = to_device(hb);
  stream_guard sa, sb;
  const int iters = small_only() ? 5 : 50;
  auto worker = [&](const device_buffer& d, const stream_guard& s, std::uint64_t expect, int* bad) {
    device_buffer out(8 * iters);
    for (int i = 0; i < iters; ++i)
      reduce(d.get(), n, dtype::i64, op::sum, static_cast<char*>(out.get()) + 8 * i, s.get());
    cudaStreamSynchronize(s.s);
    std::vector<std::uint64_t> got(iters);
    out.download(got.data(), 8 * iters);
    for (auto g : got) *bad += g != expect;
  };
  int bad_a = 0, bad_b = 0;
  std::thread ta(worker, std::cref(da), std::cref(sa), ra, &bad_a);
  std::thread tb(worker, std::cref(db), std::cref(sb), rb, &bad_b);
  ta.join();
  tb.join();
  EXPECT_EQ(bad_a, 0);
  EXPECT_EQ(bad_b, 0);
  // The same two streams driven from one thread, alternating.
  device_buffer oa(8), ob(8);
  for (int i = 0; i < iters; ++i) {
    reduce(da.get(), n, dtype::i64, op::sum, oa.get(), sa.get());
    reduce(db.get(), n, dtype::i64, op::sum, ob.get(), sb.get());
  }
  cudaStreamSynchronize(sa.s);
  cudaStreamSynchronize(sb.s);
  std::uint64_t a = 0, b = 0;
  oa.download(&a, 8);
  ob.download(&b, 8);
  EXPECT_EQ(a, ra);
  EXPECT_EQ(b, rb);
}

// More than 2^32 one-byte elements: 64-bit indexing end to end, extremes placed past 2^32.
TEST(LargeGpu, Int8PastTwoToThe32) {
  TALLY_REQUIRE_GPU();
  if (small_only()) GTEST_SKIP() << "large test skipped under TALLY_TEST_SMALL";
  const std::uint64_t n = (std::uint64_t(1) << 32) + 4099;
  device_buffer d(n);
  bench::fill_random(d.get(), n, dtype::i8, test_seed(), -100, 100);
  const std::int8_t hi = 127, lo = -128;
  d.upload(&hi, 1, n - 2);
  d.upload(&lo, 1, (std::uint64_t(1) << 32) + 5);
  std::vector<std::int8_t> h(n);
  d.download(h.data(), n);
  for (op o : {op::sum, op::max, op::min, op::bit_xor}) {
    const value v = reduce_value(d.get(), n, dtype::i8, o);
    EXPECT_EQ(value_bits(v), compute_reference(h.data(), n, o).bits) << to_string(o);
  }
  EXPECT_EQ(reduce_value(d.get(), n, dtype::i8, op::max).i, 127);
  EXPECT_EQ(reduce_value(d.get(), n, dtype::i8, op::min).i, -128);
}

// Each bad call raises tally::error naming the problem; the next valid call works.
TEST(ErrorsGpu, BadInputThenValidCall) {
  TALLY_REQUIRE_GPU();
  const auto h = random_vector<float>(1000, 5, -1, 1);
  device_buffer d = to_device(h);
  device_buffer out(8);
  auto expect_error = [&](auto&& fn, const char* needle) {
    try {
      fn();
      ADD_FAILURE() << "no tally::error for: " << needle;
    } catch (const error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
    // The process and the device stay usable.
    EXPECT_EQ(reduce_value(d.get(), 1000, dtype::f32, op::max).f,
              static_cast<double>(*std::max_element(h.begin(), h.end())));
  };
  expect_error([&] { reduce(nullptr, 10, dtype::f32, op::sum, out.get()); }, "d_in is null");
  expect_error([&] { reduce(d.get(), 10, dtype::f32, op::sum, nullptr); }, "d_out is null");
  expect_error([&] { reduce(d.get(), 10, dtype::f32, op::bit_and, out.get()); }, "bitwise ops need an integer dtype");
  expect_error([&] { reduce(d.get(), 10, static_cast<dtype>(42), op::sum, out.get()); }, "unknown dtype (value 42)");
  expect_error([&] { reduce(d.get(), 10, dtype::f32, static_cast<op>(-1), out.get()); }, "unknown op (value -1)");
  expect_error([&] { reduce(static_cast<const char*>(d.get()) + 1, 10, dtype::f32, op::sum, out.get()); },
               "not aligned to 4 bytes");
  // Under compute-sanitizer the deliberate out-of-memory would be reported as an API error.
  if (!std::getenv("TALLY_UNDER_SANITIZER"))
    expect_error([&] { device_buffer huge(std::size_t(1) << 52); }, "out of memory");
  expect_error([&] { d.upload(h.data(), 8, d.size()); }, "exceed the buffer");
}

}  // namespace
}  // namespace tally::test
