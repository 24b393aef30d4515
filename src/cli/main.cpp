// The tally command: device info, benchmarks, and reductions, statistics and dot products of files.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "bench/core_bench.hpp"
#include "bench/calls_bench.hpp"
#include "bench/cpu_bench.hpp"
#include "bench/host_bench.hpp"
#include "bench/numerics_bench.hpp"
#include "bench/segmented_bench.hpp"
#include "bench/probe.hpp"
#include "bench/tune.hpp"
#include "cli/axis.hpp"
#include "cli/progress.hpp"
#include "cli/streamed.hpp"
#include "io/npy.hpp"
#include "lab/runner.hpp"
#include "tally/tally.hpp"
#if TALLY_CLI_HAVE_DIST
#include "bench/dist/dist_bench.hpp"
#include "cli/dist/across_ranks.hpp"
#endif

namespace {

// The MPI parts of the command (bench dist, reduce --ranks) need libtally_dist (NCCL) and MPI.
[[maybe_unused]] constexpr const char* kNoDist =
    "this tally was built without libtally_dist and MPI (NCCL's nccl.h and libnccl, and an MPI such as OpenMPI's "
    "libopenmpi-dev, must be found when it is configured; scripts/setup.sh installs them)";

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

std::string op_names() {
  std::string s;
  for (int k = 0; k < tally::kOpCount; ++k)
    s += (k ? ", " : "") + std::string(tally::to_string(static_cast<tally::op>(k)));
  return s;
}

// --nan and --mode, parsed before any file is read or any GPU work starts.
tally::options parse_options(const std::string& nan_name, const std::string& mode_name) {
  tally::options opt;
  const auto nan = tally::parse_nan_policy(nan_name);
  if (!nan) throw tally::error("unknown --nan '" + nan_name + "' (propagate, ignore)");
  opt.nan = *nan;
  const auto mode = tally::parse_accuracy(mode_name);
  if (!mode) throw tally::error("unknown --mode '" + mode_name + "' (fast, compensated, exact)");
  opt.mode = *mode;
  return opt;
}

bool is_float(tally::dtype t) {
  return t == tally::dtype::f16 || t == tally::dtype::bf16 || t == tally::dtype::f32 ||
         t == tally::dtype::f64;
}

// "sum(3 x f32" plus the options that differ from the defaults.
std::string call_text(const char* what, const tally::io::array_file& a, const tally::options& opt,
                      bool show_nan, bool show_mode) {
  std::string s = fmt::format("{}({} x {}", what, a.count(), tally::to_string(a.type()));
  if (show_nan && opt.nan != tally::nan_policy::propagate)
    s += fmt::format(", nan {}", tally::to_string(opt.nan));
  if (show_mode && opt.mode != tally::accuracy::fast)
    s += fmt::format(", {}", tally::to_string(opt.mode));
  return s + ")";
}

// Shortest text that reads back to the same double (stats are computed in f64).
std::string num(double x) { return fmt::format("{}", x); }

struct print_mode {
  bool value_only = false;
  bool json = false;
};

int cmd_reduce(const std::string& path, const std::string& op_name, const std::string& dtype_name,
               const std::string& nan_name, const std::string& mode_name, print_mode pm,
               const std::vector<int>& axes, const std::string& out_path, bool across_ranks) {
  if (across_ranks && !axes.empty())
    throw tally::error("--ranks reduces the whole array across the ranks of an MPI job; --axis is not supported with it");
  if (!out_path.empty() && axes.empty())
    throw tally::error("-o writes the results of a reduction along axes: give --axis (a whole-array reduction "
                       "prints its value)");
  const auto o = tally::parse_op(op_name);
  if (!o) throw tally::error("unknown --op '" + op_name + "' (" + op_names() + ")");
  const tally::options opt = parse_options(nan_name, mode_name);
  const tally::io::array_file a = tally::cli::open_array(path, dtype_name);
  // Refused combinations fail here, before any GPU work, with the library's reason.
  if (!tally::supports(a.type(), *o, opt)) {
    std::string why = tally::why_unsupported(a.type(), *o, opt);
    if (why.empty()) why = "not supported";
    std::string flags;
    if (opt.nan != tally::nan_policy::propagate)
      flags += std::string(" --nan ") + tally::to_string(opt.nan);
    if (opt.mode != tally::accuracy::fast)
      flags += std::string(" --mode ") + tally::to_string(opt.mode);
    throw tally::error(fmt::format("--op {}{} on {} data: {}", tally::to_string(*o), flags,
                                   tally::to_string(a.type()), why));
  }
  if (!axes.empty())
    return tally::cli::reduce_along_axes(tally::io::read_all(a), path, *o, opt, axes,
                                         {out_path, pm.json, pm.value_only});
  const bool indexed = *o == tally::op::argmin || *o == tally::op::argmax;
  const auto print = [&](const tally::value& v) {
    if (pm.json) {
      json j{{"op", tally::to_string(*o)},
             {"dtype", tally::to_string(a.type())},
             {"n", a.count()},
             {"nan", tally::to_string(opt.nan)},
             {"mode", tally::to_string(opt.mode)},
             {"result_dtype", tally::to_string(v.type)},
             {"value", v.to_string()}};
      if (indexed) j["index"] = v.index;
      std::cout << j.dump(2) << "\n";
    } else if (pm.value_only) {
      if (indexed)
        fmt::print("{} {}\n", v.to_string(), v.index);
      else
        fmt::print("{}\n", v.to_string());
    } else if (indexed) {
      fmt::print("{} = {} at index {} ({})\n", call_text(tally::to_string(*o), a, opt, true, true),
                 v.to_string(), v.index, tally::to_string(v.type));
    } else {
      fmt::print("{} = {} ({})\n", call_text(tally::to_string(*o), a, opt, true, true), v.to_string(),
                 tally::to_string(v.type));
    }
  };
  if (across_ranks) {
#if TALLY_CLI_HAVE_DIST
    return tally::cli::reduce_across_ranks(a, *o, opt, print);
#else
    throw tally::error(std::string("--ranks: ") + kNoDist);
#endif
  }
  print(tally::cli::reduce_file(a, *o, opt));
  return 0;
}

int cmd_stats(const std::string& path, const std::string& dtype_name, const std::string& nan_name,
              int ddof, print_mode pm, const std::vector<int>& axes, const std::string& out_path) {
  const tally::options opt = parse_options(nan_name, "fast");
  if (ddof < 0) throw tally::error("--ddof " + std::to_string(ddof) + ": must be 0 or more");
  if (!out_path.empty() && axes.empty())
    throw tally::error("-o: write results to a .npy only with --axis (the whole array's stats are printed)");
  const tally::io::array_file a = tally::cli::open_array(path, dtype_name);
  if (a.type() == tally::dtype::b8)
    throw tally::error("stats: '" + path +
                       "' holds b8 (bool) data; stats need numbers (use reduce --op all/any/sum)");
  if (!axes.empty())
    return tally::cli::stats_along_axes(tally::io::read_all(a), path, opt, ddof, axes,
                                        {out_path, pm.json, pm.value_only});
  const tally::stats st = tally::cli::stats_file(a, opt);
  const double var = st.variance(ddof), sd = st.stddev(ddof);
  if (pm.json) {
    json j{{"dtype", tally::to_string(a.type())},
           {"n", a.count()},
           {"nan", tally::to_string(opt.nan)},
           {"ddof", ddof},
           {"count", st.count},
           {"sum", num(st.sum)},
           {"min", num(st.min)},
           {"max", num(st.max)},
           {"mean", num(st.mean)},
           {"variance", num(var)},
           {"stddev", num(sd)}};
    std::cout << j.dump(2) << "\n";
  } else if (pm.value_only) {
    fmt::print("{} {} {} {} {} {} {}\n", st.count, num(st.sum), num(st.min), num(st.max),
               num(st.mean), num(var), num(sd));
  } else {
    fmt::print("{}\n", call_text("stats", a, opt, true, false));
    fmt::print("count     {}\n", st.count);
    fmt::print("sum       {}\n", num(st.sum));
    fmt::print("min       {}\n", num(st.min));
    fmt::print("max       {}\n", num(st.max));
    fmt::print("mean      {}\n", num(st.mean));
    fmt::print("variance  {} (ddof {})\n", num(var), ddof);
    fmt::print("stddev    {} (ddof {})\n", num(sd), ddof);
  }
  return 0;
}

int cmd_dot(const std::string& path_x, const std::string& path_y, const std::string& dtype_name,
            const std::string& mode_name, print_mode pm) {
  const tally::options opt = parse_options("propagate", mode_name);
  // --dtype describes the raw files; a .npy file names its own, and one that disagrees with a
  // --dtype given is refused (as `tally reduce` does), not read as something the user did not ask.
  const tally::io::array_file x = tally::cli::open_array(path_x, dtype_name);
  const tally::io::array_file y = tally::cli::open_array(path_y, dtype_name);
  if (x.type() != y.type())
    throw tally::error(
        fmt::format("dot: '{}' holds {} and '{}' holds {}: both files must have the same dtype",
                    path_x, tally::to_string(x.type()), path_y, tally::to_string(y.type())));
  if (!is_float(x.type()))
    throw tally::error(
        fmt::format("dot: the files hold {}; dot needs float vectors (f16, bf16, f32, f64)",
                    tally::to_string(x.type())));
  if (x.count() != y.count())
    throw tally::error(
        fmt::format("dot: '{}' has {} elements and '{}' has {}: both must have the same length",
                    path_x, x.count(), path_y, y.count()));
  const tally::value v = tally::cli::dot_files(x, y, opt);
  if (pm.json) {
    json j{{"op", "dot"},
           {"dtype", tally::to_string(x.type())},
           {"n", x.count()},
           {"mode", tally::to_string(opt.mode)},
           {"result_dtype", tally::to_string(v.type)},
           {"value", v.to_string()}};
    std::cout << j.dump(2) << "\n";
  } else if (pm.value_only) {
    fmt::print("{}\n", v.to_string());
  } else {
    fmt::print("{} = {} ({})\n", call_text("dot", x, opt, false, true), v.to_string(),
               tally::to_string(v.type));
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tally: fast, correct reductions on NVIDIA GPUs"};
  // The libtally it runs with, and the headers it was built against where they differ.
  const std::string lib_version = tally::library_version().text;
  app.set_version_flag("--version", "tally " + lib_version +
                                        (lib_version == TALLY_VERSION_STRING
                                             ? std::string()
                                             : std::string(" (built against ") + TALLY_VERSION_STRING + ")"));
  app.require_subcommand(1);

  bool info_json = false;
  auto* info = app.add_subcommand("info", "device, SMs, L2, theoretical bandwidth, measured read ceiling");
  info->add_flag("--json", info_json, "print JSON");

  auto* bench =
      app.add_subcommand("bench", "benchmarks, side by side with CUB (and cuBLAS for dot)");
  bench->require_subcommand(1);
  output_files core_out, tune_out;
  bool core_quick = false, core_no_cold = false;
  tally::bench::tune_options tune_opt;
  auto* core = bench->add_subcommand("core", "tally vs CUB DeviceReduce: sum f32/f64/i32, min/max f32, 2^10..2^30");
  add_output_options(core, core_out);
  core->add_flag("--quick", core_quick, "fewer repetitions");
  core->add_flag("--no-cold", core_no_cold, "skip the cold-L2 runs");
  const char* kScheduleHelp =
      "the one-pass ops' schedule: policy (this GPU's choice), strided (at every size; the exact sums too) or dynamic "
      "(past 8 x L2)";
  std::string core_schedule = "policy", num_schedule = "policy";
  core->add_option("--schedule", core_schedule, kScheduleHelp)
      ->check(CLI::IsMember({"policy", "strided", "dynamic"}))
      ->capture_default_str();
  auto* tune = bench->add_subcommand(
      "tune", "what the tuning policy picks on this GPU and why; --measure: the shape sweeps behind it");
  add_output_options(tune, tune_out);
  tune->add_flag("--measure", tune_opt.measure, "time every candidate shape against CUB / cuBLAS (about 2 minutes)");
  tune->add_flag("--quick", tune_opt.quick, "fewer repetitions");
  tune->add_option("--groups", tune_opt.groups, "core, numerics, exact, stats (default: all)")
      ->delimiter(',')
      ->check(CLI::IsMember({"core", "numerics", "exact", "stats"}));
  tune->add_option("--max-log2", tune_opt.max_log2, "with --measure: only the sizes up to 2^K (default: all)")
      ->check(CLI::Range(10, 31));

  output_files num_out;
  bool num_quick = false, num_cold = false;
  std::vector<std::string> num_sizes, num_tables;
  auto* numerics = bench->add_subcommand(
      "numerics",
      "argmin/argmax vs CUB, dot vs cuBLAS, sum accuracy modes, stats, f16/bf16 sums; 2^10..2^30");
  add_output_options(numerics, num_out);
  numerics->add_flag("--quick", num_quick, "fewer repetitions");
  numerics->add_flag("--cold", num_cold,
                     "also time sizes that fit in L2 with a cold cache (several minutes more)");
  numerics
      ->add_option("--sizes", num_sizes,
                   "sizes, e.g. 2^20,2^28,1000003 (default: 2^10..2^30 in powers of 4)")
      ->delimiter(',');
  numerics
      ->add_option("--tables", num_tables, "argminmax, dot, accuracy, stats, half (default: all)")
      ->delimiter(',');
  numerics->add_option("--schedule", num_schedule, kScheduleHelp)
      ->check(CLI::IsMember({"policy", "strided", "dynamic"}))
      ->capture_default_str();
  int num_exact_chunk_rounds = -1, num_exact_chunk_tail = -1;
  numerics
      ->add_option("--exact-chunk-rounds", num_exact_chunk_rounds,
                   "the exact sums' dynamic schedule: at least this many rounds of loads a chunk (-1: the policy's)")
      ->check(CLI::Range(-1, 1 << 16))
      ->capture_default_str();
  numerics
      ->add_option("--exact-chunk-tail", num_exact_chunk_tail,
                   "the exact sums' dynamic schedule: its last rounds >> K in chunks of one round (0: none; -1: the "
                   "policy's)")
      ->check(CLI::Range(-1, 63))
      ->capture_default_str();
  std::string num_depth = "policy";
  numerics
      ->add_option("--depth", num_depth,
                   "every launch in one compiled shape: base or deep (policy: the GPU's choice, by size where it "
                   "has one)")
      ->check(CLI::IsMember({"policy", "base", "deep"}))
      ->capture_default_str();

  output_files seg_out;
  bool seg_quick = false, seg_sweep = false, seg_sweep_only = false;
  std::vector<int> seg_totals;
  std::vector<std::string> seg_forms;
  auto* segb = bench->add_subcommand(
      "segmented", "rows, columns and ragged segments (f32 sum) vs CUB DeviceSegmentedReduce; totals 2^20, 2^24, 2^28");
  add_output_options(segb, seg_out);
  segb->add_flag("--quick", seg_quick, "fewer repetitions");
  segb->add_flag("--sweep", seg_sweep, "also time every candidate plan of the column shapes, of rows of 16-32768 elements and of the ragged shapes against the rule's pick");
  segb->add_flag("--sweep-only", seg_sweep_only, "that sweep alone (no rows, columns, ragged or dot tables)");
  segb->add_option("--sweep-forms", seg_forms,
                   "the sweep's forms, e.g. ragged or rows,columns (default: all); ragged-uniform: segments of a "
                   "mean of 64 with light-tailed lengths")
      ->delimiter(',')
      ->check(CLI::IsMember({"columns", "rows", "ragged", "ragged-uniform"}));
  segb->add_option("--totals", seg_totals, "log2 of the total elements, e.g. 20,24,28")
      ->delimiter(',')
      ->check(CLI::Range(10, 34));
  std::string seg_profile;
  std::vector<std::string> seg_profile_shapes;
  int seg_profile_reps = 3;
  segb->add_option("--profile-plan", seg_profile,
                   "with --sweep-only: run this candidate plan (as the sweep prints it, e.g. \"ragged g2 k64\"; rule: "
                   "the rule's pick) between cudaProfilerStart/Stop at each sweep shape instead of timing "
                   "(ncu --profile-from-start off)");
  segb->add_option("--profile-shapes", seg_profile_shapes, "the sweep shapes to profile, e.g. \"2^22 x 2^6\" (default: all)")
      ->delimiter(',');
  segb->add_option("--profile-reps", seg_profile_reps, "calls of the profiled plan (default 3)")->check(CLI::Range(1, 1000));

  output_files host_out;
  tally::bench::host_bench_options host_opt;
  bool host_quick = false, host_no_sweep = false;
  auto* hostb = bench->add_subcommand(
      "host", "data in host memory reduced end to end: tally's staged and in-place paths vs cudaMemcpy + reduce");
  add_output_options(hostb, host_out);
  hostb->add_option("--log2n", host_opt.log2_n, "log2 of the f32 elements (default 30: 4 GiB)")
      ->check(CLI::Range(10, 33));
  hostb->add_flag("--quick", host_quick, "fewer repetitions");
  hostb->add_flag("--no-sweep", host_no_sweep, "skip the threads and chunk-size tables");

  output_files dist_out;
  bool dist_quick = false;
  std::vector<int> dist_totals;
  auto* distb = bench->add_subcommand(
      "dist", "under mpirun: one GPU vs every rank's GPU, tally::dist vs CUB per shard + ncclAllReduce (f32 sum, "
              "2^20..2^32 total)");
  add_output_options(distb, dist_out);
  distb->add_flag("--quick", dist_quick, "fewer repetitions");
  distb->add_option("--totals", dist_totals, "log2 of the total elements, e.g. 20,24,28,31")
      ->delimiter(',')
      ->check(CLI::Range(10, 40));
  bool dist_async = false, dist_single = false;
  distb->add_flag("--single-process", dist_single,
                  "without mpirun: one process driving every GPU it sees (communicator::init_all)");
  std::string dist_schedule = "policy";
  distb->add_option("--schedule", dist_schedule, kScheduleHelp)
      ->check(CLI::IsMember({"policy", "strided", "dynamic"}));
  distb->add_flag("--async", dist_async,
                  "also time reduce_async + synchronize and a captured graph's replay against the blocking call");

  output_files cpu_out;
  tally::bench::cpu_bench_options cpu_opt;
  auto* cpub = bench->add_subcommand(
      "cpu", "the host's exact sum (a head start's share) on 1 .. all cores, no GPU needed");
  add_output_options(cpub, cpu_out);
  cpub->add_option("--mib", cpu_opt.mib, "MiB of each dtype's array")->check(CLI::Range(1, 65536));
  cpub->add_option("--reps", cpu_opt.reps, "runs per thread count (the median)")->check(CLI::Range(1, 100));
  output_files calls_out;
  tally::bench::calls_bench_options calls_opt;
  auto* callsb = bench->add_subcommand(
      "calls", "what one small call costs the calling thread: reduce's enqueue and the driver queries behind its checks");
  add_output_options(callsb, calls_out);
  callsb->add_option("--calls", calls_opt.calls, "calls per timed loop")->check(CLI::Range(10, 1000000));

  const char* kDtypeHelp =
      "element type of a raw file: i8 u8 i16 u16 i32 u32 i64 u64 f16 bf16 f32 f64 b8 "
      "(a .npy file names its own)";
  std::string reduce_path, reduce_op = "sum", reduce_dtype, reduce_nan = "propagate",
                           reduce_mode = "fast";
  print_mode reduce_print;
  auto* red = app.add_subcommand("reduce", "reduce a .npy file (dtype from its header) or a raw binary file");
  red->add_option("file", reduce_path, "the file")->required();
  red->add_option("--op", reduce_op, op_names())->capture_default_str();
  red->add_option("--nan", reduce_nan,
                  "NaN policy of min, max, argmin, argmax: propagate or ignore")
      ->capture_default_str();
  red->add_option("--mode", reduce_mode,
                  "accuracy of float sum and mean: fast, compensated or exact")
      ->capture_default_str();
  red->add_option("--dtype", reduce_dtype, kDtypeHelp);
  red->add_flag("--value-only", reduce_print.value_only,
                "print only the value (argmin/argmax: value and index)");
  red->add_flag("--json", reduce_print.json, "print JSON (the value as exact text)");
  std::vector<int> reduce_axes;
  std::string reduce_out;
  red->add_option("--axis", reduce_axes,
                  "reduce along this axis of a .npy array (negative: from the end; several adjacent: 1,2), "
                  "one result per remaining index")
      ->delimiter(',');
  red->add_option("-o,--output", reduce_out,
                  "with --axis: write the results to this .npy (argmin/argmax: int64 indices; bf16 as f32)");
  bool reduce_ranks = false;
  red->add_flag("--ranks", reduce_ranks,
                "under mpirun: every rank reads its slice of the file onto its GPU and tally::dist combines them "
                "(the result printed by rank 0)");

  std::string stats_path, stats_dtype, stats_nan = "propagate";
  int stats_ddof = 0;
  print_mode stats_print;
  auto* stats = app.add_subcommand(
      "stats", "count, sum, min, max, mean, variance, stddev of a file, in one pass");
  stats->add_option("file", stats_path, "the file (.npy or raw)")->required();
  stats
      ->add_option("--nan", stats_nan,
                   "propagate (any NaN gives NaN) or ignore (skip NaNs, count the rest)")
      ->capture_default_str();
  stats
      ->add_option("--ddof", stats_ddof,
                   "delta degrees of freedom of variance and stddev (0: population, 1: sample)")
      ->capture_default_str();
  stats->add_option("--dtype", stats_dtype, kDtypeHelp);
  stats->add_flag("--value-only", stats_print.value_only,
                  "print only: count sum min max mean variance stddev");
  stats->add_flag("--json", stats_print.json, "print JSON (floats as exact text)");
  std::vector<int> stats_axes;
  std::string stats_out;
  stats->add_option("--axis", stats_axes,
                    "statistics along this axis of a .npy array (negative: from the end; several adjacent: 1,2), "
                    "one record per remaining index")
      ->delimiter(',');
  stats->add_option("-o,--output", stats_out,
                    "with --axis: write a float64 .npy of the remaining shape plus a last axis of 7 fields "
                    "(count, sum, min, max, mean, variance, stddev)");

  std::string dot_x, dot_y, dot_dtype, dot_mode = "fast";
  print_mode dot_print;
  auto* dotc =
      app.add_subcommand("dot", "dot product of two files of the same float dtype and length");
  dotc->add_option("x", dot_x, "first file (.npy or raw)")->required();
  dotc->add_option("y", dot_y, "second file (.npy or raw)")->required();
  dotc->add_option("--mode", dot_mode, "accuracy: fast, compensated or exact")
      ->capture_default_str();
  dotc->add_option("--dtype", dot_dtype, "element type of raw files: f16 bf16 f32 f64");
  dotc->add_flag("--value-only", dot_print.value_only, "print only the value");
  dotc->add_flag("--json", dot_print.json, "print JSON (the value as exact text)");

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
    // A benchmark with a progress line on stderr, its report written as asked.
    const auto bench_run = [&](const char* name, auto& o, auto run, const output_files& out) {
      tally::cli::progress p(std::string("bench ") + name);
      o.progress = [&](const std::string& s) { p.step(s); };
      emit(run(o), out);
      return 0;
    };
    if (core->parsed()) {
      tally::bench::core_bench_options o;
      o.quick = core_quick;
      o.cold = !core_no_cold;
      o.sched = tally::bench::parse_schedule(core_schedule);
      return bench_run("core", o, tally::bench::run_core_bench, core_out);
    }
    if (tune->parsed()) return bench_run("tune", tune_opt, tally::bench::run_tune, tune_out);
    if (numerics->parsed()) {
      tally::bench::numerics_bench_options o;
      for (const auto& n : num_sizes) o.sizes.push_back(tally::lab::parse_size(n));
      o.tables = num_tables;
      o.quick = num_quick;
      o.cold = num_cold;
      o.sched = tally::bench::parse_schedule(num_schedule);
      o.exact_chunk_rounds = num_exact_chunk_rounds;
      o.exact_chunk_tail = num_exact_chunk_tail;
      o.depth = num_depth;
      tally::cli::progress p("bench numerics");
      o.progress = [&](const std::string& s) { p.step(s); };
      const tally::bench::report rep = tally::bench::run_numerics_bench(o);
      emit(rep, num_out);
      if (rep.meta.contains("errors")) {
        for (const auto& err : rep.meta["errors"])
          std::fprintf(stderr, "tally: error: bench numerics: %s\n",
                       err.get<std::string>().c_str());
        return 1;
      }
      return 0;
    }
    if (segb->parsed()) {
      tally::bench::segmented_bench_options o;
      o.log2_totals = seg_totals;
      o.quick = seg_quick;
      o.sweep = seg_sweep;
      o.sweep_only = seg_sweep_only;
      o.sweep_forms = seg_forms;
      o.profile_plan = seg_profile;
      o.profile_shapes = seg_profile_shapes;
      o.profile_reps = seg_profile_reps;
      if (!seg_profile.empty() && !seg_sweep_only) {
        std::cerr << "tally bench segmented: --profile-plan needs --sweep-only\n";
        return 2;
      }
      return bench_run("segmented", o, tally::bench::run_segmented_bench, seg_out);
    }
    if (hostb->parsed()) {
      host_opt.reps = host_quick ? 3 : host_opt.reps;
      host_opt.sweep = !host_no_sweep;
      return bench_run("host", host_opt, tally::bench::run_host_bench, host_out);
    }
    if (callsb->parsed()) return bench_run("calls", calls_opt, tally::bench::run_calls_bench, calls_out);
    if (cpub->parsed()) return bench_run("cpu", cpu_opt, tally::bench::run_cpu_bench, cpu_out);
    if (distb->parsed()) {
#if TALLY_CLI_HAVE_DIST
      tally::bench::dist_bench_options o;
      o.quick = dist_quick;
      o.async = dist_async;
      o.sched = tally::bench::parse_schedule(dist_schedule);
      o.log2_totals = dist_totals;
      tally::cli::progress p("bench dist");
      o.progress = [&](const std::string& s) { p.step(s); };
      if (dist_single) {
        if (dist_async) throw tally::error("bench dist: --async is for the one-process-per-GPU run (mpirun)");
        emit(tally::bench::run_dist_local_bench(o), dist_out);
        return 0;
      }
      return tally::bench::run_dist_bench(o, [&](const tally::bench::report& r) { emit(r, dist_out); });
#else
      throw tally::error(std::string("bench dist: ") + kNoDist);
#endif
    }
    if (red->parsed())
      return cmd_reduce(reduce_path, reduce_op, reduce_dtype, reduce_nan, reduce_mode,
                        reduce_print, reduce_axes, reduce_out, reduce_ranks);
    if (stats->parsed())
      return cmd_stats(stats_path, stats_dtype, stats_nan, stats_ddof, stats_print, stats_axes, stats_out);
    if (dotc->parsed()) return cmd_dot(dot_x, dot_y, dot_dtype, dot_mode, dot_print);
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
