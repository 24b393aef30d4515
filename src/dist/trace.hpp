// Where a blocking tally::dist call's time goes: host timestamps (steady_clock, which on Linux is
// CLOCK_MONOTONIC, one clock for every process of a host) at the steps of each call, recorded only
// while a benchmark has switched the trace on (`tally bench dist`'s "where a call's time goes").
// Off, a step costs one relaxed atomic load. One thread calls at a time (the benchmark's).
#pragma once

#include <array>
#include <cstddef>
#include <vector>

namespace tally::dist::trace {

enum point : int {
  start,      // the call entered
  launched,   // the shard's kernel and the header's copy are queued
  queued,     // the exchange is queued after them (the all-gather, or the device exchange's kernel)
  own_done,   // this rank's kernel has ended (its event; the device exchange: the word its kernel stores first)
  exchanged,  // the exchange has ended (the stream polled; the device exchange: every record at the host)
  combined,   // the records checked and folded: the call returns
  kPoints
};

using row = std::array<long long, kPoints>;  // nanoseconds on steady_clock; 0: not reached

// Records the next `calls` blocking calls (0: stops and forgets).
void record(std::size_t calls);
// The step of the call in progress (the first, `start`, opens a call's row).
void mark(point p);
// The calls recorded since record(), oldest first.
std::vector<row> rows();

}  // namespace tally::dist::trace
