// Sharded reductions on the GPUs of this process: a communicator of every GPU it sees (one on
// most machines, two on a two-GPU one), shards of uneven sizes, against tally's one-GPU reduce of
// the whole array (bitwise where the numerics promise it) and a CPU reference.
#include <cuda_runtime_api.h>

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

#include "numerics_reference.hpp"
#include "support.hpp"
#include "tally/dist.hpp"

namespace tally::test {
namespace {

struct set_device {
  int was = 0;
  explicit set_device(int d) {
    EXPECT_EQ(cudaGetDevice(&was), cudaSuccess);
    EXPECT_EQ(cudaSetDevice(d), cudaSuccess);
  }
  ~set_device() { (void)cudaSetDevice(was); }
};

// The host array split into `ranks` uneven shards, each uploaded to its rank's device.
template <class T>
struct sharded {
  std::vector<device_buffer> bufs;
  std::vector<dist::shard> shards;
  sharded(const std::vector<T>& h, const std::vector<dist::communicator>& comms) {
    const std::size_t ranks = comms.size();
    std::size_t at = 0;
    for (std::size_t k = 0; k < ranks; ++k) {
      // Shard k holds about (k + 1) / (1 + 2 + ... + ranks) of the array: unequal sizes.
      const std::size_t end = k + 1 == ranks ? h.size() : at + h.size() * (k + 1) * 2 / (ranks * (ranks + 1));
      set_device on(comms[k].device());
      bufs.emplace_back(std::max<std::size_t>(1, (end - at) * sizeof(T)));
      if (end > at) bufs.back().upload(h.data() + at, (end - at) * sizeof(T));
      shards.push_back({bufs.back().get(), end - at, at, nullptr});
      at = end;
    }
  }
};

std::vector<int> all_devices() {
  std::vector<int> d;
  for (int k = 0; k < device_count(); ++k) d.push_back(k);
  return d;
}

TEST(DistGpu, EveryOpMatchesOneGpuOverTheWholeArray) {
  TALLY_REQUIRE_GPU();
  auto comms = dist::communicator::init_all(all_devices());
  const std::size_t n = small_only() ? (1u << 16) + 3 : (1u << 22) + 12345;
  std::mt19937_64 rng(test_seed());
  std::vector<float> xf(n);
  std::normal_distribution<float> nd(0.f, 1.f);
  for (auto& v : xf) v = nd(rng);
  xf[n / 3] = xf[2 * n / 3] = 1e6f;  // argmax: a tie, the first index wins
  std::vector<std::int32_t> xi(n);
  std::uniform_int_distribution<std::int32_t> ud(-1000000, 1000000);
  for (auto& v : xi) v = ud(rng);

  sharded<float> sf(xf, comms);
  sharded<std::int32_t> si(xi, comms);
  set_device on(0);
  device_buffer whole_f(n * 4), whole_i(n * 4);
  whole_f.upload(xf.data(), n * 4);
  whole_i.upload(xi.data(), n * 4);

  // Exact, integers, min/max/argmax: the same bits as one GPU over the whole array.
  options exact;
  exact.mode = accuracy::exact;
  EXPECT_EQ(dist::reduce(comms, sf.shards, dtype::f32, op::sum, exact),
            reduce_value(whole_f.get(), n, dtype::f32, op::sum, nullptr, exact));
  EXPECT_EQ(dist::reduce(comms, sf.shards, dtype::f32, op::mean, exact),
            reduce_value(whole_f.get(), n, dtype::f32, op::mean, nullptr, exact));
  for (op o : {op::sum, op::min, op::max, op::argmin, op::argmax, op::bit_xor}) {
    EXPECT_EQ(dist::reduce(comms, si.shards, dtype::i32, o), reduce_value(whole_i.get(), n, dtype::i32, o)) << to_string(o);
  }
  const value am = dist::reduce(comms, sf.shards, dtype::f32, op::argmax);
  EXPECT_EQ(am.index, static_cast<std::int64_t>(n / 3));
  EXPECT_EQ(am, reduce_value(whole_f.get(), n, dtype::f32, op::argmax));
  // The integer sum against the CPU.
  std::int64_t isum = 0;
  for (auto v : xi) isum += v;
  EXPECT_EQ(dist::reduce(comms, si.shards, dtype::i32, op::sum).i, isum);

  // Fast: the same bits call after call, within the sum's error bound of the double reference.
  const value f0 = dist::reduce(comms, sf.shards, dtype::f32, op::sum);
  for (int r = 0; r < 20; ++r) EXPECT_EQ(dist::reduce(comms, sf.shards, dtype::f32, op::sum), f0);
  long double ref = 0, mag = 0;
  for (float v : xf) ref += v, mag += std::fabs(v);
  EXPECT_LE(std::fabs(static_cast<long double>(f0.f) - ref), gamma_h(n, std::ldexp(1.0L, -24)) * mag + 1e-3L);

  // Stats: count, min and max exact; mean within the same bound.
  const stats st = dist::reduce_stats(comms, sf.shards, dtype::f32);
  EXPECT_EQ(st.count, n);
  const stats one = stats_value(whole_f.get(), n, dtype::f32);
  EXPECT_EQ(st.min, one.min);
  EXPECT_EQ(st.max, one.max);
  EXPECT_NEAR(st.mean, static_cast<double>(ref / n), 1e-6 * static_cast<double>(mag / n));
}

TEST(DistGpu, ARankOfItsOwnAndABorrowedCommunicator) {
  TALLY_REQUIRE_GPU();
  const dist::unique_id id = dist::make_unique_id();
  dist::communicator c = dist::communicator::init_rank(id, 0, 1, 0);
  EXPECT_EQ(c.rank(), 0);
  EXPECT_EQ(c.size(), 1);
  std::vector<double> h(1000);
  for (std::size_t i = 0; i < h.size(); ++i) h[i] = static_cast<double>(i) * 0.5;
  set_device on(0);
  device_buffer d(h.size() * 8);
  d.upload(h.data(), h.size() * 8);
  const dist::shard s{d.get(), h.size(), 0, nullptr};
  EXPECT_EQ(dist::reduce(c, s, dtype::f64, op::sum).f, 249750.0);
  // The same NCCL communicator, borrowed: works, and is not destroyed with the borrower.
  {
    dist::communicator b = dist::communicator::borrow(c.nccl());
    EXPECT_EQ(dist::reduce(b, s, dtype::f64, op::max).f, 499.5);
  }
  EXPECT_EQ(dist::reduce(c, s, dtype::f64, op::min).f, 0.0);
  // Dot of matching shards.
  EXPECT_EQ(dist::dot(c, {d.get(), h.size(), 0, d.get()}, dtype::f64, {}).f, dot_value(d.get(), d.get(), h.size(), dtype::f64).f);
}

// dist_options::device_exchange (the default) on a communicator of one rank: there is nothing to
// exchange (and NCCL gives one rank no symmetric memory), so the communicator keeps the
// all-gather, says why, gives the one-GPU results (bitwise in exact mode and for integers), names
// a bad shard and stays usable. The device exchange itself runs under MPI on two or more GPUs
// (tally_dist_mpi_check device, from scripts/gpu-check.sh dist).
TEST(DistGpu, OneRankKeepsTheAllGatherAndSaysWhy) {
  TALLY_REQUIRE_GPU();
  const dist::unique_id id = dist::make_unique_id();
  dist::dist_options o;
  EXPECT_TRUE(o.device_exchange);  // the default
  dist::communicator c = dist::communicator::init_rank(id, 0, 1, 0, o);
  std::printf("exchange: %s\n", c.exchange().c_str());
  EXPECT_NE(c.exchange().find("NCCL all-gather (device exchange unavailable: one rank"), std::string::npos);
  set_device on(0);
  const std::size_t n = small_only() ? (1u << 14) + 7 : (1u << 20) + 7;
  std::mt19937_64 rng(test_seed());
  std::vector<float> xf(n);
  std::normal_distribution<float> nd(0.f, 1.f);
  for (auto& v : xf) v = nd(rng);
  std::vector<std::int32_t> xi(n);
  std::uniform_int_distribution<std::int32_t> ud(-1000, 1000);
  for (auto& v : xi) v = ud(rng);
  device_buffer df(n * 4), di(n * 4);
  df.upload(xf.data(), n * 4);
  di.upload(xi.data(), n * 4);
  const dist::shard sf{df.get(), n, 0, nullptr}, si{di.get(), n, 0, nullptr};
  options exact;
  exact.mode = accuracy::exact;
  for (int round = 0; round < 3; ++round) {  // calls in a row
    EXPECT_EQ(dist::reduce(c, sf, dtype::f32, op::sum, exact), reduce_value(df.get(), n, dtype::f32, op::sum, nullptr, exact));
    long long ref = 0;
    for (std::int32_t v : xi) ref += v;
    EXPECT_EQ(dist::reduce(c, si, dtype::i32, op::sum).i, ref);
    EXPECT_EQ(dist::reduce(c, sf, dtype::f32, op::argmax), reduce_value(df.get(), n, dtype::f32, op::argmax));
  }
  const stats st = dist::reduce_stats(c, sf, dtype::f32);
  const stats one = stats_value(df.get(), n, dtype::f32);
  EXPECT_EQ(st.count, n);
  EXPECT_EQ(st.min, one.min);
  EXPECT_EQ(st.max, one.max);
  dist::shard bad = sf;
  bad.d_in = xf.data();  // a host pointer
  EXPECT_NE(error_of([&] { dist::reduce(c, bad, dtype::f32, op::sum); }).find("rank 0 failed"), std::string::npos);
  EXPECT_TRUE(c.usable());
  EXPECT_EQ(dist::reduce(c, si, dtype::i32, op::max).i, reduce_value(di.get(), n, dtype::i32, op::max).i);
}

// Bad calls: a clear error naming the rank and the fault, and the communicator still usable.
TEST(DistGpu, BadShardsAreRefusedAndTheCommunicatorStaysUsable) {
  TALLY_REQUIRE_GPU();
  auto comms = dist::communicator::init_all(all_devices());
  std::vector<float> h(4096, 1.0f);
  sharded<float> sf(h, comms);
  std::vector<dist::shard> bad = sf.shards;
  bad[0].first = 1;  // element 0 is nobody's
  EXPECT_NE(error_of([&] { dist::reduce(comms, bad, dtype::f32, op::sum); }).find("the shards leave a gap"), std::string::npos);
  bad = sf.shards;
  bad[0].d_in = h.data();  // a host pointer
  const std::string e = error_of([&] { dist::reduce(comms, bad, dtype::f32, op::sum); });
  EXPECT_NE(e.find("rank 0 failed"), std::string::npos) << e;
  EXPECT_NE(error_of([&] { dist::reduce(comms, sf.shards, dtype::f32, op::bit_and); }).find("rank 0 failed"), std::string::npos);
  EXPECT_EQ(dist::reduce(comms, sf.shards, dtype::f32, op::sum).f, 4096.0);
  EXPECT_TRUE(comms[0].usable());
}

// The stream-ordered forms on a communicator of one rank: the same bits as the blocking calls,
// a captured graph replayed over changing data, and errors: this rank's own at the call, what the
// combine finds at synchronize(), the communicator usable after both.
TEST(DistGpu, StreamOrderedCallsMatchTheBlockingOnesAndReplayInAGraph) {
  TALLY_REQUIRE_GPU();
  using ref::bits_of;
  const dist::unique_id id = dist::make_unique_id();
  dist::communicator c = dist::communicator::init_rank(id, 0, 1, 0);
  set_device on(0);
  const std::size_t n = small_only() ? 4099 : (1u << 20) + 3;
  std::mt19937_64 rng(test_seed());
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<float> h(n);
  for (auto& v : h) v = nd(rng);
  h[n / 2] = 50.f;
  device_buffer d(n * 4), out(64);
  d.upload(h.data(), n * 4);
  // upload() copies on the legacy default stream and may return before the data has landed; the
  // calls below run on a non-blocking stream.
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  cudaStream_t s = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  const stream_t ts = reinterpret_cast<stream_t>(s);
  const dist::shard sh{d.get(), n, 0, nullptr};
  const auto out_f32 = [&] {
    float f = 0;
    out.download(&f, 4);
    return f;
  };
  // One rank: the same bits as the core's own calls over the whole array, in every mode.
  for (accuracy mode : {accuracy::fast, accuracy::compensated, accuracy::exact}) {
    options o;
    o.mode = mode;
    dist::reduce_async(c, sh, dtype::f32, op::sum, out.get(), ts, o);
    dist::synchronize(c, ts);
    EXPECT_EQ(bits_of(out_f32()), bits_of(static_cast<float>(reduce_value(d.get(), n, dtype::f32, op::sum, nullptr, o).f)))
        << to_string(mode);
  }
  dist::reduce_async(c, sh, dtype::f32, op::argmax, out.get(), ts);
  dist::synchronize(c, ts);
  std::int64_t index = -2;
  out.download(&index, 8);
  EXPECT_EQ(index, static_cast<std::int64_t>(n / 2));
  dist::dot_async(c, {d.get(), n, 0, d.get()}, dtype::f32, out.get(), ts);
  dist::synchronize(c, ts);
  EXPECT_EQ(bits_of(out_f32()), bits_of(static_cast<float>(dot_value(d.get(), d.get(), n, dtype::f32).f)));
  dist::reduce_stats_async(c, sh, dtype::f32, out.get(), ts);
  dist::synchronize(c, ts);
  stats st;
  out.download(&st, sizeof st);
  const stats want = stats_value(d.get(), n, dtype::f32);
  EXPECT_EQ(st.count, want.count);
  EXPECT_EQ(bits_of(st.mean), bits_of(want.mean));
  EXPECT_EQ(bits_of(st.m2), bits_of(want.m2));
  EXPECT_EQ(st.max, 50.0);

  // Captured once, replayed over new data: each replay's exact sum is the data's at that time.
  options exact;
  exact.mode = accuracy::exact;
  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  dist::reduce_async(c, sh, dtype::f32, op::sum, out.get(), ts, exact);
  cudaGraph_t g = nullptr;
  ASSERT_EQ(cudaStreamEndCapture(s, &g), cudaSuccess);
  cudaGraphExec_t ge = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&ge, g, 0), cudaSuccess);
  for (int round = 0; round < 3; ++round) {
    for (auto& v : h) v = nd(rng);
    d.upload(h.data(), n * 4);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    ASSERT_EQ(cudaGraphLaunch(ge, s), cudaSuccess);
    dist::synchronize(c, ts);
    const value want_sum = reduce_value(d.get(), n, dtype::f32, op::sum, nullptr, exact);
    EXPECT_EQ(bits_of(out_f32()), bits_of(static_cast<float>(want_sum.f))) << "replay " << round;
  }
  EXPECT_EQ(cudaGraphExecDestroy(ge), cudaSuccess);
  EXPECT_EQ(cudaGraphDestroy(g), cudaSuccess);
  // The blocking form refuses a capturing stream and names the stream-ordered one; synchronize()
  // refuses it too.
  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  const std::string refused = error_of([&] { dist::reduce(c, sh, dtype::f32, op::sum, {}, ts); });
  const std::string no_sync = error_of([&] { dist::synchronize(c, ts); });
  cudaGraph_t g2 = nullptr;
  (void)cudaStreamEndCapture(s, &g2);
  if (g2 != nullptr) (void)cudaGraphDestroy(g2);
  (void)cudaGetLastError();
  EXPECT_NE(refused.find("capture tally::dist::reduce_async"), std::string::npos) << refused;
  EXPECT_NE(no_sync.find("being captured"), std::string::npos) << no_sync;
  EXPECT_TRUE(c.usable());

  // This rank's own errors throw at the call; synchronize() then reports the failed exchange too;
  // a good call after them works.
  std::vector<float> host(16, 1.f);
  const std::string e1 = error_of([&] { dist::reduce_async(c, {host.data(), 16, 0, nullptr}, dtype::f32, op::sum, out.get(), ts); });
  EXPECT_NE(e1.find("tally::dist::reduce_async on rank 0 of 1"), std::string::npos) << e1;
  const std::string e2 = error_of([&] { dist::synchronize(c, ts); });
  EXPECT_NE(e2.find("rank 0 failed"), std::string::npos) << e2;
  EXPECT_EQ(error_of([&] { dist::synchronize(c, ts); }), "");  // reported once
  const std::string e3 = error_of([&] { dist::reduce_async(c, sh, dtype::f32, op::sum, nullptr, ts); });
  EXPECT_NE(e3.find("d_out"), std::string::npos) << e3;
  (void)error_of([&] { dist::synchronize(c, ts); });
  const std::string e4 = error_of([&] { dist::reduce_async(c, sh, dtype::f32, op::bit_and, out.get(), ts); });
  EXPECT_NE(e4.find("bit_and"), std::string::npos) << e4;
  (void)error_of([&] { dist::synchronize(c, ts); });
  dist::reduce_async(c, sh, dtype::f32, op::sum, out.get(), ts, exact);
  dist::synchronize(c, ts);
  EXPECT_EQ(bits_of(out_f32()), bits_of(static_cast<float>(reduce_value(d.get(), n, dtype::f32, op::sum, nullptr, exact).f)));
  EXPECT_TRUE(c.usable());
  EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess);
}

// One thread driving every rank (init_all) cannot queue ungrouped collectives: refused by name,
// before anything is queued, and the blocking calls still work.
TEST(DistGpu, StreamOrderedCallsRefuseTheCommunicatorsOfInitAll) {
  TALLY_REQUIRE_GPU();
  auto comms = dist::communicator::init_all(all_devices());
  std::vector<float> h(1024, 0.5f);
  sharded<float> sf(h, comms);
  set_device on(comms[0].device());
  device_buffer out(64);
  const std::string e = error_of([&] { dist::reduce_async(comms[0], sf.shards[0], dtype::f32, op::sum, out.get()); });
  EXPECT_NE(e.find("init_all"), std::string::npos) << e;
  EXPECT_EQ(dist::reduce(comms, sf.shards, dtype::f32, op::sum).f, 512.0);
}

}  // namespace
}  // namespace tally::test
