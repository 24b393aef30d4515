// The tally command: device info, benchmarks and reducing files.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <iostream>
#include <string>

#include <fmt/format.h>

#include "bench/core_bench.hpp"
#include "bench/probe.hpp"
#include "bench/tune.hpp"
#include "cli/progress.hpp"
#include "io/npy.hpp"
#include "lab/runner.hpp"
#include "tally/tally.hpp"

namespace {

using tally::bench::json;

struct output_files {
  std::string csv, json_path, md;
};

void add_output_options(CLI::App* app, output_files& o) {
  app->add_option("--csv", o.csv, "also write the tables as CSV to this file");
  app->add_option("--json", o.json_path, "also write the tables and metadata as JSON to this file");
  app->add_option("--md", o.md, "also write the markdown to this file");
}

void emit(const tally::bench::report& rep, const output_files& o) {
  std::string md;
  for (auto it = rep.meta.begin(); it != rep.meta.end(); ++it) {
    const std::string v = it.value().is_string() ? it.value().get<std::string>() : it.value().dump();
    md += "- " + it.key() + ": " + v + "\n";
  }
  md += "\n" + rep.markdown();
  std::fputs(md.c_str(), stdout);
  if (!o.csv.empty()) rep.write_file(o.csv, rep.csv());
  if (!o.json_path.empty()) rep.write_file(o.json_path, rep.to_json().dump(2) + "\n");
  if (!o.md.empty()) rep.write_file(o.md, md);
}

int cmd_info(bool as_json) {
  const tally::device_info d = tally::current_device();
  const tally::bench::ceiling c = tally::bench::measure_ceiling();
  if (as_json) {
    json j{{"device", d.name},
           {"ordinal", d.ordinal},
           {"compute_capability", fmt::format("{}.{}", d.cc_major, d.cc_minor)},
           {"sm_count", d.sm_count},
           {"l2_bytes", d.l2_bytes},
           {"memory_bytes", d.global_mem_bytes},
           {"memory_clock_khz", d.mem_clock_khz},
           {"bus_width_bits", d.bus_width_bits},
           {"theoretical_gbps", d.theoretical_gbps},
           {"measured_read_ceiling_gbps", c.read_gbps}};
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  fmt::print("device           {} (ordinal {}, compute capability {}.{})\n", d.name, d.ordinal, d.cc_major,
             d.cc_minor);
  fmt::print("SMs              {}\n", d.sm_count);
  fmt::print("L2               {:.1f} MiB\n", d.l2_bytes / 1048576.0);
  fmt::print("memory           {:.1f} GiB, {} bit bus at {:.0f} MHz\n", d.global_mem_bytes / 1073741824.0,
             d.bus_width_bits, d.mem_clock_khz / 1e3);
  fmt::print("theoretical      {:.0f} GB/s (2 x memory clock x bus width)\n", d.theoretical_gbps);
  fmt::print("measured ceiling {:.0f} GB/s read-only probe over {:.0f} MiB ({:.1f}% of theoretical)\n",
             c.read_gbps, c.probe_bytes / 1048576.0, 100 * c.read_gbps / d.theoretical_gbps);
  return 0;
}

int cmd_reduce(const std::string& path, const std::string& op_name, const std::string& dtype_name,
               bool value_only) {
  const auto o = tally::parse_op(op_name);
  if (!o) throw tally::error("unknown --op '" + op_name + "' (sum, prod, min, max, bit_and, bit_or, bit_xor, all, any)");
  tally::io::loaded_array a;
  const bool is_npy = path.size() >= 4 && path.compare(path.size() - 4, 4, ".npy") == 0;
  if (is_npy && dtype_name.empty()) {
    a = tally::io::read_npy(path);
  } else {
    if (dtype_name.empty())
      throw tally::error("'" + path + "' is not a .npy file: give its element type with --dtype");
    const auto t = tally::parse_dtype(dtype_name);
    if (!t) throw tally::error("unknown --dtype '" + dtype_name + "'");
    a = tally::io::read_raw(path, *t);
  }
  if (!tally::supports(a.type, *o)) (void)tally::result_dtype(a.type, *o);  // throws, naming why
  tally::device_buffer d(a.bytes.size());
  if (!a.bytes.empty()) d.upload(a.bytes.data(), a.bytes.size());
  const tally::value v = tally::reduce_value(d.get(), a.count, a.type, *o);
  if (value_only) fmt::print("{}\n", v.to_string());
  else fmt::print("{}({} x {}) = {} ({})\n", tally::to_string(*o), a.count, tally::to_string(a.type),
                  v.to_string(), tally::to_string(v.type));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tally: fast, correct reductions on NVIDIA GPUs"};
  app.require_subcommand(1);

  bool info_json = false;
  auto* info = app.add_subcommand("info", "device, SMs, L2, theoretical bandwidth, measured read ceiling");
  info->add_flag("--json", info_json, "print JSON");

  auto* bench = app.add_subcommand("bench", "benchmarks, side by side with CUB");
  bench->require_subcommand(1);
  output_files core_out, tune_out;
  bool core_quick = false, core_no_cold = false, tune_quick = false;
  auto* core = bench->add_subcommand("core", "tally vs CUB DeviceReduce: sum f32/f64/i32, min/max f32, 2^10..2^30");
  add_output_options(core, core_out);
  core->add_flag("--quick", core_quick, "fewer repetitions");
  core->add_flag("--no-cold", core_no_cold, "skip the cold-L2 runs");
  auto* tune = bench->add_subcommand("tune", "the sweeps behind src/core/tuning.cuh");
  add_output_options(tune, tune_out);
  tune->add_flag("--quick", tune_quick, "fewer repetitions");

  std::string reduce_path, reduce_op = "sum", reduce_dtype;
  bool value_only = false;
  auto* red = app.add_subcommand("reduce", "reduce a .npy file (dtype from its header) or a raw binary file");
  red->add_option("file", reduce_path, "the file")->required();
  red->add_option("--op", reduce_op, "sum, prod, min, max, bit_and, bit_or, bit_xor, all, any")
      ->capture_default_str();
  red->add_option("--dtype", reduce_dtype, "element type of a raw file: i8 u8 i16 u16 i32 u32 i64 u64 f32 f64 b8");
  red->add_flag("--value-only", value_only, "print only the value");

  auto* lab = app.add_subcommand("lab", "the reduction lab: every tutorial kernel, verified and measured");
  lab->require_subcommand(1);
  auto* lab_list = lab->add_subcommand("list", "the catalogue, grouped by origin");
  std::vector<std::string> lab_variants, lab_dtypes = {"f32", "f64", "i32"}, lab_sizes, lab_params;
  bool lab_constant = false, lab_quick = false;
  output_files lab_out, sweep_out;
  auto* lab_run = lab->add_subcommand("run", "verify and time variants on one random input per dtype and size");
  lab_run->add_option("--variants", lab_variants, "variant ids (default: all)")->delimiter(',');
  lab_run->add_option("--dtype", lab_dtypes, "f32, f64, i32")->delimiter(',')->capture_default_str();
  lab_run->add_option("--n", lab_sizes, "sizes, e.g. 2^24,16777213 (default: 2^24 and 2^24-3)")->delimiter(',');
  lab_run->add_option("--param", lab_params, "override a parameter: block=512, unroll=4, grid=2048, tpb=128")->delimiter(',');
  lab_run->add_flag("--constant", lab_constant, "constant input (all ones) instead of random");
  lab_run->add_flag("--quick", lab_quick, "fewer timing repetitions");
  add_output_options(lab_run, lab_out);
  auto* lab_sweep = lab->add_subcommand("sweep", "kernel bandwidth of each variant over input sizes, plus parameter sweeps");
  std::vector<std::string> sweep_variants;
  std::string sweep_dtype = "f32";
  int sweep_from = 10, sweep_to = 30, sweep_step = 2;
  bool sweep_no_params = false;
  lab_sweep->add_option("--variants", sweep_variants, "variant ids (default: all)")->delimiter(',');
  lab_sweep->add_option("--dtype", sweep_dtype, "f32, f64 or i32")->capture_default_str();
  lab_sweep->add_option("--from", sweep_from, "smallest size, log2")->capture_default_str();
  lab_sweep->add_option("--to", sweep_to, "largest size, log2")->capture_default_str();
  lab_sweep->add_option("--step", sweep_step, "log2 step")->capture_default_str();
  lab_sweep->add_flag("--no-param-sweeps", sweep_no_params, "skip the unroll and block-size sweeps");
  add_output_options(lab_sweep, sweep_out);

  CLI11_PARSE(app, argc, argv);
  try {
    if (info->parsed()) return cmd_info(info_json);
    if (core->parsed()) {
      tally::cli::progress p("bench core");
      tally::bench::core_bench_options o;
      o.quick = core_quick;
      o.cold = !core_no_cold;
      o.progress = [&](const std::string& s) { p.step(s); };
      emit(tally::bench::run_core_bench(o), core_out);
      return 0;
    }
    if (tune->parsed()) {
      tally::cli::progress p("bench tune");
      emit(tally::bench::run_tune(tune_quick, [&](const std::string& s) { p.step(s); }), tune_out);
      return 0;
    }
    if (red->parsed()) return cmd_reduce(reduce_path, reduce_op, reduce_dtype, value_only);
    if (lab_list->parsed()) {
      std::fputs(tally::lab::list_text().c_str(), stdout);
      return 0;
    }
    if (lab_run->parsed()) {
      tally::cli::progress p("lab run");
      tally::lab::run_options o;
      o.variants = lab_variants;
      o.types.clear();
      for (const auto& d : lab_dtypes) {
        const auto t = tally::parse_dtype(d);
        if (!t || (*t != tally::dtype::f32 && *t != tally::dtype::f64 && *t != tally::dtype::i32))
          throw tally::error("--dtype '" + d + "': the lab runs f32, f64 and i32");
        o.types.push_back(*t);
      }
      for (const auto& n : lab_sizes) o.sizes.push_back(tally::lab::parse_size(n));
      for (const auto& kv : lab_params) {
        const auto eq = kv.find('=');
        if (eq == std::string::npos) throw tally::error("--param '" + kv + "': use name=value");
        try {
          o.params[kv.substr(0, eq)] = std::stoi(kv.substr(eq + 1));
        } catch (const std::exception&) {
          throw tally::error("--param '" + kv + "': the value is not an integer");
        }
      }
      o.constant_input = lab_constant;
      if (lab_quick) o.kernel_reps = 5, o.system_reps = 1;
      o.progress = [&](const std::string& s) { p.step(s); };
      emit(tally::lab::run_lab(o), lab_out);
      return 0;
    }
    if (lab_sweep->parsed()) {
      tally::cli::progress p("lab sweep");
      tally::lab::sweep_options o;
      o.variants = sweep_variants;
      const auto t = tally::parse_dtype(sweep_dtype);
      if (!t || (*t != tally::dtype::f32 && *t != tally::dtype::f64 && *t != tally::dtype::i32))
        throw tally::error("--dtype '" + sweep_dtype + "': the lab runs f32, f64 and i32");
      o.type = *t;
      if (sweep_from < 0 || sweep_to > 31 || sweep_from > sweep_to || sweep_step < 1)
        throw tally::error("sweep sizes: need 0 <= --from <= --to <= 31 and --step >= 1");
      o.from_log2 = sweep_from;
      o.to_log2 = sweep_to;
      o.step_log2 = sweep_step;
      o.param_sweeps = !sweep_no_params;
      o.progress = [&](const std::string& s) { p.step(s); };
      if (!sweep_out.json_path.empty())  // partial results survive an interrupted sweep
        o.checkpoint = [&](const tally::bench::report& r) { r.write_file(sweep_out.json_path, r.to_json().dump(1) + "\n"); };
      emit(tally::lab::sweep_lab(o), sweep_out);
      return 0;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tally: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
