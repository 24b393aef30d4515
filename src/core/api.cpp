// The public host API: argument checks, dtype/op dispatch and the blocking convenience.
#include <cuda_runtime_api.h>

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>

#include "context.hpp"
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
};
constexpr const char* kOps[kOpCount] = {"sum",    "prod",    "min", "max", "bit_and",
                                        "bit_or", "bit_xor", "all", "any"};

bool valid(dtype t) { return static_cast<int>(t) >= 0 && static_cast<int>(t) < kDtypeCount; }
bool valid(op o) { return static_cast<int>(o) >= 0 && static_cast<int>(o) < kOpCount; }
const dtype_row& row(dtype t) { return kDtypes[static_cast<int>(t)]; }

std::string describe(dtype t) {
  return valid(t) ? row(t).name : "unknown dtype (value " + std::to_string(static_cast<int>(t)) + ")";
}
std::string describe(op o) {
  return valid(o) ? kOps[static_cast<int>(o)]
                  : "unknown op (value " + std::to_string(static_cast<int>(o)) + ")";
}

// Checks the (dtype, op) pair and says why it is refused.
void require_supported(dtype t, op o, const char* fn) {
  if (!valid(t)) throw error(std::string("tally::") + fn + ": " + describe(t));
  if (!valid(o)) throw error(std::string("tally::") + fn + ": " + describe(o));
  if (supports(t, o)) return;
  std::string why;
  if (o == op::bit_and || o == op::bit_or || o == op::bit_xor)
    why = "bitwise ops need an integer dtype";
  else if (t == dtype::b8)
    why = "b8 supports only all and any";
  throw error(std::string("tally::") + fn + ": op " + kOps[static_cast<int>(o)] +
              " is not defined for dtype " + row(t).name + (why.empty() ? "" : " (" + why + ")"));
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

bool supports(dtype t, op o) noexcept {
  if (!valid(t) || !valid(o)) return false;
  if (t == dtype::b8) return o == op::all || o == op::any;
  if (o == op::bit_and || o == op::bit_or || o == op::bit_xor) return row(t).is_int;
  return true;
}

dtype result_dtype(dtype t, op o) {
  require_supported(t, o, "result_dtype");
  switch (o) {
    case op::sum:
    case op::prod:
      if (row(t).is_float) return t;
      return row(t).is_signed ? dtype::i64 : dtype::u64;
    case op::all:
    case op::any: return dtype::b8;
    default: return t;
  }
}

value identity(dtype t, op o) {
  const dtype r = result_dtype(t, o);
  value v;
  v.type = r;
  const bool is_float = row(r).is_float;
  const bool is_signed = row(r).is_signed;
  const int bits = static_cast<int>(row(r).size * 8);
  switch (o) {
    case op::sum:
    case op::bit_or:
    case op::bit_xor:
    case op::any: v.i = 0; break;
    case op::prod:
      if (is_float) v.f = 1.0; else v.i = 1;
      break;
    case op::all: v.i = 1; break;
    case op::bit_and:
      if (is_signed) v.i = -1; else v.u = bits == 64 ? ~0ull : (1ull << bits) - 1;
      break;
    case op::min:
      if (is_float) v.f = std::numeric_limits<double>::infinity();
      else if (is_signed) v.i = bits == 64 ? std::numeric_limits<std::int64_t>::max() : (1ll << (bits - 1)) - 1;
      else v.u = bits == 64 ? ~0ull : (1ull << bits) - 1;
      break;
    case op::max:
      if (is_float) v.f = -std::numeric_limits<double>::infinity();
      else if (is_signed) v.i = bits == 64 ? std::numeric_limits<std::int64_t>::min() : -(1ll << (bits - 1));
      else v.u = 0;
      break;
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
  if (type != o.type) return false;
  if (row(type).is_float) return std::memcmp(&f, &o.f, sizeof f) == 0;
  return u == o.u;
}

namespace core {
launch_fn find_launcher(dtype t, op o) {
  switch (t) {
    case dtype::b8: return launcher_for<std::uint8_t>(o);
    case dtype::i8: return launcher_for<std::int8_t>(o);
    case dtype::u8: return launcher_for<std::uint8_t>(o);
    case dtype::i16: return launcher_for<std::int16_t>(o);
    case dtype::u16: return launcher_for<std::uint16_t>(o);
    case dtype::i32: return launcher_for<std::int32_t>(o);
    case dtype::u32: return launcher_for<std::uint32_t>(o);
    case dtype::i64: return launcher_for<std::int64_t>(o);
    case dtype::u64: return launcher_for<std::uint64_t>(o);
    case dtype::f32: return launcher_for<float>(o);
    case dtype::f64: return launcher_for<double>(o);
  }
  return nullptr;
}
launch_record plan(dtype t, op o, std::uint64_t n) {
  const dtype r = result_dtype(t, o);  // validates the pair
  (void)r;
  const device_context& dev = current_context();
  launch_ctx c{&dev, nullptr, nullptr, true};
  find_launcher(t, o)(nullptr, n, nullptr, c);
  return last_launch();
}
}  // namespace core

void reduce(const void* d_in, std::uint64_t n, dtype t, op o, void* d_out, stream_t stream,
            const options& /*opt*/) {
  require_supported(t, o, "reduce");
  const std::size_t in_size = row(t).size;
  const std::size_t out_size = row(result_dtype(t, o)).size;
  if (d_in == nullptr && n > 0)
    throw error("tally::reduce: d_in is null but n = " + std::to_string(n));
  if (d_out == nullptr) throw error("tally::reduce: d_out is null");
  if (reinterpret_cast<std::uintptr_t>(d_in) % in_size != 0)
    throw error("tally::reduce: d_in " + hex(d_in) + " is not aligned to " +
                std::to_string(in_size) + " bytes, the size of one " + row(t).name);
  if (reinterpret_cast<std::uintptr_t>(d_out) % out_size != 0)
    throw error("tally::reduce: d_out " + hex(d_out) + " is not aligned to " +
                std::to_string(out_size) + " bytes, the size of one " +
                row(result_dtype(t, o)).name);
  const core::device_context& dev = core::current_context();
  auto* s = reinterpret_cast<cudaStream_t>(stream);
  core::launch_ctx c{&dev, s, &core::stream_workspace(dev, s)};
  core::find_launcher(t, o)(d_in, n, d_out, c);
}

value reduce_value(const void* d_in, std::uint64_t n, dtype t, op o, stream_t stream,
                   const options& opt) {
  require_supported(t, o, "reduce_value");
  const core::device_context& dev = core::current_context();
  auto* s = reinterpret_cast<cudaStream_t>(stream);
  core::workspace& ws = core::stream_workspace(dev, s);
  // Launch, copy back and read as one step, so threads sharing a stream never read each other's
  // result.
  std::lock_guard<std::mutex> lock(ws.result_mutex);
  reduce(d_in, n, t, o, ws.d_result, stream, opt);
  const dtype r = result_dtype(t, o);
  const std::size_t size = row(r).size;
  core::check_cuda(cudaMemcpyAsync(ws.h_result, ws.d_result, size, cudaMemcpyDeviceToHost, s),
                   "cudaMemcpyAsync(result to host)");
  core::check_cuda(cudaStreamSynchronize(s), "cudaStreamSynchronize(reduce_value)");
  value v;
  v.type = r;
  const unsigned char* h = static_cast<const unsigned char*>(ws.h_result);
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
  }
  return v;
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
