// The public host API: argument checks, dtype/op dispatch and the blocking convenience.
#include <cuda_runtime_api.h>

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>

#include "api_internal.hpp"
#include "chunked/staging.hpp"
#include "context.hpp"
#include "memory.hpp"
#include "policy.hpp"
#include "half.hpp"
#include "tally/tally.hpp"

namespace tally {
namespace {

struct dtype_row {
  dtype t;
  const char* name;
  const char* alias;
  std::size_t size;
  bool is_int, is_signed, is_float;
};
constexpr dtype_row kDtypes[kDtypeCount] = {
    {dtype::b8, "b8", "bool", 1, false, false, false},
    {dtype::i8, "i8", "int8", 1, true, true, false},
    {dtype::u8, "u8", "uint8", 1, true, false, false},
    {dtype::i16, "i16", "int16", 2, true, true, false},
    {dtype::u16, "u16", "uint16", 2, true, false, false},
    {dtype::i32, "i32", "int32", 4, true, true, false},
    {dtype::u32, "u32", "uint32", 4, true, false, false},
    {dtype::i64, "i64", "int64", 8, true, true, false},
    {dtype::u64, "u64", "uint64", 8, true, false, false},
    {dtype::f32, "f32", "float32", 4, false, false, true},
    {dtype::f64, "f64", "float64", 8, false, false, true},
    {dtype::f16, "f16", "float16", 2, false, false, true},
    {dtype::bf16, "bf16", "bfloat16", 2, false, false, true},
};
constexpr const char* kOps[kOpCount] = {"sum",    "prod",   "min",    "max",    "bit_and",
                                        "bit_or", "bit_xor", "all",   "any",    "argmin",
                                        "argmax", "sum_sq", "norm2",  "mean"};
constexpr const char* kNanPolicies[] = {"propagate", "ignore"};
constexpr const char* kModes[] = {"fast", "compensated", "exact"};

bool valid(dtype t) { return static_cast<int>(t) >= 0 && static_cast<int>(t) < kDtypeCount; }
bool valid(op o) { return static_cast<int>(o) >= 0 && static_cast<int>(o) < kOpCount; }
bool valid(nan_policy p) { return p == nan_policy::propagate || p == nan_policy::ignore; }
bool valid(accuracy m) { return m == accuracy::fast || m == accuracy::compensated || m == accuracy::exact; }
bool is_half(dtype t) { return t == dtype::f16 || t == dtype::bf16; }
bool is_arg(op o) { return o == op::argmin || o == op::argmax; }
bool is_bitwise(op o) { return o == op::bit_and || o == op::bit_or || o == op::bit_xor; }
const dtype_row& row(dtype t) { return kDtypes[static_cast<int>(t)]; }

std::string describe(dtype t) {
  return valid(t) ? row(t).name : "unknown dtype (value " + std::to_string(static_cast<int>(t)) + ")";
}
std::string describe(op o) {
  return valid(o) ? kOps[static_cast<int>(o)]
                  : "unknown op (value " + std::to_string(static_cast<int>(o)) + ")";
}

// An out-of-range dtype, nan_policy or accuracy value, in words ("" when all are valid).
std::string bad_enums(dtype t, const options& opt) {
  if (!valid(t)) return describe(t);
  if (!valid(opt.nan)) return "unknown nan_policy (value " + std::to_string(static_cast<int>(opt.nan)) + ")";
  if (!valid(opt.mode)) return "unknown accuracy mode (value " + std::to_string(static_cast<int>(opt.mode)) + ")";
  return "";
}

// Why (t, o, opt) is refused ("" when supported).
std::string refusal(dtype t, op o, const options& opt) {
  if (!valid(o)) return describe(o);
  if (std::string bad = bad_enums(t, opt); !bad.empty()) return bad;
  // Built only for a refusal: this runs on every call (several times), and the answer is nearly
  // always "".
  const auto pair = [&] {
    return std::string("op ") + kOps[static_cast<int>(o)] + " is not defined for dtype " + row(t).name;
  };
  if (t == dtype::b8 && o != op::all && o != op::any) return pair() + " (b8 supports only all and any)";
  if (is_bitwise(o) && !row(t).is_int) return pair() + " (bitwise ops need an integer dtype)";
  if ((o == op::sum_sq || o == op::norm2) && !row(t).is_float)
    return pair() + " (sum_sq and norm2 need a float dtype: f16, bf16, f32 or f64)";
  if (opt.nan == nan_policy::ignore && o != op::min && o != op::max && !is_arg(o))
    return std::string("nan_policy ignore applies to min, max, argmin, argmax and stats, not to op ") +
           kOps[static_cast<int>(o)];
  if (opt.mode != accuracy::fast) {
    const char* m = kModes[static_cast<int>(opt.mode)];
    if (o != op::sum && o != op::mean)
      return std::string("accuracy mode ") + m + " applies to sum, mean and dot, not to op " +
             kOps[static_cast<int>(o)];
    if (!row(t).is_float)
      return std::string("accuracy mode ") + m + " needs a float dtype: " + row(t).name +
             " sums are always exact (64-bit integer arithmetic)";
  }
  return "";
}

// Checks (dtype, op, options) and says why it is refused.
void require_supported(dtype t, op o, const options& opt, const char* fn) {
  const std::string why = refusal(t, o, opt);
  if (!why.empty()) throw error(std::string("tally::") + fn + ": " + why);
}
void require_supported(dtype t, op o, const char* fn) { require_supported(t, o, options{}, fn); }

// The kernel that computes (o, opt) (the pair is already checked).
core::kind kind_of(dtype t, op o, const options& opt) {
  const bool ignore = opt.nan == nan_policy::ignore && row(t).is_float;
  switch (o) {
    case op::sum:
      return opt.mode == accuracy::exact ? core::kind::sum_exact
             : opt.mode == accuracy::compensated ? core::kind::sum_comp : core::kind::sum;
    case op::mean:
      return opt.mode == accuracy::exact ? core::kind::mean_exact
             : opt.mode == accuracy::compensated ? core::kind::mean_comp : core::kind::mean;
    case op::min: return ignore ? core::kind::min_ignore : core::kind::min;
    case op::max: return ignore ? core::kind::max_ignore : core::kind::max;
    case op::argmin: return ignore ? core::kind::argmin_ignore : core::kind::argmin;
    case op::argmax: return ignore ? core::kind::argmax_ignore : core::kind::argmax;
    default: return static_cast<core::kind>(static_cast<int>(o));
  }
}

// Refusals of dot and stats ("" when supported).
std::string dot_refusal(dtype t, const options& opt) {
  if (std::string bad = bad_enums(t, opt); !bad.empty()) return bad;
  if (!row(t).is_float) return std::string("dot is not defined for dtype ") + row(t).name + " (dot needs f16, bf16, f32 or f64)";
  if (opt.nan != nan_policy::propagate) return "nan_policy ignore does not apply to dot";
  return "";
}
std::string stats_refusal(dtype t, const options& opt) {
  if (std::string bad = bad_enums(t, opt); !bad.empty()) return bad;
  if (t == dtype::b8) return "stats is not defined for dtype b8";
  if (opt.mode != accuracy::fast)
    return "accuracy modes apply to sum, mean and dot; stats always accumulates in f64 with Chan's merge";
  return "";
}

std::string hex(const void* p) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%p", p);
  return buf;
}

}  // namespace

std::size_t dtype_size(dtype t) noexcept { return valid(t) ? row(t).size : 0; }
const char* to_string(dtype t) noexcept { return valid(t) ? row(t).name : "unknown"; }
const char* to_string(op o) noexcept { return valid(o) ? kOps[static_cast<int>(o)] : "unknown"; }

std::optional<dtype> parse_dtype(std::string_view name) noexcept {
  for (const auto& r : kDtypes)
    if (name == r.name || name == r.alias) return r.t;
  if (name == "float") return dtype::f32;
  if (name == "double") return dtype::f64;
  return std::nullopt;
}

std::optional<op> parse_op(std::string_view name) noexcept {
  for (int k = 0; k < kOpCount; ++k)
    if (name == kOps[k]) return static_cast<op>(k);
  return std::nullopt;
}

const char* to_string(nan_policy p) noexcept { return valid(p) ? kNanPolicies[static_cast<int>(p)] : "unknown"; }
const char* to_string(accuracy m) noexcept { return valid(m) ? kModes[static_cast<int>(m)] : "unknown"; }
std::optional<nan_policy> parse_nan_policy(std::string_view name) noexcept {
  for (int k = 0; k < 2; ++k)
    if (name == kNanPolicies[k]) return static_cast<nan_policy>(k);
  return std::nullopt;
}
std::optional<accuracy> parse_accuracy(std::string_view name) noexcept {
  for (int k = 0; k < 3; ++k)
    if (name == kModes[k]) return static_cast<accuracy>(k);
  return std::nullopt;
}

bool supports(dtype t, op o) noexcept { return supports(t, o, options{}); }
bool supports(dtype t, op o, const options& opt) noexcept {
  try {
    return refusal(t, o, opt).empty();
  } catch (...) {
    return false;
  }
}
std::string why_unsupported(dtype t, op o, const options& opt) { return refusal(t, o, opt); }

dtype result_dtype(dtype t, op o) {
  require_supported(t, o, "result_dtype");
  const bool fl = row(t).is_float;
  switch (o) {
    case op::sum:
    case op::prod:
      if (fl) return is_half(t) ? dtype::f32 : t;
      return row(t).is_signed ? dtype::i64 : dtype::u64;
    case op::all:
    case op::any: return dtype::b8;
    case op::mean: return fl ? (is_half(t) ? dtype::f32 : t) : dtype::f64;
    default: return is_half(t) ? dtype::f32 : t;  // min, max, argmin, argmax, bitwise, sum_sq, norm2
  }
}

std::size_t result_bytes(dtype t, op o) {
  const dtype r = result_dtype(t, o);  // validates the pair
  return is_arg(o) ? 16 : row(r).size;
}

value identity(dtype t, op o, const options& opt) {
  require_supported(t, o, opt, "identity");
  const dtype r = result_dtype(t, o);
  value v;
  v.type = r;
  const bool is_float = row(r).is_float;
  const bool is_signed = row(r).is_signed;
  const int bits = static_cast<int>(row(r).size * 8);
  const double qnan = std::numeric_limits<double>::quiet_NaN();
  switch (o) {
    case op::sum:
    case op::bit_or:
    case op::bit_xor:
    case op::any:
    case op::sum_sq:
    case op::norm2: v.i = 0; break;
    case op::mean: v.f = qnan; break;
    case op::prod:
      if (is_float) v.f = 1.0; else v.i = 1;
      break;
    case op::all: v.i = 1; break;
    case op::bit_and:
      if (is_signed) v.i = -1; else v.u = bits == 64 ? ~0ull : (1ull << bits) - 1;
      break;
    case op::min:
    case op::max:
    case op::argmin:
    case op::argmax: {
      const bool want_max = o == op::min || o == op::argmin;  // the identity of min is the highest
      if (is_float) {
        if (is_arg(o) || opt.nan == nan_policy::ignore) v.f = qnan;
        else v.f = want_max ? std::numeric_limits<double>::infinity() : -std::numeric_limits<double>::infinity();
      } else if (is_signed) {
        v.i = want_max ? (bits == 64 ? std::numeric_limits<std::int64_t>::max() : (1ll << (bits - 1)) - 1)
                       : (bits == 64 ? std::numeric_limits<std::int64_t>::min() : -(1ll << (bits - 1)));
      } else {
        v.u = want_max ? (bits == 64 ? ~0ull : (1ull << bits) - 1) : 0;
      }
      break;
    }
  }
  return v;
}

double value::as_double() const noexcept {
  if (row(type).is_float) return f;
  if (row(type).is_signed || type == dtype::b8) return static_cast<double>(i);
  return static_cast<double>(u);
}

std::string value::to_string() const {
  if (type == dtype::b8) return i ? "true" : "false";
  if (row(type).is_int) return row(type).is_signed ? std::to_string(i) : std::to_string(u);
  if (std::isnan(f)) return std::signbit(f) ? "-nan" : "nan";
  if (std::isinf(f)) return f < 0 ? "-inf" : "inf";
  char buf[64];
  // Shortest text that reads back to the same value of the result's own type.
  auto res = type == dtype::f32 ? std::to_chars(buf, buf + sizeof buf, static_cast<float>(f))
                                : std::to_chars(buf, buf + sizeof buf, f);
  return std::string(buf, res.ptr);
}

bool value::operator==(const value& o) const noexcept {
  if (type != o.type || index != o.index) return false;
  if (row(type).is_float) return std::memcmp(&f, &o.f, sizeof f) == 0;
  return u == o.u;
}

namespace core {
launch_fn find_launcher(dtype t, kind k) {
  auto pick = [k](launch_fn basic, launch_fn numerics) { return basic ? basic : numerics; };
  switch (t) {
    case dtype::b8:
    case dtype::u8: return pick(launcher_basic<std::uint8_t>(k), launcher_numerics<std::uint8_t>(k));
    case dtype::i8: return pick(launcher_basic<std::int8_t>(k), launcher_numerics<std::int8_t>(k));
    case dtype::i16: return pick(launcher_basic<std::int16_t>(k), launcher_numerics<std::int16_t>(k));
    case dtype::u16: return pick(launcher_basic<std::uint16_t>(k), launcher_numerics<std::uint16_t>(k));
    case dtype::i32: return pick(launcher_basic<std::int32_t>(k), launcher_numerics<std::int32_t>(k));
    case dtype::u32: return pick(launcher_basic<std::uint32_t>(k), launcher_numerics<std::uint32_t>(k));
    case dtype::i64: return pick(launcher_basic<std::int64_t>(k), launcher_numerics<std::int64_t>(k));
    case dtype::u64: return pick(launcher_basic<std::uint64_t>(k), launcher_numerics<std::uint64_t>(k));
    case dtype::f32: return pick(launcher_basic<float>(k), launcher_numerics<float>(k));
    case dtype::f64: return pick(launcher_basic<double>(k), launcher_numerics<double>(k));
    case dtype::f16: return pick(launcher_basic<f16_t>(k), launcher_numerics<f16_t>(k));
    case dtype::bf16: return pick(launcher_basic<bf16_t>(k), launcher_numerics<bf16_t>(k));
  }
  return nullptr;
}
launch_record plan(dtype t, op o, std::uint64_t n, const options& opt) {
  require_supported(t, o, opt, "plan");
  const device_context& dev = current_context();
  launch_ctx c{&dev, nullptr, nullptr, true};
  find_launcher(t, kind_of(t, o, opt))(nullptr, n, nullptr, c);
  return last_launch();
}
grid_edges plan_edges(dtype t, op o, const options& opt) {
  const launch_record r = plan(t, o, std::uint64_t(1) << 20, opt);  // the shape in use
  const std::uint64_t v = 16 / dtype_size(t);
  const device_context& dev = current_context();
  grid_edges e;
  e.single_block_max = std::uint64_t(r.block) * r.unroll * v * kSingleBlockRounds;
  e.one_per_sm = std::uint64_t(dev.sm_count) * r.block * kVectorsPerThread * v;
  e.full_grid = policy_for(dev).grid.full_grid_min_bytes / dtype_size(t);
  return e;
}
}  // namespace core

namespace {

void check_input(const char* fn, const char* name, const void* p, std::uint64_t n, dtype t) {
  if (p == nullptr && n > 0)
    throw error(std::string("tally::") + fn + ": " + name + " is null but n = " + std::to_string(n));
  if (reinterpret_cast<std::uintptr_t>(p) % row(t).size != 0)
    throw error(std::string("tally::") + fn + ": " + name + " " + hex(p) + " is not aligned to " +
                std::to_string(row(t).size) + " bytes, the size of one " + row(t).name);
}

// The memory checks (src/core/memory.hpp), once the arguments are: inputs readable, the result
// writable, each within its allocation, before anything is launched (core::check_input_reach
// below for the layers outside this file).
// The inputs of reduce, dot and reduce_stats may also be pageable host memory, read through the
// chunked layer's staging (src/chunked); anything else is checked as check_reach does.
chunked::source input_source(const char* fn, const char* name, const void* p, std::uint64_t n, dtype t,
                             const core::device_context& dev) {
  return chunked::source_for(fn, name, p, n, t, true, dev);
}
// The blocking forms write into the stream workspace's result slot: no need to check that one.
thread_local const void* t_own_result = nullptr;
void check_result_reach(const char* fn, void* p, std::size_t bytes, const char* unit, const core::device_context& dev) {
  if (p == t_own_result) return;
  core::check_memory(fn, "d_out", p, 1, bytes, unit, true, dev);
}

// Launches kind k on (current device, stream) once the arguments are checked.
void run(core::kind k, dtype t, const void* d_in, const void* d_in2, std::uint64_t n, void* d_out,
         stream_t stream, const core::device_context& dev) {
  core::launch_kind(k, t, d_in, d_in2, n, d_out, reinterpret_cast<cudaStream_t>(stream), dev);
}

// Runs `launch(result)` on the stream's workspace with its pinned host result slot as the result
// (the kernels store the result straight into host memory), waits for the stream and hands the
// bytes to `read`, as one step, so threads sharing a stream never read each other's result. A
// copy of the result back after the kernel cost its own 6.9 us a call once the kernel had ended
// (`tally bench calls`, a blocking call's round trip: H200 2026-11-28, reduce of 2^27 f32 136.8 us
// with the copy against 130.6 with the kernel's store to host memory, the graph replay 121.2;
// at 2^10 19.6 against 10.5).
template <class Launch, class Read>
auto blocking(stream_t stream, Launch&& launch, Read&& read) {
  const core::device_context& dev = core::current_context();
  auto* s = reinterpret_cast<cudaStream_t>(stream);
  core::workspace& ws = core::stream_workspace(dev, s);
  std::lock_guard<std::mutex> lock(ws.result_mutex);
  struct own_slot {  // marks ws.h_result as tally's own for the launch, also when it throws
    explicit own_slot(const void* p) { t_own_result = p; }
    ~own_slot() { t_own_result = nullptr; }
  };
  {
    const own_slot mark(ws.h_result);
    launch(ws.h_result);
  }
  core::check_cuda(cudaStreamSynchronize(s), "cudaStreamSynchronize(waiting for the result)");
  return read(static_cast<const unsigned char*>(ws.h_result));
}

value read_value(dtype r, const unsigned char* h) {
  value v;
  v.type = r;
  switch (r) {
    case dtype::b8: v.i = h[0] != 0; break;
    case dtype::i8: { std::int8_t x; std::memcpy(&x, h, 1); v.i = x; break; }
    case dtype::u8: v.u = h[0]; break;
    case dtype::i16: { std::int16_t x; std::memcpy(&x, h, 2); v.i = x; break; }
    case dtype::u16: { std::uint16_t x; std::memcpy(&x, h, 2); v.u = x; break; }
    case dtype::i32: { std::int32_t x; std::memcpy(&x, h, 4); v.i = x; break; }
    case dtype::u32: { std::uint32_t x; std::memcpy(&x, h, 4); v.u = x; break; }
    case dtype::i64: std::memcpy(&v.i, h, 8); break;
    case dtype::u64: std::memcpy(&v.u, h, 8); break;
    case dtype::f32: { float x; std::memcpy(&x, h, 4); v.f = x; break; }
    case dtype::f64: std::memcpy(&v.f, h, 8); break;
    case dtype::f16:
    case dtype::bf16: break;  // never a result type
  }
  return v;
}

}  // namespace

void reduce(const void* d_in, std::uint64_t n, dtype t, op o, void* d_out, stream_t stream,
            const options& opt) {
  require_supported(t, o, opt, "reduce");
  check_input("reduce", "d_in", d_in, n, t);
  const dtype r = result_dtype(t, o);
  core::check_output_pointer("reduce", d_out, is_arg(o) ? 8 : row(r).size, [&] {
    return is_arg(o) ? std::string("an indexed<") + row(r).name + "> record" : std::string("one ") + row(r).name;
  });
  const core::device_context& dev = core::current_context();
  if (opt.check_memory) {
    const chunked::source src = input_source("reduce", "d_in", d_in, n, t, dev);
    check_result_reach("reduce", d_out, result_bytes(t, o), is_arg(o) ? "indexed record" : "result", dev);
    if (src.kind == chunked::source::from::host)
      return chunked::host_reduce("reduce", {chunked::what::reduce, t, o, opt}, &src, 1, n, d_out,
                                  reinterpret_cast<cudaStream_t>(stream), dev);
  }
  run(kind_of(t, o, opt), t, d_in, nullptr, n, d_out, stream, dev);
}

value reduce_value(const void* d_in, std::uint64_t n, dtype t, op o, stream_t stream,
                   const options& opt) {
  require_supported(t, o, opt, "reduce_value");
  const dtype r = result_dtype(t, o);
  return blocking(
      stream, [&](void* d_res) { reduce(d_in, n, t, o, d_res, stream, opt); },
      [&](const unsigned char* h) {
        if (!is_arg(o)) return read_value(r, h);
        value v = read_value(r, h + 8);
        std::memcpy(&v.index, h, 8);
        return v;
      });
}

dtype dot_result_dtype(dtype t) {
  const std::string why = dot_refusal(t, options{});
  if (!why.empty()) throw error("tally::dot_result_dtype: " + why);
  return is_half(t) ? dtype::f32 : t;
}

void dot(const void* d_x, const void* d_y, std::uint64_t n, dtype t, void* d_out, stream_t stream,
         const options& opt) {
  const std::string why = dot_refusal(t, opt);
  if (!why.empty()) throw error("tally::dot: " + why);
  check_input("dot", "d_x", d_x, n, t);
  check_input("dot", "d_y", d_y, n, t);
  const dtype r = dot_result_dtype(t);
  core::check_output_pointer("dot", d_out, row(r).size, [&] { return std::string("one ") + row(r).name; });
  const core::device_context& dev = core::current_context();
  if (opt.check_memory) {
    const chunked::source src[2] = {input_source("dot", "d_x", d_x, n, t, dev), input_source("dot", "d_y", d_y, n, t, dev)};
    check_result_reach("dot", d_out, row(r).size, "result", dev);
    if (src[0].kind == chunked::source::from::host || src[1].kind == chunked::source::from::host)
      return chunked::host_reduce("dot", {chunked::what::dot, t, op::sum, opt}, src, 2, n, d_out,
                                  reinterpret_cast<cudaStream_t>(stream), dev);
  }
  const core::kind k = opt.mode == accuracy::exact         ? core::kind::dot_exact
                       : opt.mode == accuracy::compensated ? core::kind::dot_comp
                                                           : core::kind::dot;
  run(k, t, d_x, d_y, n, d_out, stream, dev);
}

value dot_value(const void* d_x, const void* d_y, std::uint64_t n, dtype t, stream_t stream,
                const options& opt) {
  const std::string why = dot_refusal(t, opt);
  if (!why.empty()) throw error("tally::dot_value: " + why);
  const dtype r = dot_result_dtype(t);
  return blocking(
      stream, [&](void* d_res) { dot(d_x, d_y, n, t, d_res, stream, opt); },
      [&](const unsigned char* h) { return read_value(r, h); });
}

void reduce_stats(const void* d_in, std::uint64_t n, dtype t, void* d_out, stream_t stream,
                  const options& opt) {
  const std::string why = stats_refusal(t, opt);
  if (!why.empty()) throw error("tally::reduce_stats: " + why);
  check_input("reduce_stats", "d_in", d_in, n, t);
  core::check_output_pointer("reduce_stats", d_out, 8, [] { return std::string("a tally::stats record"); });
  const core::device_context& dev = core::current_context();
  if (opt.check_memory) {
    const chunked::source src = input_source("reduce_stats", "d_in", d_in, n, t, dev);
    check_result_reach("reduce_stats", d_out, 48, "tally::stats record", dev);
    if (src.kind == chunked::source::from::host)
      return chunked::host_reduce("reduce_stats", {chunked::what::stats, t, op::sum, opt}, &src, 1, n, d_out,
                                  reinterpret_cast<cudaStream_t>(stream), dev);
  }
  const bool ignore = opt.nan == nan_policy::ignore && row(t).is_float;
  run(ignore ? core::kind::stats_ignore : core::kind::stats, t, d_in, nullptr, n, d_out, stream, dev);
}

stats stats_value(const void* d_in, std::uint64_t n, dtype t, stream_t stream, const options& opt) {
  const std::string why = stats_refusal(t, opt);
  if (!why.empty()) throw error("tally::stats_value: " + why);
  static_assert(sizeof(stats) == 48, "the device writes core::stats_out, 48 bytes");
  return blocking(
      stream, [&](void* d_res) { reduce_stats(d_in, n, t, d_res, stream, opt); },
      [&](const unsigned char* h) {
        stats st;
        std::memcpy(&st, h, sizeof st);
        return st;
      });
}

void release_stream(stream_t stream) { core::release_workspace(reinterpret_cast<cudaStream_t>(stream)); }

int device_count() noexcept {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return count;
}

device_info current_device() { return core::current_context().info; }

namespace {
std::string human_bytes(std::size_t b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double v = static_cast<double>(b);
  int u = 0;
  while (v >= 1024 && u < 6) v /= 1024, ++u;
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.1f %s", v, units[u]);
  return buf;
}
}  // namespace

namespace core {
std::string op_refusal(dtype t, op o, const options& opt) { return refusal(t, o, opt); }
std::string stats_op_refusal(dtype t, const options& opt) { return stats_refusal(t, opt); }
std::string dot_op_refusal(dtype t, const options& opt) { return dot_refusal(t, opt); }
kind kind_for(dtype t, op o, const options& opt) { return kind_of(t, o, opt); }
void check_input_pointer(const char* fn, const char* name, const void* p, std::uint64_t n, dtype t) {
  check_input(fn, name, p, n, t);
}
void throw_bad_output(const char* fn, const void* p, std::size_t align, const std::string& what) {
  if (p == nullptr) throw error(std::string("tally::") + fn + ": d_out is null");
  throw error(std::string("tally::") + fn + ": d_out " + hex(p) + " is not aligned to " + std::to_string(align) +
              " bytes, as " + what + " needs");
}
void check_input_reach(const char* fn, const char* name, const void* p, std::uint64_t n, dtype t,
                       const device_context& dev, const memory_facts* known) {
  core::check_memory(fn, name, p, n, row(t).size, row(t).name, false, dev, known);
}
value decode_value(dtype t, op o, const unsigned char* h) {
  const dtype r = result_dtype(t, o);
  if (!is_arg(o)) return read_value(r, h);
  value v = read_value(r, h + 8);
  std::memcpy(&v.index, h, 8);
  return v;
}
std::string pointer_text(const void* p) { return hex(p); }
void launch_kind(kind k, dtype t, const void* d_in, const void* d_in2, std::uint64_t n, void* d_out,
                 cudaStream_t stream, const device_context& dev, long long* d_carry) {
  launch_ctx c{&dev, stream, &stream_workspace(dev, stream)};
  c.d_in2 = d_in2;
  c.d_carry = d_carry;
  const launch_fn fn = find_launcher(t, k);
  if (fn == nullptr)  // the tables above and the launchers disagree: a tally bug, said plainly
    throw error(std::string("tally: internal error: no kernel for dtype ") + row(t).name + ", kind " +
                std::to_string(static_cast<int>(k)));
  fn(d_in, n, d_out, c);
}
}  // namespace core

device_buffer::device_buffer(std::size_t bytes) : bytes_(bytes) {
  (void)core::current_context();  // a clear error when there is no GPU
  if (bytes == 0) return;
  cudaError_t e = cudaMalloc(&ptr_, bytes);
  if (e != cudaSuccess) {
    ptr_ = nullptr;
    bytes_ = 0;
    (void)cudaGetLastError();
    throw error("tally::device_buffer: cudaMalloc of " + human_bytes(bytes) + " (" +
                std::to_string(bytes) + " bytes) failed: " + cudaGetErrorName(e) + ": " +
                cudaGetErrorString(e));
  }
}
device_buffer::~device_buffer() {
  if (ptr_) cudaFree(ptr_);
}
device_buffer::device_buffer(device_buffer&& o) noexcept : ptr_(o.ptr_), bytes_(o.bytes_) {
  o.ptr_ = nullptr;
  o.bytes_ = 0;
}
device_buffer& device_buffer::operator=(device_buffer&& o) noexcept {
  if (this != &o) {
    if (ptr_) cudaFree(ptr_);
    ptr_ = o.ptr_;
    bytes_ = o.bytes_;
    o.ptr_ = nullptr;
    o.bytes_ = 0;
  }
  return *this;
}
void device_buffer::upload(const void* h_src, std::size_t bytes, std::size_t offset) {
  if (offset + bytes > bytes_ || offset + bytes < offset)
    throw error("tally::device_buffer::upload: " + std::to_string(bytes) + " bytes at offset " +
                std::to_string(offset) + " exceed the buffer's " + std::to_string(bytes_));
  core::check_cuda(cudaMemcpy(static_cast<char*>(ptr_) + offset, h_src, bytes, cudaMemcpyHostToDevice),
                   "cudaMemcpy(host to device)");
}
void device_buffer::download(void* h_dst, std::size_t bytes, std::size_t offset) const {
  if (offset + bytes > bytes_ || offset + bytes < offset)
    throw error("tally::device_buffer::download: " + std::to_string(bytes) + " bytes at offset " +
                std::to_string(offset) + " exceed the buffer's " + std::to_string(bytes_));
  core::check_cuda(cudaMemcpy(h_dst, static_cast<const char*>(ptr_) + offset, bytes, cudaMemcpyDeviceToHost),
                   "cudaMemcpy(device to host)");
}

}  // namespace tally
