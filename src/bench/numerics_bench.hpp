// `tally bench numerics`: the numerics features side by side with the vendor libraries, in one
// process, candidates interleaved inside every repetition (bench/timing):
//   argminmax  argmin / argmax f32 (and argmax f64 at two sizes) vs
//   cub::DeviceReduce::ArgMin/ArgMax dot        dot f32 / f64 vs cuBLAS cublasSdot_64 /
//   cublasDdot_64 (device pointer mode) accuracy   sum f32 / f64: fast vs compensated vs exact, %
//   of fast's bandwidth, errors stats      stats f32 / f64 vs tally's fast sum and CUB's sum half
//   sum f16 / bf16 vs CUB TransformReduce (widened to float, float accumulation)
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "bench/report.hpp"
#include "bench/schedule.hpp"

namespace tally::bench {

struct numerics_bench_options {
  std::vector<std::uint64_t> sizes;  // empty: 2^10, 2^12, ..., 2^30 (powers of 4)
  std::vector<std::string> tables;   // empty: all of numerics_table_names()
  bool quick = false;                // fewer repetitions
  bool cold = false;                 // also time sizes that fit in L2 with a cold cache (slow)
  schedule sched = schedule::policy;  // the one-pass ops' schedule (--schedule)
  int exact_chunk_rounds = -1;        // --exact-chunk-rounds (-1: the policy's)
  int exact_chunk_tail = -1;          // --exact-chunk-tail (-1: the policy's)
  std::string depth = "policy";       // --depth: policy, base or deep (depth_scope)
  std::function<void(const std::string&)> progress;  // one line per finished measurement
};

// "argminmax", "dot", "accuracy", "stats", "half".
std::vector<std::string> numerics_table_names();
// True when the build found cuBLAS (the dot table needs it).
bool numerics_has_cublas() noexcept;

// Throws tally::error for an unknown table name or a size of 0. A table that fails on the GPU is
// listed in meta["errors"] (and left out) while the other tables still run.
report run_numerics_bench(const numerics_bench_options& opt);

}  // namespace tally::bench
