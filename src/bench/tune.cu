#include "bench/tune.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include <fmt/format.h>

#include "bench/cublas_loader.hpp"
#include "bench/pdl_config.hpp"
#include "bench/probe.hpp"
#include "bench/timing.hpp"
#include "bench/tune_shapes.cuh"
#include "core/policy.hpp"

namespace tally::bench {
namespace tune {

cudaError_t launch_with_pdl(const void* kernel, void** args, unsigned blocks, int block, cudaStream_t s) {
  const pdl_config p(blocks, block, s);
  return cudaLaunchKernelExC(&p.cfg, kernel, args);
}

unsigned grid_for_shape(const candidate& c, std::uint64_t n, int per_sm, const sweep_buffers& b) {
  const core::shape sh{c.block, c.unroll, c.min_blocks, c.accs};
  return core::grid_for(sh, c.elem_bytes, n, c.binary, c.heavy, b.sm_count, per_sm, core::kMaxBlocks,
                        core::policy_for(core::current_context()).grid);
}

table run_groups(std::vector<group>& groups, sweep_buffers& b, double ceiling_gbps, bool quick,
                 const std::function<void(const std::string&)>& progress) {
  table tab{"kernel shapes side by side (graph replay; candidates and the competitor interleaved)",
            {{"op", "op"},
             {"dtype", "dtype"},
             {"n", "n"},
             {"shape", "shape"},
             {"regs", "regs"},
             {"per_sm", "blocks/SM"},
             {"inflight_kib", "KiB in flight/SM", 0},
             {"blocks", "grid"},
             {"graph_us", "graph us", 2},
             {"stream_us", "stream us", 2},
             {"gbps", "GB/s", 1},
             {"pct_ceiling", "% ceiling", 1},
             {"versus", "vs"},
             {"ratio", "their us / ours", 3}},
            {}};
  for (group& g : groups) {
    fill_random(b.d_in, b.capacity, g.data, 4242, g.lo, g.hi, b.stream);
    if (g.binary) fill_random(b.d_in2, b.capacity, g.data, 4343, g.lo, g.hi, b.stream);
    check(cudaStreamSynchronize(b.stream), "cudaStreamSynchronize");
    struct facts {
      int regs, per_sm;
    };
    std::vector<facts> f;
    for (const candidate& c : g.candidates) {
      cudaFuncAttributes attr{};
      check(cudaFuncGetAttributes(&attr, c.kernel), "cudaFuncGetAttributes");
      int occ = 0;
      check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, c.kernel, c.block, 0), "occupancy");
      occ = std::max(occ, 1);
      if (c.max_per_sm > 0) occ = std::min(occ, c.max_per_sm);
      f.push_back({attr.numRegs, occ});
    }
    for (int lg : g.log2_sizes) {
      const std::uint64_t n = std::uint64_t(1) << lg;
      if (n > b.capacity) continue;
      const std::size_t bytes = n * g.elem_bytes * (g.binary ? 2 : 1);
      std::vector<unsigned> grids;
      std::vector<call_fn> calls;
      for (std::size_t k = 0; k < g.candidates.size(); ++k) {
        grids.push_back(grid_for_shape(g.candidates[k], n, f[k].per_sm, b));
        const candidate& c = g.candidates[k];
        const unsigned blocks = grids.back();
        calls.push_back([&c, n, blocks](cudaStream_t s, std::uint64_t) { c.launch(s, n, blocks, 0); });
      }
      const bool has_other = static_cast<bool>(g.other.call);
      if (has_other) calls.push_back([&g, n](cudaStream_t s, std::uint64_t) { g.other.call(s, n); });
      timing_plan p;
      p.per_call_reps = 3;
      p.batch_reps = quick ? 3 : 5;
      p.max_batch = quick ? 50 : 200;
      p.min_batch = 5;
      p.batch_budget_us = quick ? 5000 : 15000;
      const std::vector<timings> t = time_interleaved(calls, b.stream, 1, p);
      double ref_us = NAN;
      for (std::size_t k = 0; k < g.candidates.size(); ++k)
        if (g.candidates[k].reference) ref_us = t[k].graph_us;
      const double other_us = has_other ? t.back().graph_us : NAN;
      for (std::size_t k = 0; k < g.candidates.size(); ++k) {
        const candidate& c = g.candidates[k];
        json row;
        row["op"] = g.op;
        row["dtype"] = g.dtype;
        row["n"] = fmt::format("2^{}", lg);
        row["shape"] = c.label;
        row["regs"] = f[k].regs;
        row["per_sm"] = f[k].per_sm;
        row["inflight_kib"] = core::inflight_bytes(core::shape{c.block, c.unroll, c.min_blocks, c.accs}, f[k].per_sm,
                                                   c.binary) / 1024.0;
        row["blocks"] = grids[k];
        row["graph_us"] = t[k].graph_us;
        row["stream_us"] = t[k].stream_us;
        const double gb = bytes / (t[k].graph_us * 1e-6) / 1e9;
        row["gbps"] = gb;
        row["pct_ceiling"] = 100.0 * gb / ceiling_gbps;
        if (c.reference) {
          row["versus"] = "(reference)";
          row["ratio"] = 1.0;
        } else if (!std::isnan(ref_us)) {
          row["versus"] = "fast sum";
          row["ratio"] = ref_us / t[k].graph_us;
        } else if (has_other) {
          row["versus"] = g.other.name;
          row["ratio"] = other_us / t[k].graph_us;
        }
        tab.rows.push_back(row);
      }
      if (has_other) {
        json row;
        row["op"] = g.op;
        row["dtype"] = g.dtype;
        row["n"] = fmt::format("2^{}", lg);
        row["shape"] = g.other.name;
        row["graph_us"] = other_us;
        row["stream_us"] = t.back().stream_us;
        const double gb = bytes / (other_us * 1e-6) / 1e9;
        row["gbps"] = gb;
        row["pct_ceiling"] = 100.0 * gb / ceiling_gbps;
        tab.rows.push_back(row);
      }
      if (progress) {
        std::size_t best = 0;
        for (std::size_t k = 1; k < g.candidates.size(); ++k)
          if (!g.candidates[k].reference && (g.candidates[best].reference || t[k].graph_us < t[best].graph_us)) best = k;
        progress(fmt::format("{} {} 2^{}: best {} {:.2f} us{}", g.op, g.dtype, lg, g.candidates[best].label,
                             t[best].graph_us,
                             has_other ? fmt::format(", {} {:.2f} us", g.other.name, other_us) : std::string()));
      }
    }
  }
  return tab;
}

}  // namespace tune

namespace {

// The rule's inputs and choices on this GPU, in words (tally bench tune prints it first).
table policy_table(const core::device_policy& pol) {
  table tab{"the tuning rule's inputs on this GPU", {{"item", "item"}, {"value", "value"}}, {}};
  for (const auto& [k, v] : core::explain(pol)) {
    json row;
    row["item"] = k;
    row["value"] = v;
    tab.rows.push_back(row);
  }
  return tab;
}

std::string shape_text(const core::shape& s) {
  return fmt::format("{}x{} mb{} acc{}", s.block, s.unroll, s.min_blocks, s.accs);
}

// Per family, for a representative op: both compiled shapes, their occupancy and registers on
// this GPU, the bytes each keeps in flight, and the choice.
table choices_table() {
  table tab{"the shape each family uses on this GPU (representative ops, n = 2^24 unless named)",
            {{"family", "family"},
             {"example", "example"},
             {"base", "base shape"},
             {"base_fit", "base regs, blocks/SM"},
             {"deep", "deep shape"},
             {"deep_fit", "deep regs, blocks/SM"},
             {"chosen", "uses"},
             {"why", "why"}},
            {}};
  for (const core::family_choice& c : core::policy_choices()) {
    json row;
    row["family"] = c.family;
    row["example"] = c.example;
    row["base"] = shape_text(c.base);
    row["base_fit"] = fmt::format("{}, {}", c.base_regs, c.base_per_sm);
    const bool one_shape = c.dynamic;
    row["deep"] = one_shape ? "-" : shape_text(c.deep);
    row["deep_fit"] = one_shape ? "-" : fmt::format("{}, {}", c.deep_regs, c.deep_per_sm);
    row["chosen"] = one_shape ? "dynamic" : c.chosen == core::depth::deep ? "deep" : "base";
    row["why"] = c.why;
    tab.rows.push_back(row);
  }
  return tab;
}

}  // namespace

report run_tune(const tune_options& opt) {
  const device_info dev = current_device();
  const core::device_policy& pol = core::policy_for(core::current_context());
  report rep;
  rep.meta["benchmark"] = "tally bench tune";
  rep.meta["device"] = dev.name;
  rep.meta["sm_count"] = dev.sm_count;
  rep.meta["l2_mib"] = dev.l2_bytes / double(1 << 20);
  rep.meta["theoretical_gbps"] = dev.theoretical_gbps;
  rep.meta["date"] = utc_now();
  rep.tables.push_back(policy_table(pol));
  rep.tables.push_back(choices_table());
  if (!opt.measure) return rep;
#if TALLY_HAVE_CUBLAS
  if (std::string why; !cublas::available(&why)) rep.meta["cublas"] = why + ": the dot groups have no competitor";
#else
  rep.meta["cublas"] = "not found at build time: the dot groups have no competitor";
#endif

  const ceiling ceil = measure_ceiling();
  rep.meta["read_ceiling_gbps"] = ceil.read_gbps;
  if (opt.max_log2 > 0) rep.meta["sizes"] = fmt::format("up to 2^{}", opt.max_log2);
  const std::size_t in_bytes = std::size_t(4) << 30, in2_bytes = std::size_t(1) << 30;
  device_buffer in(in_bytes), in2(in2_bytes), partials(std::size_t(core::kMaxBlocks) * core::kMaxAccBytes),
      tail(core::kTailBytes), out(64 * 64), temp(std::size_t(16) << 20);
  check(cudaMemset(tail.get(), 0, tail.size()), "cudaMemset");
  tune::sweep_buffers b;
  b.d_in = in.get();
  b.d_in2 = in2.get();
  b.d_partials = partials.get();
  char* const t = static_cast<char*>(tail.get());
  b.d_counter = reinterpret_cast<unsigned int*>(t + core::kTailCounterOffset);
  b.d_chunk_next = reinterpret_cast<unsigned int*>(t + core::kTailChunkNextOffset);
  b.d_exact = reinterpret_cast<long long*>(t + core::kTailExactOffset);
  b.d_out = out.get();
  b.d_temp = temp.get();
  b.temp_bytes = temp.size();
  b.sm_count = dev.sm_count;
  b.l2_bytes = dev.l2_bytes;
  b.exact_chunk_rounds = static_cast<unsigned int>(core::exact_chunk_rounds(pol));
  b.exact_chunk_tail = static_cast<unsigned int>(core::exact_chunk_tail(pol));
  check(cudaStreamCreateWithFlags(&b.stream, cudaStreamNonBlocking), "cudaStreamCreate");

  auto want = [&](const char* name) {
    return opt.groups.empty() || std::find(opt.groups.begin(), opt.groups.end(), name) != opt.groups.end();
  };
  std::vector<tune::group> groups;
  auto add = [&](std::vector<tune::group> more) {
    for (auto& g : more) groups.push_back(std::move(g));
  };
  if (want("core")) add(tune::core_groups(b));
  if (want("numerics")) add(tune::numerics_groups(b));
  if (want("exact")) add(tune::exact_groups(b));
  if (want("stats")) add(tune::stats_groups(b));
  table shapes;
  for (auto& g : groups) {
    if (opt.max_log2 > 0)
      g.log2_sizes.erase(std::remove_if(g.log2_sizes.begin(), g.log2_sizes.end(),
                                        [&](int lg) { return lg > opt.max_log2; }),
                         g.log2_sizes.end());
    if (g.log2_sizes.empty()) continue;
    // One input: up to 4 GiB of it; two inputs (dot): up to 1 GiB of each.
    b.capacity = (g.binary ? in2_bytes : in_bytes) / g.elem_bytes;
    std::vector<tune::group> one;
    one.push_back(std::move(g));
    table t = tune::run_groups(one, b, ceil.read_gbps, opt.quick, opt.progress);
    if (shapes.columns.empty()) shapes = std::move(t);
    else for (auto& r : t.rows) shapes.rows.push_back(std::move(r));
  }
  check(cudaStreamDestroy(b.stream), "cudaStreamDestroy");
  if (!shapes.columns.empty()) rep.tables.push_back(std::move(shapes));
  return rep;
}

}  // namespace tally::bench
