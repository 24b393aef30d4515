// Running lab variants: verification against an exact CPU reference, kernel and system timings
// (seed-style tables), size sweeps and parameter sweeps. Built on the core's harness: events and
// medians from bench/timing, the read ceiling from bench/probe, tables from bench/report.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "bench/report.hpp"
#include "lab/lab.hpp"

namespace tally::lab {

struct run_options {
  std::vector<std::string> variants;  // ids; empty = all
  std::vector<dtype> types = {dtype::f32, dtype::f64, dtype::i32};
  std::vector<std::uint64_t> sizes;   // empty = {2^24, 2^24 - 3}
  std::map<std::string, int> params;  // overrides, applied to variants that have the param
  bool constant_input = false;        // all elements 1 instead of random
  int kernel_reps = 15;
  int system_reps = 3;
  int race_runs = 5;                  // repeated runs of racy variants
  std::function<void(const std::string&)> progress;
};

struct sweep_options {
  std::vector<std::string> variants;  // empty = all
  dtype type = dtype::f32;
  int from_log2 = 10, to_log2 = 30, step_log2 = 2;
  bool param_sweeps = true;           // hip-7 unroll 1..32, cuda-* block 64..1024
  double max_seconds_per_call = 0.25; // larger sizes are skipped once a call takes longer
  std::function<void(const std::string&)> progress;
  std::function<void(const bench::report&)> checkpoint;  // after each series (partial results)
};

// The checked result of one variant on one input.
struct verdict {
  bool ok = false;          // within the error bound (exact for integers)
  bool checked = true;      // false: the forward error bound is vacuous (h*u >= 1); ok is then
                            // only "not NaN", and the report says so
  double abs_error = 0;
  double rel_error = 0;
  double bound = 0;         // gamma_h * sum|x| (+ ulp) for floats; 0 for integers
  std::string text;         // "ok", "WRONG: ..." for the report
};

// Parses "2^24", "16777216", "1e6"; throws tally::error on junk.
std::uint64_t parse_size(const std::string& s);
// The variant's params with defaults, overridden by `overrides` where the variant has them.
std::map<std::string, int> resolve_params(const variant_meta& m, const std::map<std::string, int>& overrides);
// Lines of `tally lab list`, grouped by origin.
std::string list_text();

bench::report run_lab(const run_options& opt);

// Runs variant `id` once on random input of n elements of t (seeded) and checks the result
// against the exact CPU reference. Throws config_error for configurations it refuses.
verdict verify_variant(const std::string& id, dtype t, std::uint64_t n, const std::map<std::string, int>& params,
                       std::uint64_t seed, bool constant_input = false);
bench::report sweep_lab(const sweep_options& opt);

}  // namespace tally::lab
