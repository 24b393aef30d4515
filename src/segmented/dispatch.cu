// The launcher table of the segmented layer, the ragged-offset check and the plan record.
#include <cuda_runtime.h>

#include <algorithm>

#include "core/device.cuh"
#include "core/half.hpp"
#include "segmented.hpp"

namespace tally::seg {

// Tiles k of the partition with k * tile in (bp, b] (bp < 0: from tile 0) get s: the `near` first
// ones (a segment beginning at bp of at most a chunk reaches no further) and the one holding b.
__device__ void write_partition(const tile_partition& t, std::int64_t bp, std::int64_t b, std::uint64_t s) {
  const std::int64_t tile = static_cast<std::int64_t>(t.tile), tiles = static_cast<std::int64_t>(t.tiles);
  const std::int64_t k_lo = bp < 0 ? 0 : bp / tile + 1;
  std::int64_t k_hi = b / tile;
  if (k_hi > tiles - 1) k_hi = tiles - 1;
  const std::int64_t k_near = k_lo + static_cast<std::int64_t>(t.near) - 1 < k_hi ? k_lo + static_cast<std::int64_t>(t.near) - 1 : k_hi;
  for (std::int64_t k = k_lo; k <= k_near; ++k) t.d_first[k] = static_cast<std::int64_t>(s);
  if (k_hi > k_near && k_hi >= k_lo) t.d_first[k_hi] = static_cast<std::int64_t>(s);
}

__global__ void seg_validate_kernel(const std::int64_t* d_begin, const std::int64_t* d_end, std::uint64_t segments,
                                    std::uint64_t n, unsigned long long* d_status, tile_partition part) {
  core::pdl_wait();
  core::pdl_launch_dependents();
  const std::uint64_t stride = std::uint64_t(gridDim.x) * blockDim.x;
  const std::int64_t nn = static_cast<std::int64_t>(n);
  auto clamp = [nn](std::int64_t v) { return v < 0 ? std::int64_t(0) : v > nn ? nn : v; };
  bool sorted = true;
  for (std::uint64_t s = std::uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; s < segments; s += stride) {
    const std::int64_t b = d_begin[s], e = d_end[s];
    if (b < 0 || b > e || static_cast<std::uint64_t>(e) > n) atomicMin(d_status, static_cast<unsigned long long>(s));
    if (s + 1 < segments && e > d_begin[s + 1]) sorted = false;
    if (part.d_first != nullptr) {
      // Offsets out of order or bad leave entries that nothing reads (the tile kernel runs only
      // on offsets in order); clamped, every write stays inside the partition.
      write_partition(part, s == 0 ? -1 : clamp(d_begin[s - 1]), clamp(b), s);
      if (s + 1 == segments) write_partition(part, clamp(b), nn + static_cast<std::int64_t>(part.tile), segments);
    }
  }
  // Word 1: whether the segments are in order and apart (end[s] <= begin[s + 1]); overlapping or
  // unordered segments are valid too, and run without the chunked path for long ones.
  if (__syncthreads_or(!sorted) && threadIdx.x == 0) d_status[1] = 0;
}

void validate_offsets(const problem& p, unsigned long long* d_status, cudaStream_t stream, const tile_partition& part) {
  core::check_cuda(cudaMemsetAsync(d_status, 0xff, 2 * sizeof(unsigned long long), stream),
                   "cudaMemsetAsync(segment check words)");
  if (p.outer == 0) return;
  const unsigned blocks = static_cast<unsigned>(std::min<std::uint64_t>((p.outer + 255) / 256, 1024));
  seg_validate_kernel<<<blocks, 256, 0, stream>>>(p.d_begin, p.d_end, p.outer, p.n, d_status, part);
  core::check_cuda(cudaGetLastError(), "launching the segment offset check");
}

seg_launch_fn find_launcher(dtype t, core::kind k) {
  using core::bf16_t;
  using core::f16_t;
  switch (t) {
    case dtype::b8:
    case dtype::u8: return launcher<std::uint8_t>(k);
    case dtype::i8: return launcher<std::int8_t>(k);
    case dtype::i16: return launcher<std::int16_t>(k);
    case dtype::u16: return launcher<std::uint16_t>(k);
    case dtype::i32: return launcher<std::int32_t>(k);
    case dtype::u32: return launcher<std::uint32_t>(k);
    case dtype::i64: return launcher<std::int64_t>(k);
    case dtype::u64: return launcher<std::uint64_t>(k);
    case dtype::f32: return launcher<float>(k);
    case dtype::f64: return launcher<double>(k);
    case dtype::f16: return launcher<f16_t>(k);
    case dtype::bf16: return launcher<bf16_t>(k);
  }
  return nullptr;
}

namespace {
thread_local plan g_last;
thread_local const plan* g_forced = nullptr;
}
void record_plan(const plan& pl) { g_last = pl; }
plan last_plan() { return g_last; }
void force_plan(const plan* pl) { g_forced = pl; }
const plan* forced_plan() { return g_forced; }

device_limits limits_for(const core::device_context& dev) {
  device_limits d;
  d.sm_count = dev.sm_count;
  d.max_threads_per_sm = dev.max_threads_per_sm;
  d.partial_bytes = core::kSegScratchBytes;
  d.max_tiles = core::kSegCounters;
  return d;
}



}  // namespace tally::seg
