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

// Makes device `ordinal` current for a scope and restores the caller's device afterwards
// (`what` names the device in the error when it cannot be made current).
class device_scope {
 public:
  device_scope(int ordinal, const char* what) : want_(ordinal) {
    check_cuda(cudaGetDevice(&was_), "cudaGetDevice");
    if (was_ != want_) check_cuda(cudaSetDevice(want_), what);
  }
  ~device_scope() {
    if (was_ != want_ && cudaSetDevice(was_) != cudaSuccess) (void)cudaGetLastError();
  }
  device_scope(const device_scope&) = delete;
  device_scope& operator=(const device_scope&) = delete;

 private:
  int want_, was_ = 0;
};

// This thread's stream-capture mode set to relaxed for the scope, then put back. The workspace's
// allocations run inside one, and so do the blocking calls that wait on the host (the sharded
// reductions' exchange): a capture this thread began (or, in the global mode, any thread's)
// otherwise forbids the allocation or the wait itself (cudaErrorStreamCaptureUnsupported), and a
// blocking call could not even report that the caller's stream is capturing. Nothing is queued
// on a capturing stream inside such a scope. (Work on the legacy default stream is refused under
// any capture of this thread whatever the mode: cudaErrorStreamCaptureImplicit.)
class relaxed_capture_scope {
 public:
  relaxed_capture_scope() {
    check_cuda(cudaThreadExchangeStreamCaptureMode(&mode_), "cudaThreadExchangeStreamCaptureMode(relaxed)");
  }
  ~relaxed_capture_scope() {
    if (cudaThreadExchangeStreamCaptureMode(&mode_) != cudaSuccess) (void)cudaGetLastError();
  }
  relaxed_capture_scope(const relaxed_capture_scope&) = delete;
  relaxed_capture_scope& operator=(const relaxed_capture_scope&) = delete;

 private:
  cudaStreamCaptureMode mode_ = cudaStreamCaptureModeRelaxed;
};

// True while `stream` is being captured into a graph (checked cudaStreamIsCapturing).
inline bool capturing(cudaStream_t stream) {
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  check_cuda(cudaStreamIsCapturing(stream, &capture), "cudaStreamIsCapturing");
  return capture != cudaStreamCaptureStatusNone;
}

struct workspace {
  void* d_partials = nullptr;          // max_blocks slots of up to kMaxAccBytes
  unsigned max_blocks = 0;             // the grid may not exceed this
  bool owns_memory = true;             // false: a slice of a capture slab
  unsigned int* d_counter = nullptr;   // zero between calls
  long long* d_exact = nullptr;        // the exact mode's global accumulator, zero between calls
  unsigned int* d_chunk_next = nullptr; // the dynamic schedules' next chunk, zero between calls
  unsigned long long* d_seg_status = nullptr;  // segmented: the ragged offsets' check words (64 bytes:
                                               // the check's, the one-launch kernel's)
  unsigned int* d_seg_counters = nullptr;      // segmented: kSegCounters counters, zero between calls
  void* d_seg_scratch = nullptr;               // segmented: partials, kSegScratchBytes, made on first use
  void* h_result = nullptr;            // 64 bytes of pinned host memory: the blocking calls' result,
                                       // stored there by the kernels
  std::mutex result_mutex;             // the blocking calls: launch, wait and read as one step
  ~workspace();
};
inline constexpr int kMaxBlocks = 4096;
// The core's blocks have at least this many threads (launch.cuh checks), which bounds the
// resident grid, and so the partials a workspace made for a captured call needs.
inline constexpr int kMinBlockThreads = 256;
inline constexpr int kMaxAccBytes = 64;
// The workspace's tail, the bytes after its partial slots (one allocation; every word zero
// between calls): where each field of `workspace` sits in it.
inline constexpr std::size_t kTailCounterOffset = 0;       // d_counter
inline constexpr std::size_t kTailChunkNextOffset = 68;    // d_chunk_next (64-67: unused since 2026-11-27)
// 128-255: unused since 2026-11-28 (the blocking calls' result slot, now in pinned host memory)
inline constexpr std::size_t kTailExactOffset = 256;       // d_exact, exact::kWords * 8 = 1088 bytes
inline constexpr std::size_t kSegStatusOffset = kTailExactOffset + 1088;  // d_seg_status
inline constexpr std::size_t kSegCountersOffset = kSegStatusOffset + 64;  // d_seg_counters
inline constexpr unsigned kSegCounters = 2048;
inline constexpr std::size_t kTailBytes = kSegCountersOffset + kSegCounters * 4;
inline constexpr std::size_t kSegScratchBytes = std::size_t(4) << 20;
// Points the tail's fields of `w` into `tail` (kTailBytes of device memory).
void carve_tail(workspace& w, char* tail);

struct device_context {
  int ordinal = 0;
  int sm_count = 0;
  int max_threads_per_sm = 0;
  bool pageable_access = false;  // kernels may read pageable host memory (HMM / ATS systems)
  device_info info;
};

// The current device's context; throws tally::error when no CUDA GPU is usable.
const device_context& current_context();
// The workspace of (current device, stream); created on the stream's first use. While the stream
// is being captured into a graph, every call gets a workspace of its own that the graph keeps
// (held for the life of the process), so graphs replayed concurrently never share a counter.
workspace& stream_workspace(const device_context& dev, cudaStream_t stream);
// The segmented layer's partials buffer of a workspace, allocated on its first use (also while
// the stream is being captured, as the capture workspaces are): kSegScratchBytes for a stream's
// workspace, which every later call reuses; only the `bytes` the call needs for a captured
// call's own workspace, which its graph keeps for the life of the process. bytes = 0: null.
void* segmented_scratch(workspace& ws, std::size_t bytes);
// Frees the workspace of (current device, stream), if any (tally::release_stream).
void release_workspace(cudaStream_t stream);
// Workspaces created so far on this process (tests).
std::size_t workspaces_created();

struct family_choice;
struct launch_ctx {
  const device_context* dev;
  cudaStream_t stream;
  workspace* ws;
  bool dry_run = false;  // choose and record the grid, launch nothing (tests, --debug)
  const void* d_in2 = nullptr;  // binary ops (dot): the second input
  family_choice* describe = nullptr;  // dry runs: filled with the shape choice and its reasons
  // Exact kinds only: add the exact sum into this accumulator (exact::kWords words + a flags
  // word, device memory) instead of writing a rounded result (src/chunked; device_exact.cuh).
  long long* d_carry = nullptr;
};
using launch_fn = void (*)(const void* d_in, std::uint64_t n, void* d_out, const launch_ctx& c);

// What a launcher computes: the public ops, then NaN-ignoring, compensated, exact, dot and stats
// forms (api.cpp maps (op, options) to these).
enum class kind : int {
  sum, prod, min, max, bit_and, bit_or, bit_xor, all, any, argmin, argmax, sum_sq, norm2, mean,
  min_ignore, max_ignore, argmin_ignore, argmax_ignore, sum_comp, sum_exact, mean_comp,
  mean_exact, dot, dot_comp, dot_exact, stats, stats_ignore
};

// What the last launch on this thread looked like. With TALLY_DEBUG_LAUNCH=1 in the
// environment every launch is also logged to stderr.
struct launch_record {
  unsigned elem_bytes = 0;
  std::uint64_t n = 0;
  unsigned blocks = 0, block = 0, resident = 0;
  unsigned unroll = 0;  // 16-byte loads in flight per thread
  bool deep = false;    // the family's deep shape (policy.hpp)
  bool dynamic = false; // a dynamic schedule (chunks from a counter; tuning.hpp)
  bool pipelined = false;  // the shape's pipelined twin (the next round's loads before the fold)
};
void record_launch(const launch_record& r);
launch_record last_launch();
// The grid a call with these arguments would launch on the current device (nothing runs).
launch_record plan(dtype t, op o, std::uint64_t n, const options& opt = {});
// Where the plan of (t, o) changes on the current device: the largest n run by one block, the
// n from which the grid reaches one block per SM, and the n from which the full resident grid
// is allowed (tests put their sizes there).
struct grid_edges {
  std::uint64_t single_block_max = 0, one_per_sm = 0, full_grid = 0;
};
grid_edges plan_edges(dtype t, op o, const options& opt = {});

// The launchers of every kind defined on element type T (nullptr where undefined), defined in
// launch.cuh: the plain ops (instantiate_<type>.cu) and the numerics kinds (argmin/argmax,
// sum_sq, norm2, mean, compensated, exact, dot, stats: instantiate_<type>_numerics.cu).
template <class T>
launch_fn launcher_basic(kind k);
template <class T>
launch_fn launcher_numerics(kind k);
// The launcher of (dtype, kind); nullptr when the pair is not supported.
launch_fn find_launcher(dtype t, kind k);

}  // namespace tally::core
