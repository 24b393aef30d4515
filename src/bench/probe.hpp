// The device's measured read ceiling, and random inputs for benchmarks and tests.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "bench/report.hpp"
#include "tally/tally.hpp"

namespace tally::bench {

struct ceiling {
  double read_gbps = 0;        // best read-only probe, 16-byte loads, over several grid shapes
  double theoretical_gbps = 0; // 2 x memory clock x bus width
  std::size_t probe_bytes = 0;
};

// Reads a buffer of `bytes` (>= 4x L2) with a read-only probe kernel; the best median over
// grid shapes of 2..32 blocks per SM. Measured once per process (cached).
ceiling measure_ceiling(std::size_t bytes = std::size_t(2) << 30);

// The metadata every benchmark report opens with: its name, the device, the date, the ceiling.
void stamp_report(report& rep, const char* benchmark, const device_info& dev, const ceiling& c);

// Fills d_data with n pseudo-random elements of dtype t (a hash of index and seed):
// floats uniform in [lo, hi), integers uniform in [lo, hi] (truncated toward zero).
void fill_random(void* d_data, std::uint64_t n, dtype t, std::uint64_t seed, double lo, double hi,
                 cudaStream_t stream = nullptr);

// Fills every byte of [d, d + bytes) with a value derived from seed (for poisoning).
void fill_bytes(void* d, std::size_t bytes, unsigned char value, cudaStream_t stream = nullptr);

// Enqueues a kernel that does nothing (one block of 32 threads, arguments the size of a reduce's):
// with <<<>>> (pdl false) or with cudaLaunchKernelEx allowing programmatic dependent launch, as
// tally launches its kernels. `tally bench calls`: the launch's own host cost.
cudaError_t launch_empty(cudaStream_t stream, bool pdl);

// RAII pinned host memory (cudaMallocHost: mapped for the GPU at the same address).
struct pinned_bytes {
  unsigned char* p = nullptr;
  explicit pinned_bytes(std::size_t bytes);
  ~pinned_bytes();
  pinned_bytes(const pinned_bytes&) = delete;
  pinned_bytes& operator=(const pinned_bytes&) = delete;
};

// Enqueues one thread that stores `v` at p (device memory, or pinned host memory the GPU maps at
// the same address): `tally bench calls`' round trips, a result written straight to the host.
cudaError_t launch_store(cudaStream_t stream, unsigned int* p, unsigned int v);

// Enqueues one warp that spins for `ns` nanoseconds of the GPU's global timer: a long kernel
// whose end is what comes after it waits for (`tally bench dist`: what an exchange costs after a
// shard's kernel, its host enqueue hidden behind the spin).
cudaError_t launch_spin(cudaStream_t stream, unsigned long long ns);

}  // namespace tally::bench
