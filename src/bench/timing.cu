#include "bench/timing.hpp"

#include <algorithm>
#include <cmath>

#include "tally/tally.hpp"

namespace tally::bench {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    throw tally::error(std::string("tally bench: ") + what + " failed: " + cudaGetErrorName(e) +
                       ": " + cudaGetErrorString(e));
  }
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

event_pair::event_pair() {
  check(cudaEventCreate(&start), "cudaEventCreate");
  check(cudaEventCreate(&stop), "cudaEventCreate");
}
event_pair::~event_pair() {
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
}
double event_pair::elapsed_us() const {
  check(cudaEventSynchronize(stop), "cudaEventSynchronize");
  float ms = 0;
  check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
  return ms * 1e3;
}

std::vector<timings> time_interleaved(const std::vector<call_fn>& candidates, cudaStream_t stream,
                                      std::uint64_t slots, const timing_plan& plan) {
  const std::size_t k = candidates.size();
  std::vector<timings> out(k);
  event_pair ev;
  std::uint64_t slot = 0;
  auto next_slot = [&] { return slots > 1 ? (slot++ % slots) : 0; };

  // Warm-up: module load, workspace creation, clocks up.
  for (int w = 0; w < 5; ++w)
    for (const auto& c : candidates) c(stream, next_slot());
  check(cudaStreamSynchronize(stream), "cudaStreamSynchronize(warm-up)");

  // Per call.
  std::vector<std::vector<double>> per(k);
  for (int r = 0; r < plan.per_call_reps; ++r)
    for (std::size_t c = 0; c < k; ++c) {
      const std::uint64_t s = next_slot();
      if (plan.before_each_call) plan.before_each_call(stream);
      check(cudaEventRecord(ev.start, stream), "cudaEventRecord");
      candidates[c](stream, s);
      check(cudaEventRecord(ev.stop, stream), "cudaEventRecord");
      per[c].push_back(ev.elapsed_us());
    }
  double longest = 0;
  for (std::size_t c = 0; c < k; ++c) {
    out[c].per_call_us = median(per[c]);
    longest = std::max(longest, out[c].per_call_us);
  }
  const int batch = static_cast<int>(
      std::clamp(plan.batch_budget_us / std::max(longest, 1.0), double(plan.min_batch),
                 double(std::max(plan.max_batch, plan.min_batch))));

  // Stream: `batch` calls back to back, one synchronisation.
  std::vector<std::vector<double>> str(k);
  for (int r = 0; r < plan.batch_reps; ++r)
    for (std::size_t c = 0; c < k; ++c) {
      check(cudaEventRecord(ev.start, stream), "cudaEventRecord");
      for (int i = 0; i < batch; ++i) candidates[c](stream, next_slot());
      check(cudaEventRecord(ev.stop, stream), "cudaEventRecord");
      str[c].push_back(ev.elapsed_us() / batch);
    }

  for (std::size_t c = 0; c < k; ++c) {
    out[c].stream_us = median(str[c]);
    out[c].graph_us = std::nan("");
    out[c].batch = batch;
  }
  if (!plan.graph) return out;

  // Graph: the same batch captured once per candidate, replayed.
  std::vector<cudaGraphExec_t> exec(k, nullptr);
  auto destroy_execs = [&] {
    for (auto& e : exec) {
      if (e) cudaGraphExecDestroy(e);
      e = nullptr;
    }
  };
  try {
    for (std::size_t c = 0; c < k; ++c) {
      cudaGraph_t g = nullptr;
      check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), "cudaStreamBeginCapture");
      try {
        for (int i = 0; i < batch; ++i) candidates[c](stream, next_slot());
      } catch (...) {
        cudaStreamEndCapture(stream, &g);
        if (g) cudaGraphDestroy(g);
        (void)cudaGetLastError();
        throw;
      }
      check(cudaStreamEndCapture(stream, &g), "cudaStreamEndCapture");
      const cudaError_t inst = cudaGraphInstantiate(&exec[c], g, 0);
      cudaGraphDestroy(g);
      check(inst, "cudaGraphInstantiate");
      check(cudaGraphLaunch(exec[c], stream), "cudaGraphLaunch(warm-up)");
    }
  } catch (...) {
    destroy_execs();  // a candidate that cannot be captured leaves no graph behind
    throw;
  }
  check(cudaStreamSynchronize(stream), "cudaStreamSynchronize(graph warm-up)");
  std::vector<std::vector<double>> gr(k);
  for (int r = 0; r < plan.batch_reps; ++r)
    for (std::size_t c = 0; c < k; ++c) {
      check(cudaEventRecord(ev.start, stream), "cudaEventRecord");
      check(cudaGraphLaunch(exec[c], stream), "cudaGraphLaunch");
      check(cudaEventRecord(ev.stop, stream), "cudaEventRecord");
      gr[c].push_back(ev.elapsed_us() / batch);
    }
  for (std::size_t c = 0; c < k; ++c) out[c].graph_us = median(gr[c]);
  destroy_execs();
  return out;
}

}  // namespace tally::bench
