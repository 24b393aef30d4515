// Pointer facts from the driver's cuPointerGetAttributes (found through the runtime's entry-point
// query, so libtally links no libcuda and loads on machines without a driver) and the access
// check the entry points run before launching.
#include "memory.hpp"

#include "api_internal.hpp"

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <cstdio>
#include <fstream>
#include <mutex>
#include <string>

namespace tally::core {
namespace {

using get_attributes_fn = CUresult (*)(unsigned int, CUpointer_attribute*, void**, CUdeviceptr);

// The driver's cuPointerGetAttributes, or null where it cannot be had (then nothing is checked).
get_attributes_fn driver_get_attributes() {
  static get_attributes_fn fn = nullptr;
  static std::once_flag once;
  std::call_once(once, [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult found{};
    if (cudaGetDriverEntryPointByVersion("cuPointerGetAttributes", &p, 12000, cudaEnableDefault, &found) ==
            cudaSuccess &&
        found == cudaDriverEntryPointSuccess)
      fn = reinterpret_cast<get_attributes_fn>(p);
    else
      (void)cudaGetLastError();
  });
  return fn;
}

std::string hex(std::uintptr_t p) { return pointer_text(reinterpret_cast<const void*>(p)); }

// True when every byte of [begin, begin + bytes) lies in a readable mapping of this process
// (/proc/self/maps; mappings are listed in address order). A freed device pointer lies in CUDA's
// address reservation, which the process cannot read, so it is told from a host array here.
bool host_readable(std::uintptr_t begin, std::uint64_t bytes) {
  std::ifstream maps("/proc/self/maps");
  if (!maps) return false;  // cannot tell: refused, never read blindly
  std::uintptr_t at = begin;
  const std::uintptr_t end = bytes > ~std::uintptr_t(0) - begin ? ~std::uintptr_t(0) : begin + bytes;
  std::string line;
  while (at < end && std::getline(maps, line)) {
    unsigned long lo = 0, hi = 0;
    char perms[8] = {};
    if (std::sscanf(line.c_str(), "%lx-%lx %7s", &lo, &hi, perms) != 3) continue;
    if (hi <= at) continue;
    if (lo > at || perms[0] != 'r') break;  // a hole, or a mapping the process cannot read
    at = hi;
  }
  return at >= end;
}

}  // namespace

const char* to_string(memory_kind k) {
  switch (k) {
    case memory_kind::device: return "device memory";
    case memory_kind::managed: return "managed memory";
    case memory_kind::host_pinned: return "pinned host memory";
    case memory_kind::host_pageable: return "host memory";
  }
  return "?";
}

namespace {
// Whether kernels of device `from` (the current device) may read device `to`'s memory now:
// peer access possible and enabled. Enabling is the only question CUDA answers, so where the
// probe turns it on, it is turned off again (the caller's settings stay as they were).
bool peer_access_on(int from, int to) {
  int can = 0;
  if (cudaDeviceCanAccessPeer(&can, from, to) != cudaSuccess || can == 0) {
    (void)cudaGetLastError();
    return false;
  }
  const cudaError_t e = cudaDeviceEnablePeerAccess(to, 0);
  (void)cudaGetLastError();
  if (e == cudaErrorPeerAccessAlreadyEnabled) return true;
  if (e == cudaSuccess) {
    (void)cudaDeviceDisablePeerAccess(to);
    (void)cudaGetLastError();
  }
  return false;
}
}  // namespace

memory_facts inspect_memory(const void* p, int current_device) {
  memory_facts f;
  const get_attributes_fn get = driver_get_attributes();
  if (get == nullptr) {
    f.known = false;
    return f;
  }
  // One zeroed 8-byte slot per attribute: the driver writes each in its own width (a bool, an
  // enum, an int, a pointer), and the low bytes read back right on a little-endian host.
  CUpointer_attribute attrs[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                                 CU_POINTER_ATTRIBUTE_IS_MANAGED, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
                                 CU_POINTER_ATTRIBUTE_RANGE_SIZE};
  constexpr unsigned kAttrs = sizeof attrs / sizeof attrs[0];
  unsigned long long slot[kAttrs] = {};
  void* data[kAttrs];
  for (unsigned k = 0; k < kAttrs; ++k) data[k] = &slot[k];
  // Unlike the single-attribute query, this form reports a pointer CUDA does not know as
  // memory type 0 (and default values) instead of failing.
  if (get(kAttrs, attrs, data, reinterpret_cast<CUdeviceptr>(p)) != CUDA_SUCCESS) {
    f.known = false;
    return f;
  }
  const auto low32 = [](unsigned long long v) { return static_cast<std::uint32_t>(v & 0xffffffffu); };
  const unsigned type = low32(slot[0]);
  f.driver_type = static_cast<int>(type);
  f.device = static_cast<int>(low32(slot[1]));
  const bool managed = (slot[2] & 0xff) != 0;
  if (slot[4] > 0) f.begin = static_cast<std::uintptr_t>(slot[3]), f.end = f.begin + static_cast<std::size_t>(slot[4]);
  if (managed) f.kind = memory_kind::managed;
  else if (type == CU_MEMORYTYPE_DEVICE) f.kind = memory_kind::device;
  else if (type == CU_MEMORYTYPE_HOST) f.kind = memory_kind::host_pinned;
  else f.kind = memory_kind::host_pageable;
  // The rarer facts in a second query, only where they matter: the address kernels use for
  // pinned host memory, and whether this GPU may access another GPU's memory.
  if (f.kind == memory_kind::host_pinned || f.kind == memory_kind::device) {
    int current = current_device;
    if (current < 0 && cudaGetDevice(&current) != cudaSuccess) (void)cudaGetLastError();
    if (f.kind == memory_kind::device && current == f.device) return f;
    CUpointer_attribute more[] = {CU_POINTER_ATTRIBUTE_DEVICE_POINTER, CU_POINTER_ATTRIBUTE_ACCESS_FLAGS};
    unsigned long long mslot[2] = {};
    void* mdata[2] = {&mslot[0], &mslot[1]};
    if (get(2, more, mdata, reinterpret_cast<CUdeviceptr>(p)) == CUDA_SUCCESS) {
      f.device_address = static_cast<std::uintptr_t>(mslot[0]);
      f.peer_readable = low32(mslot[1]) != 0;  // CU_POINTER_ATTRIBUTE_ACCESS_FLAG_READ or _READWRITE
    }
    // The access flags say READWRITE for another GPU's cudaMalloc memory whether or not peer
    // access is on (measured on two H200s: the kernel then faults and the context is lost), so
    // peer access itself is asked for.
    if (f.kind == memory_kind::device && f.peer_readable) f.peer_readable = peer_access_on(current, f.device);
  }
  if (f.kind == memory_kind::host_pageable) {
    // Before calling memory unknown (a refusal), ask the runtime too: a second opinion that costs
    // nothing on the fast path.
    cudaPointerAttributes a{};
    if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
      (void)cudaGetLastError();
      return f;
    }
    if (a.type == cudaMemoryTypeDevice) f.kind = memory_kind::device, f.device = a.device;
    else if (a.type == cudaMemoryTypeManaged) f.kind = memory_kind::managed;
    else if (a.type == cudaMemoryTypeHost)
      f.kind = memory_kind::host_pinned, f.device_address = reinterpret_cast<std::uintptr_t>(a.devicePointer);
  }
  return f;
}

namespace {
// check_memory and check_input_or_host: true for pageable host memory the process can read, when
// the caller takes it (allow_host) and the GPU cannot read it in place.
bool check_access(const char* fn, const char* name, const void* p, std::uint64_t count, std::size_t unit_bytes,
                  const char* unit, bool write, bool allow_host, const device_context& dev,
                  const memory_facts* known = nullptr) {
  if (count == 0 || unit_bytes == 0) return false;
  const std::uint64_t bytes = count > ~std::uint64_t(0) / unit_bytes ? ~std::uint64_t(0) : count * unit_bytes;
  const memory_facts f = known ? *known : inspect_memory(p, dev.ordinal);
  if (!f.known) return false;
  const std::uintptr_t at = reinterpret_cast<std::uintptr_t>(p);
  // The message's start, built only when a check fails (this runs on every call).
  const auto head = [&] { return std::string("tally::") + fn + ": " + name + " " + hex(at) + " "; };
  switch (f.kind) {
    case memory_kind::host_pageable:
      // Callers that take host memory stream it through pinned staging even where the GPU could
      // read it in place (HMM / ATS): faster, and read before the call returns.
      if (allow_host) {
        if (host_readable(at, bytes)) return true;
        throw error(head() + "is neither memory the GPU can read nor " + std::to_string(bytes) +
                    " bytes of host memory this process can read (a freed or stray pointer, or a host array "
                    "shorter than " + std::to_string(count) + " x " + unit + ")");
      }
      if (dev.pageable_access) return false;  // the GPU reads pageable memory (HMM / ATS); no range known
      throw error(head() + "is not memory the GPU can " + (write ? "write" : "read") +
                  ": CUDA has no allocation there (a host array such as a std::vector's data, or a freed or "
                  "stray pointer). Copy host data to the device first (or pin it with cudaHostRegister).");
    case memory_kind::host_pinned:
      if (f.device_address != 0 && f.device_address != at)
        throw error(head() + "is pinned host memory that kernels see at another address (" + hex(f.device_address) +
                    "): pass the pointer cudaHostGetDevicePointer gives.");
      break;
    case memory_kind::device:
      if (f.device != dev.ordinal && !f.peer_readable)
        throw error(head() + "is memory of device " + std::to_string(f.device) + ", but the current device is " +
                    std::to_string(dev.ordinal) + " (no peer access): call cudaSetDevice(" +
                    std::to_string(f.device) + ") first, or enable peer access.");
      break;
    case memory_kind::managed: break;
  }
  if (f.end != 0 && (at < f.begin || bytes > f.end - at))
    throw error(head() + "needs " + std::to_string(bytes) + " bytes (" + std::to_string(count) + " x " + unit + ", " +
                std::to_string(unit_bytes) + " bytes each), but its allocation (" +
                to_string(f.kind) + " " + hex(f.begin) + ", " + std::to_string(f.end - f.begin) + " bytes) has only " +
                std::to_string(at >= f.begin && at < f.end ? f.end - at : 0) + " from there" +
                (write ? ": the result buffer is too small; nothing was written." : "."));
  return false;
}
}  // namespace

void check_memory(const char* fn, const char* name, const void* p, std::uint64_t count, std::size_t unit_bytes,
                  const char* unit, bool write, const device_context& dev, const memory_facts* known) {
  (void)check_access(fn, name, p, count, unit_bytes, unit, write, false, dev, known);
}

bool check_input_or_host(const char* fn, const char* name, const void* p, std::uint64_t count, std::size_t unit_bytes,
                         const char* unit, const device_context& dev) {
  return check_access(fn, name, p, count, unit_bytes, unit, false, true, dev);
}

}  // namespace tally::core
