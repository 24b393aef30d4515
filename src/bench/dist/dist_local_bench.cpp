// `tally bench dist --single-process` (see dist_bench.hpp): one process driving every GPU it sees,
// the other mode of tally::dist (communicator::init_all, dist::reduce(comms, shards, ...)), against
// one GPU over the whole array and against CUB per shard + one grouped ncclAllReduce of the
// partials. No MPI: run it without mpirun.
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "bench/dist/cub_shard.hpp"
#include "bench/dist/dist_common.hpp"
#include "bench/dist/dist_bench.hpp"
#include "bench/probe.hpp"
#include "bench/timing.hpp"
#include "tally/dist.hpp"

namespace tally::bench {
namespace {

using clk = std::chrono::steady_clock;
using dist_common::bits_of;
using dist_common::check_nccl;
using dist_common::kGolden;
using dist_common::kSeed;

struct scoped_device {
  int was = 0;
  explicit scoped_device(int d) {
    check(cudaGetDevice(&was), "cudaGetDevice");
    check(cudaSetDevice(d), "cudaSetDevice");
  }
  ~scoped_device() { (void)cudaSetDevice(was); }
};

// The baseline's communicators: one per GPU (ncclCommInitAll), destroyed at the end.
struct nccl_all {
  std::vector<ncclComm_t> c;
  explicit nccl_all(const std::vector<int>& devs) : c(devs.size(), nullptr) {
    check_nccl(ncclCommInitAll(c.data(), static_cast<int>(devs.size()), devs.data()), "ncclCommInitAll");
  }
  ~nccl_all() {
    for (ncclComm_t x : c)
      if (x != nullptr) (void)ncclCommDestroy(x);
  }
  nccl_all(const nccl_all&) = delete;
  nccl_all& operator=(const nccl_all&) = delete;
};

// Median over `reps` loops of `calls` back-to-back blocking calls, us per call; candidates
// alternate inside each repetition.
std::vector<double> time_local(const std::vector<std::function<void()>>& cs, int calls, int reps) {
  for (const auto& c : cs) c(), c();  // warm-up
  std::vector<std::vector<double>> t(cs.size());
  for (int r = 0; r < reps; ++r)
    for (std::size_t k = 0; k < cs.size(); ++k) {
      const auto t0 = clk::now();
      for (int i = 0; i < calls; ++i) cs[k]();
      t[k].push_back(std::chrono::duration<double, std::micro>(clk::now() - t0).count() / calls);
    }
  std::vector<double> m;
  for (auto& v : t) m.push_back(median(v));
  return m;
}

}  // namespace

report run_dist_local_bench(const dist_bench_options& opt) {
  int count = 0;
  check(cudaGetDeviceCount(&count), "cudaGetDeviceCount");
  if (count < 1) throw error("tally bench dist --single-process: no GPU");
  std::vector<int> devs;
  for (int d = 0; d < count; ++d) devs.push_back(d);
  const int size = count;
  std::vector<int> totals = opt.log2_totals;
  if (totals.empty()) totals = {20, 22, 24, 26, 28, 30, 31, 32};
  const int reps = opt.quick ? 3 : std::max(1, opt.reps);
  const double loop_budget_us = opt.quick ? 5000 : 20000;
  const auto say = [&](const std::string& s) {
    if (opt.progress) opt.progress(s);
  };

  std::vector<dist::communicator> comms = dist::communicator::init_all(devs);
  nccl_all base(devs);
  // Memory: device 0 holds the whole array (its shard is the array's first part), the others
  // their shard; the largest total every GPU fits.
  int max_log2 = 0;
  for (int L : totals) {
    bool fits = true;
    for (int d : devs) {
      scoped_device on(d);
      std::size_t free_b = 0, total_b = 0;
      check(cudaMemGetInfo(&free_b, &total_b), "cudaMemGetInfo");
      const double need = 4.0 * std::ldexp(1.0, L) / (d == 0 ? 1 : size) * 1.02 + (256 << 20);
      fits = fits && need < 0.92 * static_cast<double>(free_b);
    }
    if (fits) max_log2 = std::max(max_log2, L);
  }
  std::vector<int> sizes;
  for (int L : totals)
    if (L <= max_log2) sizes.push_back(L);
  if (sizes.empty()) throw error("tally bench dist --single-process: no size fits every GPU's memory");
  const std::uint64_t n_max = std::uint64_t(1) << max_log2, shard_max = (n_max + size - 1) / size;

  std::vector<cudaStream_t> streams(size);
  std::vector<device_buffer> own, outs, temps;
  std::vector<float*> out_p(size);
  for (int k = 0; k < size; ++k) {
    scoped_device on(devs[k]);
    check(cudaStreamCreateWithFlags(&streams[k], cudaStreamNonBlocking), "cudaStreamCreate");
    own.emplace_back(k == 0 ? n_max * 4 : shard_max * 4);
    outs.emplace_back(64);
    out_p[k] = static_cast<float*>(outs.back().get());
    std::size_t tb = 0;
    check(cub_sum_f32(nullptr, tb, nullptr, nullptr, k == 0 ? n_max : shard_max, streams[k]), "cub::DeviceReduce::Sum (temp size)");
    temps.emplace_back(std::max<std::size_t>(tb, 16));
  }
  // The CUB candidates' result copies land in pinned memory, as tally's do (a pageable target
  // would be a staged, slower copy).
  float* h_pinned = nullptr;
  check(cudaMallocHost(reinterpret_cast<void**>(&h_pinned), 64), "cudaMallocHost");
  const std::unique_ptr<float, cudaError_t (*)(void*)> h_keep(h_pinned, cudaFreeHost);
  float& h_out = *h_pinned;
  {
    scoped_device on(devs[0]);
    fill_random(own[0].get(), n_max, dtype::f32, kSeed, -1.0, 1.0, streams[0]);
    check(cudaStreamSynchronize(streams[0]), "cudaStreamSynchronize");
  }
  std::vector<stream_t> ts;
  for (cudaStream_t s : streams) ts.push_back(reinterpret_cast<stream_t>(s));

  const device_info dev = current_device();
  report rep;
  stamp_report(rep, "dist-single-process", dev, ceiling{});
  rep.meta.erase("read_ceiling_gbps");
  rep.meta.erase("theoretical_gbps");
  rep.meta["gpus"] = size;
  const schedule_scope sched(opt.sched, rep);
  int nccl_version = 0;
  check_nccl(ncclGetVersion(&nccl_version), "ncclGetVersion");
  rep.meta["nccl_version"] = nccl_version;
  rep.meta["timing"] = "host wall clock of blocking calls that end with the result on the host, one thread driving every "
                       "GPU: back-to-back calls, the median of " + std::to_string(reps) + " loops; candidates alternate";
  rep.meta["data"] = "f32 uniform in [-1, 1); GPU k's shard holds elements [k N / gpus, (k + 1) N / gpus) of the array "
                     "that GPU 0 reduces alone";
  table t{"f32 sum, one process driving " + std::to_string(size) + " GPUs (us per blocking call)",
          {{"log2n", "log2 N", -1},
           {"one_gpu_us", "tally, 1 GPU, whole", 1},
           {"cub_one_us", "CUB, 1 GPU, whole", 1},
           {"dist_us", "tally::dist (init_all)", 1},
           {"cub_allreduce_us", "CUB per shard + grouped ncclAllReduce", 1},
           {"scaling", "scaling (1 GPU / dist)", 2},
           {"vs_cub_allreduce", "CUB+AllReduce / dist", 2},
           {"exact_one_us", "exact, 1 GPU", 1},
           {"exact_dist_us", "exact, dist", 1},
           {"exact_same_bits", "exact: same bits as 1 GPU", -1}},
          {}};
  options ex;
  ex.mode = accuracy::exact;
  for (int L : sizes) {
    const std::uint64_t N = std::uint64_t(1) << L;
    std::vector<dist::shard> shards(size);
    for (int k = 0; k < size; ++k) {
      const std::uint64_t first = N * static_cast<std::uint64_t>(k) / size;
      const std::uint64_t cnt = N * static_cast<std::uint64_t>(k + 1) / size - first;
      scoped_device on(devs[k]);
      if (k != 0) fill_random(own[k].get(), cnt, dtype::f32, kSeed + first * kGolden, -1.0, 1.0, streams[k]);
      check(cudaStreamSynchronize(streams[k]), "cudaStreamSynchronize");
      shards[k] = {k == 0 ? own[0].get() : own[k].get(), cnt, first, nullptr};
    }
    const float* whole = static_cast<const float*>(own[0].get());
    const double est_us = 20.0 + 4.0 * static_cast<double>(N) / 3.0e6;
    const int calls = std::clamp(static_cast<int>(loop_budget_us / est_us), 3, 400);
    say("2^" + std::to_string(L));
    const std::vector<std::function<void()>> cs = {
        [&] {
          scoped_device on(devs[0]);
          (void)reduce_value(whole, N, dtype::f32, op::sum, ts[0]);
        },
        [&] {
          scoped_device on(devs[0]);
          std::size_t tb = temps[0].size();
          check(cub_sum_f32(temps[0].get(), tb, whole, out_p[0], N, streams[0]), "cub::DeviceReduce::Sum");
          check(cudaMemcpyAsync(&h_out, out_p[0], 4, cudaMemcpyDeviceToHost, streams[0]), "cudaMemcpyAsync");
          check(cudaStreamSynchronize(streams[0]), "cudaStreamSynchronize");
        },
        [&] { (void)dist::reduce(comms, shards, dtype::f32, op::sum, {}, ts); },
        [&] {
          for (int k = 0; k < size; ++k) {
            scoped_device on(devs[k]);
            std::size_t tb = temps[k].size();
            check(cub_sum_f32(temps[k].get(), tb, static_cast<const float*>(shards[k].d_in), out_p[k], shards[k].n,
                              streams[k]),
                  "cub::DeviceReduce::Sum");
          }
          check_nccl(ncclGroupStart(), "ncclGroupStart");
          for (int k = 0; k < size; ++k) {
            scoped_device on(devs[k]);
            check_nccl(ncclAllReduce(out_p[k], out_p[k], 1, ncclFloat, ncclSum, base.c[k], streams[k]), "ncclAllReduce");
          }
          check_nccl(ncclGroupEnd(), "ncclGroupEnd");
          {
            scoped_device on(devs[0]);
            check(cudaMemcpyAsync(&h_out, out_p[0], 4, cudaMemcpyDeviceToHost, streams[0]), "cudaMemcpyAsync");
          }
          for (int k = 0; k < size; ++k) {
            scoped_device on(devs[k]);
            check(cudaStreamSynchronize(streams[k]), "cudaStreamSynchronize");
          }
        },
        [&] {
          scoped_device on(devs[0]);
          (void)reduce_value(whole, N, dtype::f32, op::sum, ts[0], ex);
        },
        [&] { (void)dist::reduce(comms, shards, dtype::f32, op::sum, ex, ts); },
    };
    const std::vector<double> m = time_local(cs, calls, reps);
    value one_exact;
    {
      scoped_device on(devs[0]);
      one_exact = reduce_value(whole, N, dtype::f32, op::sum, ts[0], ex);
    }
    const bool same = bits_of(dist::reduce(comms, shards, dtype::f32, op::sum, ex, ts)) == bits_of(one_exact);
    t.rows.push_back({{"log2n", L},
                      {"one_gpu_us", m[0]},
                      {"cub_one_us", m[1]},
                      {"dist_us", m[2]},
                      {"cub_allreduce_us", m[3]},
                      {"scaling", m[0] / m[2]},
                      {"vs_cub_allreduce", m[3] / m[2]},
                      {"exact_one_us", m[4]},
                      {"exact_dist_us", m[5]},
                      {"exact_same_bits", same ? "yes" : "NO"}});
  }
  rep.tables.push_back(std::move(t));
  for (int k = 0; k < size; ++k) {
    scoped_device on(devs[k]);
    check(cudaStreamDestroy(streams[k]), "cudaStreamDestroy");
  }
  return rep;
}

}  // namespace tally::bench
