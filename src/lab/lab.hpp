// The reduction lab: every kernel of the tutorials tally started from, one variant per file, each
// registering itself with its metadata (origin, the one change it makes, its flaw, its expected
// verdict) and running through one interface: prepare, launch, finish, fetch.
//
//   for (const auto& r : tally::lab::registry()) std::puts(r.meta.id.c_str());   // "cuda-1" ...
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "tally/tally.hpp"

namespace tally::lab {

// A tunable of a variant (block size, unroll factor, grid size), with its default.
struct param {
  std::string name;
  int value;
  std::string help;
};

struct variant_meta {
  std::string id;            // short unique name used by --variants: "cuda-1", "hip-atomics"
  std::string group;         // origin group: cuda, hip, optlog, sycl, numba, anchor
  int order = 0;             // position in its group; order 1 is the group's baseline
  std::string title;         // "interleaved addressing, divergent warps"
  std::string origin;        // where it comes from: "CUDA tutorial, reduction 1"
  std::string change;        // the one change it makes over the previous step
  std::string flaw;          // why it is slow or wrong
  bool expected_correct = true;  // false: deliberately wrong (race, lost updates)
  bool racy = false;         // results may differ run to run (repeated runs are compared)
  bool constant_demo = false;    // also verified on constant input (right there, wrong on random)
  bool dot = false;          // reduces x[i] * y[i] (the Numba chapter), not x[i]
  std::string requirements;  // what it enforces or generalises ("block must be a power of two")
  std::vector<param> params; // tunables and their defaults
};

// Everything a variant needs for one input.
struct run_args {
  dtype type = dtype::f32;           // f32, f64 or i32
  std::uint64_t n = 0;
  const void* d_x = nullptr;         // input (device)
  const void* d_y = nullptr;         // second input for dot variants
  cudaStream_t stream = nullptr;
  std::map<std::string, int> params; // every param of the variant, defaults filled in
  int sm_count = 0;
};

// A result: integers exactly, floats as doubles.
struct lab_value {
  bool is_int = false;
  std::int64_t i = 0;
  double f = 0;
  double as_double() const { return is_int ? static_cast<double>(i) : f; }
};

// A configuration the variant cannot run (a block size that is not a power of two, a grid the
// original cannot cover): the message says which and why.
class config_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class variant {
 public:
  virtual ~variant() = default;
  // Allocate what this input needs (partials, temporary storage); throws config_error.
  virtual void prepare(const run_args& a) = 0;
  // Enqueue the GPU work on a.stream (one or more kernels). Timed as the kernel time.
  virtual void launch(const run_args& a) = 0;
  // Work the original leaves to the host (copying partials back and adding them); default none.
  virtual void finish(const run_args& /*a*/) {}
  // The result; synchronises.
  virtual lab_value fetch(const run_args& a) = 0;
  // For float checks: the longest chain of roundings any element passes through (the tree
  // height h in the bound gamma_h * sum|x|). The default fits tree reductions with short
  // per-thread loops; variants with long sequential chains (a grid-stride loop per thread,
  // atomics into one address, a host loop over partials) return their own.
  virtual std::uint64_t error_height(const run_args& a) const;
};

using factory = std::unique_ptr<variant> (*)(dtype);

struct registration {
  variant_meta meta;
  factory make;
};

// Every variant, sorted by group then order.
const std::vector<registration>& registry();
const registration* find(const std::string& id);
// Group display names and their order: cuda, hip, optlog, sycl, numba, anchor.
std::vector<std::string> group_order();
std::string group_title(const std::string& group);

struct registrar {
  registrar(variant_meta meta, factory make);
};

}  // namespace tally::lab
