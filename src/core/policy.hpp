// The tuning policy: which compiled kernel shape (tuning.hpp) each launch uses and where the grid
// rule switches, chosen at run time from the device's properties, so that a GPU nobody here has
// measured still gets a sensible choice.
//
// The rule. A memory-bound kernel reads at the memory's rate only if each SM keeps enough bytes
// in flight to cover the time a load takes under full load: bytes per SM = (bandwidth / SMs) x
// that time (Little's law). The time is a measured constant (kInflightMicros in policy.cpp); the
// bandwidth is the device's theoretical figure (2 x memory clock x bus width). A shape's bytes in
// flight per SM are its resident blocks per SM (the occupancy the runtime computes from its
// registers and shared memory) x threads x loads x 16 bytes (x 2 for two inputs). Each launch
// takes the shallowest compiled shape that covers the need, or the deepest there is. The grid
// switches to the full resident grid once an input is about twice the L2 (below that, one block
// per SM reads L2-resident data faster).
//
// Measured GPUs (policy.cpp, kMeasured) record what `tally bench tune --measure` found on them;
// an entry may override the rule for a family where the measurement disagrees with it.
//
//   device_facts h200{"NVIDIA H200", 132, 9, 0, 60 << 20, 4814.0};
//   device_policy p = make_policy(h200);  // need_bytes_per_sm = 4814 / 132 * kInflightMicros KB
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "tuning.hpp"

namespace tally::core {

struct device_context;

// The device properties the rule reads.
struct device_facts {
  std::string name;
  int sm_count = 0;
  int cc_major = 0, cc_minor = 0;
  std::uint64_t l2_bytes = 0;
  double bandwidth_gbps = 0;  // theoretical: 2 x memory clock x bus width
};

inline constexpr int kDynRule = -1, kDynOff = 0, kDynBase = 1, kDynDeep = 2;

// A GPU measured here, and what the measurement says about the rule on it.
struct measured_entry {
  const char* name;       // cudaDeviceProp::name, as the driver reports it
  int sm_count;
  int depth[kFamilies];   // per family: -1 the rule decides (it agreed with the measurement), else the depth to use
  const char* run;        // the run the figures come from (machine, date, file under docs/data)
  const char* measured;   // the figures that decided it
  // Per family, the one-pass ops' schedule past kDynamicL2Multiple x L2 (tuning.hpp): kDynOff (the
  // strided grid), kDynBase or kDynDeep (the dynamic schedule in that shape, tuning.hpp's
  // dynamic_shape), kDynRule (the dynamic schedule, its shape by the rule). The exact family's
  // entry is not read (exact_dynamic decides it).
  int dynamic[kFamilies];
  const char* dynamic_measured;  // the figures that decided it
};
const std::vector<measured_entry>& measured_entries();

struct device_policy {
  device_facts facts;
  double inflight_us = 0;        // the time bytes in flight must cover
  double need_bytes_per_sm = 0;  // bandwidth / SMs x inflight_us
  grid_policy grid;
  // The one-pass ops take the dynamic schedule past kDynamicL2Multiple x L2 on GPUs where it was
  // measured faster (a measured entry, per family: kDynOff ... kDynDeep); elsewhere the strided
  // grid (kDynOff), never more than 0.5% behind it on either GPU before their entries were
  // measured (docs/tuning.md).
  int dynamic[kFamilies] = {kDynOff, kDynOff, kDynOff, kDynOff};
  int exact_chunk_rounds = 1;  // the exact sums' dynamic schedule: least rounds a chunk
  int exact_chunk_tail = 0;    // and its last rounds >> this in chunks of one round (0: none)
  const measured_entry* entry = nullptr;  // the measured entry for this GPU, if any
};

// The policy for a device with these properties (pure: no CUDA calls; tests use it with the
// properties of GPUs they do not have).
device_policy make_policy(const device_facts& f);
// The current device's policy, made once per device.
const device_policy& policy_for(const device_context& dev);

// Bytes in flight per SM of a shape with `per_sm` resident blocks (threads x 16-byte loads per
// round, x 2 for two inputs).
double inflight_bytes(const shape& s, int per_sm, bool binary);
// The rule for one family: base if its bytes in flight cover the need, else deep if that has
// more, else base. A measured entry's depth for the family wins; so does force_depth.
depth choose_depth(const device_policy& p, family f, double inflight_base, double inflight_deep);
// Why choose_depth picks what it picks, in words.
std::string why_depth(const device_policy& p, family f, double inflight_base, double inflight_deep);

// Whether an op of the one-pass kernel reads `bytes` in the dynamic schedule on this device
// (force_dynamic wins over the policy).
// heavy: an op whose fold costs more than its load (the compensated sums), which has no deep
// shape; it keeps the strided grid where its family's light ops take deep (one block an SM stops
// loading while it merges a chunk, and heavy ops merge most: H200, 2026-11-28 13:26 UTC,
// compensated f64 at 2^26 / 2^28 90.9 / 94.3% of the fast sum in base chunks, 98.6 / 99.3%
// strided at 10:49 UTC). force_dynamic's settings take heavy ops along.
bool uses_dynamic(const device_policy& p, family f, std::uint64_t bytes, bool heavy = false);
// The dynamic schedule's shape for family f (heavy: the op's fold costs more than its load) on
// this device: the entry's, else the rule's: base where its one block an SM keeps
// kDynamicMergeMargin x the need in flight (it loads nothing while it merges a chunk), else deep.
// Ops without a deep shape (has_dynamic_deep) take base. force_depth wins over both.
depth dynamic_depth(const device_policy& p, family f, bool heavy);
inline constexpr double kDynamicMergeMargin = 1.25;
// Force the dynamic schedule on at every size (1: tests, so that small inputs exercise it too),
// off (0; the exact sums' dynamic schedule too: `--schedule strided`), on past its size rule as
// if the GPU's measured entry said so (2: `tally bench core --schedule dynamic`), or -1 for the
// policy. Takes effect for launches after the call.
inline constexpr int kDynamicByPolicy = -1, kDynamicOff = 0, kDynamicEverySize = 1, kDynamicPastSizeRule = 2;
void force_dynamic(int d);
int forced_dynamic();

// The chunks of the exact sums' dynamic schedule (device_exact.cuh, exact_block_dynamic): at least
// exact_chunk_rounds rounds of loads a chunk where its input gives a round or more a chunk, and
// the last rounds >> exact_chunk_tail of the input in chunks of one round (0: none). The policy's
// kExactChunkRounds and kExactChunkTail (policy.cpp, with the measurement behind them) unless
// forced (benchmarks: `tally bench numerics --exact-chunk-rounds N --exact-chunk-tail K`; -1 for
// the policy's).
int exact_chunk_rounds(const device_policy& p);
int exact_chunk_tail(const device_policy& p);
void force_exact_chunks(int rounds, int tail);
bool forced_exact_chunks();

// Benchmarks and tests: force every launch to one depth (0 base, 1 deep), or -1 for the rule.
// Takes effect for launches after the call (each launcher caches its choice per depth setting).
void force_depth(int d);
int forced_depth();

// The policy's inputs and outputs in words, for `tally bench tune`.
std::vector<std::pair<std::string, std::string>> explain(const device_policy& p);

// One family's choice on the current device, for a representative op (tally bench tune).
struct family_choice {
  std::string family, example;  // "plain", "sum f32"
  shape base, deep;
  int base_per_sm = 0, deep_per_sm = 0;
  int base_regs = 0, deep_regs = 0;
  depth chosen = depth::base;
  bool dynamic = false;  // a dynamic schedule: one shape of its own (`base`), no depth choice
  std::string why;
};
std::vector<family_choice> policy_choices();  // defined in policy_report.cu

}  // namespace tally::core
