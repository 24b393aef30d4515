// Timing: device events around the work, warm-up first, medians of many repetitions, and the
// candidates of one comparison interleaved (A B A B) so clock and thermal drift hit all alike.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace tally::bench {

// Throws tally::error naming the call.
void check(cudaError_t e, const char* what);

// Enqueues one call on the stream; `slot` picks the input copy when buffers rotate (cold runs).
using call_fn = std::function<void(cudaStream_t stream, std::uint64_t slot)>;

struct timing_plan {
  int per_call_reps = 101;  // events around one call, each synchronised
  int batch_reps = 7;       // stream and graph batches
  int max_batch = 1000;     // calls per stream batch / per graph
  double batch_budget_us = 20000;  // fewer calls per batch where one call is long
  int min_batch = 10;              // at least this many calls per batch (cold runs raise it)
  bool graph = true;               // false: skip graph replay (graph_us = NaN), for a candidate
                                   // that cannot be captured
  // Run before each per-call measurement, outside the events (an L2 flush for cold runs).
  std::function<void(cudaStream_t)> before_each_call;
};

struct timings {
  double per_call_us = 0;  // median, events around one call, then synchronise
  double stream_us = 0;    // median over batches of (batch time / calls), host launch cost included
  double graph_us = 0;     // median over replays of a graph of many calls, per call (NaN when
                           // the plan skipped graphs)
  int batch = 0;           // calls per stream batch and per graph
};

// Times every candidate with the three methods; candidates alternate inside each repetition.
// `slots` > 1 rotates the calls over that many input copies (a cold L2); 1 reuses one input.
std::vector<timings> time_interleaved(const std::vector<call_fn>& candidates, cudaStream_t stream,
                                      std::uint64_t slots, const timing_plan& plan);

double median(std::vector<double> v);

// RAII CUDA event pair and stream.
struct event_pair {
  cudaEvent_t start = nullptr, stop = nullptr;
  event_pair();
  ~event_pair();
  event_pair(const event_pair&) = delete;
  event_pair& operator=(const event_pair&) = delete;
  double elapsed_us() const;  // synchronises on stop
};

}  // namespace tally::bench
