// `tally bench segmented`: rows, columns and ragged segments of f32 sums against CUB
// DeviceSegmentedReduce::Sum (begin/end offsets) in the same process, candidates interleaved;
// the shapes of issue 10's table (2^24 x 16 ... 16 x 2^24, scaled to each total), and the 1-D
// reduce of the same total as the reference for small sizes.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "bench/report.hpp"

namespace tally::bench {

struct segmented_bench_options {
  std::vector<int> log2_totals;  // empty: 20, 24, 28
  bool quick = false;
  bool sweep = false;  // also time every candidate column and row plan against the rule's pick
  bool sweep_only = false;  // that sweep alone (no rows, columns, ragged or dot tables)
  std::vector<std::string> sweep_forms;  // the sweep's forms: columns, rows, ragged, ragged-uniform (empty: all)
  // Profiling instead of timing: at each sweep shape named in profile_shapes (as the table
  // prints it, "2^22 x 2^6"; empty: every shape), the candidate plan of this label ("ragged g2
  // k64"; "rule": the rule's pick) runs profile_reps times between cudaProfilerStart and Stop,
  // for `ncu --profile-from-start off`; its row gives no time.
  std::string profile_plan;
  std::vector<std::string> profile_shapes;
  int profile_reps = 3;
  std::function<void(const std::string&)> progress;
};

report run_segmented_bench(const segmented_bench_options& opt);

}  // namespace tally::bench
