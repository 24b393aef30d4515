// `tally bench cpu`: the host's share of a head start (src/cpu/exact_sum, src/chunked/head_start)
// without a GPU: the exact sum of an array in host memory by 1 .. all cores, each summing its
// part in 1 MiB pieces as the head start's threads do, for float32, float64, float16 and bfloat16.
// Host wall clock, the median of several runs; the result of every thread count must be the
// one-thread result, bit for bit (`same_bits`). Runs on any machine (CI included).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "bench/report.hpp"

namespace tally::bench {

struct cpu_bench_options {
  std::uint64_t mib = 256;  // bytes of each dtype's array, MiB
  int reps = 5;             // the median of these
  std::function<void(const std::string&)> progress;
};

report run_cpu_bench(const cpu_bench_options& opt);

}  // namespace tally::bench
