// `tally bench calls`: what one call costs the calling thread. A reduce of 2^10 elements is
// bound by its host enqueue, not by the GPU, so the time of each step of that enqueue (the
// device and stream lookups, the driver's pointer queries behind the memory checks, the launch)
// decides the small-size stream ratios and the Python layer's speed. Host wall clock, loops of
// calls with a synchronise after each loop, the median of several loops. A third table times a
// blocking call's round trip part by part (the launch reaching the GPU, a copy of the result back
// or the kernel's store into pinned host memory, the synchronise) at 2^10 and 2^27 f32, against
// the same kernels replayed from a graph.
#pragma once

#include <functional>
#include <string>

#include "bench/report.hpp"

namespace tally::bench {

struct calls_bench_options {
  int calls = 4000;  // per loop
  int loops = 9;     // the median of these
  std::function<void(const std::string&)> progress;
};

report run_calls_bench(const calls_bench_options& opt);

}  // namespace tally::bench
