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

struct CUstream_st;  // the CUDA runtime's cudaStream_t is CUstream_st*

namespace tally {

using stream_t = CUstream_st*;  // pass a cudaStream_t; nullptr is the default stream

// Element types. Integer sums and products accumulate in 64 bits (wrapping modulo 2^64);
// f32 sums accumulate in f32 (like CUB), f64 in f64.
enum class dtype : int { b8, i8, u8, i16, u16, i32, u32, i64, u64, f32, f64 };
inline constexpr int kDtypeCount = 11;

// Reduction operators.
//   sum, prod: result i64 for signed inputs, u64 for unsigned, the input type for floats.
//   min, max:  the input type; for floats any NaN in the input gives NaN.
//   bit_and, bit_or, bit_xor: integers only, the input type.
//   all, any:  any input type (an element is true when it is not zero; NaN is true); result b8.
enum class op : int { sum, prod, min, max, bit_and, bit_or, bit_xor, all, any };
inline constexpr int kOpCount = 9;

// Thrown for every failure; the message names the argument or the CUDA call that failed.
class error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct options {
  // Reserved for the accuracy modes and NaN policies; the defaults are the documented ones.
};

// Size of one element in bytes.
std::size_t dtype_size(dtype t) noexcept;
const char* to_string(dtype t) noexcept;
const char* to_string(op o) noexcept;
std::optional<dtype> parse_dtype(std::string_view name) noexcept;  // "f32", "float32", "int8" ...
std::optional<op> parse_op(std::string_view name) noexcept;        // "sum", "max", "bit_xor" ...

// True when op o is defined on dtype t.
bool supports(dtype t, op o) noexcept;
// The dtype of the result written by reduce(); throws tally::error for unsupported pairs.
dtype result_dtype(dtype t, op o);
// The value of an empty reduction (n = 0), in result_dtype(t, o).
struct value;
value identity(dtype t, op o);

// A reduction result on the host.
struct value {
  tally::dtype type = dtype::i64;
  union {
    std::int64_t i;   // b8, i8..i64
    std::uint64_t u;  // u8..u64
    double f;         // f32 (exactly widened), f64
  };
  value() : i(0) {}
  double as_double() const noexcept;
  // Exact text: integers in full, floats with the fewest digits that round-trip their type.
  std::string to_string() const;
  bool operator==(const value& o) const noexcept;
};

// Stream-ordered reduction of n elements at d_in into *d_out (device memory, result_dtype).
// d_in needs only the element's natural alignment; n may exceed 2^32.
void reduce(const void* d_in, std::uint64_t n, dtype t, op o, void* d_out,
            stream_t stream = nullptr, const options& opt = {});

// Blocking convenience: reduces on the given stream and returns the result on the host.
value reduce_value(const void* d_in, std::uint64_t n, dtype t, op o, stream_t stream = nullptr,
                   const options& opt = {});

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

}  // namespace tally
