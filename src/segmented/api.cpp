// The segmented layer's entry points: argument checks, the (outer, length, inner) problem of
// each form, the plan, and the launcher of (dtype, kind).
#include <cuda_runtime_api.h>

#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "core/api_internal.hpp"
#include "core/context.hpp"
#include "core/memory.hpp"
#include "core/half.hpp"
#include "problem.hpp"
#include "segmented.hpp"
#include "tally/tally.hpp"

namespace tally {
namespace {

using core::kind;

[[noreturn]] void fail(const char* fn, const std::string& what) { throw error(std::string("tally::") + fn + ": " + what); }

std::uint64_t mul_checked(const char* fn, std::uint64_t a, std::uint64_t b, const char* what) {
  if (a != 0 && b > std::numeric_limits<std::uint64_t>::max() / a) fail(fn, std::string(what) + " overflows 64 bits");
  return a * b;
}
std::uint64_t add_checked(const char* fn, std::uint64_t a, std::uint64_t b, const char* what) {
  if (b > std::numeric_limits<std::uint64_t>::max() - a) fail(fn, std::string(what) + " overflows 64 bits");
  return a + b;
}

// Runs kind k over problem p once the arguments are checked: first the memory checks (the input
// span, the offsets and `each` bytes per result all inside their allocations), then the plan.
void run(const char* fn, dtype t, kind k, const void* d_in, seg::problem p, void* d_out, std::size_t each,
         bool check_memory, stream_t stream, const char* in_name = "d_in") {
  p.aligned16 = reinterpret_cast<std::uintptr_t>(d_in) % 16 == 0;
  const core::device_context& dev = core::current_context();
  if (check_memory) {
    core::check_input_reach(fn, in_name, d_in, p.span, t, dev);
    if (p.ragged()) {
      core::check_input_reach(fn, "d_begin", p.d_begin, p.outer, dtype::i64, dev);
      core::check_input_reach(fn, "d_end", p.d_end, p.outer, dtype::i64, dev);
    }
    core::check_memory(fn, "d_out", d_out, p.results(), each, "result", true, dev);
  }
  auto* s = reinterpret_cast<cudaStream_t>(stream);
  core::workspace& ws = core::stream_workspace(dev, s);
  seg::seg_launch_fn launch = seg::find_launcher(t, k);
  if (launch == nullptr)
    fail(fn, std::string("internal error: no segmented kernel for dtype ") + to_string(t) + ", kind " +
                 std::to_string(static_cast<int>(k)));
  const bool exact = k == kind::sum_exact || k == kind::mean_exact || k == kind::dot_exact;
  // Every workspace, captured or not, has the same segmented buffers, so a shape gets the same
  // plan, and the same bits, in and out of a graph.
  // Ragged offsets are checked by the launcher, ahead of its kernels (tile plans have the check
  // find each tile's first segment too); with no results, here.
  seg::seg_ctx c{&dev, s, &ws, p.ragged() ? ws.d_seg_status : nullptr, seg::limits_for(dev)};
  if (p.results() == 0) {
    if (p.ragged()) seg::validate_offsets(p, ws.d_seg_status, s);
    return;
  }
  launch(d_in, p, exact, d_out, c);
}

void check_kind(const char* fn, dtype t, op o, const options& opt, bool inner) {
  const std::string why = core::op_refusal(t, o, opt);
  if (!why.empty()) fail(fn, why);
  if (inner && opt.mode == accuracy::exact)
    fail(fn, "exact mode runs along the last axis (rows, segments, trailing axes); this reduction is along an "
             "axis with elements after it (columns)");
}
void check_stats(const char* fn, dtype t, const options& opt) {
  const std::string why = core::stats_op_refusal(t, opt);
  if (!why.empty()) fail(fn, why);
}
kind stats_kind(dtype t, const options& opt) {
  const bool fl = t == dtype::f32 || t == dtype::f64 || t == dtype::f16 || t == dtype::bf16;
  return opt.nan == nan_policy::ignore && fl ? kind::stats_ignore : kind::stats;
}
// The argument checks of d_out; returns the bytes of one result.
std::size_t check_out(const char* fn, void* d_out, std::uint64_t results, dtype t, op o) {
  const bool arg = o == op::argmin || o == op::argmax;
  const dtype r = result_dtype(t, o);
  if (results > 0)
    core::check_output_pointer(fn, d_out, arg ? 8 : dtype_size(r), [&] {
      return arg ? std::string("indexed<") + to_string(r) + "> records" : std::string(to_string(r)) + " results";
    });
  return result_bytes(t, o);
}
std::size_t check_stats_out(const char* fn, void* d_out, std::uint64_t results) {
  if (results > 0) core::check_output_pointer(fn, d_out, 8, [] { return std::string("tally::stats records"); });
  return 48;
}

seg::problem matrix(const char* fn, const void* d_in, std::uint64_t rows, std::uint64_t cols, std::uint64_t ld,
                    dtype t, bool by_rows, const char* in_name = "d_in", const char* ld_name = "ld") {
  if (rows > 1 && ld < cols)
    fail(fn, std::string(ld_name) + " " + std::to_string(ld) + " is smaller than a row (cols = " + std::to_string(cols) +
                 "): rows would overlap");
  // (rows - 1) x ld + cols elements, every step checked: an ld near 2^64 (a negative stride
  // converted to unsigned) once wrapped the span to a few elements that passed the memory check.
  const std::uint64_t span =
      rows == 0 || cols == 0 ? 0 : add_checked(fn, mul_checked(fn, rows - 1, ld, "rows x ld"), cols, "rows x ld + cols");
  core::check_input_pointer(fn, in_name, d_in, span, t);
  seg::problem p;
  p.span = span;
  if (by_rows) {
    p.outer = rows, p.length = cols, p.inner = 1, p.outer_stride = ld, p.length_stride = 1;
  } else {
    p.outer = 1, p.length = rows, p.inner = cols, p.outer_stride = 0, p.length_stride = ld;
  }
  return p;
}

seg::problem axes(const char* fn, const void* d_in, const std::uint64_t* dims, int ndim, int axis, int count, dtype t) {
  if (ndim < 1) fail(fn, "ndim " + std::to_string(ndim) + ": an array has at least one dimension");
  if (dims == nullptr) fail(fn, "dims is null");
  if (count < 1) fail(fn, "count " + std::to_string(count) + ": reduce at least one axis");
  if (axis < 0 || axis >= ndim || count > ndim - axis)
    fail(fn, "axes [" + std::to_string(axis) + ", " + std::to_string(static_cast<long long>(axis) + count) +
                 ") are out of range for an array of " + std::to_string(ndim) + " dimensions");
  seg::problem p;
  p.outer = 1, p.length = 1, p.inner = 1;
  for (int d = 0; d < ndim; ++d) {
    std::uint64_t& part = d < axis ? p.outer : d < axis + count ? p.length : p.inner;
    part = mul_checked(fn, part, dims[d], "the array's size");
  }
  const std::uint64_t n = mul_checked(fn, mul_checked(fn, p.outer, p.length, "the array's size"), p.inner, "the array's size");
  // The results' count too: a zero length hides outer x inner from the size's check (dims
  // (2^32, 0, 2^32) reduced along axis 1 asked for 2^64 results, which wrapped to none).
  (void)mul_checked(fn, p.outer, p.inner, "the number of results");
  core::check_input_pointer(fn, "d_in", d_in, n, t);
  p.span = n;
  p.length_stride = p.inner;
  p.outer_stride = p.length * p.inner;
  return p;
}

seg::problem ragged(const char* fn, const void* d_in, std::uint64_t n, const std::int64_t* d_begin,
                    const std::int64_t* d_end, std::uint64_t segments, dtype t) {
  core::check_input_pointer(fn, "d_in", d_in, n, t);
  if (segments > 0 && (d_begin == nullptr || d_end == nullptr))
    fail(fn, std::string(d_begin == nullptr ? "d_begin" : "d_end") + " is null but segments = " + std::to_string(segments));
  if (reinterpret_cast<std::uintptr_t>(d_begin) % 8 || reinterpret_cast<std::uintptr_t>(d_end) % 8)
    fail(fn, "the offsets must be aligned to 8 bytes (int64)");
  if (n > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) fail(fn, "n does not fit int64 offsets");
  seg::problem p;
  p.outer = segments, p.inner = 1, p.d_begin = d_begin, p.d_end = d_end, p.n = n, p.span = n;
  return p;
}

template <class T>
std::vector<T> copy_back(const char* fn, const void* d, std::uint64_t count, std::size_t each, stream_t stream,
                         T (*decode)(const unsigned char*, void*), void* ctx) {
  const std::uint64_t bytes = mul_checked(fn, count, each, "the results' bytes");
  std::vector<unsigned char> h;
  try {
    h.resize(static_cast<std::size_t>(bytes));
  } catch (const std::exception&) {  // bad_alloc or length_error: said with the size
    fail(fn, std::to_string(count) + " results of " + std::to_string(each) + " bytes do not fit host memory");
  }
  auto* s = reinterpret_cast<cudaStream_t>(stream);
  if (count > 0) {
    if (d == nullptr) fail(fn, "d_results is null");
    core::check_cuda(cudaMemcpyAsync(h.data(), d, h.size(), cudaMemcpyDeviceToHost, s), "cudaMemcpyAsync(results to host)");
    core::check_cuda(cudaStreamSynchronize(s), "cudaStreamSynchronize(waiting for the results)");
  }
  std::vector<T> out;
  out.reserve(count);
  for (std::uint64_t i = 0; i < count; ++i) out.push_back(decode(h.data() + i * each, ctx));
  return out;
}

}  // namespace

void reduce_rows(const void* d_in, std::uint64_t rows, std::uint64_t cols, std::uint64_t ld, dtype t, op o,
                 void* d_out, stream_t stream, const options& opt) {
  check_kind("reduce_rows", t, o, opt, false);
  const seg::problem p = matrix("reduce_rows", d_in, rows, cols, ld, t, true);
  const std::size_t each = check_out("reduce_rows", d_out, p.results(), t, o);
  run("reduce_rows", t, core::kind_for(t, o, opt), d_in, p, d_out, each, opt.check_memory, stream);
}

void reduce_columns(const void* d_in, std::uint64_t rows, std::uint64_t cols, std::uint64_t ld, dtype t, op o,
                    void* d_out, stream_t stream, const options& opt) {
  const seg::problem p = matrix("reduce_columns", d_in, rows, cols, ld, t, false);
  check_kind("reduce_columns", t, o, opt, !p.contiguous());
  const std::size_t each = check_out("reduce_columns", d_out, p.results(), t, o);
  run("reduce_columns", t, core::kind_for(t, o, opt), d_in, p, d_out, each, opt.check_memory, stream);
}

void reduce_axis(const void* d_in, const std::uint64_t* dims, int ndim, int axis, int count, dtype t, op o,
                 void* d_out, stream_t stream, const options& opt) {
  const seg::problem p = axes("reduce_axis", d_in, dims, ndim, axis, count, t);
  check_kind("reduce_axis", t, o, opt, !p.contiguous());
  const std::size_t each = check_out("reduce_axis", d_out, p.results(), t, o);
  run("reduce_axis", t, core::kind_for(t, o, opt), d_in, p, d_out, each, opt.check_memory, stream);
}

void reduce_segments(const void* d_in, std::uint64_t n, const std::int64_t* d_begin, const std::int64_t* d_end,
                     std::uint64_t segments, dtype t, op o, void* d_out, stream_t stream, const options& opt) {
  check_kind("reduce_segments", t, o, opt, false);
  const seg::problem p = ragged("reduce_segments", d_in, n, d_begin, d_end, segments, t);
  const std::size_t each = check_out("reduce_segments", d_out, p.results(), t, o);
  run("reduce_segments", t, core::kind_for(t, o, opt), d_in, p, d_out, each, opt.check_memory, stream);
}

void stats_rows(const void* d_in, std::uint64_t rows, std::uint64_t cols, std::uint64_t ld, dtype t, void* d_out,
                stream_t stream, const options& opt) {
  check_stats("stats_rows", t, opt);
  const seg::problem p = matrix("stats_rows", d_in, rows, cols, ld, t, true);
  const std::size_t each = check_stats_out("stats_rows", d_out, p.results());
  run("stats_rows", t, stats_kind(t, opt), d_in, p, d_out, each, opt.check_memory, stream);
}

void stats_columns(const void* d_in, std::uint64_t rows, std::uint64_t cols, std::uint64_t ld, dtype t,
                   void* d_out, stream_t stream, const options& opt) {
  check_stats("stats_columns", t, opt);
  const seg::problem p = matrix("stats_columns", d_in, rows, cols, ld, t, false);
  const std::size_t each = check_stats_out("stats_columns", d_out, p.results());
  run("stats_columns", t, stats_kind(t, opt), d_in, p, d_out, each, opt.check_memory, stream);
}

void stats_axis(const void* d_in, const std::uint64_t* dims, int ndim, int axis, int count, dtype t, void* d_out,
                stream_t stream, const options& opt) {
  check_stats("stats_axis", t, opt);
  const seg::problem p = axes("stats_axis", d_in, dims, ndim, axis, count, t);
  const std::size_t each = check_stats_out("stats_axis", d_out, p.results());
  run("stats_axis", t, stats_kind(t, opt), d_in, p, d_out, each, opt.check_memory, stream);
}

void stats_segments(const void* d_in, std::uint64_t n, const std::int64_t* d_begin, const std::int64_t* d_end,
                    std::uint64_t segments, dtype t, void* d_out, stream_t stream, const options& opt) {
  check_stats("stats_segments", t, opt);
  const seg::problem p = ragged("stats_segments", d_in, n, d_begin, d_end, segments, t);
  const std::size_t each = check_stats_out("stats_segments", d_out, p.results());
  run("stats_segments", t, stats_kind(t, opt), d_in, p, d_out, each, opt.check_memory, stream);
}

void dot_rows(const void* d_x, const void* d_y, std::uint64_t rows, std::uint64_t cols, std::uint64_t ldx,
              std::uint64_t ldy, dtype t, void* d_out, stream_t stream, const options& opt) {
  const char* fn = "dot_rows";
  const std::string why = core::dot_op_refusal(t, opt);
  if (!why.empty()) fail(fn, why);
  seg::problem p = matrix(fn, d_x, rows, cols, ldx, t, true, "d_x", "ldx");
  const seg::problem py = matrix(fn, d_y, rows, cols, ldy, t, true, "d_y", "ldy");
  p.d_in2 = d_y != nullptr ? d_y : d_x;  // (null only with nothing to read)
  p.outer_stride2 = ldy;
  p.aligned16_2 = reinterpret_cast<std::uintptr_t>(p.d_in2) % 16 == 0;
  const dtype r = dot_result_dtype(t);
  if (p.results() > 0)
    core::check_output_pointer(fn, d_out, dtype_size(r), [&] { return std::string(to_string(r)) + " results"; });
  if (opt.check_memory && p.results() > 0 && p.length > 0)
    core::check_input_reach(fn, "d_y", d_y, py.span, t, core::current_context());
  const kind k = opt.mode == accuracy::exact ? kind::dot_exact : opt.mode == accuracy::compensated ? kind::dot_comp : kind::dot;
  run(fn, t, k, d_x, p, d_out, dtype_size(r), opt.check_memory, stream, "d_x");
}

void check_segments(const std::int64_t* d_begin, const std::int64_t* d_end, std::uint64_t segments, std::uint64_t n,
                    stream_t stream) {
  const char* fn = "check_segments";
  if (segments == 0) return;
  if (d_begin == nullptr || d_end == nullptr) fail(fn, "the offsets are null");
  core::check_input_reach(fn, "d_begin", d_begin, segments, dtype::i64, core::current_context());
  core::check_input_reach(fn, "d_end", d_end, segments, dtype::i64, core::current_context());
  seg::problem p;
  p.outer = segments, p.d_begin = d_begin, p.d_end = d_end, p.n = n;
  const core::device_context& dev = core::current_context();
  auto* s = reinterpret_cast<cudaStream_t>(stream);
  core::workspace& ws = core::stream_workspace(dev, s);
  seg::validate_offsets(p, ws.d_seg_status, s);
  unsigned long long bad = 0;
  core::check_cuda(cudaMemcpyAsync(&bad, ws.d_seg_status, 8, cudaMemcpyDeviceToHost, s), "cudaMemcpyAsync(segment check)");
  core::check_cuda(cudaStreamSynchronize(s), "cudaStreamSynchronize(segment check)");
  if (bad == seg::kStatusOkHost) return;
  std::int64_t b = 0, e = 0;
  core::check_cuda(cudaMemcpy(&b, d_begin + bad, 8, cudaMemcpyDeviceToHost), "cudaMemcpy(bad segment's begin)");
  core::check_cuda(cudaMemcpy(&e, d_end + bad, 8, cudaMemcpyDeviceToHost), "cudaMemcpy(bad segment's end)");
  const std::string where = "segment " + std::to_string(bad) + " [" + std::to_string(b) + ", " + std::to_string(e) + ")";
  if (b < 0) fail(fn, where + ": begin is negative; nothing was written");
  if (b > e) fail(fn, where + ": begin is past end (offsets out of order); nothing was written");
  fail(fn, where + ": end is past n = " + std::to_string(n) + "; nothing was written");
}

std::vector<value> results_to_values(const void* d_results, std::uint64_t count, dtype t, op o, stream_t stream) {
  const std::string why = core::op_refusal(t, o, options{});
  if (!why.empty()) fail("results_to_values", why);
  struct ctx_t { dtype t; op o; } ctx{t, o};
  return copy_back<value>("results_to_values", d_results, count, result_bytes(t, o), stream,
                          [](const unsigned char* h, void* c) {
                            const auto* x = static_cast<ctx_t*>(c);
                            return core::decode_value(x->t, x->o, h);
                          },
                          &ctx);
}

std::vector<stats> stats_to_host(const void* d_results, std::uint64_t count, stream_t stream) {
  return copy_back<stats>("stats_to_host", d_results, count, 48, stream,
                          [](const unsigned char* h, void*) {
                            stats s;
                            std::memcpy(&s.count, h, 8);
                            std::memcpy(&s.sum, h + 8, 8);
                            std::memcpy(&s.min, h + 16, 8);
                            std::memcpy(&s.max, h + 24, 8);
                            std::memcpy(&s.mean, h + 32, 8);
                            std::memcpy(&s.m2, h + 40, 8);
                            return s;
                          },
                          nullptr);
}

std::vector<value> reduce_segments_values(const void* d_in, std::uint64_t n, const std::int64_t* d_begin,
                                          const std::int64_t* d_end, std::uint64_t segments, dtype t, op o,
                                          stream_t stream, const options& opt) {
  check_kind("reduce_segments_values", t, o, opt, false);
  device_buffer out(segments * result_bytes(t, o));
  reduce_segments(d_in, n, d_begin, d_end, segments, t, o, out.get(), stream, opt);
  check_segments(d_begin, d_end, segments, n, stream);
  return results_to_values(out.get(), segments, t, o, stream);
}

}  // namespace tally
