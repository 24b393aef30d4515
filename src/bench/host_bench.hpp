// `tally bench host`: reductions of data in host memory, end to end (host wall clock: the copies,
// the staging and the kernels), side by side in one process: tally's streamed path from pageable
// memory and its in-place path from pinned memory against a plain cudaMemcpy followed by a device
// reduce (what `t.cuda().sum()` does), plus sweeps of the staging's threads and chunk size.
#pragma once

#include <functional>
#include <string>

#include "bench/report.hpp"

namespace tally::bench {

struct host_bench_options {
  int log2_n = 30;  // f32 elements
  int reps = 5;
  bool sweep = true;  // the threads and chunk-size tables
  std::function<void(const std::string&)> progress;
};

report run_host_bench(const host_bench_options& opt);

}  // namespace tally::bench
