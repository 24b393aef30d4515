#include "policy.hpp"

#include <cuda_runtime_api.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <mutex>

#include "context.hpp"

namespace tally::core {
namespace {

// The time the bytes in flight must cover, in microseconds (see policy.hpp). Calibrated on the
// two GPUs measured: on the H200 (36.5 GB/s per SM) shapes keeping 64 KiB in flight per SM read
// at 100-101% of the ceiling (f32, f64 and i32 sums and f32 max at 2^28-2^30; 128 KiB: the same),
// so the constant is at most 1.80 us; 32 KiB per SM (the statistics at 512 x 4, one block per
// SM) ran below the ceiling on both GPUs. 1.75 us asks 64 KiB per SM of the H200 and 44 KiB of
// the H100 (25.4 GB/s per SM).
constexpr double kInflightMicros = 1.75;

// The full resident grid from this multiple of the L2 up: 96 MiB measured on the H100's 50 MiB
// (L2-resident inputs ran up to 40% slower at 2 blocks per SM than at 1; from 256 MiB up the
// full grid read faster).
constexpr double kFullGridL2Multiple = 96.0 / 50.0;
// Two-input ops (dot) take the full grid from a sixth of the L2: f32 dot at 2^22 (32 MiB) took
// 12.1 us on one block per SM against cuBLAS's 9.7 on the H100 (8 MiB of its 50 MiB L2).
constexpr double kFullGridL2MultipleBinary = 8.0 / 50.0;

// The exact sums' dynamic schedule cuts its input into about 32 chunks a block, each of whole
// rounds of loads, and ends every chunk with a block barrier where the block's loads drain; at
// least this many rounds a chunk, and the last rounds >> kExactChunkTail (an eighth) in chunks of
// one round, so that the blocks still end within about a round of one another. Where the input
// gave one round a chunk (32 to 64 rounds a block: from 8 x L2 to 528 MiB on 132 SMs, f32 and
// f64) the barriers cost most; further up the tail is what changes: `tally bench numerics --tables
// accuracy --exact-chunk-rounds R --exact-chunk-tail K`, two H200s on 2026-11-29 (15:45 and 15:52
// UTC, each configuration twice, docs/data/exact-chunks-h200-1129.md), exact / fast sum: f64 at
// 2^26 (512 MiB) 93.6-95.8% in one-round chunks, 96.9% at R = 2 (K = 0: 96.5-96.9%), 2^28
// 99.1-99.7% -> 99.7-99.8%; f32 at 2^27 (512 MiB) 85.1% on the first machine and 94.7% on the
// second in one-round chunks, 94.8-95.0% at R = 2 (the strided grid: 96.7-96.9% there, but 85% at
// 2^28, where these chunks give 96-98%). R = 3 and 4 were no better, K = 2-4 alike.
constexpr int kExactChunkRounds = 2;
constexpr int kExactChunkTail = 3;

std::atomic<int> g_forced{-1};
std::atomic<int> g_forced_dynamic{-1};
std::atomic<int> g_forced_exact_chunk_rounds{-1};
std::atomic<int> g_forced_exact_chunk_tail{-1};

}  // namespace

const char* to_string(family f) {
  switch (f) {
    case family::plain: return "plain";
    case family::folding: return "folding";
    case family::binary: return "binary";
    case family::exact: return "exact";
  }
  return "?";
}

const std::vector<measured_entry>& measured_entries() {
  // The GPUs measured here. depth -1: the rule's choice was confirmed by the measurement.
  static const std::vector<measured_entry> entries = {
      {"NVIDIA H100 80GB HBM3", 132, {-1, -1, -1, -1},
       "H100 80GB HBM3, 2026-11-23, tally bench tune --measure (docs/data/tune-h100.md as of commit 64a6b5d)",
       "base shapes of 64 KiB in flight per SM read at 100.5% of the ceiling (f32 sum at 2^30); the "
       "statistics' deep shape 99.2% of the fast sum at 2^28 against 97.3% for base",
       {kDynBase, kDynBase, kDynBase, kDynOff},
       "2026-11-24, tally bench core: f32 sum at 2^28 / 2^30 341.4 / 1347.2 us against the strided "
       "grid's 346.7 / 1386.0 (CUB 346.2 / 1384.6); base, not deep: 2026-11-28 01:44 UTC, tally bench "
       "tune (docs/data/tune-h100-1128.md): f32 sum at 2^30 1349.4 us against 1356.1, argmax f32 "
       "1348.4 against 1361.1"},
      {"NVIDIA H200", 132, {-1, -1, -1, -1},
       "H200, 2026-11-23, tally bench tune --measure (docs/data/tune-h200.md)",
       "base shapes of 64 KiB in flight per SM read at 101% of the ceiling (f32 sum at 2^30, "
       "ld.global.nc); the statistics' deep shape 97.7% of the fast sum at 2^28 against 92% for base",
       {kDynDeep, kDynDeep, kDynOff, kDynOff},
       "2026-11-28 13:37 UTC, tally bench tune (docs/data/tune-h200-1128.md; the last block's fold "
       "of the chunks' partials batched): deep, 512 x 8 at two blocks an SM: f32 sum at 2^28 / 2^30 "
       "233.5 / 920.4 us against the strided grid's 234.3 / 925.1 (CUB 234.6 / 922.4), argmax f32 "
       "235.0 / 921.2 against 234.9 / 929.3 (CUB 238.6 / 932.7; base, one block an SM, 275.7 / "
       "943.4), f64 sum at 2^27 / 2^29 234.4 / 918.4 (CUB 235.6 / 926.4). Dot keeps the strided "
       "grid (docs/data/schedules-h200-1128.md: dynamic f64 at 2^26 / 2^28 247.8 / 984.5 us against "
       "239.0 / 945.3)"},
  };
  return entries;
}

device_policy make_policy(const device_facts& f) {
  device_policy p;
  p.facts = f;
  p.inflight_us = kInflightMicros;
  p.exact_chunk_rounds = kExactChunkRounds;
  p.exact_chunk_tail = kExactChunkTail;
  const double per_sm_gbps = f.sm_count > 0 ? f.bandwidth_gbps / f.sm_count : 0.0;
  p.need_bytes_per_sm = per_sm_gbps * 1e3 * p.inflight_us;  // GB/s = KB/ms = bytes/us x 1e3
  const double l2 = static_cast<double>(f.l2_bytes);
  if (l2 > 0) {
    p.grid.full_grid_min_bytes = static_cast<std::uint64_t>(l2 * kFullGridL2Multiple);
    p.grid.full_grid_min_bytes_binary = static_cast<std::uint64_t>(l2 * kFullGridL2MultipleBinary);
  }
  for (const measured_entry& e : measured_entries())
    if (f.name == e.name && f.sm_count == e.sm_count) p.entry = &e;
  if (p.entry)
    for (int k = 0; k < kFamilies; ++k) p.dynamic[k] = p.entry->dynamic[k];
  return p;
}

bool uses_dynamic(const device_policy& p, family f, std::uint64_t bytes, bool heavy) {
  const int forced = g_forced_dynamic.load(std::memory_order_relaxed);
  if (forced == kDynamicOff || forced == kDynamicEverySize) return forced == kDynamicEverySize;
  if (forced != kDynamicPastSizeRule) {
    if (p.dynamic[static_cast<int>(f)] == kDynOff) return false;
    if (heavy && has_dynamic_deep(f, false) && dynamic_depth(p, f, false) == depth::deep) return false;
  }
  return dynamic_schedule(bytes, p.facts.l2_bytes);
}

depth dynamic_depth(const device_policy& p, family f, bool heavy) {
  if (!has_dynamic_deep(f, heavy)) return depth::base;
  const int forced = g_forced.load(std::memory_order_relaxed);
  if (forced == 0 || forced == 1) return static_cast<depth>(forced);
  const int e = p.dynamic[static_cast<int>(f)];
  if (e == kDynBase || e == kDynDeep) return e == kDynDeep ? depth::deep : depth::base;
  const shape b = dynamic_shape(4, f, depth::base);
  const double kept = inflight_bytes(b, b.min_blocks, false);
  return kept >= kDynamicMergeMargin * p.need_bytes_per_sm ? depth::base : depth::deep;
}
void force_dynamic(int d) {
  g_forced_dynamic.store(d >= kDynamicOff && d <= kDynamicPastSizeRule ? d : kDynamicByPolicy, std::memory_order_relaxed);
}
int forced_dynamic() { return g_forced_dynamic.load(std::memory_order_relaxed); }

int exact_chunk_rounds(const device_policy& p) {
  const int forced = g_forced_exact_chunk_rounds.load(std::memory_order_relaxed);
  return std::max(forced >= 0 ? forced : p.exact_chunk_rounds, 1);
}
int exact_chunk_tail(const device_policy& p) {
  const int forced = g_forced_exact_chunk_tail.load(std::memory_order_relaxed);
  return std::clamp(forced >= 0 ? forced : p.exact_chunk_tail, 0, 63);
}
void force_exact_chunks(int rounds, int tail) {
  g_forced_exact_chunk_rounds.store(rounds >= 0 ? std::min(rounds, 1 << 16) : -1, std::memory_order_relaxed);
  g_forced_exact_chunk_tail.store(tail >= 0 ? std::min(tail, 63) : -1, std::memory_order_relaxed);
}
bool forced_exact_chunks() {
  return g_forced_exact_chunk_rounds.load(std::memory_order_relaxed) >= 0 ||
         g_forced_exact_chunk_tail.load(std::memory_order_relaxed) >= 0;
}

const device_policy& policy_for(const device_context& dev) {
  // Every launch asks: after the first call on a device, one acquire load and no lock. Policies
  // live for the process, like the device contexts they describe.
  static std::mutex m;
  static std::atomic<const device_policy*> cache[64] = {};
  std::atomic<const device_policy*>& slot = cache[dev.ordinal & 63];
  if (const device_policy* p = slot.load(std::memory_order_acquire)) return *p;
  std::lock_guard<std::mutex> lock(m);
  if (const device_policy* p = slot.load(std::memory_order_relaxed)) return *p;
  device_facts f;
  f.name = dev.info.name;
  f.sm_count = dev.info.sm_count;
  f.cc_major = dev.info.cc_major;
  f.cc_minor = dev.info.cc_minor;
  f.l2_bytes = dev.info.l2_bytes;
  f.bandwidth_gbps = dev.info.theoretical_gbps;
  const device_policy* p = new device_policy(make_policy(f));
  slot.store(p, std::memory_order_release);
  return *p;
}

double inflight_bytes(const shape& s, int per_sm, bool binary) {
  return double(per_sm) * s.block * s.unroll * 16.0 * (binary ? 2 : 1);
}

depth choose_depth(const device_policy& p, family f, double inflight_base, double inflight_deep) {
  const int forced = g_forced.load(std::memory_order_relaxed);
  if (forced == 0 || forced == 1) return static_cast<depth>(forced);
  if (p.entry && p.entry->depth[static_cast<int>(f)] >= 0) return static_cast<depth>(p.entry->depth[static_cast<int>(f)]);
  if (inflight_base >= p.need_bytes_per_sm) return depth::base;
  return inflight_deep > inflight_base ? depth::deep : depth::base;
}

std::string why_depth(const device_policy& p, family f, double inflight_base, double inflight_deep) {
  char buf[320];
  const int forced = g_forced.load(std::memory_order_relaxed);
  if (forced == 0 || forced == 1) return forced ? "forced deep" : "forced base";
  if (p.entry && p.entry->depth[static_cast<int>(f)] >= 0) {
    std::snprintf(buf, sizeof buf, "measured entry for %s: %s", p.entry->name, p.entry->measured);
    return buf;
  }
  if (inflight_base >= p.need_bytes_per_sm)
    std::snprintf(buf, sizeof buf, "base keeps %.0f KiB in flight per SM, need %.0f KiB: base", inflight_base / 1024,
                  p.need_bytes_per_sm / 1024);
  else if (inflight_deep > inflight_base)
    std::snprintf(buf, sizeof buf, "base keeps %.0f KiB in flight per SM, need %.0f KiB; deep keeps %.0f: deep",
                  inflight_base / 1024, p.need_bytes_per_sm / 1024, inflight_deep / 1024);
  else
    std::snprintf(buf, sizeof buf, "neither shape covers %.0f KiB; deep has no more than base: base",
                  p.need_bytes_per_sm / 1024);
  return buf;
}

void force_depth(int d) { g_forced.store(d == 0 || d == 1 ? d : -1, std::memory_order_relaxed); }
int forced_depth() { return g_forced.load(std::memory_order_relaxed); }

std::vector<std::pair<std::string, std::string>> explain(const device_policy& p) {
  std::vector<std::pair<std::string, std::string>> v;
  char buf[512];
  const device_facts& f = p.facts;
  v.emplace_back("device", f.name);
  std::snprintf(buf, sizeof buf, "%d SMs, compute capability %d.%d, L2 %.0f MiB, %.0f GB/s theoretical", f.sm_count,
                f.cc_major, f.cc_minor, f.l2_bytes / 1048576.0, f.bandwidth_gbps);
  v.emplace_back("properties read", buf);
  std::snprintf(buf, sizeof buf, "%.1f GB/s per SM x %.2f us = %.0f KiB per SM",
                f.sm_count ? f.bandwidth_gbps / f.sm_count : 0.0, p.inflight_us, p.need_bytes_per_sm / 1024);
  v.emplace_back("bytes in flight needed", buf);
  std::snprintf(buf, sizeof buf, "%.0f MiB (%.2f x L2); two-input ops %.1f MiB", p.grid.full_grid_min_bytes / 1048576.0,
                kFullGridL2Multiple, p.grid.full_grid_min_bytes_binary / 1048576.0);
  v.emplace_back("full resident grid from", buf);
  if (p.entry) {
    std::snprintf(buf, sizeof buf, "%s (%s)", p.entry->name, p.entry->run);
    v.emplace_back("measured entry", buf);
  } else {
    v.emplace_back("measured entry", "none: the rule alone (docs/tuning.md says how to add one)");
  }
  std::string fams;
  for (int k = 0; k < kFamilies; ++k) {
    if (static_cast<family>(k) == family::exact || p.dynamic[k] == kDynOff) continue;
    const depth d = dynamic_depth(p, static_cast<family>(k), false);
    fams += std::string(fams.empty() ? "" : ", ") + to_string(static_cast<family>(k)) +
            (d == depth::deep ? " (deep)" : " (base)");
  }
  if (!fams.empty()) {
    std::snprintf(buf, sizeof buf, "from %.0f MiB (%d x L2) for ",
                  p.facts.l2_bytes * double(kDynamicL2Multiple) / 1048576.0, int(kDynamicL2Multiple));
    v.emplace_back("dynamic schedule", buf + fams +
                                           " (stats keep the strided grid; compensated sums take base where "
                                           "their family does, else the strided grid): " +
                                           p.entry->dynamic_measured);
  } else {
    const char* why = p.entry ? p.entry->dynamic_measured : "no measured entry (on only where measured faster)";
    v.emplace_back("dynamic schedule", std::string("off: ") + why);
  }
  const int rounds = exact_chunk_rounds(p), tail = exact_chunk_tail(p);
  std::snprintf(buf, sizeof buf, "from %.0f MiB (%d x L2), chunks of at least %d round%s of loads",
                p.facts.l2_bytes * double(kExactDynamicL2Multiple) / 1048576.0, int(kExactDynamicL2Multiple), rounds,
                rounds == 1 ? "" : "s");
  std::string chunks = buf;
  if (tail > 0) chunks += ", the last 1/2^" + std::to_string(tail) + " in one-round chunks";
  if (forced_exact_chunks()) chunks += " (forced)";
  v.emplace_back("exact sums' dynamic schedule", chunks);
  const int forced = forced_depth();
  if (forced >= 0) v.emplace_back("forced depth", forced ? "deep" : "base");
  const int fd = forced_dynamic();
  if (fd != kDynamicByPolicy)
    v.emplace_back("forced schedule", fd == kDynamicOff          ? "strided at every size"
                                      : fd == kDynamicEverySize ? "dynamic at every size"
                                                                : "dynamic past the size rule");
  return v;
}

}  // namespace tally::core
