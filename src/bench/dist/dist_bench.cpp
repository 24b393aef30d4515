// `tally bench dist` (see dist_bench.hpp).
#include "bench/dist/dist_bench.hpp"

#include <cuda_runtime_api.h>
#include <mpi.h>
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "bench/dist/cub_shard.hpp"
#include "bench/dist/dist_common.hpp"
#include "bench/probe.hpp"
#include "bench/timing.hpp"
#include "dist/trace.hpp"
#include "tally/dist.hpp"
#include "tally/dist_mpi.hpp"

namespace tally::bench {
namespace {

using clk = std::chrono::steady_clock;
using dist::check_mpi;

using dist_common::bits_of;
using dist_common::check_nccl;
using dist_common::kGolden;
using dist_common::kSeed;

double max_over_ranks(double v) {
  double m = 0;
  check_mpi(MPI_Allreduce(&v, &m, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD), "MPI_Allreduce(the slowest rank)");
  return m;
}

long long min_over_ranks(long long v) {
  long long m = 0;
  check_mpi(MPI_Allreduce(&v, &m, 1, MPI_LONG_LONG, MPI_MIN, MPI_COMM_WORLD), "MPI_Allreduce(the least)");
  return m;
}

bool on_every_rank(bool b) { return min_over_ranks(b ? 1 : 0) == 1; }

// Where a blocking tally::dist call's time goes: `calls` calls traced on every rank (src/dist/trace.hpp:
// host timestamps on the one clock of the host), gathered to rank 0. Per call, every rank's steps
// are measured from the earliest rank's start; a row per rank, the medians over the calls (us).
// Every rank calls `call`; the rows are rank 0's (none elsewhere).
std::vector<json> trace_steps(int L, int calls, int rank, int size, const std::function<void()>& call) {
  using dist::trace::kPoints;
  check_mpi(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
  call();  // lines the ranks up (loop_us)
  dist::trace::record(static_cast<std::size_t>(calls));
  for (int i = 0; i < calls; ++i) call();
  const std::vector<dist::trace::row> mine = dist::trace::rows();
  dist::trace::record(0);
  std::vector<long long> flat(static_cast<std::size_t>(calls) * kPoints, 0);
  for (std::size_t i = 0; i < mine.size() && i < static_cast<std::size_t>(calls); ++i)
    for (int p = 0; p < kPoints; ++p) flat[i * kPoints + p] = mine[i][p];
  std::vector<long long> all(rank == 0 ? flat.size() * static_cast<std::size_t>(size) : 1);
  check_mpi(MPI_Gather(flat.data(), static_cast<int>(flat.size()), MPI_LONG_LONG, all.data(), static_cast<int>(flat.size()),
                       MPI_LONG_LONG, 0, MPI_COMM_WORLD),
            "MPI_Gather(the traced steps)");
  if (rank != 0) return {};
  const auto at = [&](int r, int i, int p) { return all[(static_cast<std::size_t>(r) * calls + i) * kPoints + p]; };
  // per rank, per step: the step's time from the call's earliest start, over the whole calls
  std::vector<std::vector<std::vector<double>>> t(static_cast<std::size_t>(size),
                                                  std::vector<std::vector<double>>(kPoints));
  std::vector<std::vector<double>> period(static_cast<std::size_t>(size));
  for (int i = 0; i < calls; ++i) {
    bool whole = true;
    long long base = at(0, i, dist::trace::start);
    for (int r = 0; r < size; ++r) {
      for (int p = 0; p < kPoints; ++p) whole = whole && at(r, i, p) != 0;
      base = std::min(base, at(r, i, dist::trace::start));
    }
    if (!whole) continue;
    for (int r = 0; r < size; ++r) {
      for (int p = 0; p < kPoints; ++p) t[r][p].push_back((at(r, i, p) - base) / 1e3);
      if (i + 1 < calls && at(r, i + 1, dist::trace::start) != 0)
        period[r].push_back((at(r, i + 1, dist::trace::start) - at(r, i, dist::trace::start)) / 1e3);
    }
  }
  std::vector<json> rows;
  if (t[0][0].empty()) return rows;
  for (int r = 0; r < size; ++r)
    rows.push_back(json{{"log2n", L},
                        {"rank", r},
                        {"start_us", median(t[r][dist::trace::start])},
                        {"launched_us", median(t[r][dist::trace::launched])},
                        {"queued_us", median(t[r][dist::trace::queued])},
                        {"own_us", median(t[r][dist::trace::own_done])},
                        {"exchanged_us", median(t[r][dist::trace::exchanged])},
                        {"returned_us", median(t[r][dist::trace::combined])},
                        {"period_us", period[r].empty() ? 0.0 : median(period[r])}});
  return rows;
}

// The baseline's NCCL communicator: blocking (NCCL's default), as a plain caller makes it.
struct nccl_comm {
  ncclComm_t c = nullptr;
  nccl_comm(int rank, int size) {
    ncclUniqueId id{};
    if (rank == 0) check_nccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
    check_mpi(MPI_Bcast(&id, static_cast<int>(sizeof id), MPI_BYTE, 0, MPI_COMM_WORLD), "MPI_Bcast(NCCL's id)");
    check_nccl(ncclCommInitRank(&c, size, id, rank), "ncclCommInitRank(the baseline's communicator)");
  }
  ~nccl_comm() {
    if (c != nullptr) (void)ncclCommDestroy(c);
  }
  nccl_comm(const nccl_comm&) = delete;
  nccl_comm& operator=(const nccl_comm&) = delete;
};

constexpr std::size_t kRecord = 1536;  // src/dist/record.hpp: record_bytes()

// Checks an all-gather on tally's communicator, waiting while it answers ncclInProgress (a
// non-blocking communicator) until the collective is queued.
void queued(ncclComm_t c, ncclResult_t r) {
  if (r != ncclInProgress) check_nccl(r, "ncclAllGather (tally's communicator)");
  ncclResult_t st = ncclInProgress;
  while (st == ncclInProgress) check_nccl(ncclCommGetAsyncError(c, &st), "ncclCommGetAsyncError");
  check_nccl(st, "ncclAllGather (tally's communicator)");
}

struct candidate {
  const char* key;
  bool rank0_only;  // one GPU: rank 0 calls, the others wait at the next barrier
  std::function<void()> call;
};

// Host microseconds per call over `calls` back-to-back calls after a barrier and one untimed
// call: the slowest rank's, and the fastest's (the ranks that called). The untimed call lines the
// ranks up: they leave MPI_Barrier up to tens of microseconds apart, and in a candidate that
// synchronises the ranks (an all-reduce, tally::dist) the first rank out waits that long in its
// first call, which at 2^32 (3 calls a loop) added 40-75 us to every call of the loop on two
// H100s (2026-11-26: the 1-float ncclAllReduce measured 56.7 us there, 15 us at small sizes).
std::pair<double, double> loop_us(const candidate& c, int calls, int rank) {
  check_mpi(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
  double us = 0;
  const bool calls_here = !c.rank0_only || rank == 0;
  if (calls_here) {
    c.call();
    const auto t0 = clk::now();
    for (int i = 0; i < calls; ++i) c.call();
    us = std::chrono::duration<double, std::micro>(clk::now() - t0).count() / calls;
  }
  const double slowest = max_over_ranks(us);
  return {slowest, -max_over_ranks(calls_here ? -us : -slowest)};
}

struct medians {
  std::vector<double> slowest, fastest;  // per candidate: the median over repetitions
};

// Median per-call time of every candidate; candidates alternate inside each repetition.
medians time_all(const std::vector<candidate>& cs, int calls, int reps, int rank) {
  for (const candidate& c : cs) (void)loop_us(c, 2, rank);  // warm-up (NCCL connections, CUB)
  std::vector<std::vector<double>> hi(cs.size()), lo(cs.size());
  for (int r = 0; r < reps; ++r)
    for (std::size_t k = 0; k < cs.size(); ++k) {
      const auto [a, b] = loop_us(cs[k], calls, rank);
      hi[k].push_back(a);
      lo[k].push_back(b);
    }
  medians m;
  for (std::size_t k = 0; k < cs.size(); ++k) m.slowest.push_back(median(hi[k])), m.fastest.push_back(median(lo[k]));
  return m;
}

report run(const dist_bench_options& opt, int rank, int size) {
  std::vector<int> totals = opt.log2_totals;
  if (totals.empty()) totals = {20, 22, 24, 26, 28, 30, 31, 32};
  const int reps = opt.quick ? 3 : std::max(1, opt.reps);
  const double loop_budget_us = opt.quick ? 5000 : 20000;
  auto say = [&](const std::string& s) {
    if (rank == 0 && opt.progress) opt.progress(s);
  };

  dist::dist_options dopt;
  dopt.timeout_ms = 120000;
  std::optional<dist::communicator> comm;
  comm.emplace(dist::mpi_communicator(MPI_COMM_WORLD, -1, dopt));
  // Where tally's communicator exchanges through NCCL's device API (dist_options::device_exchange,
  // the default), a second one with the all-gather (device_exchange = false): its own candidate.
  const bool has_dx = on_every_rank(comm->exchange() == "NCCL device API");
  std::optional<dist::communicator> comm_ag;
  if (has_dx) {
    dist::dist_options o = dopt;
    o.device_exchange = false;
    comm_ag.emplace(dist::mpi_communicator(MPI_COMM_WORLD, -1, o));
  }
  check(cudaSetDevice(comm->device()), "cudaSetDevice(this rank's GPU)");
  nccl_comm base(rank, size);
  cudaStream_t s = nullptr;
  check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate(bench dist)");

  // The largest total every rank can hold: rank 0 the whole array (its shard is the array's
  // first part), the others their shard; CUB's temporary storage beside it.
  std::size_t free_b = 0, total_b = 0;
  check(cudaMemGetInfo(&free_b, &total_b), "cudaMemGetInfo");
  int fits = 0;
  for (int L : totals) {
    const double need = 4.0 * std::ldexp(1.0, L) / (rank == 0 ? 1 : size) * 1.02 + (256 << 20);
    if (need < 0.92 * static_cast<double>(free_b)) fits = std::max(fits, L);
  }
  const int max_log2 = static_cast<int>(min_over_ranks(fits));
  std::vector<int> skipped, sizes;
  for (int L : totals) (L <= max_log2 ? sizes : skipped).push_back(L);
  if (sizes.empty()) throw error("tally bench dist: no size fits every rank's GPU memory");
  const std::uint64_t n_max = std::uint64_t(1) << max_log2;
  const std::uint64_t shard_max = (n_max + size - 1) / size;

  device_buffer whole(rank == 0 ? n_max * 4 : 4), own(rank == 0 ? 4 : shard_max * 4), d_out(64), d_res(64);
  if (rank == 0) fill_random(whole.get(), n_max, dtype::f32, kSeed, -1.0, 1.0, s);
  std::size_t temp_bytes = 0;
  check(cub_sum_f32(nullptr, temp_bytes, nullptr, nullptr, rank == 0 ? n_max : shard_max, s),
        "cub::DeviceReduce::Sum (temp size)");
  device_buffer temp(std::max<std::size_t>(temp_bytes, 16));
  pinned_bytes h_out(64);
  check(cudaStreamSynchronize(s), "cudaStreamSynchronize(bench dist fill)");

  const device_info dev = current_device();
  report rep;
  stamp_report(rep, "dist", dev, ceiling{});
  rep.meta.erase("read_ceiling_gbps");  // no ceiling probe here
  rep.meta.erase("theoretical_gbps");
  rep.meta["ranks"] = size;
  const schedule_scope sched(opt.sched, rep);
  rep.meta["gpus_per_rank"] = 1;
  int nccl_version = 0;
  check_nccl(ncclGetVersion(&nccl_version), "ncclGetVersion");
  rep.meta["nccl_version"] = nccl_version;
  const char* nvls = std::getenv("NCCL_NVLS_ENABLE");
  rep.meta["NCCL_NVLS_ENABLE"] = nvls ? nvls : "(unset)";
  rep.meta["exchange"] = comm->exchange();
  rep.meta["timing"] = "host wall clock of blocking calls that end with the result on the host: back-to-back calls "
                       "after a barrier and one untimed call, the slowest rank's time per call, the median of " +
                       std::to_string(reps) + " loops; candidates alternate";
  rep.meta["data"] = "f32 uniform in [-1, 1); rank k's shard holds elements [k N / ranks, (k + 1) N / ranks) of the "
                     "array that rank 0 reduces alone";
  if (!skipped.empty()) {
    std::string sk;
    for (int L : skipped) sk += (sk.empty() ? "2^" : ", 2^") + std::to_string(L);
    rep.meta["skipped_sizes"] = sk + " (GPU memory)";
  }

  table fast{"f32 sum, fast mode: one GPU vs " + std::to_string(size) + " ranks (us per blocking call)",
             {{"log2n", "log2 N", -1},
              {"one_gpu_us", "tally, 1 GPU, whole", 1},
              {"cub_one_us", "CUB, 1 GPU, whole", 1},
              {"shard_us", "tally, one shard alone", 1},
              {"shard_fastest_us", "(fastest rank)", 1},
              {"allreduce_us", "ncclAllReduce 1 float", 1},
              {"dist_us", "tally::dist", 1},
              {"cub_allreduce_us", "CUB per shard + ncclAllReduce", 1},
              {"scaling", "scaling (1 GPU / dist)", 2},
              {"vs_cub_allreduce", "CUB+AllReduce / dist", 2},
              {"dist_ag_us", "tally::dist, all-gather exchange", 1},
              {"scaling_ag", "its scaling", 2},
              {"ag_same_bits", "its bits as dist's", -1},
              {"budget_us", "shard + all-reduce + 5 us", 1},
              {"within_budget", "dist within it", -1},
              {"dist_gbps", "dist GB/s", 0},
              {"same_bits_20_runs", "20 runs, same bits", -1}},
             {}};
  table strm{"f32 sum, fast mode, stream-ordered: the blocking call vs reduce_async + synchronize vs a captured "
             "graph's replay + synchronize, " + std::to_string(size) + " ranks (us per call)",
             {{"log2n", "log2 N", -1},
              {"dist_us", "tally::dist (blocking)", 1},
              {"async_us", "reduce_async + synchronize", 1},
              {"graph_us", "graph replay + synchronize", 1},
              {"async_ss_us", "reduce_async + cudaStreamSynchronize + synchronize", 1},
              {"graph_ss_us", "graph replay + cudaStreamSynchronize + synchronize", 1},
              {"async_vs_dist", "blocking / async", 2},
              {"graph_vs_dist", "blocking / graph", 2},
              {"same_bits", "async and graph: same bits as blocking", -1}},
             {}};
  table exact{"f32 sum, exact mode: one GPU vs " + std::to_string(size) + " ranks (us per blocking call)",
              {{"log2n", "log2 N", -1},
               {"one_gpu_us", "tally exact, 1 GPU, whole", 1},
               {"dist_us", "tally::dist exact", 1},
               {"scaling", "scaling", 2},
               {"same_bits", "same bits as 1 GPU", -1}},
              {}};

  table steps{"where a tally::dist call's time goes: each rank's steps, host clock, us from the earliest rank's "
              "start of the call (medians over 40 back-to-back calls)",
              {{"log2n", "log2 N", -1},
               {"exchange", "exchange", -1},
               {"rank", "rank", -1},
               {"start_us", "call entered", 1},
               {"launched_us", "shard kernel + header queued", 1},
               {"queued_us", "all-gather queued", 1},
               {"own_us", "own kernel seen ended", 1},
               {"exchanged_us", "exchange seen ended", 1},
               {"returned_us", "returned", 1},
               {"period_us", "call to call", 1}},
              {}};
  // Where a small call's time goes: NCCL's exchanges alone (the baseline's communicator and
  // tally's, the size of tally's records), the copy back, tally's whole call.
  {
    say("latency");
    device_buffer rec_mine(kRecord), rec_all(kRecord * static_cast<std::size_t>(size)), one(4);
    pinned_bytes h_rec(kRecord * static_cast<std::size_t>(size));
    const float x1 = 1.0f;
    one.upload(&x1, 4);
    check(cudaMemset(rec_mine.get(), 0, kRecord), "cudaMemset");
    float* out = reinterpret_cast<float*>(d_out.get());
    ncclComm_t tc = comm->nccl();
    const auto sync = [&] { check(cudaStreamSynchronize(s), "cudaStreamSynchronize"); };
    const dist::shard tiny{one.get(), 1, static_cast<std::uint64_t>(rank), nullptr};
    std::vector<candidate> cl = {
        {"ncclAllReduce, 1 float (blocking communicator)", false,
         [&] {
           check_nccl(ncclAllReduce(out, out, 1, ncclFloat, ncclSum, base.c, s), "ncclAllReduce");
           sync();
         }},
        {"ncclAllGather, 1536 B a rank (blocking communicator)", false,
         [&] {
           check_nccl(ncclAllGather(rec_mine.get(), rec_all.get(), kRecord, ncclUint8, base.c, s), "ncclAllGather");
           sync();
         }},
        {"ncclAllGather, 1536 B a rank (tally's communicator)", false,
         [&] {
           queued(tc, ncclAllGather(rec_mine.get(), rec_all.get(), kRecord, ncclUint8, tc, s));
           sync();
         }},
        {"ncclAllGather, 1536 B a rank, into pinned host memory", false,
         [&] {
           check_nccl(ncclAllGather(rec_mine.get(), h_rec.p, kRecord, ncclUint8, base.c, s), "ncclAllGather");
           sync();
         }},
        {"the same, then the records copied to the host", false,
         [&] {
           queued(tc, ncclAllGather(rec_mine.get(), rec_all.get(), kRecord, ncclUint8, tc, s));
           check(cudaMemcpyAsync(h_rec.p, rec_all.get(), kRecord * static_cast<std::size_t>(size),
                                 cudaMemcpyDeviceToHost, s),
                 "cudaMemcpyAsync");
           sync();
         }},
        {"cudaMemcpyAsync of 4 bytes to the host", false,
         [&] {
           check(cudaMemcpyAsync(h_out.p, out, 4, cudaMemcpyDeviceToHost, s), "cudaMemcpyAsync");
           sync();
         }},
        {"tally::reduce_value of 1 element (one GPU)", false,
         [&] { (void)reduce_value(one.get(), 1, dtype::f32, op::sum, reinterpret_cast<stream_t>(s)); }},
        {has_dx ? "tally::dist::reduce of 1 element a rank (device exchange)" : "tally::dist::reduce of 1 element a rank", false,
         [&] { (void)dist::reduce(*comm, tiny, dtype::f32, op::sum, {}, reinterpret_cast<stream_t>(s)); }},
    };
    if (has_dx)
      cl.push_back({"tally::dist::reduce of 1 element a rank, all-gather exchange", false,
                    [&] { (void)dist::reduce(*comm_ag, tiny, dtype::f32, op::sum, {}, reinterpret_cast<stream_t>(s)); }});
    const std::vector<double> tl = time_all(cl, opt.quick ? 50 : 200, reps, rank).slowest;
    table lat{"latency: what a small call's parts cost (us per blocking call, the slowest rank)",
              {{"what", "what", -1}, {"us", "us", 1}},
              {}};
    for (std::size_t k = 0; k < cl.size(); ++k) lat.rows.push_back({{"what", cl[k].key}, {"us", tl[k]}});
    rep.tables.push_back(std::move(lat));
  }

  // The exchange's own cost on the GPU once a long kernel ends (its host enqueue hidden behind
  // it): every rank runs a 100 us spin kernel, then the step, then waits; less the spin and a
  // synchronize alone. What tally::dist pays after its shard's kernel against what a one-GPU
  // blocking call pays (a 4-byte copy), and the variants of the exchange.
  {
    say("after a kernel");
    constexpr unsigned long long kSpinNs = 100000;
    device_buffer rec_mine(kRecord), rec_all(kRecord * static_cast<std::size_t>(size));
    pinned_bytes h_rec(kRecord * static_cast<std::size_t>(size)), h_send(kRecord), h_head(kRecord);
    check(cudaMemset(rec_mine.get(), 0, kRecord), "cudaMemset");
    std::memset(h_send.p, 0, kRecord);
    std::memset(h_head.p, 0, kRecord);
    ncclComm_t tc = comm->nccl();
    cudaStream_t side = nullptr;
    cudaEvent_t head = nullptr, ready = nullptr;
    check(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking), "cudaStreamCreate(bench dist side)");
    check(cudaEventCreateWithFlags(&head, cudaEventDisableTiming), "cudaEventCreate");
    check(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming), "cudaEventCreate");
    const auto spin = [&] { check(launch_spin(s, kSpinNs), "the spin kernel"); };
    const auto sync = [&] { check(cudaStreamSynchronize(s), "cudaStreamSynchronize"); };
    const auto gather = [&](const void* from, void* to, std::size_t bytes) {
      queued(tc, ncclAllGather(from, to, bytes, ncclUint8, tc, s));
    };
    const std::vector<candidate> ck = {
        {"the spin, then cudaStreamSynchronize", false, [&] { spin(); sync(); }},
        {"+ 4 B copied to pinned host memory (a one-GPU blocking call's tail)", false,
         [&] {
           spin();
           check(cudaMemcpyAsync(h_rec.p, rec_mine.get(), 4, cudaMemcpyDeviceToHost, s), "cudaMemcpyAsync");
           sync();
         }},
        {"+ ncclAllGather 1536 B a rank into pinned host memory (tally::dist's exchange)", false,
         [&] { spin(); gather(rec_mine.get(), h_rec.p, kRecord); sync(); }},
        {"+ the same after tally::dist's header wait (side-stream copy, event wait, event)", false,
         [&] {
           spin();
           check(cudaMemcpyAsync(rec_mine.get(), h_head.p, 256, cudaMemcpyHostToDevice, side), "cudaMemcpyAsync");
           check(cudaEventRecord(head, side), "cudaEventRecord");
           check(cudaStreamWaitEvent(s, head, 0), "cudaStreamWaitEvent");
           check(cudaEventRecord(ready, s), "cudaEventRecord");
           gather(rec_mine.get(), h_rec.p, kRecord);
           sync();
         }},
        {"+ ncclAllGather 64 B a rank into pinned host memory", false,
         [&] { spin(); gather(rec_mine.get(), h_rec.p, 64); sync(); }},
        {"+ ncclAllGather 1536 B a rank into device memory", false,
         [&] { spin(); gather(rec_mine.get(), rec_all.get(), kRecord); sync(); }},
        {"+ ncclAllGather 1536 B a rank, pinned host memory to pinned host memory", false,
         [&] { spin(); gather(h_send.p, h_rec.p, kRecord); sync(); }},
    };
    const std::vector<double> tk = time_all(ck, opt.quick ? 20 : 60, reps, rank).slowest;
    table after{"after a kernel: what a step costs once a 100 us kernel ends (us over the spin and a synchronize, "
                "the slowest rank)",
                {{"what", "what", -1}, {"us", "us per call", 1}, {"over", "over the first row", 1}},
                {}};
    for (std::size_t k = 0; k < ck.size(); ++k)
      after.rows.push_back({{"what", ck[k].key}, {"us", tk[k]}, {"over", tk[k] - tk[0]}});
    rep.tables.push_back(std::move(after));
    check(cudaEventDestroy(head), "cudaEventDestroy");
    check(cudaEventDestroy(ready), "cudaEventDestroy");
    check(cudaStreamDestroy(side), "cudaStreamDestroy");
  }

  for (int L : sizes) {
    const std::uint64_t N = std::uint64_t(1) << L;
    const std::uint64_t first = N * static_cast<std::uint64_t>(rank) / size;
    const std::uint64_t count = N * static_cast<std::uint64_t>(rank + 1) / size - first;
    const float* whole_p = static_cast<const float*>(whole.get());
    const float* shard_p = rank == 0 ? whole_p : static_cast<const float*>(own.get());
    if (rank != 0)  // the same values as elements [first, first + count) of rank 0's array
      fill_random(own.get(), count, dtype::f32, kSeed + first * kGolden, -1.0, 1.0, s);
    check(cudaStreamSynchronize(s), "cudaStreamSynchronize(bench dist fill)");
    const dist::shard sh{shard_p, count, first, nullptr};
    const stream_t ts = reinterpret_cast<stream_t>(s);
    float* out = static_cast<float*>(d_out.get());
    options ex;
    ex.mode = accuracy::exact;

    const double est_us = 20.0 + 4.0 * static_cast<double>(N) / 3.0e6;  // the whole array at ~3 TB/s
    const int calls = std::clamp(static_cast<int>(loop_budget_us / est_us), 3, 400);
    say("2^" + std::to_string(L) + " fast");
    std::vector<candidate> cs = {
        {"one_gpu", true, [&] { (void)reduce_value(whole_p, N, dtype::f32, op::sum, ts); }},
        {"cub_one", true,
         [&] {
           std::size_t tb = temp.size();
           check(cub_sum_f32(temp.get(), tb, whole_p, out, N, s), "cub::DeviceReduce::Sum");
           check(cudaMemcpyAsync(h_out.p, out, 4, cudaMemcpyDeviceToHost, s), "cudaMemcpyAsync");
           check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
         }},
        {"shard", false, [&] { (void)reduce_value(shard_p, count, dtype::f32, op::sum, ts); }},
        {"allreduce", false,
         [&] {
           check_nccl(ncclAllReduce(out, out, 1, ncclFloat, ncclSum, base.c, s), "ncclAllReduce");
           check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
         }},
        {"dist", false, [&] { (void)dist::reduce(*comm, sh, dtype::f32, op::sum, {}, ts); }},
        {"cub_allreduce", false,
         [&] {
           std::size_t tb = temp.size();
           check(cub_sum_f32(temp.get(), tb, shard_p, out, count, s), "cub::DeviceReduce::Sum");
           check_nccl(ncclAllReduce(out, out, 1, ncclFloat, ncclSum, base.c, s), "ncclAllReduce");
           check(cudaMemcpyAsync(h_out.p, out, 4, cudaMemcpyDeviceToHost, s), "cudaMemcpyAsync");
           check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
         }},
    };
    if (has_dx) cs.push_back({"dist_ag", false, [&] { (void)dist::reduce(*comm_ag, sh, dtype::f32, op::sum, {}, ts); }});
    const medians tm = time_all(cs, calls, reps, rank);
    const std::vector<double>& t = tm.slowest;
    const value f0 = dist::reduce(*comm, sh, dtype::f32, op::sum, {}, ts);
    bool same = true;
    for (int r = 0; r < 20; ++r) same = same && dist::reduce(*comm, sh, dtype::f32, op::sum, {}, ts) == f0;
    same = on_every_rank(same);
    for (json& r : trace_steps(L, 40, rank, size, [&] { (void)dist::reduce(*comm, sh, dtype::f32, op::sum, {}, ts); })) {
      r["exchange"] = has_dx ? "device API" : "all-gather";
      steps.rows.push_back(std::move(r));
    }
    std::string ag_same = "-";
    if (has_dx) {
      ag_same = on_every_rank(dist::reduce(*comm_ag, sh, dtype::f32, op::sum, {}, ts) == f0) ? "yes" : "NO";
      for (json& r : trace_steps(L, 40, rank, size, [&] { (void)dist::reduce(*comm_ag, sh, dtype::f32, op::sum, {}, ts); })) {
        r["exchange"] = "all-gather";
        steps.rows.push_back(std::move(r));
      }
    }
    const double budget = t[2] + t[3] + 5.0;
    fast.rows.push_back({{"log2n", L},
                         {"one_gpu_us", t[0]},
                         {"cub_one_us", t[1]},
                         {"shard_us", t[2]},
                         {"shard_fastest_us", tm.fastest[2]},
                         {"allreduce_us", t[3]},
                         {"dist_us", t[4]},
                         {"cub_allreduce_us", t[5]},
                         {"scaling", t[0] / t[4]},
                         {"vs_cub_allreduce", t[5] / t[4]},
                         {"dist_ag_us", has_dx ? json(t[6]) : json()},
                         {"scaling_ag", has_dx ? json(t[0] / t[6]) : json()},
                         {"ag_same_bits", ag_same},
                         {"budget_us", budget},
                         {"within_budget", t[4] <= budget ? "yes" : "no"},
                         {"dist_gbps", 4.0 * static_cast<double>(N) / t[4] / 1e3},
                         {"same_bits_20_runs", same ? "yes" : "NO"}});

    if (opt.async) {
      say("2^" + std::to_string(L) + " stream-ordered");
      float* res = static_cast<float*>(d_res.get());
      cudaGraph_t g = nullptr;
      cudaGraphExec_t ge = nullptr;
      check(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
      dist::reduce_async(*comm, sh, dtype::f32, op::sum, res, ts);
      check(cudaStreamEndCapture(s, &g), "cudaStreamEndCapture");
      check(cudaGraphInstantiate(&ge, g, 0), "cudaGraphInstantiate");
      const std::vector<candidate> ca = {
          {"dist", false, [&] { (void)dist::reduce(*comm, sh, dtype::f32, op::sum, {}, ts); }},
          {"async", false,
           [&] {
             dist::reduce_async(*comm, sh, dtype::f32, op::sum, res, ts);
             dist::synchronize(*comm, ts);
           }},
          {"graph", false,
           [&] {
             check(cudaGraphLaunch(ge, s), "cudaGraphLaunch");
             dist::synchronize(*comm, ts);
           }},
          // The same two waited for by CUDA first (synchronize then finds them done): what the
          // host's wait in synchronize() costs.
          {"async_ss", false,
           [&] {
             dist::reduce_async(*comm, sh, dtype::f32, op::sum, res, ts);
             check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
             dist::synchronize(*comm, ts);
           }},
          {"graph_ss", false,
           [&] {
             check(cudaGraphLaunch(ge, s), "cudaGraphLaunch");
             check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
             dist::synchronize(*comm, ts);
           }},
      };
      const std::vector<double> ta = time_all(ca, calls, reps, rank).slowest;
      const std::uint64_t want = bits_of(dist::reduce(*comm, sh, dtype::f32, op::sum, {}, ts));
      const auto got = [&] {
        float f = 0;
        check(cudaMemcpy(&f, res, 4, cudaMemcpyDeviceToHost), "cudaMemcpy(the stream-ordered result)");
        value v;
        v.type = dtype::f32;
        v.f = f;
        return bits_of(v);
      };
      dist::reduce_async(*comm, sh, dtype::f32, op::sum, res, ts);
      dist::synchronize(*comm, ts);
      bool same = got() == want;
      check(cudaMemsetAsync(res, 0, 4, s), "cudaMemsetAsync");
      check(cudaGraphLaunch(ge, s), "cudaGraphLaunch");
      dist::synchronize(*comm, ts);
      same = on_every_rank(same && got() == want);
      check(cudaGraphExecDestroy(ge), "cudaGraphExecDestroy");
      check(cudaGraphDestroy(g), "cudaGraphDestroy");
      strm.rows.push_back({{"log2n", L},
                           {"dist_us", ta[0]},
                           {"async_us", ta[1]},
                           {"graph_us", ta[2]},
                           {"async_ss_us", ta[3]},
                           {"graph_ss_us", ta[4]},
                           {"async_vs_dist", ta[0] / ta[1]},
                           {"graph_vs_dist", ta[0] / ta[2]},
                           {"same_bits", same ? "yes" : "NO"}});
    }

    say("2^" + std::to_string(L) + " exact");
    const std::vector<candidate> ce = {
        {"one_exact", true, [&] { (void)reduce_value(whole_p, N, dtype::f32, op::sum, ts, ex); }},
        {"dist_exact", false, [&] { (void)dist::reduce(*comm, sh, dtype::f32, op::sum, ex, ts); }},
    };
    const std::vector<double> te = time_all(ce, calls, reps, rank).slowest;
    std::uint64_t one_bits = 0;
    if (rank == 0) one_bits = bits_of(reduce_value(whole_p, N, dtype::f32, op::sum, ts, ex));
    check_mpi(MPI_Bcast(&one_bits, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD), "MPI_Bcast(the one-GPU exact sum)");
    const bool exact_same = on_every_rank(bits_of(dist::reduce(*comm, sh, dtype::f32, op::sum, ex, ts)) == one_bits);
    exact.rows.push_back({{"log2n", L},
                          {"one_gpu_us", te[0]},
                          {"dist_us", te[1]},
                          {"scaling", te[0] / te[1]},
                          {"same_bits", exact_same ? "yes" : "NO"}});
  }
  rep.tables.push_back(std::move(fast));
  rep.tables.push_back(std::move(steps));
  if (opt.async) rep.tables.push_back(std::move(strm));
  rep.tables.push_back(std::move(exact));
  comm.reset();
  comm_ag.reset();
  check(cudaStreamDestroy(s), "cudaStreamDestroy(bench dist)");
  return rep;
}

}  // namespace

int run_dist_bench(const dist_bench_options& opt, const std::function<void(const report&)>& emit) {
  std::optional<dist::mpi_session> mpi;
  try {
    mpi.emplace();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tally: error: bench dist: %s\n", e.what());
    return 1;
  }
  try {
    const report rep = run(opt, mpi->rank(), mpi->size());
    if (mpi->rank() == 0) emit(rep);
  } catch (const std::exception& e) {
    // One rank's failure ends every rank (a barrier or collective would otherwise wait forever).
    std::fprintf(stderr, "tally: error: bench dist (rank %d of %d): %s\n", mpi->rank(), mpi->size(), e.what());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
    return 1;
  }
  return 0;
}

}  // namespace tally::bench
