// The segmented layer's host-side interface to api.cpp: the launcher table, the device-side check
// of ragged offsets, and the record of the last plan (tests, `tally bench segmented`).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "core/context.hpp"
#include "problem.hpp"
#include "tally/tally.hpp"

namespace tally::seg {

struct seg_ctx {
  const core::device_context* dev;
  cudaStream_t stream;
  core::workspace* ws;
  const unsigned long long* d_status;  // ragged: the offset check word, else null
  device_limits limits;
};
// Plans (make_plan with the op's accumulator size), records the plan and launches it.
using seg_launch_fn = void (*)(const void* d_in, const problem& p, bool exact, void* d_out, const seg_ctx& c);
// The launcher of kind k on element type T (launch.cuh; instantiated in instantiate_<type>.cu).
template <class T>
seg_launch_fn launcher(core::kind k);
// The launcher of (dtype, kind) (nullptr where undefined).
seg_launch_fn find_launcher(dtype t, core::kind k);
// The lean kernels of plain ops: a 256-thread block a row (split) and column tiles at four blocks
// an SM (columns).
enum class lean_kernel { split, columns };
// Whether (T, kind k) takes lean kernel `which` on device `ordinal` (launch.cuh, lean_available;
// instantiated with launcher<T>), and the same for (dtype, kind) on `dev`, which must be current:
// tests and the benchmark's sweep ask before they force a lean plan.
template <class T>
bool lean_available(core::kind k, lean_kernel which, int ordinal);
bool lean_available(dtype t, core::kind k, lean_kernel which, const core::device_context& dev);

inline constexpr unsigned long long kStatusOkHost = ~0ull;
// Where the offset check also writes the ragged tile kernel's partition: tile k of `tile`
// elements gets the first segment beginning at or after k * tile, or -1 where the tile holds
// nothing of a segment that the tile kernel reduces (it lies inside a segment longer than
// `chunk`, or in a gap, and no segment begins in it). Offsets in order write each tile once; out
// of order, each block of the check stops writing past `tiles` entries (at most 1024 x `tiles`
// writes in all), and the tile kernel, seeing them out of order, runs the lane groups instead.
struct tile_partition {
  std::int64_t* d_first = nullptr;
  std::uint64_t tile = 0, tiles = 0, chunk = 0;
};
// Sets *d_status to kStatusOkHost, then to the smallest s with bad offsets (stream-ordered);
// with a partition, also writes it (whole where d_status[1] says the segments are in order).
void validate_offsets(const problem& p, unsigned long long* d_status, cudaStream_t stream,
                      const tile_partition& part = {});

// The plan of the last segmented call on this thread.
void record_plan(const plan& pl);
plan last_plan();
// The main kernel the last ragged call of lane groups or tiles launched on this thread (its
// launch description, e.g. "launching the segmented group kernel (eager)"; tests: which one ran).
void record_kernel(const char* what);
const char* last_kernel();
// `tally bench segmented --sweep`: while set (on this thread), segmented calls run with *pl
// instead of the rule's plan; it must be one of column_candidates() (strided axes) or
// row_candidates() (rows) of the call's problem for the call's element and accumulator sizes.
// nullptr restores the rule.
void force_plan(const plan* pl);
const plan* forced_plan();
// What the plan rule reads about the current device (the same for every stream and capture).
device_limits limits_for(const core::device_context& dev);

}  // namespace tally::seg
