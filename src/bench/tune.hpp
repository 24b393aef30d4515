// `tally bench tune`: the sweeps behind the constants in src/core/tuning.cuh. Kernel shapes
// (block size, loads in flight, load hint), blocks per SM at large sizes, grid size at middle
// sizes, programmatic dependent launch on and off, and a thread-block-cluster variant that
// combines through distributed shared memory instead of global atomics.
#pragma once

#include <functional>
#include <string>

#include "bench/report.hpp"

namespace tally::bench {

report run_tune(bool quick, const std::function<void(const std::string&)>& progress);

}  // namespace tally::bench
