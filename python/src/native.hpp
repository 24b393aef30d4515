// tally._tally's shared native pieces (python/src/): the device guard, the pool of result
// buffers and the device memory that Python owns, used by bindings.cpp (the module) and
// torch_path.cpp (tally.sum(t)'s per-call path for a torch tensor).
#pragma once

#include <nanobind/nanobind.h>

#include <cuda_runtime_api.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "tally/tally.hpp"

namespace tally_py {

namespace nb = nanobind;

// Makes `device` current for a scope (as torch's device guard does), when it is given (>= 0) and
// is not current already; the previous device comes back after.
class device_guard {
 public:
  explicit device_guard(int device) {
    if (device < 0) return;
    int current = 0;
    if (cudaGetDevice(&current) != cudaSuccess) {
      (void)cudaGetLastError();
      return;  // no usable GPU: the call itself says so
    }
    if (current == device) return;
    const cudaError_t e = cudaSetDevice(device);
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      throw tally::error(std::string("tally: cudaSetDevice(") + std::to_string(device) +
                         ") for an array on that GPU failed: " + cudaGetErrorString(e));
    }
    previous_ = current;
  }
  ~device_guard() {
    if (previous_ >= 0 && cudaSetDevice(previous_) != cudaSuccess) (void)cudaGetLastError();
  }
  device_guard(const device_guard&) = delete;
  device_guard& operator=(const device_guard&) = delete;

 private:
  int previous_ = -1;
};

// Result buffers are reused: a call that leaves its result on the GPU must not pay a cudaMalloc
// (tally never allocates per call). Freed buffers wait here, by device, stream and size (up to
// kKeep each); a buffer goes back only to calls on the stream that last wrote it, so a dropped
// result's kernel still in flight is ordered before the next writer.
struct buffer_pool {
  static constexpr std::size_t kKeep = 64;
  using key = std::tuple<int, std::uintptr_t, std::size_t>;
  std::mutex m;
  std::map<key, std::vector<tally::device_buffer>> free;
  tally::device_buffer take(int device, std::uintptr_t stream, std::size_t bytes) {
    {
      std::lock_guard<std::mutex> lock(m);
      auto it = free.find({device, stream, bytes});
      if (it != free.end() && !it->second.empty()) {
        tally::device_buffer b = std::move(it->second.back());
        it->second.pop_back();
        return b;
      }
    }
    return tally::device_buffer(bytes);
  }
  void give(int device, std::uintptr_t stream, tally::device_buffer&& b) {
    std::lock_guard<std::mutex> lock(m);
    auto& v = free[{device, stream, b.size()}];
    if (v.size() < kKeep) v.push_back(std::move(b));
  }
};
inline buffer_pool& pool() {
  static buffer_pool* p = new buffer_pool;  // never destroyed: freeing at interpreter exit is unsafe
  return *p;
}

// Device memory owned by Python: results left on the GPU. Exported through DLPack (nanobind's
// nb_ndarray) and __cuda_array_interface__ as `dtype` elements of `shape` with element strides
// `strides` (argmin/argmax: the int64 indices of the 16-byte records, stride 2).
class device_array {
 public:
  device_array(std::size_t bytes, int device, std::uintptr_t stream, bool pooled)
      : device_(device), stream_(stream), pooled_(pooled), buf_(make(bytes == 0 ? 16 : bytes, device, stream, pooled)) {}
  // Back to the pool unless a consumer (DLPack, the array interface) may still read it on a
  // stream of its own: exported buffers are freed (cudaFree waits for the device).
  ~device_array() {
    if (pooled_ && !exported_) pool().give(device_, stream_, std::move(buf_));
  }
  void mark_exported() { exported_ = true; }
  device_array(const device_array&) = delete;
  device_array& operator=(const device_array&) = delete;
  std::uintptr_t address() const { return reinterpret_cast<std::uintptr_t>(buf_.get()); }
  std::size_t size() const { return buf_.size(); }
  int device() const { return device_; }
  // Host bytes copied in: with stream < 0 a blocking copy (cudaMemcpy), else ordered on `stream`
  // (a stream of this buffer's GPU) before the work enqueued after it there; pageable host memory
  // is staged before this returns, so it may be freed then.
  void upload(std::uintptr_t host, std::size_t bytes, std::intptr_t stream) {
    if (bytes > buf_.size()) throw nb::value_error("DeviceBuffer.upload: more bytes than the buffer holds");
    nb::gil_scoped_release unlocked;
    if (bytes == 0) return;
    if (stream < 0) {
      buf_.upload(reinterpret_cast<const void*>(host), bytes);
      return;
    }
    const device_guard on(device_);
    const cudaError_t e = cudaMemcpyAsync(buf_.get(), reinterpret_cast<const void*>(host), bytes, cudaMemcpyHostToDevice,
                                          reinterpret_cast<cudaStream_t>(stream));
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      throw tally::error(std::string("tally: cudaMemcpyAsync(host to device, ") + std::to_string(bytes) +
                         " bytes) failed: " + cudaGetErrorString(e));
    }
  }

 private:
  // Memory of `device` (made current while it is allocated).
  static tally::device_buffer make(std::size_t bytes, int device, std::uintptr_t stream, bool pooled) {
    const device_guard on(device);
    return pooled ? pool().take(device, stream, bytes) : tally::device_buffer(bytes);
  }
  int device_;
  std::uintptr_t stream_;
  bool pooled_ = true, exported_ = false;
  tally::device_buffer buf_;
};

// A pooled result buffer of `bytes` on `device` (>= 0: made current for the call; -1: the current
// GPU) and one reduction into it, enqueued on `stream`: the per-call work of a whole-array
// reduction left on the GPU. Returns the buffer (a DeviceBuffer). The GIL is kept unless the
// memory is checked (a host input streams through staging), as torch keeps it for its launches.
inline nb::object reduce_into_new(const void* p, std::uint64_t n, tally::dtype t, tally::op o, const tally::options& opt,
                                  std::uintptr_t stream, int device, std::size_t bytes) {
  const device_guard on(device);
  int current = device;
  if (current < 0 && cudaGetDevice(&current) != cudaSuccess) (void)cudaGetLastError(), current = 0;
  auto* a = new device_array(bytes, current, stream, true);
  nb::object owner = nb::cast(a, nb::rv_policy::take_ownership);
  void* out = reinterpret_cast<void*>(a->address());
  auto* s = reinterpret_cast<tally::stream_t>(stream);
  if (opt.check_memory) {
    nb::gil_scoped_release unlocked;
    tally::reduce(p, n, t, o, out, s, opt);
  } else {
    tally::reduce(p, n, t, o, out, s, opt);
  }
  return owner;
}

// Adds _torch_setup, _torch_plan_add and _torch_reduce (torch_path.cpp).
void add_torch_path(nb::module_& m);

}  // namespace tally_py
