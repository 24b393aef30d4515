// The launcher table of the segmented layer, the ragged-offset check and the plan record.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "core/device.cuh"
#include "core/half.hpp"
#include "kernels/check.cuh"
#include "segmented.hpp"

namespace tally::seg {

__global__ void seg_validate_kernel(const std::int64_t* d_begin, const std::int64_t* d_end, std::uint64_t segments,
                                    std::uint64_t n, unsigned long long* d_status, tile_partition part) {
  core::pdl_wait();
  core::pdl_launch_dependents();
  __shared__ unsigned long long block_writes;  // the partition's writes of this block
  if (threadIdx.x == 0) block_writes = 0;
  __syncthreads();
  bool sorted = true;
  const std::uint64_t bad =
      check_segments_share(d_begin, d_end, segments, n, part, &block_writes, std::uint64_t(blockIdx.x) * blockDim.x + threadIdx.x,
                           std::uint64_t(gridDim.x) * blockDim.x, sorted);
  if (bad != UINT64_MAX) atomicMin(d_status, static_cast<unsigned long long>(bad));
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

namespace {
template <class T>
struct type_tag {
  using type = T;
};
// f(type_tag<T>{}) for dtype t's element type (b8 reads as u8), or `none`.
template <class R, class F>
R on_dtype(dtype t, R none, F&& f) {
  switch (t) {
    case dtype::b8:
    case dtype::u8: return f(type_tag<std::uint8_t>{});
    case dtype::i8: return f(type_tag<std::int8_t>{});
    case dtype::i16: return f(type_tag<std::int16_t>{});
    case dtype::u16: return f(type_tag<std::uint16_t>{});
    case dtype::i32: return f(type_tag<std::int32_t>{});
    case dtype::u32: return f(type_tag<std::uint32_t>{});
    case dtype::i64: return f(type_tag<std::int64_t>{});
    case dtype::u64: return f(type_tag<std::uint64_t>{});
    case dtype::f32: return f(type_tag<float>{});
    case dtype::f64: return f(type_tag<double>{});
    case dtype::f16: return f(type_tag<core::f16_t>{});
    case dtype::bf16: return f(type_tag<core::bf16_t>{});
  }
  return none;
}
}  // namespace

seg_launch_fn find_launcher(dtype t, core::kind k) {
  return on_dtype(t, seg_launch_fn{}, [k](auto e) { return launcher<typename decltype(e)::type>(k); });
}

bool lean_available(dtype t, core::kind k, lean_kernel which, const core::device_context& dev) {
  return on_dtype(t, false,
                  [k, which, &dev](auto e) { return lean_available<typename decltype(e)::type>(k, which, dev.ordinal); });
}

namespace {
thread_local plan g_last;
thread_local const plan* g_forced = nullptr;
thread_local const char* g_kernel = "";
}
void record_plan(const plan& pl) { g_last = pl; }
plan last_plan() { return g_last; }
void record_kernel(const char* what) { g_kernel = what; }
const char* last_kernel() { return g_kernel; }
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
