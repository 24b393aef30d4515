// What the standalone probes (tally_layout_probe, tally_rows_probe) share: the checked CUDA call,
// the block sum of their plain kernels, and the timing of a set of variants in graph replay
// (each variant a batch of calls captured in a graph, every variant in turn in each repetition,
// the median per call). No libtally: the probes compare kernels on equal terms.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

#include "bench/pdl_config.hpp"

#define CK(x)                                                                         \
  do {                                                                                \
    const cudaError_t e_ = (x);                                                       \
    if (e_ != cudaSuccess) {                                                          \
      std::fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); \
      std::exit(1);                                                                   \
    }                                                                                 \
  } while (0)

namespace probe {

// The B values of a block summed into thread 0 (warp shuffles, then warp 0 over the warps). Safe
// to call again at once: the first barrier waits for the previous call's readers.
template <int B>
__device__ float block_sum(float v) {
  __shared__ float sh[32];
  for (int o = 16; o; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  __syncthreads();
  if ((threadIdx.x & 31) == 0) sh[threadIdx.x >> 5] = v;
  __syncthreads();
  if (threadIdx.x < 32) {
    v = threadIdx.x < B / 32 ? sh[threadIdx.x] : 0.f;
    for (int o = 16; o; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  }
  return v;
}

__device__ __forceinline__ float hsum(float4 v) { return (v.x + v.y) + (v.z + v.w); }

// n floats k / 1024, k < 1024 from a hash of the index.
__global__ void fill(float* d, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    unsigned h = unsigned(i) * 2654435761u;
    h ^= h >> 15;
    d[i] = float(h & 1023) * (1.f / 1024.f);
  }
}

// The (log2 rows, log2 cols) pairs on the command line, or `defaults`; empty (the usage printed)
// where their count is odd.
inline std::vector<int> shape_pairs(int argc, char** argv, std::vector<int> defaults, const char* usage) {
  std::vector<int> shape;
  for (int a = 1; a < argc; ++a) shape.push_back(std::atoi(argv[a]));
  if (shape.empty()) shape = std::move(defaults);
  if (shape.size() % 2 != 0) {
    std::fprintf(stderr, "usage: %s\n", usage);
    shape.clear();
  }
  return shape;
}

// The GPU's SM count (its name, SMs and L2 printed as the report's first line).
inline int describe_gpu() {
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, 0));
  std::printf("# %s, %d SMs, L2 %d MiB\n", prop.name, prop.multiProcessorCount, prop.l2CacheSize >> 20);
  return prop.multiProcessorCount;
}

// n floats of fill() in a new device allocation.
inline float* filled_input(size_t n, int sms) {
  float* d = nullptr;
  CK(cudaMalloc(&d, n * 4));
  fill<<<sms * 8, 256>>>(d, n);
  CK(cudaGetLastError());
  return d;
}

// A launch of kf<<<grid, block, 0, s>>>(args...) with programmatic dependent launch allowed (as
// tally's launcher makes every launch) or not: the probes launch tally's own kernels on its terms.
template <class... Params, class... Args>
void launch_pdl(void (*kf)(Params...), unsigned grid, int block, cudaStream_t s, bool pdl, Args... args) {
  const tally::bench::pdl_config p(grid, block, s, pdl);
  CK(cudaLaunchKernelEx(&p.cfg, kf, args...));
}

struct variant {
  std::string name;
  std::function<void(cudaStream_t)> call;
  bool per_row = true;  // tally_rows_probe: its output is one sum a row (else one 1-D sum)
};

// The median time per call of each variant (us): `batch` calls in a graph, `reps` replays of each,
// the variants alternating in every repetition.
inline std::vector<float> graph_medians(const std::vector<variant>& vs, cudaStream_t st, int batch, int reps) {
  std::vector<cudaGraphExec_t> ex(vs.size());
  for (size_t k = 0; k < vs.size(); ++k) {
    cudaGraph_t g;
    CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
    for (int r = 0; r < batch; ++r) vs[k].call(st);
    CK(cudaStreamEndCapture(st, &g));
    CK(cudaGraphInstantiate(&ex[k], g, 0));
    CK(cudaGraphDestroy(g));
    CK(cudaGraphLaunch(ex[k], st));  // warm-up
  }
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  std::vector<std::vector<float>> t(vs.size());
  for (int rep = 0; rep < reps; ++rep)
    for (size_t k = 0; k < vs.size(); ++k) {
      CK(cudaEventRecord(e0, st));
      CK(cudaGraphLaunch(ex[k], st));
      CK(cudaEventRecord(e1, st));
      CK(cudaEventSynchronize(e1));
      float ms = 0;
      CK(cudaEventElapsedTime(&ms, e0, e1));
      t[k].push_back(ms * 1000.f / batch);
    }
  std::vector<float> med;
  for (auto& v : t) {
    std::sort(v.begin(), v.end());
    med.push_back(v[v.size() / 2]);
  }
  for (auto& e : ex) CK(cudaGraphExecDestroy(e));
  CK(cudaEventDestroy(e0));
  CK(cudaEventDestroy(e1));
  return med;
}

// Frees the probe's device buffers (cudaFree, checked).
inline void free_all(std::initializer_list<void*> ps) {
  for (void* q : ps) CK(cudaFree(q));
}

// Times the variants (probe::graph_medians: batches of 20 calls, 5 from 1 GiB, 11 repetitions)
// and prints one line each: time, GB/s over `bytes`, CUB's time (vs[0]) over this one and the
// variant's error against the reference (`err`, one per variant).
inline void report(const char* title, const std::vector<variant>& vs, const std::vector<double>& err, size_t bytes,
                   cudaStream_t st, int name_width) {
  const int batch = bytes >= (size_t(1) << 30) ? 5 : 20, reps = 11;
  const std::vector<float> med = graph_medians(vs, st, batch, reps);
  std::printf("\n%s (%zu MiB), graph replay, us per call (median of %d)\n", title, bytes >> 20, reps);
  for (size_t j = 0; j < vs.size(); ++j)
    std::printf("  %-*s %9.2f us %8.1f GB/s  CUB seg/this %.3f  max rel err %.1e\n", name_width, vs[j].name.c_str(), med[j],
                double(bytes) / med[j] / 1e3, med[0] / med[j], err[j]);
}

}  // namespace probe
