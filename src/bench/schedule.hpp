// `tally bench core|numerics --schedule`: which schedule the one-pass ops take for one run, so
// that the strided grid and the dynamic schedule (tuning.hpp) can be timed against the same
// competitors on any GPU, whatever its measured entry chose.
#pragma once

#include <string>

#include "bench/report.hpp"

namespace tally::bench {

// policy: what the GPU's policy picks; strided: the strided grid at every size; dynamic: the
// dynamic schedule past its size rule (kDynamicL2Multiple x L2).
enum class schedule { policy, strided, dynamic };
schedule parse_schedule(const std::string& name);  // throws tally::error naming the choices

// Forces the schedule while it lives (the policy again afterwards) and records it in the
// report's metadata.
class schedule_scope {
 public:
  schedule_scope(schedule s, report& rep);
  ~schedule_scope();
  schedule_scope(const schedule_scope&) = delete;
  schedule_scope& operator=(const schedule_scope&) = delete;
};

// `tally bench numerics --exact-chunk-rounds N --exact-chunk-tail K`: the chunks of the exact sums'
// dynamic schedule (policy.hpp, exact_chunk_rounds / exact_chunk_tail) while it lives (-1: the
// policy's), recorded in the report's metadata.
class exact_chunks_scope {
 public:
  exact_chunks_scope(int rounds, int tail, report& rep);
  ~exact_chunks_scope();
  exact_chunks_scope(const exact_chunks_scope&) = delete;
  exact_chunks_scope& operator=(const exact_chunks_scope&) = delete;
};

// `tally bench numerics --depth base|deep`: every launch in one compiled depth (policy.hpp,
// force_depth) while it lives, so a shape the policy picks by size (the exact sums' and the
// statistics' narrow blocks at small sizes, tuning.hpp) can be timed against the plain shape in
// the same session; "policy" forces nothing. Recorded in the report's metadata.
class depth_scope {
 public:
  depth_scope(const std::string& depth, report& rep);  // throws tally::error naming the choices
  ~depth_scope();
  depth_scope(const depth_scope&) = delete;
  depth_scope& operator=(const depth_scope&) = delete;
};

}  // namespace tally::bench
