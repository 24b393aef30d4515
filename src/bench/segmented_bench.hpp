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
  std::function<void(const std::string&)> progress;
};

report run_segmented_bench(const segmented_bench_options& opt);

}  // namespace tally::bench
