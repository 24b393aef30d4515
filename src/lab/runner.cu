#include "lab/runner.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "bench/probe.hpp"
#include "bench/timing.hpp"
#include "lab/common.cuh"

namespace tally::lab {
namespace {

using bench::json;

std::string size_text(std::uint64_t n) {
  if (n && (n & (n - 1)) == 0) {
    int k = 0;
    while ((std::uint64_t(1) << k) != n) ++k;
    return fmt::format("2^{}", k);
  }
  return std::to_string(n);
}

std::string params_text(const std::map<std::string, int>& p) {
  std::string s;
  for (const auto& [k, v] : p) s += (s.empty() ? "" : " ") + k + "=" + std::to_string(v);
  return s;
}

std::size_t size_of(dtype t) { return dtype_size(t); }

// Host data of one dtype, with the exact reference of sum(x) or sum(x*y).
struct input_set {
  dtype type;
  std::uint64_t n;
  bool constant;
  std::vector<unsigned char> hx, hy;     // pageable host copies
  void* px = nullptr;                    // pinned host copies (system time from pinned memory)
  void* py = nullptr;
  device_buffer dx, dy;
  long double sum = 0, abs_sum = 0;      // reference for floats
  long double dot = 0, abs_dot = 0;
  std::int64_t isum = 0, idot = 0;       // reference for i32 (compared modulo 2^32)
  ~input_set() {
    if (px) cudaFreeHost(px);
    if (py) cudaFreeHost(py);
  }
};

template <class T>
void fill_host(input_set& s, std::uint64_t seed) {
  s.hx.resize(s.n * sizeof(T));
  s.hy.resize(s.n * sizeof(T));
  T* x = reinterpret_cast<T*>(s.hx.data());
  T* y = reinterpret_cast<T*>(s.hy.data());
  std::mt19937_64 rng(seed);
  for (std::uint64_t i = 0; i < s.n; ++i) {
    if (s.constant) {
      x[i] = T(1);
      y[i] = T(1);
    } else if constexpr (std::is_integral_v<T>) {
      x[i] = static_cast<T>(static_cast<long long>(rng() % 2001) - 1000);
      y[i] = static_cast<T>(static_cast<long long>(rng() % 21) - 10);
    } else {
      x[i] = static_cast<T>(static_cast<double>(rng() >> 11) * 0x1.0p-53);
      y[i] = static_cast<T>(static_cast<double>(rng() >> 11) * 0x1.0p-53);
    }
  }
  // References: Neumaier-compensated in long double for floats, exact int64 for integers.
  long double s1 = 0, c1 = 0, a1 = 0, s2 = 0, c2 = 0, a2 = 0;
  std::int64_t is = 0, id = 0;
  auto add = [](long double& s, long double& c, long double v) {
    const long double t = s + v;
    c += std::fabs(s) >= std::fabs(v) ? (s - t) + v : (v - t) + s;
    s = t;
  };
  for (std::uint64_t i = 0; i < s.n; ++i) {
    if constexpr (std::is_integral_v<T>) {
      is += x[i];
      id += static_cast<std::int64_t>(x[i]) * y[i];
    } else {
      add(s1, c1, x[i]);
      a1 += std::fabs(static_cast<long double>(x[i]));
      const long double pr = static_cast<long double>(x[i]) * y[i];
      add(s2, c2, pr);
      a2 += std::fabs(pr);
    }
  }
  s.sum = s1 + c1;
  s.abs_sum = a1;
  s.dot = s2 + c2;
  s.abs_dot = a2;
  s.isum = is;
  s.idot = id;
}

std::unique_ptr<input_set> make_input(dtype t, std::uint64_t n, bool constant, std::uint64_t seed) {
  auto s = std::make_unique<input_set>();
  s->type = t;
  s->n = n;
  s->constant = constant;
  switch (t) {
    case dtype::f32: fill_host<float>(*s, seed); break;
    case dtype::f64: fill_host<double>(*s, seed); break;
    case dtype::i32: fill_host<std::int32_t>(*s, seed); break;
    default: throw tally::error("the lab runs f32, f64 and i32");
  }
  const std::size_t bytes = n * size_of(t);
  s->dx = device_buffer(std::max<std::size_t>(bytes, 16));
  s->dy = device_buffer(std::max<std::size_t>(bytes, 16));
  if (bytes) {
    s->dx.upload(s->hx.data(), bytes);
    s->dy.upload(s->hy.data(), bytes);
  }
  check(cudaMallocHost(&s->px, std::max<std::size_t>(bytes, 16)), "cudaMallocHost");
  check(cudaMallocHost(&s->py, std::max<std::size_t>(bytes, 16)), "cudaMallocHost");
  if (bytes) {
    std::memcpy(s->px, s->hx.data(), bytes);
    std::memcpy(s->py, s->hy.data(), bytes);
  }
  return s;
}

verdict judge(const input_set& in, bool dot, const lab_value& v, std::uint64_t height) {
  verdict r;
  if (in.type == dtype::i32) {
    const std::int64_t want64 = dot ? in.idot : in.isum;
    const auto want = static_cast<std::int32_t>(static_cast<std::uint32_t>(want64));
    const auto got = static_cast<std::int32_t>(static_cast<std::uint32_t>(v.i));
    r.abs_error = std::fabs(static_cast<double>(got) - want);
    r.rel_error = want ? r.abs_error / std::fabs(static_cast<double>(want)) : r.abs_error;
    r.ok = got == want;
    r.text = r.ok ? "ok" : fmt::format("WRONG: {} instead of {}", got, want);
    return r;
  }
  const long double exact = dot ? in.dot : in.sum;
  const long double abs_sum = dot ? in.abs_dot : in.abs_sum;
  const long double u = in.type == dtype::f32 ? 0x1p-24L : 0x1p-53L;
  const long double hu = static_cast<long double>(height) * u;
  r.abs_error = static_cast<double>(std::fabs(static_cast<long double>(v.f) - exact));
  r.rel_error = exact != 0 ? static_cast<double>(r.abs_error / std::fabs(exact)) : r.abs_error;
  if (std::isnan(v.f)) {
    r.text = "WRONG: NaN";
    return r;
  }
  if (hu >= 1) {
    r.bound = std::numeric_limits<double>::infinity();
    r.ok = true;
    r.checked = false;
    r.text = fmt::format("UNVERIFIED: a chain of {} adds has no useful error bound (rel err {:.1e} against the exact sum)",
                         height, r.rel_error);
    return r;
  }
  const long double ulp = in.type == dtype::f32 ? std::ldexp(1.0L, std::ilogb(static_cast<float>(exact)) - 23)
                                                : std::ldexp(1.0L, std::ilogb(static_cast<double>(exact)) - 52);
  r.bound = static_cast<double>(hu / (1 - hu) * abs_sum + (exact != 0 ? ulp : 0));
  r.ok = r.abs_error <= r.bound;
  r.text = r.ok ? "ok" : fmt::format("WRONG: rel err {:.2e} (bound {:.1e})", r.rel_error, r.bound / std::fabs(static_cast<double>(exact)));
  return r;
}

run_args args_for(const registration& reg, const input_set& in, cudaStream_t s, const std::map<std::string, int>& overrides,
                  int sms) {
  run_args a;
  a.type = in.type;
  a.n = in.n;
  a.d_x = in.dx.get();
  a.d_y = in.dy.get();
  a.stream = s;
  a.params = resolve_params(reg.meta, overrides);
  a.sm_count = sms;
  return a;
}

lab_value run_once(variant& v, const run_args& a) {
  v.launch(a);
  v.finish(a);
  return v.fetch(a);
}

bool same_bits(const lab_value& a, const lab_value& b) {
  return a.is_int ? a.i == b.i : std::memcmp(&a.f, &b.f, sizeof(double)) == 0;
}

}  // namespace

std::uint64_t parse_size(const std::string& s) {
  try {
    const auto caret = s.find('^');
    if (caret != std::string::npos) {
      // Whole fields only: std::stoi stops at the first non-digit ('2^24junk' read as 2^24).
      std::size_t pb = 0, pe = 0;
      const std::string bs = s.substr(0, caret), es = s.substr(caret + 1);
      const int base = std::stoi(bs, &pb), e = std::stoi(es, &pe);
      if (pb != bs.size() || pe != es.size() || base != 2 || e < 0 || e > 40) throw std::invalid_argument("");
      return std::uint64_t(1) << e;
    }
    std::size_t pos = 0;
    const double d = std::stod(s, &pos);
    if (pos != s.size() || d < 0 || d > 1e13 || d != std::floor(d)) throw std::invalid_argument("");
    return static_cast<std::uint64_t>(d);
  } catch (const std::exception&) {
    throw tally::error("bad size '" + s + "' (use 2^24, 16777216 or 1e6)");
  }
}

std::map<std::string, int> resolve_params(const variant_meta& m, const std::map<std::string, int>& overrides) {
  std::map<std::string, int> p;
  for (const auto& prm : m.params) {
    const auto it = overrides.find(prm.name);
    p[prm.name] = it == overrides.end() ? prm.value : it->second;
  }
  return p;
}

std::string list_text() {
  std::ostringstream out;
  std::string group;
  for (const auto& r : registry()) {
    const auto& m = r.meta;
    if (m.group != group) {
      group = m.group;
      out << "\n" << group_title(group) << "\n";
    }
    std::string flags;
    if (!m.expected_correct) flags += " [deliberately WRONG]";
    if (m.racy) flags += " [varies run to run]";
    if (m.dot) flags += " [dot product]";
    std::string params;
    for (const auto& p : m.params) params += (params.empty() ? " (" : ", ") + p.name + "=" + std::to_string(p.value);
    if (!params.empty()) params += ")";
    out << fmt::format("  {:<20} {}{}{}\n", m.id, m.title, params, flags);
    out << fmt::format("  {:<20}   change: {}\n", "", m.change);
    out << fmt::format("  {:<20}   flaw:   {}\n", "", m.flaw);
  }
  return out.str();
}

verdict verify_variant(const std::string& id, dtype t, std::uint64_t n, const std::map<std::string, int>& params,
                       std::uint64_t seed, bool constant_input) {
  const registration* reg = find(id);
  if (!reg) throw tally::error("unknown lab variant '" + id + "'");
  auto in = make_input(t, n, constant_input, seed);
  cudaStream_t stream = nullptr;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  struct guard {
    cudaStream_t s;
    ~guard() { cudaStreamDestroy(s); }
  } g{stream};
  const run_args a = args_for(*reg, *in, stream, params, current_device().sm_count);
  auto v = reg->make(t);
  v->prepare(a);
  return judge(*in, reg->meta.dot, run_once(*v, a), v->error_height(a));
}

bench::report run_lab(const run_options& opt) {
  const device_info dev = current_device();
  const bench::ceiling ceil = bench::measure_ceiling();
  std::vector<const registration*> chosen;
  if (opt.variants.empty()) {
    for (const auto& r : registry()) chosen.push_back(&r);
  } else {
    for (const auto& id : opt.variants) {
      const registration* r = find(id);
      if (!r) throw tally::error("unknown lab variant '" + id + "' (tally lab list shows them)");
      chosen.push_back(r);
    }
  }
  std::vector<std::uint64_t> sizes = opt.sizes;
  if (sizes.empty()) sizes = {std::uint64_t(1) << 24, (std::uint64_t(1) << 24) - 3};

  bench::report rep;
  rep.meta["benchmark"] = "tally lab run";
  rep.meta["device"] = dev.name;
  rep.meta["date"] = bench::utc_now();
  rep.meta["read_ceiling_gbps"] = ceil.read_gbps;
  rep.meta["theoretical_gbps"] = ceil.theoretical_gbps;
  rep.meta["input"] = opt.constant_input ? "constant (all ones)"
                                          : "random: floats uniform in [0,1), i32 uniform in [-1000,1000] (dot: y in [-10,10])";
  rep.meta["timings"] =
      "kernel: median of events around the variant's GPU work (host finishing excluded); system: host "
      "wall clock of input copy host-to-device (pageable or pinned) + kernels + host finishing + result back, "
      "median; speedups against the group's first variant at the same dtype and n";

  cudaStream_t stream = nullptr;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  std::map<std::string, std::vector<json>> rows_by_group;
  std::uint64_t seed = 20261122;
  for (dtype t : opt.types)
    for (std::uint64_t n : sizes) {
      auto in = make_input(t, n, opt.constant_input, ++seed);
      std::unique_ptr<input_set> constant_in;  // made on demand for constant_demo variants
      for (const registration* reg : chosen) {
        const auto& m = reg->meta;
        json row;
        row["group"] = m.group;
        row["id"] = m.id;
        row["title"] = m.title;
        row["dtype"] = to_string(t);
        row["n"] = size_text(n);
        row["n_elements"] = n;
        row["expected"] = m.expected_correct ? "correct" : "WRONG";
        std::unique_ptr<variant> v;
        run_args a = args_for(*reg, *in, stream, opt.params, dev.sm_count);
        row["params"] = params_text(a.params);
        try {
          v = reg->make(t);
          v->prepare(a);
          const lab_value first = run_once(*v, a);
          const verdict vd = judge(*in, m.dot, first, v->error_height(a));
          row["result"] = first.is_int ? json(first.i) : json(first.f);
          row["rel_error"] = vd.rel_error;
          row["ok"] = vd.ok;
          std::string text = vd.text;
          if (m.racy) {
            std::vector<lab_value> seen = {first};
            int distinct = 1;
            for (int r = 1; r < opt.race_runs; ++r) {
              const lab_value again = run_once(*v, a);
              if (std::none_of(seen.begin(), seen.end(), [&](const lab_value& s) { return same_bits(s, again); })) ++distinct;
              seen.push_back(again);
            }
            row["distinct_results"] = fmt::format("{} of {}", distinct, opt.race_runs);
            text += fmt::format("; {} distinct results in {} runs", distinct, opt.race_runs);
          }
          if (m.constant_demo && !opt.constant_input) {
            const std::uint64_t span = std::uint64_t(a.params.count("grid") ? a.params.at("grid") : 1) *
                                       (a.params.count("block") ? a.params.at("block") : 1);
            const std::uint64_t nc = std::max<std::uint64_t>(span, n / span * span);
            if (!constant_in || constant_in->n != nc || constant_in->type != t) constant_in = make_input(t, nc, true, 1);
            run_args ac = args_for(*reg, *constant_in, stream, opt.params, dev.sm_count);
            v->prepare(ac);
            const verdict vc = judge(*constant_in, m.dot, run_once(*v, ac), v->error_height(ac));
            row["constant_input_check"] = vc.ok ? "ok" : vc.text;
            text += fmt::format("; constant input (n={}): {}", nc, vc.ok ? "right" : "wrong");
            v->prepare(a);
          }
          if (vd.ok != m.expected_correct)
            text = (vd.ok ? "UNEXPECTEDLY RIGHT: " : "UNEXPECTED ") + text;
          else if (!vd.ok)
            text = "WRONG (as expected): " + text.substr(text.find(':') + 2);
          row["verdict"] = text;

          // Kernel time: events around the GPU work.
          bench::event_pair ev;
          std::vector<double> kt;
          for (int r = 0; r < opt.kernel_reps + 2; ++r) {
            check(cudaEventRecord(ev.start, stream), "cudaEventRecord");
            v->launch(a);
            check(cudaEventRecord(ev.stop, stream), "cudaEventRecord");
            const double us = ev.elapsed_us();
            v->finish(a);
            if (r >= 2) kt.push_back(us);
          }
          const double kernel_us = bench::median(kt);
          // System time: copy in (pageable, then pinned), kernels, host finishing, result back.
          const std::size_t bytes = n * size_of(t);
          auto system_ms = [&](const void* hx, const void* hy) {
            std::vector<double> st;
            for (int r = 0; r < opt.system_reps; ++r) {
              const auto t0 = std::chrono::steady_clock::now();
              if (bytes) {
                check(cudaMemcpyAsync(const_cast<void*>(a.d_x), hx, bytes, cudaMemcpyHostToDevice, stream), "cudaMemcpyAsync(input)");
                if (m.dot) check(cudaMemcpyAsync(const_cast<void*>(a.d_y), hy, bytes, cudaMemcpyHostToDevice, stream), "cudaMemcpyAsync(input)");
              }
              (void)run_once(*v, a);
              st.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
            }
            return bench::median(st);
          };
          const double sys_pageable = system_ms(in->hx.data(), in->hy.data());
          const double sys_pinned = system_ms(in->px, in->py);
          const double moved = static_cast<double>(bytes) * (m.dot ? 2 : 1);
          row["kernel_us"] = kernel_us;
          row["system_pageable_ms"] = sys_pageable;
          row["system_pinned_ms"] = sys_pinned;
          row["gbps"] = moved / (kernel_us * 1e-6) / 1e9;
          row["pct_peak"] = 100 * double(row["gbps"]) / ceil.theoretical_gbps;
          row["pct_ceiling"] = 100 * double(row["gbps"]) / ceil.read_gbps;
        } catch (const config_error& e) {
          row["verdict"] = std::string("SKIPPED: ") + e.what();
        }
        if (opt.progress) opt.progress(fmt::format("{} {} n={}: {}", m.id, to_string(t), size_text(n), std::string(row["verdict"])));
        rows_by_group[m.group].push_back(std::move(row));
      }
    }
  check(cudaStreamDestroy(stream), "cudaStreamDestroy");

  // Speedups against the first variant of each group at the same dtype and n.
  for (auto& [group, rows] : rows_by_group) {
    std::map<std::string, const json*> base;
    for (const auto& r : rows) {
      const std::string key = std::string(r["dtype"]) + std::string(r["n"]);
      if (!base.count(key) && r.contains("kernel_us")) base[key] = &r;
    }
    for (auto& r : rows) {
      const std::string key = std::string(r["dtype"]) + std::string(r["n"]);
      if (!r.contains("kernel_us") || !base.count(key)) continue;
      const json& b = *base[key];
      r["baseline"] = b["id"];
      r["kernel_speedup"] = double(b["kernel_us"]) / double(r["kernel_us"]);
      r["system_speedup"] = double(b["system_pageable_ms"]) / double(r["system_pageable_ms"]);
      r["system_speedup_pinned"] = double(b["system_pinned_ms"]) / double(r["system_pinned_ms"]);
    }
  }
  for (const auto& g : group_order()) {
    if (!rows_by_group.count(g)) continue;
    bench::table tab;
    tab.title = group_title(g) + " (" + dev.name + ")";
    tab.columns = {{"id", "variant"},        {"dtype", "dtype"},
                   {"n", "N"},               {"params", "params"},
                   {"kernel_us", "kernel us", 1},
                   {"system_pageable_ms", "system ms (pageable)", 2},
                   {"system_pinned_ms", "system ms (pinned)", 2},
                   {"kernel_speedup", "kernel speedup", 2},
                   {"system_speedup", "system speedup", 2},
                   {"gbps", "GB/s", 1},
                   {"pct_peak", "% peak", 1},
                   {"pct_ceiling", "% ceiling", 1},
                   {"verdict", "verdict"}};
    tab.rows = rows_by_group[g];
    rep.tables.push_back(std::move(tab));
  }
  return rep;
}

namespace {

// A float64 reference for the sweep's sanity check: sum(x) or sum(x*y) with double atomics per
// block (order-dependent only far below float precision).
template <class T>
__global__ void reference_kernel(const T* x, const T* y, std::uint64_t n, double* out) {
  __shared__ double part[256];
  double s = 0;
  for (std::uint64_t i = std::uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += std::uint64_t(gridDim.x) * blockDim.x)
    s += y ? double(x[i]) * double(y[i]) : double(x[i]);
  part[threadIdx.x] = s;
  __syncthreads();
  for (unsigned k = blockDim.x / 2; k > 0; k >>= 1) {
    if (threadIdx.x < k) part[threadIdx.x] += part[threadIdx.x + k];
    __syncthreads();
  }
  if (threadIdx.x == 0) atomicAdd(out, part[0]);
}

double device_reference(dtype t, const void* x, const void* y, std::uint64_t n, cudaStream_t s, device_buffer& out) {
  check(cudaMemsetAsync(out.get(), 0, 8, s), "cudaMemsetAsync");
  auto* o = static_cast<double*>(out.get());
  if (t == dtype::f32) reference_kernel<float><<<1024, 256, 0, s>>>(static_cast<const float*>(x), static_cast<const float*>(y), n, o);
  else if (t == dtype::f64) reference_kernel<double><<<1024, 256, 0, s>>>(static_cast<const double*>(x), static_cast<const double*>(y), n, o);
  else reference_kernel<std::int32_t><<<1024, 256, 0, s>>>(static_cast<const std::int32_t*>(x), static_cast<const std::int32_t*>(y), n, o);
  check_launch("reference_kernel");
  double h = 0;
  check(cudaMemcpyAsync(&h, o, 8, cudaMemcpyDeviceToHost, s), "cudaMemcpyAsync");
  check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
  return h;
}

}  // namespace

bench::report sweep_lab(const sweep_options& opt) {
  const device_info dev = current_device();
  const bench::ceiling ceil = bench::measure_ceiling();
  const std::size_t es = size_of(opt.type);
  const std::uint64_t nmax = std::uint64_t(1) << opt.to_log2;
  device_buffer dx(nmax * es), dy(nmax * es), ref(8);
  bench::fill_random(dx.get(), nmax, opt.type, 11, opt.type == dtype::i32 ? -1000 : 0, opt.type == dtype::i32 ? 1000 : 1);
  bench::fill_random(dy.get(), nmax, opt.type, 12, opt.type == dtype::i32 ? -10 : 0, opt.type == dtype::i32 ? 10 : 1);
  cudaStream_t stream = nullptr;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");

  // Series: every chosen variant at its defaults, then the parameter sweeps.
  struct series {
    const registration* reg;
    std::map<std::string, int> overrides;
    std::string kind;  // "variant" or "param"
  };
  std::vector<series> all;
  for (const auto& r : registry())
    if (opt.variants.empty() || std::find(opt.variants.begin(), opt.variants.end(), r.meta.id) != opt.variants.end())
      all.push_back({&r, {}, "variant"});
  if (opt.param_sweeps) {
    if (const auto* r = find("hip-7"))
      for (int u : {1, 2, 4, 8, 16, 32}) all.push_back({r, {{"unroll", u}}, "param"});
    for (const auto& r : registry())
      if (r.meta.group == "cuda")
        for (int b : {64, 128, 256, 512, 1024}) all.push_back({&r, {{"block", b}}, "param"});
  }

  bench::report rep;
  rep.meta["benchmark"] = "tally lab sweep";
  rep.meta["device"] = dev.name;
  rep.meta["date"] = bench::utc_now();
  rep.meta["dtype"] = to_string(opt.type);
  rep.meta["read_ceiling_gbps"] = ceil.read_gbps;
  rep.meta["theoretical_gbps"] = ceil.theoretical_gbps;
  rep.meta["timing"] = "kernel time: median of events around the variant's GPU work (5 runs, 3 above 2^26)";
  bench::table tab;
  tab.title = "lab sweep: kernel bandwidth against input size";
  tab.columns = {{"series", "series"}, {"n", "n"}, {"kernel_us", "kernel us", 2}, {"gbps", "GB/s", 1},
                 {"pct_ceiling", "% ceiling", 1}, {"check", "check"}};
  std::map<std::uint64_t, double> refs_sum, refs_dot;
  for (const auto& se : all) {
    const auto& m = se.reg->meta;
    const std::string label = m.id + (se.overrides.empty() ? "" : " " + params_text(se.overrides));
    bool too_slow = false;
    for (int k = opt.from_log2; k <= opt.to_log2; k += opt.step_log2) {
      const std::uint64_t n = std::uint64_t(1) << k;
      json row;
      row["series"] = label;
      row["kind"] = se.kind;
      row["id"] = m.id;
      row["group"] = m.group;
      row["params"] = params_text(resolve_params(m, se.overrides));
      row["n"] = size_text(n);
      row["log2n"] = k;
      if (too_slow) {
        row["check"] = "skipped: too slow at a smaller size";
        tab.rows.push_back(row);
        continue;
      }
      run_args a;
      a.type = opt.type;
      a.n = n;
      a.d_x = dx.get();
      a.d_y = dy.get();
      a.stream = stream;
      a.params = resolve_params(m, se.overrides);
      a.sm_count = dev.sm_count;
      try {
        auto v = se.reg->make(opt.type);
        v->prepare(a);
        const lab_value got = run_once(*v, a);
        auto& refs = m.dot ? refs_dot : refs_sum;
        if (!refs.count(n)) refs[n] = device_reference(opt.type, dx.get(), m.dot ? dy.get() : nullptr, n, stream, ref);
        const double want = refs[n];
        const double rel = std::fabs(got.as_double() - want) / std::max(std::fabs(want), 1e-300);
        const double tol = opt.type == dtype::f32 ? 1e-3 : opt.type == dtype::f64 ? 1e-9 : 0;
        bool ok = opt.type == dtype::i32
                      ? static_cast<std::int32_t>(static_cast<std::uint32_t>(got.i)) ==
                            static_cast<std::int32_t>(static_cast<std::uint32_t>(static_cast<std::int64_t>(want)))
                      : rel <= tol;
        bench::event_pair ev;
        std::vector<double> kt;
        const int reps = k > 26 ? 3 : 5;
        for (int r = 0; r < reps + 1; ++r) {
          check(cudaEventRecord(ev.start, stream), "cudaEventRecord");
          v->launch(a);
          check(cudaEventRecord(ev.stop, stream), "cudaEventRecord");
          const double us = ev.elapsed_us();
          v->finish(a);
          if (r) kt.push_back(us);
        }
        const double us = bench::median(kt);
        const double gbps = double(n) * es * (m.dot ? 2 : 1) / (us * 1e-6) / 1e9;
        row["kernel_us"] = us;
        row["gbps"] = gbps;
        row["pct_ceiling"] = 100 * gbps / ceil.read_gbps;
        row["pct_peak"] = 100 * gbps / ceil.theoretical_gbps;
        row["rel_error"] = rel;
        row["check"] = ok ? "ok" : fmt::format("WRONG rel {:.1e}", rel);
        if (us * 1e-6 > opt.max_seconds_per_call) too_slow = true;
      } catch (const config_error& e) {
        row["check"] = std::string("skipped: ") + e.what();
      }
      tab.rows.push_back(row);
    }
    if (opt.progress) opt.progress("sweep " + label);
    if (opt.checkpoint) {
      bench::report partial = rep;
      partial.meta["partial"] = true;
      partial.tables.push_back(tab);
      opt.checkpoint(partial);
    }
  }
  check(cudaStreamDestroy(stream), "cudaStreamDestroy");
  rep.tables.push_back(std::move(tab));
  return rep;
}

}  // namespace tally::lab
