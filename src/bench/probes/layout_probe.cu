// tally_layout_probe: how a large f32 sum should share its input among blocks. Standalone (no
// libtally), so that the layouts are compared on the same plain kernel body:
//   strided  a resident grid, grid-stride by whole blocks (tally's kernel below 8 x L2)
//   chunk    one block per contiguous chunk of one round, a partial per block
//   dyn      a resident grid taking chunks from a counter, a partial per chunk (tally's dynamic
//            schedule, src/core/device.cuh); `pipelined`: the next chunk's loads are issued before
//            this chunk's block reduce; `serial combine`: the last block's loads of the partials
//            one at a time
//   even     CUB's layout: a grid of `waves` x the resident grid, each block one contiguous range
//            of whole tiles (B x U vectors, thread t reading vectors t, t + B, ...) walked in order
// and CUB DeviceReduce::Sum, all in one process, graph replay of a batch, every variant in turn in
// each repetition. Usage: tally_layout_probe [log2 n ...] (default 26 28 30).
// docs/tuning.md, "The dynamic schedule of the one-pass ops", has the figures.
#include <cub/device/device_reduce.cuh>

#include "probe_common.cuh"

namespace {

using probe::block_sum;
using probe::fill;
using probe::hsum;
using probe::variant;

// The last block to arrive adds the nslots partials in order and resets the counters. Thread t
// adds slots t, t + B, ... in that order, its loads K at a time (K = 1: one L2 round trip a slot,
// as tally's dynamic schedule did until 2026-11-28; the same sum either way).
template <int B, int K = 16>
__device__ void finish(unsigned nslots, float* partials, unsigned* counter, float* out) {
  __shared__ bool last;
  if (threadIdx.x == 0) {
    __threadfence();
    last = atomicAdd(counter, 1u) == gridDim.x - 1;
  }
  __syncthreads();
  if (!last) return;
  __threadfence();
  float p = 0.f;
  unsigned b = threadIdx.x;
  for (; b + (K - 1) * B < nslots; b += K * B) {
    float v[K];
#pragma unroll
    for (int k = 0; k < K; ++k) v[k] = __ldcg(partials + b + k * B);
#pragma unroll
    for (int k = 0; k < K; ++k) p += v[k];
  }
  for (; b < nslots; b += B) p += __ldcg(partials + b);
  p = block_sum<B>(p);
  if (threadIdx.x == 0) {
    *out = p;
    counter[0] = 0;
    counter[1] = 0;
  }
}

// U vectors at p, p + step, ... (all loads issued first) into U accumulators.
template <int U>
__device__ __forceinline__ void add_round(float (&acc)[U], const float4* __restrict__ p, size_t step) {
  float4 v[U];
#pragma unroll
  for (int u = 0; u < U; ++u) v[u] = __ldg(p + u * step);
#pragma unroll
  for (int u = 0; u < U; ++u) acc[u] += hsum(v[u]);
}

// The block's accumulators summed, its partial written, and the last block's combine.
template <int B, int U>
__device__ __forceinline__ void end_block(const float (&acc)[U], float* partials, unsigned* counter, float* out) {
  float s = 0.f;
#pragma unroll
  for (int u = 0; u < U; ++u) s += acc[u];
  s = block_sum<B>(s);
  if (threadIdx.x == 0) partials[blockIdx.x] = s;
  finish<B>(gridDim.x, partials, counter, out);
}

template <int B, int U, int MB>
__global__ void __launch_bounds__(B, MB)
    strided_kernel(const float4* __restrict__ in, size_t nvec, unsigned, float* partials, unsigned* counter, float* out) {
  float acc[U] = {};
  const size_t stride = size_t(gridDim.x) * B;
  size_t i = size_t(blockIdx.x) * B + threadIdx.x;
  for (; i + (U - 1) * stride < nvec; i += U * stride) add_round<U>(acc, in + i, stride);
  for (; i < nvec; i += stride) acc[0] += hsum(__ldg(in + i));
  end_block<B, U>(acc, partials, counter, out);
}

// CUB's layout: block b walks tiles [b T / grid, (b + 1) T / grid) of the T tiles of B x U vectors.
template <int B, int U, int MB>
__global__ void __launch_bounds__(B, MB)
    even_kernel(const float4* __restrict__ in, size_t nvec, unsigned, float* partials, unsigned* counter, float* out) {
  constexpr size_t tile = size_t(B) * U;
  const size_t tiles = (nvec + tile - 1) / tile;
  const size_t t0 = blockIdx.x * tiles / gridDim.x, t1 = (blockIdx.x + 1) * tiles / gridDim.x;
  float acc[U] = {};
  size_t t = t0;
  for (; t < t1 && (t + 1) * tile <= nvec; ++t) add_round<U>(acc, in + t * tile + threadIdx.x, B);
  for (; t < t1; ++t)
    for (size_t i = t * tile + threadIdx.x; i < nvec && i < (t + 1) * tile; i += B) acc[0] += hsum(__ldg(in + i));
  end_block<B, U>(acc, partials, counter, out);
}

template <int B, int V>
__device__ __forceinline__ void load_chunk(float4 (&v)[V], const float4* __restrict__ in, size_t nvec, unsigned c) {
  const size_t base = size_t(c) * B * V + threadIdx.x;
#pragma unroll
  for (int u = 0; u < V; ++u) v[u] = base + u * B < nvec ? __ldg(in + base + u * B) : make_float4(0.f, 0.f, 0.f, 0.f);
}

template <int V>
__device__ __forceinline__ float chunk_sum(const float4 (&v)[V]) {
  float acc[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
  for (int u = 0; u < V; ++u) acc[u & 3] += hsum(v[u]);
  return (acc[0] + acc[1]) + (acc[2] + acc[3]);
}

template <int B, int V, int MB>
__global__ void __launch_bounds__(B, MB)
    chunk_kernel(const float4* __restrict__ in, size_t nvec, unsigned, float* partials, unsigned* counter, float* out) {
  float4 v[V];
  load_chunk<B, V>(v, in, nvec, blockIdx.x);
  const float s = block_sum<B>(chunk_sum<V>(v));
  if (threadIdx.x == 0) partials[blockIdx.x] = s;
  finish<B>(gridDim.x, partials, counter, out);
}

template <int B, int V, int MB, bool Pipelined, int K = 16>
__global__ void __launch_bounds__(B, MB)
    dyn_kernel(const float4* __restrict__ in, size_t nvec, unsigned chunks, float* partials, unsigned* counter, float* out) {
  __shared__ unsigned next[2];
  unsigned* ticket = counter + 1;
  if (threadIdx.x == 0) {
    next[0] = atomicAdd(ticket, 1u);
    next[1] = Pipelined ? atomicAdd(ticket, 1u) : 0u;
  }
  __syncthreads();
  unsigned c = next[0];
  float4 v[V];
  if (Pipelined) {
    unsigned cn = next[1];
    if (c < chunks) load_chunk<B, V>(v, in, nvec, c);
    for (int k = 0; c < chunks; k ^= 1) {
      const float t = chunk_sum<V>(v);
      load_chunk<B, V>(v, in, nvec, cn < chunks ? cn : c);  // in flight across the block reduce
      const float s = block_sum<B>(t);
      if (threadIdx.x == 0) {
        partials[c] = s;
        next[k] = atomicAdd(ticket, 1u);
      }
      __syncthreads();
      c = cn;
      cn = next[k];
      __syncthreads();
    }
  } else {
    for (int k = 1; c < chunks; k ^= 1) {
      if (threadIdx.x == 0) next[k] = atomicAdd(ticket, 1u);
      load_chunk<B, V>(v, in, nvec, c);
      const float s = block_sum<B>(chunk_sum<V>(v));
      if (threadIdx.x == 0) partials[c] = s;
      __syncthreads();
      c = next[k];
    }
  }
  finish<B, K>(chunks, partials, counter, out);
}

using kernel_t = void (*)(const float4*, size_t, unsigned, float*, unsigned*, float*);

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> logs;
  for (int a = 1; a < argc; ++a) logs.push_back(std::atoi(argv[a]));
  if (logs.empty()) logs = {26, 28, 30};
  const int max_log = *std::max_element(logs.begin(), logs.end());
  if (max_log < 20 || max_log > 31) {
    std::fprintf(stderr, "sizes are log2 n, 20..31\n");
    return 2;
  }
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, 0));
  const int sms = prop.multiProcessorCount;
  std::printf("# %s, %d SMs, L2 %d MiB\n", prop.name, sms, prop.l2CacheSize >> 20);
  const size_t nmax = size_t(1) << max_log;
  float *d_in = nullptr, *d_part = nullptr, *d_out = nullptr;
  unsigned* d_ctr = nullptr;
  CK(cudaMalloc(&d_in, nmax * 4));
  fill<<<sms * 8, 256>>>(d_in, nmax);
  CK(cudaGetLastError());
  CK(cudaMalloc(&d_part, (size_t(1) << 22) * 4));
  CK(cudaMalloc(&d_out, 64));
  CK(cudaMalloc(&d_ctr, 64));
  CK(cudaMemset(d_ctr, 0, 64));
  void* d_tmp = nullptr;
  size_t tmp_bytes = 0;
  CK(cub::DeviceReduce::Sum(d_tmp, tmp_bytes, d_in, d_out + 1, static_cast<long long>(nmax)));
  CK(cudaMalloc(&d_tmp, tmp_bytes));
  cudaStream_t st;
  CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  const float4* d_vec = reinterpret_cast<const float4*>(d_in);

  for (int lg : logs) {
    const size_t n = size_t(1) << lg, nvec = n / 4;
    std::vector<variant> vs;
    vs.push_back({"CUB DeviceReduce::Sum", [=](cudaStream_t s) {
                    size_t tb = tmp_bytes;
                    CK(cub::DeviceReduce::Sum(d_tmp, tb, d_in, d_out + 1, static_cast<long long>(n), s));
                  }});
    // grid: blocks per SM (resident grid); chunk_vecs: 0 for the strided kernel, else the grid is
    // one block per chunk (chunk kernel) or resident (dyn kernels, resident = true).
    auto add = [&](const char* name, kernel_t k, int block, size_t chunk_vecs, bool resident, int waves = 1) {
      int per_sm = 0;
      CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, k, block, 0));
      cudaFuncAttributes at{};
      CK(cudaFuncGetAttributes(&at, k));
      const unsigned chunks = chunk_vecs ? unsigned((nvec + chunk_vecs - 1) / chunk_vecs) : 0u;
      const unsigned grid = chunk_vecs && !resident ? chunks : unsigned(sms * std::max(per_sm, 1) * waves);
      char label[128];
      std::snprintf(label, sizeof label, "%s [%d regs, %d/SM]", name, at.numRegs, per_sm);
      vs.push_back({label, [=](cudaStream_t s) { k<<<grid, block, 0, s>>>(d_vec, nvec, chunks, d_part, d_ctr, d_out); }});
    };
    add("strided 512x4, 2/SM", strided_kernel<512, 4, 2>, 512, 0, true);
    add("strided 512x8, 2/SM", strided_kernel<512, 8, 2>, 512, 0, true);
    add("chunk 512x16 (128K)", chunk_kernel<512, 16, 1>, 512, 512 * 16, false);
    add("dyn 512x16 (128K)", dyn_kernel<512, 16, 1, false>, 512, 512 * 16, true);
    add("dyn 512x16, serial combine", dyn_kernel<512, 16, 1, false, 1>, 512, 512 * 16, true);
    add("dyn 512x8 (64K)", dyn_kernel<512, 8, 2, false>, 512, 512 * 8, true);
    add("dyn 256x8 (32K)", dyn_kernel<256, 8, 4, false>, 256, 256 * 8, true);
    add("dyn 256x16 (64K)", dyn_kernel<256, 16, 2, false>, 256, 256 * 16, true);
    add("dyn 512x16 pipelined", dyn_kernel<512, 16, 1, true>, 512, 512 * 16, true);
    add("even 512x8, 1 wave", even_kernel<512, 8, 2>, 512, 0, true, 1);
    add("even 512x8, 5 waves", even_kernel<512, 8, 2>, 512, 0, true, 5);
    add("even 256x4, 5 waves (CUB's tile)", even_kernel<256, 4, 4>, 256, 0, true, 5);
    add("even 512x4, 2 waves", even_kernel<512, 4, 2>, 512, 0, true, 2);

    std::vector<float> sums;
    for (auto& v : vs) {
      v.call(st);
      float h[2];
      CK(cudaMemcpyAsync(h, d_out, 8, cudaMemcpyDeviceToHost, st));
      CK(cudaStreamSynchronize(st));
      sums.push_back(&v == &vs[0] ? h[1] : h[0]);
    }
    const int batch = lg >= 28 ? 5 : 20, reps = lg >= 30 ? 7 : 11;
    const std::vector<float> med = probe::graph_medians(vs, st, batch, reps);
    std::printf("\n2^%d f32 (%zu MiB), graph replay, us per call (median of %d)\n", lg, n * 4 >> 20, reps);
    for (size_t k = 0; k < vs.size(); ++k)
      std::printf("  %-44s %10.2f us %8.1f GB/s  CUB/this %.3f  sum %.7g\n", vs[k].name.c_str(), med[k],
                  double(n) * 4 / med[k] / 1e3, med[0] / med[k], sums[k]);
  }
  CK(cudaFree(d_tmp));
  CK(cudaFree(d_ctr));
  CK(cudaFree(d_out));
  CK(cudaFree(d_part));
  CK(cudaFree(d_in));
  CK(cudaStreamDestroy(st));
  return 0;
}
