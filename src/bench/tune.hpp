// `tally bench tune`: what the tuning policy (src/core/policy.hpp) picks on this GPU and why, and
// with --measure the sweeps behind the compiled shapes (src/core/tuning.hpp): every candidate
// shape of each op family timed side by side with CUB / cuBLAS (or, for the exact sum and the
// statistics, with the fast sum), at the sizes that decide.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "bench/report.hpp"

namespace tally::bench {

struct tune_options {
  bool measure = false;             // time the candidate shapes (about 2 minutes)
  bool quick = false;               // fewer repetitions
  std::vector<std::string> groups;  // core, numerics, exact, stats (empty: all)
  int max_log2 = 0;                 // only the sizes up to 2^max_log2 (0: every size of each group)
  std::function<void(const std::string&)> progress;
};

report run_tune(const tune_options& opt);

}  // namespace tally::bench
