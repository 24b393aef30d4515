// `tally bench host` (see host_bench.hpp).
#include "bench/host_bench.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bench/probe.hpp"
#include "bench/timing.hpp"
#include "tally/tally.hpp"

namespace tally::bench {
namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Median wall seconds of reps runs of f (after one warm-up run).
template <class F>
double wall_median(int reps, F&& f) {
  f();
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    t.push_back(seconds_since(t0));
  }
  return median(t);
}

// n floats in [0, 1) from a hash of the index, written by every core (so the pages are resident).
void fill_host(float* p, std::uint64_t n) {
  const unsigned k = std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::thread> ts;
  for (unsigned t = 0; t < k; ++t)
    ts.emplace_back([=] {
      const std::uint64_t lo = n * t / k, hi = n * (t + 1) / k;
      for (std::uint64_t i = lo; i < hi; ++i) {
        std::uint64_t x = (i + 1) * 0x9E3779B97F4A7C15ull;
        x ^= x >> 29;
        x *= 0xBF58476D1CE4E5B9ull;
        x ^= x >> 32;
        p[i] = static_cast<float>(x >> 40) * (1.0f / 16777216.0f);
      }
    });
  for (auto& t : ts) t.join();
}

struct env_setting {  // sets an environment variable for a scope
  std::string name;
  std::string old;
  bool had = false;
  env_setting(const char* n, const std::string& v) : name(n) {
    if (const char* o = std::getenv(n)) had = true, old = o;
    setenv(n, v.c_str(), 1);
  }
  ~env_setting() {
    if (had) setenv(name.c_str(), old.c_str(), 1);
    else unsetenv(name.c_str());
  }
};

}  // namespace

report run_host_bench(const host_bench_options& opt) {
  const device_info dev = current_device();
  report rep;
  stamp_report(rep, "host", dev, measure_ceiling());
  const std::uint64_t n = std::uint64_t(1) << opt.log2_n;
  const std::size_t bytes = n * sizeof(float);
  rep.meta["n"] = "2^" + std::to_string(opt.log2_n) + " f32 (" + std::to_string(bytes >> 20) + " MiB)";
  rep.meta["host_cores"] = std::thread::hardware_concurrency();
  rep.meta["timing"] = "host wall clock, median of " + std::to_string(opt.reps) + " runs after a warm-up";
  auto say = [&](const std::string& s) {
    if (opt.progress) opt.progress(s);
  };

  say("filling host memory");
  std::unique_ptr<float[]> pageable(new float[n]);
  fill_host(pageable.get(), n);
  float* pinned = nullptr;
  check(cudaMallocHost(reinterpret_cast<void**>(&pinned), bytes), "cudaMallocHost(bench)");
  std::unique_ptr<float, decltype(&cudaFreeHost)> pinned_guard(pinned, &cudaFreeHost);
  std::memcpy(pinned, pageable.get(), bytes);
  void* d = nullptr;
  check(cudaMalloc(&d, bytes), "cudaMalloc(bench)");
  std::unique_ptr<void, decltype(&cudaFree)> d_guard(d, &cudaFree);
  const double gb = static_cast<double>(bytes) / 1e9;

  table t{"2^" + std::to_string(opt.log2_n) + " f32 in host memory, reduced end to end",
          {{"case", "case"}, {"ms", "ms", 1}, {"gbps", "GB/s", 1}, {"vs_copy", "vs pageable copy + reduce", 2},
           {"value", "value"}},
          {}};
  double base = 0;
  // The value is read after the timing has run (as a callable: the order in which a call's
  // arguments are evaluated is unspecified, so a plain argument could show the previous value).
  auto row = [&](const std::string& name, double s, const std::function<std::string()>& value) {
    if (base == 0) base = s;
    t.rows.push_back({{"case", name}, {"ms", s * 1e3}, {"gbps", gb / s}, {"vs_copy", base / s}, {"value", value()}});
  };
  value v;
  say("cudaMemcpy + reduce");
  row("cudaMemcpy from pageable memory, then reduce", wall_median(opt.reps, [&] {
        check(cudaMemcpy(d, pageable.get(), bytes, cudaMemcpyHostToDevice), "cudaMemcpy(bench)");
        v = reduce_value(d, n, dtype::f32, op::sum);
      }), [&] { return v.to_string(); });
  row("cudaMemcpy from pinned memory, then reduce", wall_median(opt.reps, [&] {
        check(cudaMemcpy(d, pinned, bytes, cudaMemcpyHostToDevice), "cudaMemcpy(bench)");
        v = reduce_value(d, n, dtype::f32, op::sum);
      }), [&] { return v.to_string(); });
  say("tally from host memory");
  row("tally::reduce_value(pageable): staged", wall_median(opt.reps, [&] {
        v = reduce_value(pageable.get(), n, dtype::f32, op::sum);
      }), [&] { return v.to_string(); });
  row("tally::reduce_value(pinned): read in place", wall_median(opt.reps, [&] {
        v = reduce_value(pinned, n, dtype::f32, op::sum);
      }), [&] { return v.to_string(); });
  options exact;
  exact.mode = accuracy::exact;
  value ve;
  row("tally::reduce_value(pageable), exact", wall_median(opt.reps, [&] {
        ve = reduce_value(pageable.get(), n, dtype::f32, op::sum, nullptr, exact);
      }), [&] { return ve.to_string(); });
  const value vd = reduce_value(d, n, dtype::f32, op::sum, nullptr, exact);
  rep.meta["exact_same_bits_as_device"] = ve == vd ? "yes" : "NO: device " + vd.to_string();
  {
    // The host's cores summing the array in place while the GPU takes pieces of it through the
    // staging (src/chunked/head_start.hpp; an experiment): the exact sum in every mode.
    const env_setting on("TALLY_HOST_SHARE", "1");
    value vs;
    row("tally::reduce_value(pageable), host cores + GPU (TALLY_HOST_SHARE=1)", wall_median(opt.reps, [&] {
          vs = reduce_value(pageable.get(), n, dtype::f32, op::sum);
        }), [&] { return vs.to_string(); });
    rep.meta["host_share_same_bits_as_device_exact"] =
        bytes < (std::size_t(64) << 20) ? "not applied (under 64 MiB)" : vs == vd ? "yes" : "NO: " + vs.to_string();
  }
  stats st;
  row("tally::stats_value(pageable)", wall_median(opt.reps, [&] { st = stats_value(pageable.get(), n, dtype::f32); }),
      [&] { return "mean " + std::to_string(st.mean); });
  row("tally::reducer, 64 MiB feeds from pageable", wall_median(opt.reps, [&] {
        reducer r = reducer::for_reduce(dtype::f32, op::sum);
        const std::uint64_t step = std::uint64_t(16) << 20;
        for (std::uint64_t at = 0; at < n; at += step) r.feed(pageable.get() + at, std::min(step, n - at));
        v = r.result();
      }), [&] { return v.to_string(); });
  rep.tables.push_back(std::move(t));

  if (opt.sweep) {
    table th{"staging threads (pageable f32 sum, 16 MiB chunks)", {{"threads", "threads"}, {"gbps", "GB/s", 1}}, {}};
    for (int k : {1, 2, 4, 6, 8, 12, 16}) {
      say("threads " + std::to_string(k));
      const env_setting e("TALLY_HOST_THREADS", std::to_string(k));
      const double s = wall_median(opt.reps, [&] { v = reduce_value(pageable.get(), n, dtype::f32, op::sum); });
      th.rows.push_back({{"threads", k}, {"gbps", gb / s}});
    }
    rep.tables.push_back(std::move(th));
    table tc{"staging chunk size (pageable f32 sum, default threads)", {{"mib", "chunk MiB"}, {"gbps", "GB/s", 1}}, {}};
    for (int mib : {2, 4, 8, 16, 32, 64}) {
      say("chunk " + std::to_string(mib) + " MiB");
      const env_setting e("TALLY_CHUNK_MIB", std::to_string(mib));
      const double s = wall_median(opt.reps, [&] { v = reduce_value(pageable.get(), n, dtype::f32, op::sum); });
      tc.rows.push_back({{"mib", mib}, {"gbps", gb / s}});
    }
    rep.tables.push_back(std::move(tc));
  }
  return rep;
}

}  // namespace tally::bench
