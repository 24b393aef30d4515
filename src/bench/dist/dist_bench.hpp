// `tally bench dist`: an f32 sum over several GPUs, one process per GPU under mpirun, side by side
// in one run:
//   - tally on ONE GPU over the whole array (rank 0), and CUB on one GPU (reference);
//   - tally::dist over every rank's shard (the result on every rank, on the host);
//   - "CUB per shard + ncclAllReduce": cub::DeviceReduce::Sum of the shard, an ncclAllReduce
//     (ncclSum) of the one-float partials, the result copied to the host;
//   - the parts of the budget for data that already lives sharded: one GPU's reduce of its shard
//     alone, and the latency of a one-float ncclAllReduce.
// Every time is the host wall clock of a blocking call that ends with the result on the host:
// back-to-back calls in a timed loop after a barrier, the slowest rank's time per call, the median
// of several loops; the candidates alternate inside each repetition. Then the exact mode: one GPU
// against every rank, and whether the bits agree (the shards hold the same values as the whole).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "bench/report.hpp"
#include "bench/schedule.hpp"

namespace tally::bench {

struct dist_bench_options {
  std::vector<int> log2_totals;  // total f32 elements over all ranks; empty: 20, 22, ..., 30, 31, 32
  int reps = 7;                  // timed loops per candidate (the median is reported)
  bool quick = false;            // 3 loops, shorter ones
  // Also the stream-ordered form: tally::dist::reduce against reduce_async + synchronize and the
  // replay of a captured reduce_async, and whether their bits agree (a table of its own).
  bool async = false;
  // The one-pass ops' schedule on every rank (`--schedule`, as bench core): the shards' reductions
  // and the one-GPU and per-shard columns alike.
  schedule sched = schedule::policy;
  std::function<void(const std::string&)> progress;  // rank 0 only
};

// One process driving every GPU it sees (communicator::init_all, no MPI): one GPU over the whole
// array against tally::dist over all of them and CUB per shard + a grouped ncclAllReduce, fast
// and exact (`tally bench dist --single-process`).
report run_dist_local_bench(const dist_bench_options& opt);

// Runs under mpirun (or alone, as one rank): initialises and finalises MPI itself. Rank 0 hands
// the report to `emit`. Returns the process's exit code (0, or 1 after an error on any rank, whose
// message is printed on stderr).
int run_dist_bench(const dist_bench_options& opt, const std::function<void(const report&)>& emit);

}  // namespace tally::bench
