// `tally bench core`: tally against CUB DeviceReduce, side by side in one process.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "bench/report.hpp"
#include "bench/schedule.hpp"
#include "tally/tally.hpp"

namespace tally::bench {

struct core_case {
  dtype type;
  op operation;
  int min_log2, max_log2, step_log2;
  std::vector<int> extra_log2;  // sizes off the step grid (2^29 for f64)
};

struct core_bench_options {
  std::vector<core_case> cases;  // empty: the standard set (sum f32/f64/i32, min/max f32)
  bool cold = true;              // also run sizes that fit in L2 with a cold cache
  bool quick = false;            // fewer repetitions (smoke runs, CI-like checks on a GPU)
  schedule sched = schedule::policy;  // the one-pass ops' schedule (--schedule)
  std::function<void(const std::string&)> progress;  // one line per finished measurement
};

std::vector<core_case> standard_core_cases();
report run_core_bench(const core_bench_options& opt);

}  // namespace tally::bench
