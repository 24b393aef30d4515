// Host data to the GPU in chunks: the staging pipeline of a chunked reduction.
//
// Each device keeps (from its first host feed on, for the life of the process) a ring of pinned
// host slots, a few device chunk buffers, a copy stream and events. A feed of n elements is cut
// into chunks of chunk_bytes; worker threads take the chunks in order and fill a free slot each
// (copying from pageable memory with streaming stores, or calling a producer), the calling thread
// sends each filled slot to a device buffer on the copy stream and reduces it there on the
// accumulation's stream (partials in chunk order). So the host's copies, the PCIe transfers and
// the kernels all overlap, and the chunks' partials are the same whatever the threads' timing.
//
//   source s{source::from::host, h_data};
//   feed(acc, &s, 1, n);   // returns once h_data has been read; the last kernels may still run
#pragma once

#include <cstddef>
#include <cstdint>

#include "chunked/accumulation.hpp"

namespace tally::chunked {

// One input of a feed.
struct source {
  enum class from { device, host, producer };
  from kind = from::device;
  const void* p = nullptr;  // device (read in place, also in a mixed dot feed) or host memory
  reducer::fill_fn fill = nullptr;  // producer
  void* context = nullptr;
};

// Where an input of n elements of t at p comes from, for fn's message: memory kernels read in
// place (device, managed, pinned), or pageable host memory for the staging (found by the memory
// check, which also refuses freed and stray pointers); without the check every pointer is taken
// for device memory.
source source_for(const char* fn, const char* name, const void* p, std::uint64_t n, dtype t, bool check_memory,
                  const core::device_context& dev);

// How the staging is cut: worker threads, bytes per chunk (per input), pinned slots. Chosen from
// the host (threads: 3/4 of the cores, at most 16; 8 MiB chunks; measured in `tally bench host`); the environment
// variables TALLY_HOST_THREADS and TALLY_CHUNK_MIB override them (benchmarks; a different chunk
// size changes the rounding of fast float sums).
struct staging_shape {
  int threads = 1;
  std::size_t chunk_bytes = 0;
  bool chunk_forced = false;  // TALLY_CHUNK_MIB: every feed is cut at chunk_bytes
  int slots = 0;
};
staging_shape current_shape();

// Elements per chunk of a feed of n elements of elem bytes: chunk_bytes, or for a feed of fewer
// than 32 such chunks a smaller power-of-two part of it (down to 1 MiB), so that the first chunk
// is filled, and the copies start, sooner (the reducer's feeds of tens of MiB). A function of n
// and the shape's chunk_bytes alone: the pieces, and so a fast float sum's rounding, do not depend
// on the host's threads or timing.
std::uint64_t chunk_elements(const staging_shape& s, std::uint64_t n, std::size_t elem);

// Makes dev's staging (pinned slots, device buffers, copy stream, cut as current_shape()) for
// `inputs` inputs now instead of at the first feed that needs it: a head start (head_start.hpp)
// pins it while the host's cores are reducing. May be called from any thread.
void prepare_staging(const core::device_context& dev, int inputs);

// Reduces n elements of each of `inputs` sources (1; 2 for dot) into acc: all-device feeds as one
// piece, others chunk by chunk through the current device's staging. Returns once every host
// element has been read (the last copies and kernels may still be running on acc's stream).
void feed(accumulation& acc, const source* src, int inputs, std::uint64_t n);

// reduce(), dot() and reduce_stats() of inputs in pageable host memory: fed through the staging
// into the device's own accumulation, then the result (as the core writes it) copied to d_out on
// the stream. Refused while the stream is being captured (a graph cannot read host data).
void host_reduce(const char* fn, const spec& s, const source* src, int inputs, std::uint64_t n, void* d_out,
                 cudaStream_t stream, const core::device_context& dev);

}  // namespace tally::chunked
