// tally: device-wide reductions on NVIDIA GPUs.
//
// Plain C++17 host API: this header needs no CUDA compiler and no CUDA headers. Link libtally.
//
//   float* d_x = ...;                                   // 1000 floats on the device, all 0.5
//   tally::value v = tally::reduce_value(d_x, 1000, tally::dtype::f32, tally::op::sum);
//   // v.dtype == f32, v.as_double() == 500.0
//
// Stream-ordered form: writes the result (of type result_dtype(dtype, op)) into device memory,
// never synchronises, never allocates per call, and may be captured in a CUDA graph.
//
//   tally::reduce(d_x, n, tally::dtype::i32, tally::op::sum, d_out /* int64_t */, stream);
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "tally/version.hpp"

struct CUstream_st;  // the CUDA runtime's cudaStream_t is CUstream_st*

namespace tally {

using stream_t = CUstream_st*;  // pass a cudaStream_t; nullptr is the default stream

// Element types. Integer sums and products accumulate in 64 bits (wrapping modulo 2^64);
// f32 sums accumulate in f32 (like CUB), f64 in f64; f16 and bf16 (IEEE half, bfloat16)
// accumulate in f32 and give f32 results.
enum class dtype : int { b8, i8, u8, i16, u16, i32, u32, i64, u64, f32, f64, f16, bf16 };
inline constexpr int kDtypeCount = 13;

// Reduction operators.
//   sum, prod: result i64 for signed inputs, u64 for unsigned, the input type for f32/f64, f32
//              for f16/bf16.
//   min, max:  the input type (f32 for f16/bf16). NaN follows options::nan; -0.0 counts as less
//              than +0.0, so the result never depends on the combine order.
//   bit_and, bit_or, bit_xor: integers only, the input type.
//   all, any:  any input type (an element is true when it is not zero; NaN is true); result b8.
//   argmin, argmax: the first index of the smallest / largest element and its value; the result
//              is an indexed<V> record (16 bytes) with V = result_dtype (as for min / max).
//              -0.0 and +0.0 compare equal here (the first index wins); n = 0 gives index -1
//              with value NaN (floats) or the min/max identity (integers).
//   sum_sq:    sum of x*x; norm2: sqrt(sum of x*x), free of overflow and underflow in the
//              squares; floats only, result f32 (f32/f16/bf16 inputs, accumulated in f64) or f64.
//   mean:      sum / n (NaN for n = 0); floats (result as for sum, so an f32 mean of values near
//              FLT_MAX may overflow to inf except in exact mode) and integers (the sum exact in
//              128 bits, so it never wraps, then converted to f64 and divided by n; result f64).
// A sum that is exactly zero is +0.0 in every mode (also when every input is -0.0). Under NaN
// propagation which NaN payload a result carries is not specified (it may differ by GPU).
enum class op : int {
  sum, prod, min, max, bit_and, bit_or, bit_xor, all, any, argmin, argmax, sum_sq, norm2, mean
};
inline constexpr int kOpCount = 14;

// NaN policy for min, max, argmin, argmax and stats (floats; integers have no NaN, so ignore is
// accepted there and changes nothing). Other ops, dot and the accuracy modes refuse ignore.
//   propagate: any NaN gives NaN; argmin/argmax return the first NaN's index (as numpy does).
//   ignore:    NaNs are skipped (like fmin / numpy.nanmax); when every element is NaN (or n = 0)
//              the value is NaN and argmin/argmax give index -1.
enum class nan_policy : int { propagate, ignore };

// Accuracy of float sums, mean and dot (other ops and integer inputs are exact or need no mode).
//   fast:        the core's fixed-order sum in the accumulation type; bitwise the same from run
//                to run on one GPU, error bounded by gamma_h * sum|x|.
//   compensated: TwoSum (Neumaier) compensation per thread and in every combine: within a few
//                ulps of the exact sum unless the data cancel catastrophically, at nearly the
//                same speed.
//   exact:       the exact sum of the inputs rounded once (to nearest, ties to even): bitwise the
//                same whatever the grid, GPU, number of GPUs or order of the elements; +inf and
//                -inf together give NaN, an exact sum beyond the type's range gives +-inf.
//                mean = (exact sum rounded to f64) / n, rounded to the result type.
enum class accuracy : int { fast, compensated, exact };

// Thrown for every failure; the message names the argument or the CUDA call that failed.
class error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct options {
  nan_policy nan = nan_policy::propagate;
  accuracy mode = accuracy::fast;
  // Before launching, ask the CUDA driver where each pointer lives: a host array the GPU cannot
  // read, another GPU's memory, a freed pointer, an input running past its allocation or a
  // result buffer too small is refused with tally::error (a kernel would fault, and a fault
  // loses the CUDA context for the whole process); the pageable host inputs of reduce, dot and
  // reduce_stats are streamed instead. Costs one driver query per pointer (about 0.5 us per
  // reduce call on an H100/H200 host, nothing in a replayed graph); false skips it for callers
  // whose buffers are known to be device memory and who call in tight loops of small inputs.
  bool check_memory = true;
};

// The record argmin/argmax write to device memory: index first, then the value (V =
// result_dtype). The index is -1 for n = 0 and, under nan_policy::ignore, for all-NaN input.
template <class V>
struct indexed {
  std::int64_t index;
  V value;
};

// Size of one element in bytes.
std::size_t dtype_size(dtype t) noexcept;
const char* to_string(dtype t) noexcept;
const char* to_string(op o) noexcept;
std::optional<dtype> parse_dtype(std::string_view name) noexcept;  // "f32", "float32", "int8" ...
std::optional<op> parse_op(std::string_view name) noexcept;        // "sum", "argmax", "norm2" ...
const char* to_string(nan_policy p) noexcept;  // "propagate", "ignore"
const char* to_string(accuracy m) noexcept;    // "fast", "compensated", "exact"
std::optional<nan_policy> parse_nan_policy(std::string_view name) noexcept;
std::optional<accuracy> parse_accuracy(std::string_view name) noexcept;

// True when op o is defined on dtype t (with the default options).
bool supports(dtype t, op o) noexcept;
// True when op o is defined on dtype t with these options: accuracy modes other than fast need
// a float dtype and op sum or mean; nan_policy::ignore needs min, max, argmin or argmax.
bool supports(dtype t, op o, const options& opt) noexcept;
// Why (t, o, opt) is refused, in words ("" when it is supported).
std::string why_unsupported(dtype t, op o, const options& opt = {});
// The dtype of the result written by reduce() (for argmin/argmax: the value's dtype); throws
// tally::error for unsupported pairs.
dtype result_dtype(dtype t, op o);
// Bytes reduce() writes at d_out: the result dtype's size, or 16 for argmin/argmax.
std::size_t result_bytes(dtype t, op o);
// The value of an empty reduction (n = 0), in result_dtype(t, o).
struct value;
value identity(dtype t, op o, const options& opt = {});

// A reduction result on the host.
struct value {
  tally::dtype type = dtype::i64;
  union {
    std::int64_t i;   // b8, i8..i64
    std::uint64_t u;  // u8..u64
    double f;         // f32 (exactly widened), f64
  };
  std::int64_t index = -1;  // argmin / argmax: the element's index (-1: none); otherwise -1
  value() : i(0) {}
  double as_double() const noexcept;
  // Exact text: integers in full, floats with the fewest digits that round-trip their type.
  std::string to_string() const;
  bool operator==(const value& o) const noexcept;  // bitwise, index included
};

// Stream-ordered reduction of n elements at d_in into *d_out (device memory, result_bytes(t, o)
// bytes aligned to 8 for argmin/argmax, else to the result's size). d_in needs only the
// element's natural alignment; n may exceed 2^32. d_in may be device, managed or pinned host
// memory (read in place) or, with options::check_memory, pageable host memory: that is streamed
// through the chunked path (see tally::reducer), read before the call returns, and refused while
// the stream is being captured. dot and reduce_stats take host inputs the same way.
//
//   float x[] = {3, 7, 7, 1};   // on the device
//   tally::reduce(d_x, 4, tally::dtype::f32, tally::op::argmax, d_rec, stream);
//   // d_rec: tally::indexed<float>{index = 1, value = 7}
void reduce(const void* d_in, std::uint64_t n, dtype t, op o, void* d_out,
            stream_t stream = nullptr, const options& opt = {});

// Blocking convenience: reduces on the given stream and returns the result on the host.
value reduce_value(const void* d_in, std::uint64_t n, dtype t, op o, stream_t stream = nullptr,
                   const options& opt = {});

// Dot product sum(x[i] * y[i]) of two float vectors of dtype t (f16, bf16, f32, f64), fused in
// one pass. Result f32 for f32/f16/bf16 (fast and compensated accumulate in f32) and f64 for
// f64; the accuracy modes apply as for sum (exact: the exact dot product rounded once to the
// result type). nan_policy::ignore is refused. x and y may have different alignments (equal
// offsets modulo 16 bytes are fastest).
dtype dot_result_dtype(dtype t);
void dot(const void* d_x, const void* d_y, std::uint64_t n, dtype t, void* d_out,
         stream_t stream = nullptr, const options& opt = {});
value dot_value(const void* d_x, const void* d_y, std::uint64_t n, dtype t,
                stream_t stream = nullptr, const options& opt = {});

// Fused statistics in one read of the data (any dtype but b8, accumulated in f64 with shifted
// sums per thread, merged about the warps' and the blocks' means; accuracy modes other than fast
// are refused). Under nan_policy::propagate NaNs are counted and make sum, min, max, mean and m2
// NaN; under ignore NaNs are skipped and not counted. An infinite element (or an f64 sum that
// overflows) makes m2 NaN (docs/numerics.md).
struct stats {
  std::uint64_t count = 0;  // elements counted
  double sum = 0;           // sum of the counted elements
  double min = 0, max = 0;  // NaN when count = 0
  double mean = 0;          // sum / count (NaN when count = 0)
  double m2 = 0;            // sum of squared deviations from the mean
  // Variance with `ddof` delta degrees of freedom (0: population, 1: sample); NaN if count <= ddof
  // or ddof < 0 (no such degrees of freedom; it gave m2 / (count + 1) for -1 before 2026-11-28).
  double variance(int ddof = 0) const noexcept {
    const double dof = static_cast<double>(count) - ddof;
    return ddof >= 0 && dof > 0 ? m2 / dof : __builtin_nan("");
  }
  double stddev(int ddof = 0) const noexcept { return __builtin_sqrt(variance(ddof)); }
};
// Writes one tally::stats record (48 bytes, aligned to 8) at d_out.
void reduce_stats(const void* d_in, std::uint64_t n, dtype t, void* d_out,
                  stream_t stream = nullptr, const options& opt = {});
stats stats_value(const void* d_in, std::uint64_t n, dtype t, stream_t stream = nullptr,
                  const options& opt = {});

// ---- Reductions along an axis and over segments (src/segmented) ------------------------------
// A batch of reductions with one result per row, column, axis position or segment, each under
// the rules of reduce() over that range (NaN policy, ties, accuracy modes; argmin/argmax give the
// index inside the range; an empty range gives the op's identity, like reduce of n = 0). The
// results are written contiguously at d_out, result_bytes(t, o) bytes each (the stats forms: one
// tally::stats record, 48 bytes, each). Stream-ordered, graph-capturable, no per-call
// allocation, and deterministic for a given shape and GPU. An exact sum of a row is bitwise the
// exact reduce() of that row. Exact mode runs along the last axis (rows, ragged segments, axes
// with nothing after them); reduce_columns and other axes refuse it.
//
//   float m[2][3] = {{1, 2, 3}, {4, 5, 6}};   // on the device, ld = 3
//   tally::reduce_rows(d_m, 2, 3, 3, tally::dtype::f32, tally::op::sum, d_out);     // {6, 15}
//   tally::reduce_columns(d_m, 2, 3, 3, tally::dtype::f32, tally::op::sum, d_out);  // {5, 7, 9}

// Every row of a rows x cols matrix whose rows start ld elements apart (ld >= cols): rows results.
void reduce_rows(const void* d_in, std::uint64_t rows, std::uint64_t cols, std::uint64_t ld, dtype t, op o,
                 void* d_out, stream_t stream = nullptr, const options& opt = {});
// Every column of the same matrix: cols results.
void reduce_columns(const void* d_in, std::uint64_t rows, std::uint64_t cols, std::uint64_t ld, dtype t, op o,
                    void* d_out, stream_t stream = nullptr, const options& opt = {});
// Axes [axis, axis + count) of a contiguous (C order) array with dims[0..ndim): the results keep
// the other dims in order (count = 1 is numpy's a.sum(axis=axis)). 1 <= count, axis + count <= ndim.
void reduce_axis(const void* d_in, const std::uint64_t* dims, int ndim, int axis, int count, dtype t, op o,
                 void* d_out, stream_t stream = nullptr, const options& opt = {});
// Ragged segments: segment s is elements [d_begin[s], d_end[s]) of the n at d_in (64-bit offsets
// in device memory, in any order, overlapping allowed). Offsets must satisfy 0 <= begin <= end <=
// n: they are checked on the device, and if any is bad nothing is written; check_segments (and
// reduce_segments_values) throw naming the first bad segment.
void reduce_segments(const void* d_in, std::uint64_t n, const std::int64_t* d_begin, const std::int64_t* d_end,
                     std::uint64_t segments, dtype t, op o, void* d_out, stream_t stream = nullptr,
                     const options& opt = {});
// Dot product of each pair of matching rows: result r = sum over k < cols of x[r * ldx + k] *
// y[r * ldy + k], for rows x cols matrices of a float dtype t (ldx, ldy >= cols), written as
// dot_result_dtype(t) values. The modes as for dot(); an exact row's result is bitwise dot() of
// that pair of rows in exact mode.
//   x = {{1, 2}, {3, 4}}, y = {{5, 6}, {7, 8}}  ->  {17, 53}
void dot_rows(const void* d_x, const void* d_y, std::uint64_t rows, std::uint64_t cols, std::uint64_t ldx,
              std::uint64_t ldy, dtype t, void* d_out, stream_t stream = nullptr, const options& opt = {});
// Fused statistics per row, per column, per axis position and per segment (tally::stats records).
void stats_rows(const void* d_in, std::uint64_t rows, std::uint64_t cols, std::uint64_t ld, dtype t, void* d_out,
                stream_t stream = nullptr, const options& opt = {});
void stats_columns(const void* d_in, std::uint64_t rows, std::uint64_t cols, std::uint64_t ld, dtype t,
                   void* d_out, stream_t stream = nullptr, const options& opt = {});
void stats_axis(const void* d_in, const std::uint64_t* dims, int ndim, int axis, int count, dtype t, void* d_out,
                stream_t stream = nullptr, const options& opt = {});
void stats_segments(const void* d_in, std::uint64_t n, const std::int64_t* d_begin, const std::int64_t* d_end,
                    std::uint64_t segments, dtype t, void* d_out, stream_t stream = nullptr, const options& opt = {});
// Throws tally::error naming the first segment whose offsets are bad (blocking).
void check_segments(const std::int64_t* d_begin, const std::int64_t* d_end, std::uint64_t segments,
                    std::uint64_t n, stream_t stream = nullptr);
// Blocking conveniences: the results of the calls above, copied to the host and decoded.
std::vector<value> results_to_values(const void* d_results, std::uint64_t count, dtype t, op o,
                                     stream_t stream = nullptr);
std::vector<stats> stats_to_host(const void* d_results, std::uint64_t count, stream_t stream = nullptr);
// reduce_segments, then check_segments' verdict, then the results.
std::vector<value> reduce_segments_values(const void* d_in, std::uint64_t n, const std::int64_t* d_begin,
                                          const std::int64_t* d_end, std::uint64_t segments, dtype t, op o,
                                          stream_t stream = nullptr, const options& opt = {});

// ---- Data in pieces, and data in host memory (src/chunked) -----------------------------------
// A reducer takes its input in pieces (feeds), in order, and gives the result of reduce(), dot()
// or stats over everything fed. A feed may be device memory of the reducer's GPU, managed or
// pinned host memory (all read in place by kernels on the reducer's stream: keep them unchanged
// until result() or a synchronisation of that stream), or pageable host memory (a std::vector's
// data, a buffer read from a file), which is streamed to the GPU in chunks through pinned staging
// buffers that several host threads fill while earlier chunks are copied and reduced, and has
// been read by the time feed() returns. feed_from() takes the data from a producer callback
// instead, called from several threads at once, each call filling one chunk; a producer may
// reduce device memory with tally but not give it host data (the staging is busy: refused).
//
// Each feed is reduced in chunks of a fixed size (8 MiB of host data, or all of a device feed at
// once) and the chunks' partials are combined on the host in order: results are bitwise the same
// for the same sequence of feed sizes. Exact mode, integer ops, min/max, argmin/argmax (global
// indices, the first on ties), bitwise and logical ops give exactly reduce()'s result over all
// the data, however it was fed; fast and compensated float sums differ from one reduce() only by
// their rounding. Blocking: result() waits for the reducer's stream. Not thread-safe: one thread
// feeds a reducer. reduce(), dot(), reduce_stats() and their _value forms use the same path when
// given pageable host memory (outside stream capture: a capture refuses it).
//
//   tally::reducer r = tally::reducer::for_reduce(tally::dtype::f32, tally::op::sum);
//   for (auto& block : blocks) r.feed(block.data(), block.size());   // host vectors
//   tally::value total = r.result();
class reducer {
 public:
  // fill(input, dst, first, count): write elements [first, first + count) of the feed (counted
  // from the feed's first element) of input 0 (dot: 0 is x, 1 is y) to dst, pinned host memory.
  // Throwing stops the feed; feed_from rethrows the first exception.
  using fill_fn = void (*)(void* context, int input, void* dst, std::uint64_t first, std::uint64_t count);

  static reducer for_reduce(dtype t, op o, const options& opt = {}, stream_t stream = nullptr);
  static reducer for_dot(dtype t, const options& opt = {}, stream_t stream = nullptr);
  static reducer for_stats(dtype t, const options& opt = {}, stream_t stream = nullptr);
  ~reducer();
  reducer(reducer&& o) noexcept;
  reducer& operator=(reducer&& o) noexcept;
  reducer(const reducer&) = delete;
  reducer& operator=(const reducer&) = delete;

  // The next n elements at data (reduce, stats) or at x and y (dot).
  void feed(const void* data, std::uint64_t n);
  void feed(const void* x, const void* y, std::uint64_t n);
  // The next n elements (of each input, for dot) from fill; context is passed back to it.
  void feed_from(std::uint64_t n, fill_fn fill, void* context);
  // The result of reduce (or dot) over everything fed so far; the reducer can keep feeding.
  value result();
  stats stats_result();  // for_stats reducers
  std::uint64_t count() const noexcept;  // elements fed so far
  void reset();                          // forget everything fed

  struct impl;  // opaque (src/chunked/reducer.cpp)

 private:
  explicit reducer(impl* p) noexcept : p_(p) {}
  impl* p_ = nullptr;
};

// Frees the small workspace tally keeps for (current device, stream). Call it once the stream's
// tally work has finished (for example before cudaStreamDestroy) in programs that create many
// streams; the next call on that stream simply creates a new one.
void release_stream(stream_t stream);

// Owning device allocation, for callers without the CUDA runtime headers (the CLI, the tests).
class device_buffer {
 public:
  device_buffer() = default;
  explicit device_buffer(std::size_t bytes);  // throws tally::error naming the size on failure
  ~device_buffer();
  device_buffer(device_buffer&& o) noexcept;
  device_buffer& operator=(device_buffer&& o) noexcept;
  device_buffer(const device_buffer&) = delete;
  device_buffer& operator=(const device_buffer&) = delete;
  void* get() const noexcept { return ptr_; }
  std::size_t size() const noexcept { return bytes_; }
  void upload(const void* h_src, std::size_t bytes, std::size_t offset = 0);
  void download(void* h_dst, std::size_t bytes, std::size_t offset = 0) const;

 private:
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
};

// Device facts, read once per device and cached.
struct device_info {
  int ordinal = 0;
  std::string name;
  int sm_count = 0;
  int cc_major = 0, cc_minor = 0;
  std::size_t l2_bytes = 0;
  std::size_t global_mem_bytes = 0;
  double mem_clock_khz = 0;
  int bus_width_bits = 0;
  double theoretical_gbps = 0;  // 2 (DDR) * memory clock * bus width
};
// Throws tally::error naming the problem when no CUDA GPU is usable.
device_info current_device();
// Number of usable CUDA devices, 0 when none (never throws).
int device_count() noexcept;

// The version of the libtally this program runs with. The headers it was compiled against give
// TALLY_VERSION_MAJOR / _MINOR / _PATCH and TALLY_VERSION_STRING (tally/version.hpp); a program
// that loads libtally at run time can compare the two (the CMake package accepts the same major
// and minor version only).
//   tally::library_version().text  // "0.1.0"
struct version_info {
  int major = 0, minor = 0, patch = 0;
  const char* text = "";  // "MAJOR.MINOR.PATCH"
};
version_info library_version() noexcept;

}  // namespace tally
