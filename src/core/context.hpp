// Per-device state read once (properties, SM count) and the per-stream workspace: block
// partials, the last-block counter and a result slot, allocated on a stream's first call and
// reused by every later call on that stream, so a call never allocates.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <mutex>

#include "tally/tally.hpp"

namespace tally::core {

// Throws tally::error "<what>: <cuda error name>: <description>" and clears a non-sticky error.
[[noreturn]] void throw_cuda(cudaError_t e, const char* what);
inline void check_cuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw_cuda(e, what);
}

struct workspace {
  void* d_partials = nullptr;          // max_blocks slots of up to kMaxAccBytes
  unsigned max_blocks = 0;             // the grid may not exceed this
  bool owns_memory = true;             // false: a slice of a capture slab
  unsigned int* d_counter = nullptr;   // zero between calls
  void* d_result = nullptr;            // 16 bytes for reduce_value
  void* h_result = nullptr;            // pinned mirror of d_result
  std::mutex result_mutex;             // reduce_value: launch, copy back and read as one step
  ~workspace();
};
inline constexpr int kMaxBlocks = 4096;
// The core's blocks have at least this many threads (launch.cuh checks), which bounds the
// resident grid, and so the partials a workspace made for a captured call needs.
inline constexpr int kMinBlockThreads = 256;
inline constexpr int kMaxAccBytes = 32;

struct device_context {
  int ordinal = 0;
  int sm_count = 0;
  int max_threads_per_sm = 0;
  device_info info;
};

// The current device's context; throws tally::error when no CUDA GPU is usable.
const device_context& current_context();
// The workspace of (current device, stream); created on the stream's first use. While the stream
// is being captured into a graph, every call gets a workspace of its own that the graph keeps
// (held for the life of the process), so graphs replayed concurrently never share a counter.
workspace& stream_workspace(const device_context& dev, cudaStream_t stream);
// Frees the workspace of (current device, stream), if any (tally::release_stream).
void release_workspace(cudaStream_t stream);
// Workspaces created so far on this process (tests).
std::size_t workspaces_created();

struct launch_ctx {
  const device_context* dev;
  cudaStream_t stream;
  workspace* ws;
  bool dry_run = false;  // choose and record the grid, launch nothing (tests, --debug)
};
using launch_fn = void (*)(const void* d_in, std::uint64_t n, void* d_out, const launch_ctx& c);

// What the last launch on this thread looked like. With TALLY_DEBUG_LAUNCH=1 in the
// environment every launch is also logged to stderr.
struct launch_record {
  unsigned elem_bytes = 0;
  std::uint64_t n = 0;
  unsigned blocks = 0, block = 0, resident = 0;
};
void record_launch(const launch_record& r);
launch_record last_launch();
// The grid a call with these arguments would launch on the current device (nothing runs).
launch_record plan(dtype t, op o, std::uint64_t n);

// The launchers of every op defined on element type T (nullptr where undefined); defined in
// launch.cuh and instantiated once per element type in instantiate_<type>.cu.
template <class T>
launch_fn launcher_for(op o);
// The launcher of (dtype, op); nullptr when the pair is not supported.
launch_fn find_launcher(dtype t, op o);

}  // namespace tally::core
