// `tally bench segmented` (see segmented_bench.hpp).
#include <cub/device/device_segmented_reduce.cuh>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_profiler_api.h>
#include <cuda_runtime.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "bench/probe.hpp"
#include "bench/segmented_bench.hpp"
#include "bench/timing.hpp"
#include "core/context.hpp"
#include "segmented/problem.hpp"
#include "segmented/segmented.hpp"
#include "tally/tally.hpp"

namespace tally::bench {
namespace {

struct dev_mem {
  void* p = nullptr;
  explicit dev_mem(std::size_t bytes) { check(cudaMalloc(&p, std::max<std::size_t>(bytes, 256)), "cudaMalloc(bench)"); }
  ~dev_mem() { cudaFree(p); }
  dev_mem(const dev_mem&) = delete;
  dev_mem& operator=(const dev_mem&) = delete;
  template <class T>
  T* as() const { return static_cast<T*>(p); }
};

std::string pow2(std::uint64_t v) {
  int k = 0;
  while ((std::uint64_t(1) << k) < v) ++k;
  return (std::uint64_t(1) << k) == v ? "2^" + std::to_string(k) : std::to_string(v);
}

// Heavy-tailed lengths (Pareto-like, a fifth of the segments empty) summing to exactly n; with
// pareto false, light-tailed ones (uniform on 0 to twice the mean, none forced empty): the same
// mean without the few long segments that hold a wave's last warps.
std::vector<std::int64_t> ragged_offsets(std::uint64_t n, std::uint64_t segments, std::uint64_t seed, bool pareto = true) {
  std::mt19937_64 rng(seed);
  std::vector<double> w(segments);
  double total = 0;
  for (std::uint64_t s = 0; s < segments; ++s) {
    const double u = std::uniform_real_distribution<double>(1e-6, 1)(rng);
    w[s] = !pareto ? u : s % 5 == 0 ? 0 : std::pow(u, -1.0 / 1.2);  // Pareto, alpha 1.2
    total += w[s];
  }
  std::vector<std::int64_t> off(segments + 1, 0);
  double acc = 0;
  for (std::uint64_t s = 0; s < segments; ++s) {
    acc += w[s];
    off[s + 1] = static_cast<std::int64_t>(std::llround(acc / total * static_cast<double>(n)));
  }
  off[segments] = static_cast<std::int64_t>(n);
  return off;
}

// The ragged shapes at `total` elements: segments of a mean of 4096 and of 64 elements, and 1024
// segments (few: the pieces plan; the mean then 1024, 16384, 262144 at 2^20, 2^24, 2^28).
std::vector<std::uint64_t> ragged_counts(std::uint64_t total) { return {total / 4096, total / 64, 1024}; }

// Runs tally's call (calls[0], results at out) and CUB's (calls[1], results at out + region) once
// more and compares the first results (up to 64): "ok", or "MISMATCH" past a sum's tolerance.
std::string compare_first(const std::vector<call_fn>& calls, cudaStream_t stream, const dev_mem& out,
                          std::uint64_t region, std::uint64_t results, std::uint64_t len) {
  calls[0](stream, 0);
  calls[1](stream, 0);
  std::vector<float> a(std::min<std::uint64_t>(results, 64)), b(a.size());
  check(cudaMemcpyAsync(a.data(), out.p, a.size() * 4, cudaMemcpyDeviceToHost, stream), "copy");
  check(cudaMemcpyAsync(b.data(), out.as<float>() + region, b.size() * 4, cudaMemcpyDeviceToHost, stream), "copy");
  check(cudaStreamSynchronize(stream), "sync");
  for (std::size_t i = 0; i < a.size(); ++i)
    if (std::fabs(a[i] - b[i]) > 1e-3f * std::sqrt(float(len)) + 1e-4f) return "MISMATCH";
  return "ok";
}

// Offsets of `segs` back-to-back segments of `len` elements (k * len, k = 0 .. segs) into offs:
// a matrix's rows as CUB's segments (or its columns, read as the rows of the transpose).
void upload_even_offsets(dev_mem& offs, std::uint64_t segs, std::uint64_t len) {
  std::vector<std::int64_t> h(segs + 1);
  for (std::size_t k = 0; k < h.size(); ++k) h[k] = static_cast<std::int64_t>(k * len);
  check(cudaMemcpy(offs.p, h.data(), h.size() * 8, cudaMemcpyHostToDevice), "offsets");
  // (A copy from pageable memory may return before its DMA lands; the calls run on another stream.)
  check(cudaDeviceSynchronize(), "offsets (synchronize)");
}

// 2-byte floats widened to float for CUB (tally accumulates them in f32 too).
struct widen_f16 {
  __device__ float operator()(__half h) const { return __half2float(h); }
};
struct widen_bf16 {
  __device__ float operator()(__nv_bfloat16 h) const { return __bfloat162float(h); }
};
// CUB's sums of `segs` segments [begin[s], end[s]) of 2-byte floats H, each element widened to
// float (the column sums of the transposed layout: the bytes tally reads, as CUB needs them).
template <class H, class W>
cudaError_t cub_half_segments(void* d_temp, std::size_t& bytes, const void* d_in, float* d_out, int segs,
                              const std::int64_t* begin, const std::int64_t* end, cudaStream_t s) {
  const auto in = thrust::make_transform_iterator(static_cast<const H*>(d_in), W{});
  return cub::DeviceSegmentedReduce::Reduce(d_temp, bytes, in, d_out, segs, begin, end, ::cuda::std::plus<float>{},
                                            0.0f, s);
}

// A plan in a table cell: the strategy, the lane group, the blocks per segment.
// Column tiles add their width in vectors (c32; r: two rounds of loads in flight a lane; lean: the
// lean kernel), thin plans their vectors per thread (m4), row
// tiles and lane groups with eight loads in flight u8 (a flat grid: flat), split blocks their threads (b256) and the lean kernel (lean);
// ragged plans their lanes per segment (g)
// or the tile kernel (tiles) or spans (span: the window in KiB, w, and a lane's longest segment in
// elements, l; m: the warp folds middle segments from the windows), and the chunk in KiB of f32 (k); pieces their size in KiB of f32 (k);
// stripes the stripe in Ki elements (s); the one-launch kernel is `once`.
std::string plan_cell(const seg::plan& pl) {
  return std::string(seg::to_string(pl.how)) + (pl.how == seg::strategy::group ? " g" + std::to_string(pl.group) : "") +
         (pl.how == seg::strategy::columns ? " c" + std::to_string(pl.col_vecs) : "") +
         (pl.how == seg::strategy::columns && pl.col_ring ? std::string(" r") : "") +
         (pl.how == seg::strategy::columns && pl.col_lean ? std::string(" lean") : "") +
         (pl.how == seg::strategy::thin ? " m" + std::to_string(pl.group) : "") +
         (pl.how == seg::strategy::split && pl.split_block != seg::kSplitBlock ? " b" + std::to_string(pl.split_block) : "") +
         (pl.how == seg::strategy::split && pl.split_lean ? std::string(" lean") : "") +
         (pl.per_seg > 1 ? " x" + std::to_string(pl.per_seg) : "") +
         (pl.how == seg::strategy::ragged && pl.stripe > 0 ? " stripes s" + std::to_string(pl.stripe / 1024) : "") +
         (pl.how == seg::strategy::ragged && pl.stripe == 0
              ? (pl.tiles > 0  ? std::string(" tiles")
                 : pl.span > 0 ? " span w" + std::to_string(pl.span / 1024) + " l" + std::to_string(pl.short_max)
                               : " g" + std::to_string(pl.group)) +
                    " k" + std::to_string(pl.chunk * 4 / 1024)
              : "") +
         (pl.how == seg::strategy::pieces ? " k" + std::to_string(pl.chunk * 4 / 1024) : "") +
         ((pl.how == seg::strategy::group || pl.how == seg::strategy::rowtile || pl.how == seg::strategy::ragged) &&
                  pl.unroll != 4
              ? " u" + std::to_string(pl.unroll)
              : "") +
         ((pl.how == seg::strategy::group || pl.how == seg::strategy::rowtile) && pl.flat ? std::string(" flat") : "") +
         (pl.how == seg::strategy::ragged && pl.eager ? std::string(" e") : "") +
         (pl.how == seg::strategy::ragged && pl.span_mid ? std::string(" m") : "");
}

// A row's tally-against-CUB fields: the plan, both graph times, their ratio, tally's GB/s over
// `bytes` and its share of the read ceiling.
void fill_versus(json& r, const seg::plan& pl, const std::vector<timings>& tm, double bytes, double read_gbps) {
  r["plan"] = plan_cell(pl);
  r["tally_us"] = tm[0].graph_us;
  r["cub_us"] = tm[1].graph_us;
  r["ratio"] = tm[1].graph_us / tm[0].graph_us;
  r["gbps"] = bytes / tm[0].graph_us / 1e3;
  r["pct_ceiling"] = 100.0 * bytes / tm[0].graph_us / 1e3 / read_gbps;
}

// The plan rule's inputs for this GPU, as the library reads them, with the columns kernel's
// resident blocks that the rule counted for its own pick.
seg::device_limits sweep_limits(const seg::plan& rule) {
  seg::device_limits d = seg::limits_for(core::current_context());
  // The sweep's op is the f32 sum: its lean split and column plans where their kernels fit their
  // registers here.
  d.split_lean = seg::lean_available(dtype::f32, core::kind::sum, seg::lean_kernel::split, core::current_context());
  d.columns_lean = seg::lean_available(dtype::f32, core::kind::sum, seg::lean_kernel::columns, core::current_context());
  if (rule.how == seg::strategy::columns && d.sm_count > 0) d.columns_blocks_per_sm = static_cast<int>(rule.resident) / d.sm_count;
  return d;
}

// x[i] * y[i]: CUB's input for the dot of matching rows.
struct product_at {
  const float* x;
  const float* y;
  __host__ __device__ float operator()(std::int64_t i) const { return x[i] * y[i]; }
};

}  // namespace

report run_segmented_bench(const segmented_bench_options& opt) {
  std::vector<int> totals = opt.log2_totals.empty() ? std::vector<int>{20, 24, 28} : opt.log2_totals;
  const device_info dev = current_device();
  const ceiling ceil = measure_ceiling();
  const std::uint64_t nmax = std::uint64_t(1) << *std::max_element(totals.begin(), totals.end());
  const std::uint64_t cols_list[] = {16, 256, 4096, 65536, std::uint64_t(1) << 20, std::uint64_t(1) << 24};
  // The most segments (results) of any shape: rows of 16 (total / 16), or the columns of one row
  // (as many as the row is long; more than total / 16 when 2^20 is the largest total).
  std::uint64_t max_segs = nmax / 16;
  for (std::uint64_t c : cols_list)
    if (c <= nmax) max_segs = std::max(max_segs, c);
  const std::uint64_t region = max_segs + 64;  // results of one candidate (floats); CUB's follow tally's
  dev_mem x(nmax * 4), out(2 * region * 4), offs((max_segs + 2) * 8);
  fill_random(x.p, nmax, dtype::f32, 7, -1.0, 1.0);
  check(cudaDeviceSynchronize(), "fill");
  cudaStream_t stream;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  timing_plan plan;
  if (opt.quick) plan.per_call_reps = 21, plan.batch_reps = 3, plan.max_batch = 200;
  plan.batch_budget_us = 40000;

  report rep;
  stamp_report(rep, "tally bench segmented", dev, ceil);
  rep.meta["timings"] = "graph: CUDA-graph replay of a batch of calls, time per call (median); stream: the batch "
                        "enqueued back to back; candidates interleaved in every repetition. GB/s and % ceiling "
                        "from tally's graph time; ratios are competitor / tally (> 1: tally faster).";
  table t;
  t.title = "sum f32 of rows and columns: tally vs CUB DeviceSegmentedReduce::Sum (" + dev.name + ")";
  t.columns = {{"total", "total", -1},          {"shape", "rows x cols", -1},     {"form", "form", -1},
               {"plan", "tally plan", -1},      {"tally_us", "tally us", 2},      {"cub_us", "CUB us", 2},
               {"flat_us", "1-D reduce us", 2}, {"ratio", "CUB/tally", 2},        {"stream_ratio", "stream CUB/tally", 2},
               {"gbps", "tally GB/s", 1},       {"pct_ceiling", "% ceiling", 1},  {"check", "check", -1}};

  // CUB's temporary storage, sized for the largest segment count.
  std::size_t temp_bytes = 0;
  check(cub::DeviceSegmentedReduce::Sum(nullptr, temp_bytes, x.as<float>(), out.as<float>(), int(max_segs),
                                        offs.as<std::int64_t>(), offs.as<std::int64_t>() + 1, stream),
        "cub::DeviceSegmentedReduce::Sum(temporary bytes)");
  dev_mem temp(temp_bytes);

  // --sweep-only: the sweep's table alone.
  const std::vector<int> table_totals = opt.sweep_only ? std::vector<int>{} : totals;
  for (int lt : table_totals) {
    const std::uint64_t total = std::uint64_t(1) << lt;
    for (std::uint64_t cols : cols_list) {
      if (cols > total) continue;
      const std::uint64_t rows = total / cols;
      for (int by_rows = 1; by_rows >= 0; --by_rows) {
        // CUB: rows as segments of a row-major matrix; columns as segments of its transpose
        // (the same bytes read, the layout CUB needs).
        const int segs = static_cast<int>(by_rows ? rows : cols);
        upload_even_offsets(offs, by_rows ? rows : cols, by_rows ? cols : rows);
        std::vector<call_fn> calls = {
            [&](cudaStream_t s, std::uint64_t) {
              if (by_rows) reduce_rows(x.p, rows, cols, cols, dtype::f32, op::sum, out.p, reinterpret_cast<stream_t>(s));
              else reduce_columns(x.p, rows, cols, cols, dtype::f32, op::sum, out.p, reinterpret_cast<stream_t>(s));
            },
            [&](cudaStream_t s, std::uint64_t) {
              std::size_t tb = temp_bytes;
              check(cub::DeviceSegmentedReduce::Sum(temp.p, tb, x.as<float>(), out.as<float>() + region, segs,
                                                    offs.as<std::int64_t>(), offs.as<std::int64_t>() + 1, s),
                    "cub::DeviceSegmentedReduce::Sum");
            },
            [&](cudaStream_t s, std::uint64_t) {
              reduce(x.p, total, dtype::f32, op::sum, out.as<char>() + 32, reinterpret_cast<stream_t>(s));
            }};
        const auto tm = time_interleaved(calls, stream, 1, plan);
        const seg::plan pl = seg::last_plan();
        // Check: tally's results against CUB's (rows) on the first results.
        const std::string verdict = by_rows ? compare_first(calls, stream, out, region, rows, cols) : "ok";
        json r;
        r["total"] = pow2(total);
        r["shape"] = pow2(rows) + " x " + pow2(cols);
        r["form"] = by_rows ? "rows" : "columns";
        fill_versus(r, pl, tm, double(total * 4), ceil.read_gbps);
        r["flat_us"] = tm[2].graph_us;
        r["stream_ratio"] = tm[1].stream_us / tm[0].stream_us;
        r["check"] = verdict;
        t.rows.push_back(r);
        if (opt.progress)
          opt.progress(std::string(by_rows ? "rows " : "columns ") + pow2(rows) + " x " + pow2(cols) + ": tally " +
                       std::to_string(tm[0].graph_us) + " us, CUB " + std::to_string(tm[1].graph_us) + " us");
      }
    }
  }
  if (!opt.sweep_only) rep.tables.push_back(std::move(t));

  // Columns of 2-byte floats (f16, bf16; f32 results, f32 accumulation): tally against CUB's
  // segmented reduce of the transposed layout, each element widened to float.
  table hc;
  hc.title = "sum f16 / bf16 of columns (f32 results): tally vs CUB DeviceSegmentedReduce::Reduce of the transposed "
             "layout, widened to float (" + dev.name + ")";
  hc.columns = {{"total", "total", -1},     {"shape", "rows x cols", -1}, {"dtype", "dtype", -1},
                {"plan", "tally plan", -1}, {"tally_us", "tally us", 2},  {"cub_us", "CUB us", 2},
                {"ratio", "CUB/tally", 2},  {"gbps", "tally GB/s", 1},    {"pct_ceiling", "% ceiling", 1}};
  if (!table_totals.empty()) {
    dev_mem xh(nmax * 2);
    for (const dtype ht : {dtype::f16, dtype::bf16}) {
      fill_random(xh.p, nmax, ht, 9, -1.0, 1.0);
      check(cudaDeviceSynchronize(), "fill (f16 / bf16)");
      const auto cub_fn = ht == dtype::f16 ? &cub_half_segments<__half, widen_f16> : &cub_half_segments<__nv_bfloat16, widen_bf16>;
      std::size_t htemp_bytes = 0;
      check(cub_fn(nullptr, htemp_bytes, xh.p, out.as<float>(), int(max_segs), offs.as<std::int64_t>(),
                   offs.as<std::int64_t>() + 1, stream),
            "cub::DeviceSegmentedReduce::Reduce(f16 / bf16 temporary bytes)");
      dev_mem htemp(std::max<std::size_t>(htemp_bytes, 16));
      for (int lt : table_totals) {
        const std::uint64_t total = std::uint64_t(1) << lt;
        for (std::uint64_t cols : cols_list) {
          if (cols > total) continue;
          const std::uint64_t rows = total / cols;
          upload_even_offsets(offs, cols, rows);
          std::vector<call_fn> calls = {
              [&](cudaStream_t s, std::uint64_t) {
                reduce_columns(xh.p, rows, cols, cols, ht, op::sum, out.p, reinterpret_cast<stream_t>(s));
              },
              [&](cudaStream_t s, std::uint64_t) {
                std::size_t tb = htemp_bytes;
                check(cub_fn(htemp.p, tb, xh.p, out.as<float>() + region, int(cols), offs.as<std::int64_t>(),
                             offs.as<std::int64_t>() + 1, s),
                      "cub::DeviceSegmentedReduce::Reduce (f16 / bf16)");
              }};
          const auto tm = time_interleaved(calls, stream, 1, plan);
          const seg::plan pl = seg::last_plan();
          // (CUB's sums are of the transposed layout's rows: other numbers, no check here; the
          // columns' results are the tests' business.)
          json r;
          r["total"] = pow2(total);
          r["shape"] = pow2(rows) + " x " + pow2(cols);
          r["dtype"] = std::string(to_string(ht));
          fill_versus(r, pl, tm, double(total * 2), ceil.read_gbps);
          hc.rows.push_back(r);
          if (opt.progress)
            opt.progress(std::string(to_string(ht)) + " columns " + pow2(rows) + " x " + pow2(cols) + ": tally " +
                         std::to_string(tm[0].graph_us) + " us, CUB " + std::to_string(tm[1].graph_us) + " us");
        }
      }
    }
  }
  if (!hc.rows.empty()) rep.tables.push_back(std::move(hc));

  // --sweep: every candidate plan against the rule's pick, interleaved in one timing: the column
  // shapes, then rows of 256 to 32768 elements (where lane groups give way to blocks).
  if (opt.sweep || opt.sweep_only) {
    // Fewer repetitions (a shape has up to two dozen candidates); candidates with a sixteenth of
    // the rule's blocks or fewer are left out (a block or a few reading the whole matrix: seconds
    // of timing for a plan that cannot win).
    timing_plan sweep_timing = plan;
    sweep_timing.per_call_reps = 21, sweep_timing.batch_reps = 3, sweep_timing.max_batch = 200;
    const std::vector<column> sweep_columns = {
        {"total", "total", -1}, {"shape", "rows x cols", -1}, {"plan", "plan", -1},       {"rule", "rule's pick", -1},
        {"us", "graph us", 2},  {"vs_rule", "rule us / us", 2}, {"pct_ceiling", "% ceiling", 1}};
    // One shape: the rule's call, then each candidate forced, interleaved; a row per plan.
    auto sweep_shape = [&](table& sw, const char* form, std::uint64_t total, std::uint64_t rows, std::uint64_t cols,
                           const std::function<void(cudaStream_t)>& call,
                           const std::function<std::vector<seg::plan>(const seg::plan&)>& candidates_of) {
      call(stream);
      check(cudaStreamSynchronize(stream), "sync");
      const seg::plan rule = seg::last_plan();
      std::vector<seg::plan> cands;
      for (const seg::plan& c : candidates_of(rule))
        if (std::uint64_t(c.blocks) * 16 > rule.blocks || rule.flat) cands.push_back(c);  // (a flat grid: its resident twin)
      std::vector<call_fn> calls{[&](cudaStream_t s, std::uint64_t) { call(s); }};
      // The plan forced for one call, the rule's again after it (also when the call throws).
      struct forced {
        explicit forced(const seg::plan* p) { seg::force_plan(p); }
        ~forced() { seg::force_plan(nullptr); }
      };
      for (const seg::plan& c : cands)
        calls.push_back([&, c](cudaStream_t s, std::uint64_t) {
          const forced f(&c);
          call(s);
        });
      auto same_as_rule = [&](const seg::plan& c) {
        return c.how == rule.how && c.col_vecs == rule.col_vecs && c.per_seg == rule.per_seg && c.col_ring == rule.col_ring &&
               c.col_lean == rule.col_lean && c.split_block == rule.split_block && c.split_lean == rule.split_lean && c.unroll == rule.unroll &&
               c.flat == rule.flat &&
               c.chunk == rule.chunk && c.tiles == rule.tiles && c.eager == rule.eager && c.span == rule.span &&
               c.stripe == rule.stripe &&
               (c.span == 0 || (c.short_max == rule.short_max && c.span_segs == rule.span_segs &&
                                c.span_mid == rule.span_mid)) &&
               (c.how != seg::strategy::thin && c.how != seg::strategy::group && c.how != seg::strategy::ragged
                    ? true
                    : c.group == rule.group);
      };
      if (!opt.profile_plan.empty()) {
        // One plan between the profiler's start and stop (ncu --profile-from-start off), no timing.
        const std::string shape = pow2(rows) + " x " + pow2(cols);
        if (!opt.profile_shapes.empty() &&
            std::find(opt.profile_shapes.begin(), opt.profile_shapes.end(), shape) == opt.profile_shapes.end())
          return;
        std::size_t pick = 0;  // calls[0]: the rule's
        for (std::size_t k = 0; k < cands.size() && opt.profile_plan != "rule"; ++k)
          if (plan_cell(cands[k]) == opt.profile_plan) pick = k + 1;
        if (pick == 0 && opt.profile_plan != "rule") return;  // no such candidate at this shape
        const seg::plan& pl = pick == 0 ? rule : cands[pick - 1];
        check(cudaStreamSynchronize(stream), "sync");
        check(cudaProfilerStart(), "cudaProfilerStart");
        for (int r = 0; r < std::max(1, opt.profile_reps); ++r) calls[pick](stream, 0);
        check(cudaStreamSynchronize(stream), "sync");
        check(cudaProfilerStop(), "cudaProfilerStop");
        json row;
        row["total"] = pow2(total);
        row["shape"] = shape;
        row["plan"] = plan_cell(pl) + " (profiled: " + pl.why + ")";
        row["rule"] = pick == 0 || same_as_rule(pl) ? "<- rule" : "";
        sw.rows.push_back(row);
        if (opt.progress) opt.progress(std::string("profiled ") + form + " " + shape + ": " + plan_cell(pl));
        return;
      }
      const auto tm = time_interleaved(calls, stream, 1, sweep_timing);
      auto row_of = [&](const seg::plan& c, double us, bool is_rule) {
        json r;
        r["total"] = pow2(total);
        r["shape"] = pow2(rows) + " x " + pow2(cols);
        r["plan"] = plan_cell(c);
        r["rule"] = is_rule ? "<- rule" : "";
        r["us"] = us;
        r["vs_rule"] = tm[0].graph_us / us;
        r["pct_ceiling"] = 100.0 * total * 4 / us / 1e3 / ceil.read_gbps;
        sw.rows.push_back(r);
      };
      // The rule's pick is none of the candidates: its own row.
      if (std::none_of(cands.begin(), cands.end(), same_as_rule)) row_of(rule, tm[0].graph_us, true);
      for (std::size_t k = 0; k < cands.size(); ++k) row_of(cands[k], tm[k + 1].graph_us, same_as_rule(cands[k]));
      if (opt.progress) {
        // The rule's pick and the fastest candidate, so that a run cut short still says them.
        std::size_t best = 0;
        for (std::size_t k = 1; k < cands.size(); ++k)
          if (tm[k + 1].graph_us < tm[best + 1].graph_us) best = k;
        opt.progress(std::string("sweep ") + form + " " + pow2(rows) + " x " + pow2(cols) + ": rule " +
                     plan_cell(rule) + " " + std::to_string(tm[0].graph_us) + " us, best of " +
                     std::to_string(cands.size()) + " plans " +
                     (cands.empty() ? std::string("-") : plan_cell(cands[best]) + " " + std::to_string(tm[best + 1].graph_us)) +
                     " us");
      }
    };
    table sw;
    sw.title = "columns, f32 sum: every candidate plan vs the rule's pick (" + dev.name + ")";
    sw.columns = sweep_columns;
    table sr;
    sr.title = "rows, f32 sum: every candidate plan vs the rule's pick (" + dev.name + ")";
    sr.columns = sweep_columns;
    table sg;
    sg.title = "ragged segments (Pareto lengths, a fifth empty; shape: segments x mean length), f32 sum: every "
               "candidate plan vs the rule's pick (" + dev.name + ")";
    sg.columns = sweep_columns;
    table su;
    su.title = "ragged segments of light-tailed lengths (uniform on 0 to twice the mean; shape: segments x mean "
               "length), f32 sum: every candidate plan vs the rule's pick (" + dev.name + ")";
    su.columns = sweep_columns;
    auto form_on = [&](const char* f) {
      return opt.sweep_forms.empty() || std::find(opt.sweep_forms.begin(), opt.sweep_forms.end(), f) != opt.sweep_forms.end();
    };
    const std::uint64_t row_lengths[] = {16, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768};
    for (int lt : totals) {
      const std::uint64_t total = std::uint64_t(1) << lt;
      for (std::uint64_t cols : cols_list) {
        if (cols > total || cols < 16 || !form_on("columns")) continue;
        const std::uint64_t rows = total / cols;
        seg::problem p;
        p.outer = 1, p.length = rows, p.inner = cols, p.length_stride = cols, p.aligned16 = true;
        sweep_shape(
            sw, "columns", total, rows, cols,
            [&](cudaStream_t s) {
              reduce_columns(x.p, rows, cols, cols, dtype::f32, op::sum, out.p, reinterpret_cast<stream_t>(s));
            },
            [&](const seg::plan& rule) { return seg::column_candidates(p, 4, 4, sweep_limits(rule)); });
      }
      for (std::uint64_t cols : row_lengths) {
        if (cols > total || !form_on("rows")) continue;
        const std::uint64_t rows = total / cols;
        seg::problem p;
        p.outer = rows, p.length = cols, p.inner = 1, p.outer_stride = cols, p.aligned16 = true;
        sweep_shape(
            sr, "rows", total, rows, cols,
            [&](cudaStream_t s) {
              reduce_rows(x.p, rows, cols, cols, dtype::f32, op::sum, out.p, reinterpret_cast<stream_t>(s));
            },
            [&](const seg::plan& rule) { return seg::row_candidates(p, 4, 4, sweep_limits(rule)); });
      }
      // The ragged table's shapes: a mean of 4096 and of 64 elements, and 1024 segments; and
      // (form ragged-uniform) a mean of 64 with a light tail: the rule sees only the mean and
      // cannot tell a light tail from a heavy one.
      auto ragged_shape = [&](table& t, const char* form, std::uint64_t segments, bool pareto) {
        const auto h = ragged_offsets(total, segments, 11 + lt, pareto);
        check(cudaMemcpy(offs.p, h.data(), h.size() * 8, cudaMemcpyHostToDevice), "offsets");
        const auto* b = offs.as<std::int64_t>();
        seg::problem p;
        p.outer = segments, p.n = total, p.d_begin = b, p.d_end = b + 1, p.aligned16 = true;
        sweep_shape(
            t, form, total, segments, total / segments,
            [&](cudaStream_t s) {
              reduce_segments(x.p, total, b, b + 1, segments, dtype::f32, op::sum, out.p, reinterpret_cast<stream_t>(s));
            },
            [&](const seg::plan& rule) { return seg::ragged_candidates(p, 4, 4, sweep_limits(rule)); });
      };
      for (std::uint64_t segments : ragged_counts(total))
        if (segments != 0 && form_on("ragged")) ragged_shape(sg, "ragged", segments, true);
      if (total / 64 != 0 && form_on("ragged-uniform")) ragged_shape(su, "ragged-uniform", total / 64, false);
    }
    if (!sw.rows.empty()) rep.tables.push_back(std::move(sw));
    if (!sr.rows.empty()) rep.tables.push_back(std::move(sr));
    if (!sg.rows.empty()) rep.tables.push_back(std::move(sg));
    if (!su.rows.empty()) rep.tables.push_back(std::move(su));
  }

  // Ragged: heavy-tailed segment lengths, empty ones included, against CUB on the same offsets.
  table g;
  g.title = "sum f32 of ragged segments (Pareto lengths, a fifth empty): tally vs CUB (" + dev.name + ")";
  g.columns = {{"total", "total", -1}, {"segments", "segments", -1}, {"plan", "tally plan", -1},
               {"tally_us", "tally us", 2}, {"cub_us", "CUB us", 2}, {"ratio", "CUB/tally", 2},
               {"gbps", "tally GB/s", 1}, {"pct_ceiling", "% ceiling", 1}};
  for (int lt : table_totals) {
    const std::uint64_t total = std::uint64_t(1) << lt;
    for (std::uint64_t segments : ragged_counts(total)) {
      if (segments == 0) continue;
      const auto h = ragged_offsets(total, segments, 11 + lt);
      check(cudaMemcpy(offs.p, h.data(), h.size() * 8, cudaMemcpyHostToDevice), "offsets");
      const auto* b = offs.as<std::int64_t>();
      std::vector<call_fn> calls = {
          [&](cudaStream_t s, std::uint64_t) {
            reduce_segments(x.p, total, b, b + 1, segments, dtype::f32, op::sum, out.p, reinterpret_cast<stream_t>(s));
          },
          [&](cudaStream_t s, std::uint64_t) {
            std::size_t tb = temp_bytes;
            check(cub::DeviceSegmentedReduce::Sum(temp.p, tb, x.as<float>(), out.as<float>() + region,
                                                  int(segments), b, b + 1, s),
                  "cub::DeviceSegmentedReduce::Sum");
          }};
      const auto tm = time_interleaved(calls, stream, 1, plan);
      const seg::plan pl = seg::last_plan();
      json r;
      r["total"] = pow2(total);
      r["segments"] = pow2(segments);
      fill_versus(r, pl, tm, double(total * 4), ceil.read_gbps);
      g.rows.push_back(r);
      if (opt.progress) opt.progress("ragged " + pow2(total) + ", " + pow2(segments) + " segments");
    }
  }
  if (!opt.sweep_only) rep.tables.push_back(std::move(g));

  // Dot of matching rows: tally's dot_rows against CUB summing x[i] * y[i] through a transform
  // iterator over the same row offsets (two matrices read, so the bytes are twice the total).
  table dt;
  dt.title = "dot f32 of matching rows (x, y both rows x cols): tally dot_rows vs CUB DeviceSegmentedReduce::Sum of "
             "x*y (" + dev.name + ")";
  dt.columns = {{"total", "total", -1},          {"shape", "rows x cols", -1}, {"plan", "tally plan", -1},
                {"tally_us", "tally us", 2},     {"cub_us", "CUB us", 2},      {"ratio", "CUB/tally", 2},
                {"stream_ratio", "stream CUB/tally", 2}, {"gbps", "tally GB/s", 1}, {"pct_ceiling", "% ceiling", 1},
                {"check", "check", -1}};
  dev_mem y(nmax * 4);
  fill_random(y.p, nmax, dtype::f32, 8, -1.0, 1.0);
  const float* xs = x.as<float>();
  const float* ys = y.as<float>();
  const auto products = thrust::make_transform_iterator(thrust::make_counting_iterator<std::int64_t>(0),
                                                        product_at{xs, ys});
  std::size_t dot_temp_bytes = 0;
  check(cub::DeviceSegmentedReduce::Sum(nullptr, dot_temp_bytes, products, out.as<float>(), int(nmax / 16),
                                        offs.as<std::int64_t>(), offs.as<std::int64_t>() + 1, stream),
        "cub::DeviceSegmentedReduce::Sum(x*y temporary bytes)");
  dev_mem dot_temp(dot_temp_bytes);
  for (int lt : table_totals) {
    const std::uint64_t total = std::uint64_t(1) << lt;
    for (std::uint64_t cols : {std::uint64_t(16), std::uint64_t(256), std::uint64_t(4096), std::uint64_t(65536),
                               std::uint64_t(1) << 20}) {
      if (cols > total) continue;
      const std::uint64_t rows = total / cols;
      upload_even_offsets(offs, rows, cols);
      std::vector<call_fn> calls = {
          [&](cudaStream_t s, std::uint64_t) {
            dot_rows(x.p, y.p, rows, cols, cols, cols, dtype::f32, out.p, reinterpret_cast<stream_t>(s));
          },
          [&](cudaStream_t s, std::uint64_t) {
            std::size_t tb = dot_temp_bytes;
            check(cub::DeviceSegmentedReduce::Sum(dot_temp.p, tb, products, out.as<float>() + region, int(rows),
                                                  offs.as<std::int64_t>(), offs.as<std::int64_t>() + 1, s),
                  "cub::DeviceSegmentedReduce::Sum(x*y)");
          }};
      const auto tm = time_interleaved(calls, stream, 1, plan);
      const seg::plan pl = seg::last_plan();
      const std::string verdict = compare_first(calls, stream, out, region, rows, cols);
      json r;
      r["total"] = pow2(total);
      r["shape"] = pow2(rows) + " x " + pow2(cols);
      fill_versus(r, pl, tm, 2.0 * total * 4, ceil.read_gbps);
      r["stream_ratio"] = tm[1].stream_us / tm[0].stream_us;
      r["check"] = verdict;
      dt.rows.push_back(r);
      if (opt.progress) opt.progress("dot rows " + pow2(rows) + " x " + pow2(cols));
    }
  }
  if (!opt.sweep_only) rep.tables.push_back(std::move(dt));
  cudaStreamDestroy(stream);
  return rep;
}

}  // namespace tally::bench
