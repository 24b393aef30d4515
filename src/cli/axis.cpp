#include "cli/axis.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cstring>
#include <iostream>

namespace tally::cli {
namespace {

std::string shape_text(const std::vector<std::uint64_t>& s) {
  std::string r = "(";
  for (std::size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + (s.size() == 1 ? ",)" : ")");
}

// bf16 results (min/max of bf16) have no numpy dtype: they are written widened to f32, exactly.
std::vector<unsigned char> widen_bf16(const std::vector<unsigned char>& raw) {
  std::vector<unsigned char> out(raw.size() * 2);
  for (std::size_t i = 0; i < raw.size() / 2; ++i) {
    std::uint16_t h;
    std::memcpy(&h, raw.data() + 2 * i, 2);
    const std::uint32_t w = std::uint32_t(h) << 16;
    std::memcpy(out.data() + 4 * i, &w, 4);
  }
  return out;
}

}  // namespace

axis_plan plan_axes(const std::vector<std::uint64_t>& shape, bool fortran, const std::vector<int>& axes) {
  const int nd = static_cast<int>(shape.size());
  if (axes.empty()) throw error("--axis: give at least one axis");
  if (nd == 0) throw error("--axis: the array is 0-d (a single element); it has no axes to reduce along");
  std::vector<int> a;
  for (int x : axes) {
    const int k = x < 0 ? x + nd : x;
    if (k < 0 || k >= nd)
      throw error(fmt::format("--axis {}: out of range for an array of {} dimension{} {}", x, nd, nd == 1 ? "" : "s",
                              shape_text(shape)));
    if (std::find(a.begin(), a.end(), k) != a.end()) throw error(fmt::format("--axis: axis {} is given twice", k));
    a.push_back(k);
  }
  std::sort(a.begin(), a.end());
  for (std::size_t i = 1; i < a.size(); ++i)
    if (a[i] != a[i - 1] + 1)
      throw error(fmt::format("--axis: axes {} and {} are not adjacent; tally reduces one run of adjacent axes",
                              a[i - 1], a[i]));
  axis_plan p;
  p.fortran = fortran;
  p.count = static_cast<int>(a.size());
  for (int k = 0; k < nd; ++k)
    if (k < a.front() || k > a.back()) p.out_shape.push_back(shape[k]), p.results *= shape[k];
  p.dims = shape;
  p.axis = a.front();
  if (fortran) {  // memory order is the reversed shape
    std::reverse(p.dims.begin(), p.dims.end());
    p.axis = nd - 1 - a.back();
  }
  return p;
}

int reduce_along_axes(const io::loaded_array& a, const std::string& path, op o, const options& opt,
                      const std::vector<int>& axes, const axis_output& out) {
  const axis_plan p = plan_axes(a.shape, a.fortran_order, axes);
  const bool indexed = o == op::argmin || o == op::argmax;
  const dtype rt = result_dtype(a.type, o);
  const std::size_t rb = result_bytes(a.type, o);
  device_buffer d(std::max<std::size_t>(a.bytes.size(), 1));
  if (!a.bytes.empty()) d.upload(a.bytes.data(), a.bytes.size());
  device_buffer r(std::max<std::size_t>(p.results * rb, 8));
  reduce_axis(d.get(), p.dims.data(), static_cast<int>(p.dims.size()), p.axis, p.count, a.type, o, r.get(), nullptr,
              opt);
  std::string axes_text;
  for (std::size_t i = 0; i < axes.size(); ++i) axes_text += (i ? "," : "") + std::to_string(axes[i]);

  if (!out.out_path.empty()) {
    std::vector<unsigned char> raw(p.results * rb);
    if (!raw.empty()) r.download(raw.data(), raw.size());
    dtype wt = rt;
    std::vector<unsigned char> data;
    if (indexed) {  // the index of each indexed<> record (its first 8 bytes)
      wt = dtype::i64;
      data.resize(p.results * 8);
      for (std::uint64_t i = 0; i < p.results; ++i) std::memcpy(data.data() + 8 * i, raw.data() + i * rb, 8);
    } else if (rt == dtype::bf16) {
      wt = dtype::f32;
      data = widen_bf16(raw);
    } else {
      data = std::move(raw);
    }
    io::write_npy(out.out_path, wt, data.data(), p.out_shape, p.fortran);
    if (!out.value_only && !out.json)
      fmt::print("{} along axis {} of {} {} -> {} {} written to {}\n", to_string(o), axes_text, shape_text(a.shape),
                 to_string(a.type), shape_text(p.out_shape), to_string(wt), out.out_path);
    return 0;
  }
  const std::vector<value> v = results_to_values(r.get(), p.results, a.type, o);
  if (out.json) {
    nlohmann::json j{{"op", to_string(o)},           {"dtype", to_string(a.type)},
                     {"shape", a.shape},             {"axes", axes},
                     {"result_shape", p.out_shape},  {"result_dtype", to_string(rt)},
                     {"fortran_order", p.fortran},   {"nan", to_string(opt.nan)},
                     {"mode", to_string(opt.mode)}};
    nlohmann::json vals = nlohmann::json::array(), idx = nlohmann::json::array();
    for (const value& x : v) {
      vals.push_back(x.to_string());
      if (indexed) idx.push_back(x.index);
    }
    j["values"] = vals;
    if (indexed) j["indices"] = idx;
    std::cout << j.dump(2) << "\n";
  } else if (out.value_only) {
    for (const value& x : v) {
      if (indexed) fmt::print("{} {}\n", x.to_string(), x.index);
      else fmt::print("{}\n", x.to_string());
    }
  } else {
    fmt::print("{} along axis {} of '{}' {} {} -> {} {} ({} in memory order{})\n", to_string(o), axes_text, path,
               shape_text(a.shape), to_string(a.type), shape_text(p.out_shape), to_string(rt), p.results,
               p.fortran ? ", Fortran order" : "");
    constexpr std::uint64_t kShown = 20;
    for (std::uint64_t i = 0; i < std::min<std::uint64_t>(p.results, kShown); ++i) {
      if (indexed) fmt::print("  [{}] {} at index {}\n", i, v[i].to_string(), v[i].index);
      else fmt::print("  [{}] {}\n", i, v[i].to_string());
    }
    if (p.results > kShown)
      fmt::print("  ... {} more (all of them: --value-only, --json, or -o FILE.npy)\n", p.results - kShown);
  }
  return 0;
}

int stats_along_axes(const io::loaded_array& a, const std::string& path, const options& opt, int ddof,
                     const std::vector<int>& axes, const axis_output& out) {
  const axis_plan p = plan_axes(a.shape, a.fortran_order, axes);
  device_buffer d(std::max<std::size_t>(a.bytes.size(), 1));
  if (!a.bytes.empty()) d.upload(a.bytes.data(), a.bytes.size());
  device_buffer r(std::max<std::size_t>(p.results * sizeof(stats), 8));
  stats_axis(d.get(), p.dims.data(), static_cast<int>(p.dims.size()), p.axis, p.count, a.type, r.get(), nullptr, opt);
  const std::vector<stats> st = stats_to_host(r.get(), p.results);
  std::string axes_text;
  for (std::size_t i = 0; i < axes.size(); ++i) axes_text += (i ? "," : "") + std::to_string(axes[i]);
  constexpr int kFields = 7;
  auto fields = [&](const stats& s) {
    return std::array<double, kFields>{static_cast<double>(s.count), s.sum, s.min, s.max, s.mean, s.variance(ddof),
                                       s.stddev(ddof)};
  };
  if (!out.out_path.empty()) {
    std::vector<double> data(p.results * kFields);
    for (std::uint64_t i = 0; i < p.results; ++i) {
      const auto f = fields(st[i]);
      for (int k = 0; k < kFields; ++k)  // the fields axis is last: outermost in Fortran order
        data[p.fortran ? k * p.results + i : i * kFields + k] = f[k];
    }
    std::vector<std::uint64_t> shape = p.out_shape;
    shape.push_back(kFields);
    io::write_npy(out.out_path, dtype::f64, data.data(), shape, p.fortran);
    if (!out.value_only && !out.json)
      fmt::print("stats along axis {} of {} {} -> {} f64 (count, sum, min, max, mean, variance, stddev; ddof {}) "
                 "written to {}\n",
                 axes_text, shape_text(a.shape), to_string(a.type), shape_text(shape), ddof, out.out_path);
    return 0;
  }
  auto num = [](double x) { return fmt::format("{}", x); };  // shortest text that round-trips
  if (out.json) {
    nlohmann::json j{{"dtype", to_string(a.type)},  {"shape", a.shape},           {"axes", axes},
                     {"result_shape", p.out_shape}, {"fortran_order", p.fortran}, {"nan", to_string(opt.nan)},
                     {"ddof", ddof}};
    nlohmann::json rows = nlohmann::json::array();
    for (const stats& s : st) {
      const auto f = fields(s);
      rows.push_back({{"count", s.count}, {"sum", num(f[1])}, {"min", num(f[2])}, {"max", num(f[3])},
                      {"mean", num(f[4])}, {"variance", num(f[5])}, {"stddev", num(f[6])}});
    }
    j["stats"] = rows;
    std::cout << j.dump(2) << "\n";
  } else if (out.value_only) {
    for (const stats& s : st) {
      const auto f = fields(s);
      fmt::print("{} {} {} {} {} {} {}\n", s.count, num(f[1]), num(f[2]), num(f[3]), num(f[4]), num(f[5]), num(f[6]));
    }
  } else {
    fmt::print("stats along axis {} of '{}' {} {} -> {} ({} in memory order{}; ddof {})\n", axes_text, path,
               shape_text(a.shape), to_string(a.type), shape_text(p.out_shape), p.results,
               p.fortran ? ", Fortran order" : "", ddof);
    fmt::print("  {:>6} {:>10} {:>14} {:>14} {:>14} {:>14} {:>14} {:>14}\n", "index", "count", "sum", "min", "max",
               "mean", "variance", "stddev");
    constexpr std::uint64_t kShown = 20;
    for (std::uint64_t i = 0; i < std::min<std::uint64_t>(p.results, kShown); ++i) {
      const auto f = fields(st[i]);
      fmt::print("  {:>6} {:>10} {:>14} {:>14} {:>14} {:>14} {:>14} {:>14}\n", fmt::format("[{}]", i), st[i].count,
                 num(f[1]), num(f[2]), num(f[3]), num(f[4]), num(f[5]), num(f[6]));
    }
    if (p.results > kShown)
      fmt::print("  ... {} more (all of them: --value-only, --json, or -o FILE.npy)\n", p.results - kShown);
  }
  return 0;
}

}  // namespace tally::cli
