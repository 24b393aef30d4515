#include <cub/version.cuh>

#include "bench/competitors.cuh"
#include "bench/numerics_bench.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <utility>

#include "bench/probe.hpp"
#include "bench/timing.hpp"
#include "tally/tally.hpp"

namespace tally::bench {
namespace {

using namespace competitors;

// The issue states its bandwidth requirements at this size (warm, graph time).
constexpr std::uint64_t kRequirementN = std::uint64_t(1) << 28;

std::string size_label(std::uint64_t n) {
  if (n != 0 && (n & (n - 1)) == 0) return fmt::format("2^{}", __builtin_ctzll(n));
  return std::to_string(n);
}

std::size_t round_up(std::size_t b) {
  return (b + 255) / 256 * 256;
}

double gbps(std::size_t bytes, double us) {
  return bytes / (us * 1e-6) / 1e9;
}

// GB/s and ratios use the graph time; the stream time where graph capture was refused.
double basis_us(const timings& t) {
  return std::isnan(t.graph_us) ? t.stream_us : t.graph_us;
}

std::string sci(double x) {
  return std::isnan(x) ? "nan" : fmt::format("{:.1e}", x);
}

// Where one measurement's inputs lie: arena + slot * stride. Stride 0: one input (warm L2 where
// it fits); cold runs rotate through the arena.
struct placement {
  std::size_t stride = 0;
};

struct measurement {
  bool cold = false;
  bool graph = true;  // false: graph capture refused, GB/s from the stream time
  std::vector<timings> t;
};

struct env {
  env(const numerics_bench_options& o, device_info d, ceiling c, std::size_t arena_bytes,
      std::size_t flush_bytes)
      : opt(o), dev(std::move(d)), ceil(c), arena(arena_bytes), flush(flush_bytes) {}
  const numerics_bench_options& opt;
  device_info dev;
  ceiling ceil;
  cudaStream_t stream = nullptr;
  device_buffer arena, flush, cub_temp{256};
  std::vector<device_buffer> out;  // one 64-byte result slot per candidate
  timing_plan plan;
  report rep;

  const char* at(const placement& p, std::uint64_t slot, std::size_t offset = 0) const {
    return static_cast<const char*>(arena.get()) + slot * p.stride + offset;
  }
  void* out_at(std::size_t k, std::size_t offset = 0) const {
    return static_cast<char*>(out[k].get()) + offset;
  }
  // CUB's temporary storage, grown to what `query(bytes, n)` asks for at every n of sizes.
  template <class Query>
  void size_temp(const std::vector<std::uint64_t>& sizes, Query query, const char* what) {
    for (std::uint64_t n : sizes) {
      std::size_t bytes = 0;
      check(query(bytes, n), what);
      bytes = std::max<std::size_t>(bytes, 16);
      if (cub_temp.size() < bytes) cub_temp = device_buffer(bytes);
    }
  }
  void fill(dtype t, std::uint64_t seed, double lo, double hi) {
    fill_random(arena.get(), arena.size() / dtype_size(t), t, seed, lo, hi, stream);
  }
  void sync() { check(cudaStreamSynchronize(stream), "cudaStreamSynchronize"); }
  void progress(const std::string& s) const {
    if (opt.progress) opt.progress(s);
  }
};

template <class T>
T fetch(const env& e, std::size_t k, std::size_t offset = 0) {
  T x;
  e.out[k].download(&x, sizeof x, offset);
  return x;
}

double fetch_float(const env& e, std::size_t k, dtype r) {
  return r == dtype::f64 ? fetch<double>(e, k) : double(fetch<float>(e, k));
}

// Times the candidates (interleaved), warm and, where the footprint fits in L2 and --cold is on,
// cold. `graph_fallback`: a capture failure (a library that cannot be captured) is retried
// without graphs instead of failing the run.
std::vector<measurement> measure(env& e, const std::vector<call_fn>& calls, std::size_t footprint,
                                 placement& where, bool graph_fallback = false) {
  std::vector<measurement> res;
  const bool fits = footprint <= e.dev.l2_bytes;
  for (int cold = 0; cold <= (fits && e.opt.cold ? 1 : 0); ++cold) {
    timing_plan p = e.plan;
    // Long calls: fewer per-call repetitions keep the default run within ~4 minutes; a median of
    // 31 calls of >= 0.3 ms is as steady as 101 short ones.
    if (footprint >= (std::size_t(1) << 30))
      p.per_call_reps = std::min(p.per_call_reps, 31);
    else if (footprint >= (std::size_t(256) << 20))
      p.per_call_reps = std::min(p.per_call_reps, 51);
    std::uint64_t slots = 1;
    where.stride = 0;
    if (cold) {
      where.stride = round_up(footprint);
      slots = std::max<std::uint64_t>(1, e.arena.size() / where.stride);
      p.before_each_call = [&e](cudaStream_t s) {
        check(cudaMemsetAsync(e.flush.get(), 0x5a, e.flush.size(), s), "cudaMemsetAsync(L2 flush)");
      };
      // Enough calls per batch that one batch reads >= 2x L2 of distinct inputs (as bench core).
      const std::uint64_t need = (2 * e.dev.l2_bytes + footprint - 1) / footprint;
      p.min_batch = static_cast<int>(std::min<std::uint64_t>({need, slots, 20000}));
    }
    measurement m;
    m.cold = cold != 0;
    try {
      m.t = time_interleaved(calls, e.stream, slots, p);
    } catch (const tally::error& err) {
      if (!graph_fallback) throw;
      p.graph = false;
      m.graph = false;
      m.t = time_interleaved(calls, e.stream, slots, p);
      e.rep.meta["graph_fallback"] =
          std::string("stream timing only where capture failed: ") + err.what();
    }
    res.push_back(std::move(m));
  }
  where.stride = 0;
  return res;
}

// Columns of a two-candidate table, tally first, the competitor second.
std::vector<column> pair_columns(const std::string& who) {
  return {{"n", "n"},
          {"cache", "L2"},
          {"per_call_tally_us", "call tally us", 2},
          {"per_call_other_us", "call " + who + " us", 2},
          {"per_call_ratio", "call " + who + "/tally", 2},
          {"stream_tally_us", "stream tally us", 2},
          {"stream_other_us", "stream " + who + " us", 2},
          {"stream_ratio", "stream " + who + "/tally", 2},
          {"graph_tally_us", "graph tally us", 2},
          {"graph_other_us", "graph " + who + " us", 2},
          {"graph_ratio", "graph " + who + "/tally", 2},
          {"tally_gbps", "tally GB/s", 1},
          {"other_gbps", who + " GB/s", 1},
          {"pct_ceiling", "% ceiling", 1},
          {"pct_peak", "% peak", 1},
          {"check", "check"}};
}

// The three candidates' per-call, stream and graph times of one measurement, named.
template <class M>
void put_timings(json& row, const M& m, const char* const (&names)[3]) {
  for (int k = 0; k < 3; ++k) {
    row[fmt::format("per_call_{}_us", names[k])] = m.t[k].per_call_us;
    row[fmt::format("stream_{}_us", names[k])] = m.t[k].stream_us;
    row[fmt::format("graph_{}_us", names[k])] = m.t[k].graph_us;
  }
}

json base_row(const env& e, dtype t, const std::string& what, std::uint64_t n, std::size_t bytes,
              const measurement& m) {
  json row;
  row["dtype"] = to_string(t);
  row["op"] = what;
  row["n"] = size_label(n);
  row["n_elements"] = n;
  row["bytes"] = bytes;
  row["cache"] = m.cold ? "cold" : "warm";
  row["batch"] = m.t[0].batch;
  row["graph_timed"] = m.graph;
  const double g = gbps(bytes, basis_us(m.t[0]));
  row["tally_gbps"] = g;
  row["pct_ceiling"] = 100.0 * g / e.ceil.read_gbps;
  row["pct_peak"] = 100.0 * g / e.ceil.theoretical_gbps;
  return row;
}

json pair_row(const env& e, dtype t, const std::string& what, const std::string& competitor,
              std::uint64_t n, std::size_t bytes, const measurement& m,
              const std::string& check_text) {
  const timings &a = m.t[0], &b = m.t[1];
  json row = base_row(e, t, what, n, bytes, m);
  row["competitor"] = competitor;
  row["per_call_tally_us"] = a.per_call_us;
  row["per_call_other_us"] = b.per_call_us;
  row["per_call_ratio"] = b.per_call_us / a.per_call_us;
  row["stream_tally_us"] = a.stream_us;
  row["stream_other_us"] = b.stream_us;
  row["stream_ratio"] = b.stream_us / a.stream_us;
  row["graph_tally_us"] = a.graph_us;
  row["graph_other_us"] = b.graph_us;
  row["graph_ratio"] = b.graph_us / a.graph_us;
  row["other_gbps"] = gbps(bytes, basis_us(b));
  row["check"] = check_text;
  return row;
}

std::string pair_progress(const std::string& what, std::uint64_t n, const measurement& m,
                          const std::string& who) {
  return fmt::format("{} n={} {}: tally {:.2f} us vs {} {:.2f} ({:.2f}x{})", what, size_label(n),
                     m.cold ? "cold" : "warm", basis_us(m.t[0]), who, basis_us(m.t[1]),
                     basis_us(m.t[1]) / basis_us(m.t[0]), m.graph ? "" : ", stream timing");
}

// --- a) argmin / argmax vs CUB -------------------------------------------------------------------

template <class T>
void argminmax_table(env& e, op o, const std::vector<std::uint64_t>& sizes) {
  const dtype t = sizeof(T) == 4 ? dtype::f32 : dtype::f64;
  const char* cub_name =
      o == op::argmax ? "cub::DeviceReduce::ArgMax" : "cub::DeviceReduce::ArgMin";
  table tab;
  tab.title = fmt::format("{} {} — tally vs {} (int64 index) ({})", to_string(o), to_string(t),
                          cub_name, e.dev.name);
  tab.columns = pair_columns("CUB");
  e.fill(t, o == op::argmax ? 2024 : 2025, -1.0, 1.0);
  e.size_temp(
      sizes,
      [&](std::size_t& tb, std::uint64_t n) { return cub_arg<T>(o, nullptr, tb, nullptr, nullptr, nullptr, n, e.stream); },
      "cub ArgMin/ArgMax (temp size)");
  for (std::uint64_t n : sizes) {
    const std::size_t bytes = n * sizeof(T);
    placement where;
    std::vector<call_fn> calls = {
        [&](cudaStream_t s, std::uint64_t slot) {
          tally::reduce(e.at(where, slot), n, t, o, e.out_at(0), s);
        },
        [&](cudaStream_t s, std::uint64_t slot) {
          std::size_t tb = e.cub_temp.size();
          check(cub_arg<T>(o, e.cub_temp.get(), tb, reinterpret_cast<const T*>(e.at(where, slot)),
                           static_cast<T*>(e.out_at(1, 8)), static_cast<std::int64_t*>(e.out_at(1)),
                           n, s),
                cub_name);
        }};
    const auto ms = measure(e, calls, bytes, where);
    // Both on the first input: the same index (the first extreme) and the same value, bitwise.
    calls[0](e.stream, 0);
    calls[1](e.stream, 0);
    e.sync();
    const auto ti = fetch<std::int64_t>(e, 0), ci = fetch<std::int64_t>(e, 1);
    const T tv = fetch<T>(e, 0, 8), cv = fetch<T>(e, 1, 8);
    const bool ok = ti == ci && std::memcmp(&tv, &cv, sizeof(T)) == 0;
    const std::string text =
        ok ? "ok" : fmt::format("MISMATCH tally [{}] {} CUB [{}] {}", ti, tv, ci, cv);
    for (const auto& m : ms) {
      json row = pair_row(e, t, to_string(o), cub_name, n, bytes, m, text);
      row["tally_index"] = ti;
      row["cub_index"] = ci;
      tab.rows.push_back(std::move(row));
      e.progress(pair_progress(fmt::format("{} {}", to_string(o), to_string(t)), n, m, "CUB"));
    }
  }
  e.rep.tables.push_back(std::move(tab));
}

// --- b) dot vs cuBLAS ----------------------------------------------------------------------------

#if TALLY_HAVE_CUBLAS
template <class T>
void dot_table(env& e, cublas_session& cb, const std::vector<std::uint64_t>& sizes) {
  const dtype t = sizeof(T) == 4 ? dtype::f32 : dtype::f64;
  const char* fn = sizeof(T) == 4 ? "cublasSdot_64" : "cublasDdot_64";
  table tab;
  tab.title = fmt::format("dot {} — tally vs cuBLAS {}, device pointer mode ({}); bytes = 2 n x {}",
                          to_string(t), fn, e.dev.name, sizeof(T));
  tab.columns = pair_columns("cuBLAS");
  // Positive data: the two results are compared relatively, free of cancellation.
  e.fill(t, 77, 0.0, 1.0);
  for (std::uint64_t n : sizes) {
    const std::size_t bytes = 2 * n * sizeof(T);
    const std::size_t y_offset = round_up(n * sizeof(T));
    placement where;
    std::vector<call_fn> calls = {
        [&](cudaStream_t s, std::uint64_t slot) {
          tally::dot(e.at(where, slot), e.at(where, slot, y_offset), n, t, e.out_at(0), s);
        },
        [&](cudaStream_t s, std::uint64_t slot) {
          (void)s;  // the handle is bound to the bench stream (cublasSetStream), which s is
          const T* x = reinterpret_cast<const T*>(e.at(where, slot));
          const T* y = reinterpret_cast<const T*>(e.at(where, slot, y_offset));
          const auto nn = static_cast<std::int64_t>(n);
          if constexpr (sizeof(T) == 4)
            cublas_check(cb.f.sdot(cb.handle, nn, x, 1, y, 1, static_cast<float*>(e.out_at(1))), fn);
          else
            cublas_check(cb.f.ddot(cb.handle, nn, x, 1, y, 1, static_cast<double*>(e.out_at(1))), fn);
        }};
    const auto ms = measure(e, calls, 2 * y_offset, where, /*graph_fallback=*/true);
    calls[0](e.stream, 0);
    calls[1](e.stream, 0);
    e.sync();
    const double a = fetch<T>(e, 0), b = fetch<T>(e, 1);
    const double rel = std::fabs(a - b) / std::max(std::fabs(b), 1e-300);
    const double tol = sizeof(T) == 4 ? 1e-4 : 1e-12;
    const std::string text = rel <= tol ? "ok" : fmt::format("MISMATCH rel {:.2e}", rel);
    for (const auto& m : ms) {
      json row = pair_row(e, t, "dot", fn, n, bytes, m, text);
      row["rel_diff_vs_cublas"] = rel;
      tab.rows.push_back(std::move(row));
      e.progress(pair_progress(fmt::format("dot {}", to_string(t)), n, m, "cuBLAS"));
    }
  }
  e.rep.tables.push_back(std::move(tab));
}
#endif

// --- c) accuracy modes: fast vs compensated vs exact ---------------------------------------------
std::string requirement(std::uint64_t n, bool cold, double pct, double need) {
  if (n != kRequirementN || cold) return "";
  return fmt::format("{} ({:.1f}% >= {:.0f}%)", pct >= need ? "PASS" : "FAIL", pct, need);
}

void accuracy_table(env& e, dtype t, const std::vector<std::uint64_t>& sizes) {
  table tab;
  tab.title =
      fmt::format("sum {} — accuracy fast vs compensated vs exact, data uniform in [-1, 1) ({})",
                  to_string(t), e.dev.name);
  tab.columns = {{"n", "n"},
                 {"cache", "L2"},
                 {"graph_fast_us", "fast us", 2},
                 {"graph_comp_us", "comp us", 2},
                 {"graph_exact_us", "exact us", 2},
                 {"pct_comp_of_fast", "comp % fast", 1},
                 {"pct_exact_of_fast", "exact % fast", 1},
                 {"stream_pct_comp_of_fast", "stream comp % fast", 1},
                 {"stream_pct_exact_of_fast", "stream exact % fast", 1},
                 {"tally_gbps", "fast GB/s", 1},
                 {"comp_gbps", "comp GB/s", 1},
                 {"exact_gbps", "exact GB/s", 1},
                 {"pct_ceiling", "fast % ceiling", 1},
                 {"fast_rel_err_text", "fast rel err", -1},
                 {"comp_rel_err_text", "comp rel err", -1},
                 {"req_comp", "comp >= 95% at 2^28", -1},
                 {"req_exact", "exact >= 90% at 2^28", -1}};
  // Signed data: the sum cancels, so the modes' errors differ visibly.
  e.fill(t, 4242, -1.0, 1.0);
  const accuracy modes[3] = {accuracy::fast, accuracy::compensated, accuracy::exact};
  const std::size_t es = dtype_size(t);
  for (std::uint64_t n : sizes) {
    const std::size_t bytes = n * es;
    placement where;
    std::vector<call_fn> calls;
    for (int k = 0; k < 3; ++k) {
      options o;
      o.mode = modes[k];
      calls.push_back([&e, &where, n, t, k, o](cudaStream_t s, std::uint64_t slot) {
        tally::reduce(e.at(where, slot), n, t, op::sum, e.out_at(k), s, o);
      });
    }
    const auto ms = measure(e, calls, bytes, where);
    for (auto& c : calls) c(e.stream, 0);
    e.sync();
    const double fast = fetch_float(e, 0, t), comp = fetch_float(e, 1, t),
                 exact = fetch_float(e, 2, t);
    const double scale = std::max(std::fabs(exact), 1e-300);
    const double fast_err = std::fabs(fast - exact) / scale,
                 comp_err = std::fabs(comp - exact) / scale;
    for (const auto& m : ms) {
      json row = base_row(e, t, "sum", n, bytes, m);
      const char* names[3] = {"fast", "comp", "exact"};
      put_timings(row, m, names);
      const double f = basis_us(m.t[0]), c = basis_us(m.t[1]), x = basis_us(m.t[2]);
      row["pct_comp_of_fast"] = 100.0 * f / c;
      row["pct_exact_of_fast"] = 100.0 * f / x;
      row["stream_pct_comp_of_fast"] = 100.0 * m.t[0].stream_us / m.t[1].stream_us;
      row["stream_pct_exact_of_fast"] = 100.0 * m.t[0].stream_us / m.t[2].stream_us;
      row["comp_gbps"] = gbps(bytes, c);
      row["exact_gbps"] = gbps(bytes, x);
      row["sum_fast"] = fast;
      row["sum_comp"] = comp;
      row["sum_exact"] = exact;
      row["fast_rel_err"] = fast_err;
      row["comp_rel_err"] = comp_err;
      row["fast_rel_err_text"] = sci(fast_err);
      row["comp_rel_err_text"] = sci(comp_err);
      row["req_comp"] = requirement(n, m.cold, 100.0 * f / c, 95);
      row["req_exact"] = requirement(n, m.cold, 100.0 * f / x, 90);
      tab.rows.push_back(std::move(row));
      e.progress(fmt::format(
          "sum {} n={} {}: fast {:.2f} us, compensated {:.1f}%, exact {:.1f}% of fast",
          to_string(t), size_label(n), m.cold ? "cold" : "warm", f, 100.0 * f / c, 100.0 * f / x));
    }
  }
  e.rep.tables.push_back(std::move(tab));
}

// --- d) stats vs tally's fast sum and CUB's sum --------------------------------------------------
template <class T>
void stats_table(env& e, const std::vector<std::uint64_t>& sizes) {
  const dtype t = sizeof(T) == 4 ? dtype::f32 : dtype::f64;
  table tab;
  tab.title = fmt::format(
      "stats {} — fused count/sum/min/max/mean/m2 vs tally fast sum and "
      "cub::DeviceReduce::Sum ({})",
      to_string(t), e.dev.name);
  tab.columns = {{"n", "n"},
                 {"cache", "L2"},
                 {"graph_stats_us", "stats us", 2},
                 {"graph_sum_us", "tally sum us", 2},
                 {"graph_cub_us", "CUB sum us", 2},
                 {"pct_stats_of_sum", "stats % sum", 1},
                 {"stream_pct_stats_of_sum", "stream stats % sum", 1},
                 {"cub_over_stats", "CUB/stats", 2},
                 {"tally_gbps", "stats GB/s", 1},
                 {"pct_ceiling", "% ceiling", 1},
                 {"req_stats", "stats >= 90% at 2^28", -1},
                 {"check", "check"}};
  e.fill(t, 99, -1.0, 1.0);
  e.size_temp(
      sizes, [&](std::size_t& tb, std::uint64_t n) { return cub_sum<T>(nullptr, tb, nullptr, nullptr, n, e.stream); },
      "cub::DeviceReduce::Sum (temp size)");
  for (std::uint64_t n : sizes) {
    const std::size_t bytes = n * sizeof(T);
    placement where;
    std::vector<call_fn> calls = {
        [&](cudaStream_t s, std::uint64_t slot) {
          tally::reduce_stats(e.at(where, slot), n, t, e.out_at(0), s);
        },
        [&](cudaStream_t s, std::uint64_t slot) {
          tally::reduce(e.at(where, slot), n, t, op::sum, e.out_at(1), s);
        },
        [&](cudaStream_t s, std::uint64_t slot) {
          std::size_t tb = e.cub_temp.size();
          check(cub_sum<T>(e.cub_temp.get(), tb, reinterpret_cast<const T*>(e.at(where, slot)),
                           static_cast<T*>(e.out_at(2)), n, s),
                "cub::DeviceReduce::Sum");
        }};
    const auto ms = measure(e, calls, bytes, where);
    for (auto& c : calls) c(e.stream, 0);
    e.sync();
    const tally::stats st = fetch<tally::stats>(e, 0);
    const double sum = fetch<T>(e, 1);
    // The fast sum's error is bounded by gamma_h * sum|x|, sum|x| ~ n / 2 for data in [-1, 1).
    // A sanity check, not the numerics test (tests/ has those).
    const double tol = (sizeof(T) == 4 ? 1e-4 : 1e-13) * double(n);
    const bool ok = st.count == n && std::fabs(st.sum - sum) <= tol && st.min >= -1.0 &&
                    st.max <= 1.0 && st.min <= st.max;
    const std::string text =
        ok ? "ok"
           : fmt::format("MISMATCH count {} sum {} (fast sum {}) min {} max {}", st.count, st.sum,
                         sum, st.min, st.max);
    for (const auto& m : ms) {
      json row = base_row(e, t, "stats", n, bytes, m);
      const char* names[3] = {"stats", "sum", "cub"};
      put_timings(row, m, names);
      const double sv = basis_us(m.t[0]), fs = basis_us(m.t[1]), cb = basis_us(m.t[2]);
      row["pct_stats_of_sum"] = 100.0 * fs / sv;
      row["stream_pct_stats_of_sum"] = 100.0 * m.t[1].stream_us / m.t[0].stream_us;
      row["cub_over_stats"] = cb / sv;
      row["cub_gbps"] = gbps(bytes, cb);
      row["req_stats"] = requirement(n, m.cold, 100.0 * fs / sv, 90);
      row["check"] = text;
      tab.rows.push_back(std::move(row));
      e.progress(fmt::format("stats {} n={} {}: {:.2f} us, {:.1f}% of fast sum, CUB sum {:.2f}x",
                             to_string(t), size_label(n), m.cold ? "cold" : "warm", sv,
                             100.0 * fs / sv, cb / sv));
    }
  }
  e.rep.tables.push_back(std::move(tab));
}

// --- e) f16 / bf16 sums vs CUB -------------------------------------------------------------------
template <class H, class Widen>
void half_table(env& e, dtype t, const std::vector<std::uint64_t>& sizes) {
  table tab;
  tab.title = fmt::format(
      "sum {} — tally (f32 accumulation) vs cub::DeviceReduce::TransformReduce "
      "(widened to float, float accumulation) ({})",
      to_string(t), e.dev.name);
  tab.columns = pair_columns("CUB");
  e.fill(t, 16, 0.0, 1.0);
  e.size_temp(
      sizes,
      [&](std::size_t& tb, std::uint64_t n) { return cub_half_sum<H, Widen>(nullptr, tb, nullptr, nullptr, n, e.stream); },
      "cub::DeviceReduce::TransformReduce (temp size)");
  for (std::uint64_t n : sizes) {
    const std::size_t bytes = n * sizeof(H);
    placement where;
    std::vector<call_fn> calls = {
        [&](cudaStream_t s, std::uint64_t slot) {
          tally::reduce(e.at(where, slot), n, t, op::sum, e.out_at(0), s);
        },
        [&](cudaStream_t s, std::uint64_t slot) {
          std::size_t tb = e.cub_temp.size();
          check(cub_half_sum<H, Widen>(e.cub_temp.get(), tb,
                                       reinterpret_cast<const H*>(e.at(where, slot)),
                                       static_cast<float*>(e.out_at(1)), n, s),
                "cub::DeviceReduce::TransformReduce");
        }};
    const auto ms = measure(e, calls, bytes, where);
    calls[0](e.stream, 0);
    calls[1](e.stream, 0);
    e.sync();
    const double a = fetch<float>(e, 0), b = fetch<float>(e, 1);
    const double rel = std::fabs(a - b) / std::max(std::fabs(b), 1e-300);
    const std::string text = rel <= 1e-3 ? "ok" : fmt::format("MISMATCH rel {:.2e}", rel);
    for (const auto& m : ms) {
      json row =
          pair_row(e, t, "sum", "cub::DeviceReduce::TransformReduce (float)", n, bytes, m, text);
      row["rel_diff_vs_cub"] = rel;
      tab.rows.push_back(std::move(row));
      e.progress(pair_progress(fmt::format("sum {}", to_string(t)), n, m, "CUB"));
    }
  }
  e.rep.tables.push_back(std::move(tab));
}

}  // namespace

std::vector<std::string> numerics_table_names() {
  return {"argminmax", "dot", "accuracy", "stats", "half"};
}

bool numerics_has_cublas() noexcept {
#if TALLY_HAVE_CUBLAS
  return cublas::available();
#else
  return false;
#endif
}

report run_numerics_bench(const numerics_bench_options& opt) {
  const auto names = numerics_table_names();
  std::vector<std::string> tables = opt.tables.empty() ? names : opt.tables;
  for (const auto& t : tables)
    if (std::find(names.begin(), names.end(), t) == names.end())
      throw tally::error("bench numerics: unknown table '" + t +
                         "' (argminmax, dot, accuracy, stats, half)");
  auto want = [&](const char* name) {
    return std::find(tables.begin(), tables.end(), name) != tables.end();
  };
  std::vector<std::uint64_t> sizes = opt.sizes;
  if (sizes.empty())
    for (int k = 10; k <= 30; k += 2) sizes.push_back(std::uint64_t(1) << k);
  for (std::uint64_t n : sizes)
    if (n == 0) throw tally::error("bench numerics: a size of 0 elements measures nothing");
  std::sort(sizes.begin(), sizes.end());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  const std::uint64_t nmax = sizes.back();
  // f64 argmax at two sizes (one in L2, one far beyond); the largest size if neither is asked for.
  std::vector<std::uint64_t> f64_arg_sizes;
  for (std::uint64_t n : sizes)
    if (n == (std::uint64_t(1) << 16) || n == kRequirementN) f64_arg_sizes.push_back(n);
  if (f64_arg_sizes.empty()) f64_arg_sizes.push_back(nmax);

  const device_info dev = current_device();
  const ceiling ceil = measure_ceiling();
  // Bytes one measurement needs at the largest size: dot f64 reads two vectors.
  std::size_t need = 0;
  if (want("argminmax")) need = std::max(need, nmax * sizeof(float));
  if (want("argminmax")) need = std::max(need, f64_arg_sizes.back() * sizeof(double));
  if (want("dot") && numerics_has_cublas()) need = std::max(need, 2 * round_up(nmax * sizeof(double)));
  if (want("accuracy") || want("stats")) need = std::max(need, nmax * sizeof(double));
  if (want("half")) need = std::max(need, nmax * 2);
  if (opt.cold) need = std::max(need, 8 * dev.l2_bytes);
  need = round_up(std::max<std::size_t>(need, 256));

  env e(opt, dev, ceil, need, opt.cold ? 2 * dev.l2_bytes : 256);
  for (int k = 0; k < 3; ++k) e.out.emplace_back(64);
  if (opt.quick) {
    e.plan.per_call_reps = 21;
    e.plan.batch_reps = 3;
    e.plan.max_batch = 200;
  }
  check(cudaStreamCreateWithFlags(&e.stream, cudaStreamNonBlocking), "cudaStreamCreate");
  struct stream_guard {
    cudaStream_t s;
    ~stream_guard() {
      cudaStreamSynchronize(s);
      cudaStreamDestroy(s);
    }
  } guard{e.stream};

  auto& meta = e.rep.meta;
  meta["benchmark"] = "tally bench numerics";
  const schedule_scope sched(opt.sched, e.rep);
  const exact_chunks_scope chunks(opt.exact_chunk_rounds, opt.exact_chunk_tail, e.rep);
  const depth_scope depth(opt.depth, e.rep);
  meta["device"] = dev.name;
  meta["sm_count"] = dev.sm_count;
  meta["l2_mib"] = dev.l2_bytes / double(1 << 20);
  meta["date"] = utc_now();
  meta["read_ceiling_gbps"] = ceil.read_gbps;
  meta["theoretical_gbps"] = ceil.theoretical_gbps;
  meta["cub_version"] =
      fmt::format("{}.{}.{}", CUB_MAJOR_VERSION, CUB_MINOR_VERSION, CUB_SUBMINOR_VERSION);
#if TALLY_HAVE_CUBLAS
  if (std::string why; cublas::available(&why)) {
    int major = 0, minor = 0, patch = 0;
    const cublas::functions& f = cublas::api();
    // Metadata only: a failed query leaves "unknown" rather than stopping the benchmark.
    const bool known = f.get_property(MAJOR_VERSION, &major) == CUBLAS_STATUS_SUCCESS &&
                       f.get_property(MINOR_VERSION, &minor) == CUBLAS_STATUS_SUCCESS &&
                       f.get_property(PATCH_LEVEL, &patch) == CUBLAS_STATUS_SUCCESS;
    meta["cublas_version"] = fmt::format("{} ({}, loaded at run time)",
                                         known ? fmt::format("{}.{}.{}", major, minor, patch) : "unknown",
                                         cublas::library_name());
  } else {
    meta["cublas_version"] = why + ": the dot table is skipped";
  }
#else
  meta["cublas_version"] = "not found at build time: the dot table is skipped";
#endif
  meta["timings"] =
      "per_call: events around one call, then sync (median); stream: a batch of calls back to "
      "back, one sync, time per call (median); graph: CUDA-graph replay of the same batch, time "
      "per call (median). The candidates of a row alternate inside every repetition, in one "
      "process. GB/s, % ceiling, % peak and the % columns use the graph time. Ratios: "
      "competitor time / tally time (> 1: tally is faster).";
  meta["cache"] =
      opt.cold ? "warm rows, plus cold rows (L2 flushed, inputs rotated) for sizes that fit in L2"
               : "warm only (inputs that fit stay in L2); --cold adds cold rows";
  meta["requirements"] =
      "at n = 2^28 (warm, graph time): sum compensated >= 95% and exact >= 90% of fast's "
      "bandwidth; stats >= 90% of the fast sum's";

  // One failing table (a refused call, a CUDA error) is reported and the others still run; the
  // report's meta "errors" lists what failed, and the command then exits non-zero.
  auto guarded = [&](const std::string& what, const std::function<void()>& fn) {
    try {
      fn();
    } catch (const std::exception& err) {
      (void)cudaStreamSynchronize(e.stream);
      (void)cudaGetLastError();
      meta["errors"].push_back(what + ": " + err.what());
      e.progress(what + " FAILED: " + err.what());
    }
  };
  if (want("argminmax")) {
    guarded("argmin f32", [&] { argminmax_table<float>(e, op::argmin, sizes); });
    guarded("argmax f32", [&] { argminmax_table<float>(e, op::argmax, sizes); });
    guarded("argmax f64", [&] { argminmax_table<double>(e, op::argmax, f64_arg_sizes); });
  }
  if (want("dot")) {
#if TALLY_HAVE_CUBLAS
    if (numerics_has_cublas()) guarded("dot", [&] {
      cublas_session cb(e.stream);
      guarded("dot f32", [&] { dot_table<float>(e, cb, sizes); });
      guarded("dot f64", [&] { dot_table<double>(e, cb, sizes); });
    });
#endif
  }
  if (want("accuracy")) {
    guarded("accuracy f32", [&] { accuracy_table(e, dtype::f32, sizes); });
    guarded("accuracy f64", [&] { accuracy_table(e, dtype::f64, sizes); });
  }
  if (want("stats")) {
    guarded("stats f32", [&] { stats_table<float>(e, sizes); });
    guarded("stats f64", [&] { stats_table<double>(e, sizes); });
  }
  if (want("half")) {
    guarded("sum f16", [&] { half_table<__half, half_to_float>(e, dtype::f16, sizes); });
    guarded("sum bf16", [&] { half_table<__nv_bfloat16, bf16_to_float>(e, dtype::bf16, sizes); });
  }
  e.sync();
  return std::move(e.rep);
}

}  // namespace tally::bench
