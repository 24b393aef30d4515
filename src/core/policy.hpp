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

// A GPU measured here, and what the measurement says about the rule on it.
struct measured_entry {
  const char* name;       // cudaDeviceProp::name, as the driver reports it
  int sm_count;
  int depth[kFamilies];   // per family: -1 the rule decides (it agreed with the measurement), else the depth to use
  const char* run;        // the run the figures come from (machine, date, file under docs/data)
  const char* measured;   // the figures that decided it
  bool dynamic;           // the one-pass ops' dynamic schedule past kDynamicL2Multiple x L2 (tuning.hpp)
  const char* dynamic_measured;  // the figures that decided it
};
const std::vector<measured_entry>& measured_entries();

struct device_policy {
  device_facts facts;
  double inflight_us = 0;        // the time bytes in flight must cover
  double need_bytes_per_sm = 0;  // bandwidth / SMs x inflight_us
  grid_policy grid;
  // The one-pass ops take the dynamic schedule past kDynamicL2Multiple x L2 on GPUs where it was
  // measured faster (a measured entry); elsewhere the strided grid, which was never more than
  // 0.5% behind it on either GPU measured (docs/tuning.md).
  bool dynamic = false;
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
bool uses_dynamic(const device_policy& p, std::uint64_t bytes);
// Force the dynamic schedule on at every size (1: tests, so that small inputs exercise it too),
// off (0), on past its size rule as if the GPU's measured entry said so (2: `tally bench core
// --schedule dynamic`), or -1 for the policy. Takes effect for launches after the call.
inline constexpr int kDynamicByPolicy = -1, kDynamicOff = 0, kDynamicEverySize = 1, kDynamicPastSizeRule = 2;
void force_dynamic(int d);
int forced_dynamic();

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
