#include "bench/core_bench.hpp"

#include "bench/competitors.cuh"

#include <algorithm>
#include <cmath>
#include <cstring>

#include <fmt/format.h>

#include "bench/probe.hpp"
#include "bench/timing.hpp"

namespace tally::bench {
namespace {

using competitors::cub_reduce;

struct cub_runner {
  void* d_temp = nullptr;
  std::size_t temp_bytes = 0;
};

double read_result(const device_buffer& b, dtype r) {
  unsigned char h[8] = {};
  b.download(h, dtype_size(r));
  switch (r) {
    case dtype::f32: { float x; std::memcpy(&x, h, 4); return x; }
    case dtype::f64: { double x; std::memcpy(&x, h, 8); return x; }
    case dtype::i32: { std::int32_t x; std::memcpy(&x, h, 4); return x; }
    case dtype::i64: { std::int64_t x; std::memcpy(&x, h, 8); return static_cast<double>(x); }
    default: return NAN;
  }
}

std::string pow2(int k) { return fmt::format("2^{}", k); }

}  // namespace

std::vector<core_case> standard_core_cases() {
  return {{dtype::f32, op::sum, 10, 30, 2, {}},
          {dtype::f64, op::sum, 10, 28, 2, {29}},
          {dtype::i32, op::sum, 10, 30, 2, {}},
          {dtype::f32, op::min, 10, 30, 2, {}},
          {dtype::f32, op::max, 10, 30, 2, {}}};
}

report run_core_bench(const core_bench_options& opt) {
  const device_info dev = current_device();
  const ceiling ceil = measure_ceiling();
  const auto cases = opt.cases.empty() ? standard_core_cases() : opt.cases;

  report rep;
  stamp_report(rep, "tally bench core", dev, ceil);
  const schedule_scope sched(opt.sched, rep);
  rep.meta["timings"] =
      "per_call: events around one call, then sync (median); stream: a batch of calls back to "
      "back, one sync, time per call (median of 7 batches); graph: CUDA-graph replay of the "
      "same batch, time per call (median of 7). tally and CUB alternate inside every repetition. "
      "GB/s, % ceiling and % peak use the graph time. warm: the input stays in L2 between calls "
      "where it fits; cold: L2 flushed before each per-call run, inputs rotated "
      "in stream and graph runs (a batch reads >= 1.6x L2 of distinct inputs).";

  // One arena holds every input: the largest case, or enough copies to rotate past the L2.
  std::size_t arena_bytes = 0;
  for (const auto& c : cases) {
    int top = c.max_log2;
    for (int e : c.extra_log2) top = std::max(top, e);
    arena_bytes = std::max(arena_bytes, (std::size_t(1) << top) * dtype_size(c.type));
  }
  arena_bytes = std::max(arena_bytes, 8 * dev.l2_bytes);
  device_buffer arena(arena_bytes);
  device_buffer flush(2 * dev.l2_bytes);
  device_buffer out_tally(16), out_cub(16);
  cudaStream_t stream = nullptr;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");

  timing_plan plan;
  if (opt.quick) {
    plan.per_call_reps = 21;
    plan.batch_reps = 3;
    plan.max_batch = 200;
  }

  for (const auto& c : cases) {
    const dtype r = result_dtype(c.type, c.operation);
    const std::size_t esize = dtype_size(c.type);
    table tab;
    tab.title = fmt::format("{} {} — tally vs CUB DeviceReduce ({})", to_string(c.operation),
                            to_string(c.type), dev.name);
    tab.columns = {{"n", "n"},
                   {"cache", "L2"},
                   {"per_call_tally_us", "call tally us", 2},
                   {"per_call_cub_us", "call CUB us", 2},
                   {"per_call_ratio", "call CUB/tally", 2},
                   {"stream_tally_us", "stream tally us", 2},
                   {"stream_cub_us", "stream CUB us", 2},
                   {"stream_ratio", "stream CUB/tally", 2},
                   {"graph_tally_us", "graph tally us", 2},
                   {"graph_cub_us", "graph CUB us", 2},
                   {"graph_ratio", "graph CUB/tally", 2},
                   {"tally_gbps", "tally GB/s", 1},
                   {"cub_gbps", "CUB GB/s", 1},
                   {"pct_ceiling", "% ceiling", 1},
                   {"pct_peak", "% peak", 1},
                   {"check", "check"}};
    fill_random(arena.get(), arena_bytes / esize, c.type, 1234,
                c.type == dtype::i32 ? -1000.0 : 0.0, c.type == dtype::i32 ? 1000.0 : 1.0, stream);

    std::vector<int> logs;
    for (int k = c.min_log2; k <= c.max_log2; k += c.step_log2) logs.push_back(k);
    for (int e : c.extra_log2) logs.push_back(e);
    std::sort(logs.begin(), logs.end());

    // CUB's temporary storage, sized once for the largest n of the case.
    cub_runner cub;
    const std::uint64_t nmax = std::uint64_t(1) << logs.back();
    check(cub_reduce(c.type, c.operation, nullptr, cub.temp_bytes, arena.get(), out_cub.get(), nmax,
                     stream),
          "cub::DeviceReduce (temp size)");
    device_buffer cub_temp(std::max<std::size_t>(cub.temp_bytes, 16));

    for (int k : logs) {
      const std::uint64_t n = std::uint64_t(1) << k;
      const std::size_t bytes = n * esize;
      const bool fits_l2 = bytes <= dev.l2_bytes;
      for (int cold = 0; cold <= (fits_l2 && opt.cold ? 1 : 0); ++cold) {
        // Cold runs rotate over inputs spread through the arena so no input repeats in L2.
        const std::size_t stride = (bytes + 255) / 256 * 256;
        const std::uint64_t slots = cold ? std::max<std::uint64_t>(1, arena_bytes / stride) : 1;
        auto in_at = [&](std::uint64_t slot) {
          return static_cast<const char*>(arena.get()) + slot * stride;
        };
        std::vector<call_fn> calls = {
            [&](cudaStream_t s, std::uint64_t slot) {
              tally::reduce(in_at(slot), n, c.type, c.operation, out_tally.get(),
                            reinterpret_cast<stream_t>(s));
            },
            [&](cudaStream_t s, std::uint64_t slot) {
              std::size_t tb = cub.temp_bytes;
              check(cub_reduce(c.type, c.operation, cub_temp.get(), tb, in_at(slot), out_cub.get(), n, s),
                    "cub::DeviceReduce");
            }};
        timing_plan p = plan;
        if (cold) {
          p.before_each_call = [&](cudaStream_t s) {
            check(cudaMemsetAsync(flush.get(), k & 0xff, flush.size(), s), "cudaMemsetAsync(L2 flush)");
          };
          // Enough calls per batch that one batch reads >= 2x L2 of distinct inputs (at most
          // 20000 calls: 1.6x L2 for the smallest inputs).
          const std::uint64_t need = (2 * dev.l2_bytes + bytes - 1) / bytes;
          p.min_batch = static_cast<int>(std::min<std::uint64_t>({need, slots, 20000}));
        }
        const auto t = time_interleaved(calls, stream, slots, p);

        // Results on the first input, tally against CUB.
        tally::reduce(in_at(0), n, c.type, c.operation, out_tally.get(), reinterpret_cast<stream_t>(stream));
        std::size_t tb = cub.temp_bytes;
        check(cub_reduce(c.type, c.operation, cub_temp.get(), tb, in_at(0), out_cub.get(), n, stream),
              "cub::DeviceReduce");
        check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
        const double a = read_result(out_tally, r), b = read_result(out_cub, r);
        const double rel = std::fabs(a - b) / std::max(std::fabs(b), 1e-300);
        const double tol = c.type == dtype::f32 ? 1e-4 : c.type == dtype::f64 ? 1e-12 : 0.0;
        const bool ok = c.operation == op::sum ? rel <= tol : a == b;

        json row;
        row["dtype"] = to_string(c.type);
        row["op"] = to_string(c.operation);
        row["n"] = pow2(k);
        row["n_elements"] = n;
        row["bytes"] = bytes;
        row["cache"] = cold ? "cold" : "warm";
        row["per_call_tally_us"] = t[0].per_call_us;
        row["per_call_cub_us"] = t[1].per_call_us;
        row["per_call_ratio"] = t[1].per_call_us / t[0].per_call_us;
        row["stream_tally_us"] = t[0].stream_us;
        row["stream_cub_us"] = t[1].stream_us;
        row["stream_ratio"] = t[1].stream_us / t[0].stream_us;
        row["graph_tally_us"] = t[0].graph_us;
        row["graph_cub_us"] = t[1].graph_us;
        row["graph_ratio"] = t[1].graph_us / t[0].graph_us;
        row["batch"] = t[0].batch;
        const double gbps = bytes / (t[0].graph_us * 1e-6) / 1e9;
        row["tally_gbps"] = gbps;
        row["cub_gbps"] = bytes / (t[1].graph_us * 1e-6) / 1e9;
        row["pct_ceiling"] = 100.0 * gbps / ceil.read_gbps;
        row["pct_peak"] = 100.0 * gbps / ceil.theoretical_gbps;
        row["rel_diff_vs_cub"] = rel;
        row["check"] = ok ? "ok" : fmt::format("MISMATCH rel {:.2e}", rel);
        tab.rows.push_back(row);
        if (opt.progress)
          opt.progress(fmt::format("{} {} n=2^{} {}: graph {:.2f} us vs CUB {:.2f} ({:.2f}x), stream {:.2f}x",
                                   to_string(c.operation), to_string(c.type), k, cold ? "cold" : "warm",
                                   t[0].graph_us, t[1].graph_us, t[1].graph_us / t[0].graph_us,
                                   t[1].stream_us / t[0].stream_us));
      }
    }
    rep.tables.push_back(std::move(tab));
  }
  check(cudaStreamDestroy(stream), "cudaStreamDestroy");
  return rep;
}

}  // namespace tally::bench
