// Where caller memory lives, as the CUDA driver sees it, and the check every entry point runs
// before a kernel touches it. A kernel that reads a host array the GPU cannot reach, or runs past
// the end of an allocation, faults with an illegal address, and that loses the CUDA context for
// the whole process: every later CUDA call fails. So such pointers are refused first, with an
// error naming the argument, what it points to and how many bytes the call needs.
//
//   std::vector<float> h(1000);
//   tally::reduce_value(h.data(), 1000, tally::dtype::f32, tally::op::sum);
//   // tally::error: "tally::reduce: d_in 0x55.. is not memory the GPU can read: CUDA has no
//   //  allocation there (a host array ...). Copy host data to the device first (or pin it ...)"
#pragma once

#include <cstdint>
#include <string>

#include "context.hpp"

namespace tally::core {

enum class memory_kind {
  device,         // device memory (cudaMalloc, cudaMallocAsync, VMM mappings)
  managed,        // cudaMallocManaged
  host_pinned,    // cudaMallocHost / cudaHostAlloc / cudaHostRegister: mapped for the GPU
  host_pageable,  // memory CUDA has no record of: plain host memory, or a freed or stray pointer
};
const char* to_string(memory_kind k);

struct memory_facts {
  memory_kind kind = memory_kind::host_pageable;
  int device = -1;                         // device memory: the GPU it lives on
  std::uintptr_t begin = 0, end = 0;       // the allocation (or VMM reservation) holding it; 0, 0: unknown
  std::uintptr_t device_address = 0;       // pinned host memory: the address kernels use for it
  bool peer_readable = false;              // another GPU's memory that this GPU may read (peer access)
  int driver_type = 0;                     // CU_POINTER_ATTRIBUTE_MEMORY_TYPE as the driver gave it
  bool known = true;                       // false: the driver could not be asked (no check possible)
};

// The driver's record of p (one cuPointerGetAttributes call; never throws for a stray pointer).
// current_device: the caller's current device (-1: asked here), to tell another GPU's memory.
memory_facts inspect_memory(const void* p, int current_device = -1);

// Throws tally::error "tally::<fn>: <name> ..." unless kernels on `dev` may access count x
// unit_bytes bytes from p (read, or also write): device memory of this GPU or a peer it may
// access, managed memory, pinned host memory mapped at the same address, or any host memory on
// systems where the GPU reads pageable memory (HMM, ATS); and the bytes lie inside p's
// allocation. `unit` names one item ("f32", "result") for the message, built only on failure.
// `known`, if given, is p's record as inspect_memory(p, dev.ordinal) read it: a caller with checks
// of its own asks the driver once.
void check_memory(const char* fn, const char* name, const void* p, std::uint64_t count, std::size_t unit_bytes,
                  const char* unit, bool write, const device_context& dev, const memory_facts* known = nullptr);

// The same check for an input that may also be pageable host memory (reduce, dot, stats and the
// reducer read it through the host path, src/chunked): true for host memory this process can
// read (every byte of the span) that kernels cannot read in place; false for memory they read in
// place. A freed or stray pointer (CUDA has no allocation there and the process cannot read it)
// is refused.
bool check_input_or_host(const char* fn, const char* name, const void* p, std::uint64_t count, std::size_t unit_bytes,
                         const char* unit, const device_context& dev);

}  // namespace tally::core
