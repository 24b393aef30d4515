// tally_rows_probe: what a row sum of a rows x cols f32 matrix needs to read as fast as CUB's
// DeviceSegmentedReduce (which leads tally's rows and columns at 4096 x 4096 on the H200:
// docs/tuning.md, "Rows of one block's round at 2^24"). Standalone (no libtally), so that the variants
// differ only in what they are named for:
//   row B x V, MB/SM   a block of B threads a row, V 16-byte loads in flight a thread (thread t
//                      reads vectors t, t + B, ...; `blocked`: t V .. t V + V - 1, CUB's
//                      arrangement), launch bounds of MB blocks an SM, a grid of one block a row
//   ring               a resident grid walking the rows, the next row's loads issued before this
//                      row's block reduce (rows of exactly one round, B x V vectors)
// and CUB DeviceSegmentedReduce::Sum (begin/end offsets) and DeviceReduce::Sum of the whole
// matrix, all in one process, graph replay of a batch, every variant in turn in each repetition.
// Usage: tally_rows_probe [log2 rows log2 cols ...] (default 12 12 14 12 10 14).
#include <cmath>

#include "probe_common.cuh"
#include "probe_cub.cuh"

namespace {

using probe::block_sum;
using probe::hsum;
using probe::variant;

template <int B, int V, bool Blocked>
__device__ __forceinline__ void load_round(float4 (&v)[V], const float4* __restrict__ p, size_t base, size_t nvec) {
#pragma unroll
  for (int u = 0; u < V; ++u) {
    const size_t i = base + (Blocked ? size_t(threadIdx.x) * V + u : size_t(u) * B + threadIdx.x);
    v[u] = i < nvec ? __ldg(p + i) : make_float4(0.f, 0.f, 0.f, 0.f);
  }
}

template <int V>
__device__ __forceinline__ float round_sum(const float4 (&v)[V]) {
  float a = 0.f;
#pragma unroll
  for (int u = 0; u < V; ++u) a += hsum(v[u]);
  return a;
}

template <int B, int V, int MB, bool Blocked>
__global__ void __launch_bounds__(B, MB)
    row_kernel(const float4* __restrict__ in, size_t cvec, unsigned rows, float* __restrict__ out) {
  for (unsigned r = blockIdx.x; r < rows; r += gridDim.x) {
    const float4* p = in + size_t(r) * cvec;
    float acc = 0.f;
    for (size_t base = 0; base < cvec; base += size_t(B) * V) {
      float4 v[V];
      load_round<B, V, Blocked>(v, p, base, cvec);
      acc += round_sum<V>(v);
    }
    acc = block_sum<B>(acc);
    if (threadIdx.x == 0) out[r] = acc;
  }
}

// Rows of one round (cvec == B V): the next row's loads go out before this row's block reduce.
template <int B, int V, int MB>
__global__ void __launch_bounds__(B, MB)
    ring_kernel(const float4* __restrict__ in, size_t cvec, unsigned rows, float* __restrict__ out) {
  unsigned r = blockIdx.x;
  float4 v[V];
  if (r < rows) load_round<B, V, false>(v, in + size_t(r) * cvec, 0, cvec);
  for (; r < rows; r += gridDim.x) {
    const float t = round_sum<V>(v);
    const unsigned rn = r + gridDim.x;
    if (rn < rows) load_round<B, V, false>(v, in + size_t(rn) * cvec, 0, cvec);
    const float s = block_sum<B>(t);
    if (threadIdx.x == 0) out[r] = s;
  }
}

// The 1-D sum as rows: a block a chunk of one round (B V vectors), a partial a block, the last
// block to arrive adds the partials in order (thread t: slots t, t + B, ..., 16 loads at a time).
template <int B, int V, int MB>
__global__ void __launch_bounds__(B, MB)
    chunk_kernel(const float4* __restrict__ in, size_t nvec, unsigned* counter, float* __restrict__ partials,
                 float* __restrict__ out) {
  float4 v[V];
  load_round<B, V, false>(v, in, size_t(blockIdx.x) * B * V, nvec);
  const float s = block_sum<B>(round_sum<V>(v));
  __shared__ bool last;
  if (threadIdx.x == 0) {
    partials[blockIdx.x] = s;
    __threadfence();
    last = atomicAdd(counter, 1u) == gridDim.x - 1;
  }
  __syncthreads();
  if (!last) return;
  __threadfence();
  constexpr int K = 16;
  float p = 0.f;
  unsigned b = threadIdx.x;
  const unsigned nslots = gridDim.x;
  for (; b + (K - 1) * B < nslots; b += K * B) {
    float w[K];
#pragma unroll
    for (int k = 0; k < K; ++k) w[k] = __ldcg(partials + b + k * B);
#pragma unroll
    for (int k = 0; k < K; ++k) p += w[k];
  }
  for (; b < nslots; b += B) p += __ldcg(partials + b);
  p = block_sum<B>(p);
  if (threadIdx.x == 0) {
    *out = p;
    *counter = 0;
  }
}

using kernel_t = void (*)(const float4*, size_t, unsigned, float*);

// Dynamic shared memory that leaves room for at most `cap` blocks of kf an SM (0: none).
template <class K>
size_t smem_for_cap(K kf, int block, int cap) {
  if (cap <= 0) return 0;
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, 0));
  cudaFuncAttributes at{};
  CK(cudaFuncGetAttributes(&at, kf));
  size_t bytes = prop.sharedMemPerMultiprocessor / cap - prop.reservedSharedMemPerBlock - at.sharedSizeBytes;
  bytes = std::min<size_t>(bytes, prop.sharedMemPerBlockOptin - at.sharedSizeBytes);
  // The largest a block may take (one kernel serves several caps: the attribute is per kernel).
  CK(cudaFuncSetAttribute(kf, cudaFuncAttributeMaxDynamicSharedMemorySize,
                          int(prop.sharedMemPerBlockOptin - at.sharedSizeBytes)));
  int per_sm = 0;
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kf, block, bytes));
  if (per_sm > cap) std::fprintf(stderr, "cap %d: %d blocks an SM\n", cap, per_sm);
  (void)block;
  return bytes;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<int> shape = probe::shape_pairs(argc, argv, {12, 12, 14, 12, 10, 14}, "tally_rows_probe [log2 rows log2 cols ...]");
  if (shape.empty()) return 2;
  size_t nmax = 0, rmax = 0;
  for (size_t k = 0; k < shape.size(); k += 2) {
    if (shape[k] < 0 || shape[k + 1] < 2 || shape[k] + shape[k + 1] > 31 || shape[k] > 24) {
      std::fprintf(stderr, "rows 2^0..2^24, cols 2^2.., at most 2^31 elements\n");
      return 2;
    }
    nmax = std::max(nmax, size_t(1) << (shape[k] + shape[k + 1]));
    rmax = std::max(rmax, size_t(1) << shape[k]);
  }
  const int sms = probe::describe_gpu();
  float *d_in = probe::filled_input(nmax, sms), *d_out = nullptr, *d_ref = nullptr, *d_part = nullptr;
  unsigned* d_ctr = nullptr;
  long long *d_begin = nullptr, *d_end = nullptr;
  CK(cudaMalloc(&d_out, rmax * 4 + 64));
  CK(cudaMalloc(&d_ref, rmax * 4 + 64));
  CK(cudaMalloc(&d_begin, rmax * 8));
  CK(cudaMalloc(&d_part, nmax / 1024 * 4 + 64));
  CK(cudaMalloc(&d_ctr, 64));
  CK(cudaMemset(d_ctr, 0, 64));
  CK(cudaMalloc(&d_end, rmax * 8));
  cudaStream_t st;
  CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  const float4* d_vec = reinterpret_cast<const float4*>(d_in);

  for (size_t k = 0; k < shape.size(); k += 2) {
    const unsigned rows = 1u << shape[k];
    const size_t cols = size_t(1) << shape[k + 1], n = size_t(rows) * cols, cvec = cols / 4;
    std::vector<variant> vs;
    const probe::cub_baselines cub(vs, "CUB DeviceSegmentedReduce::Sum", true, d_in, rows, static_cast<long long>(cols),
                                   d_begin, d_end, d_ref, d_out + rmax, st);
    // grid: one block a row, or (resident) the blocks one wave holds.
    auto add = [&](const char* name, kernel_t kf, int block, bool resident, int cap = 0) {
      const size_t smem = smem_for_cap(kf, block, cap);
      int per_sm = 0;
      CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kf, block, smem));
      cudaFuncAttributes at{};
      CK(cudaFuncGetAttributes(&at, kf));
      const unsigned grid = resident ? std::min<unsigned>(rows, unsigned(sms * std::max(per_sm, 1))) : rows;
      char label[128];
      std::snprintf(label, sizeof label, "%s [%d regs, %d/SM, grid %u]", name, at.numRegs, per_sm, grid);
      vs.push_back({label, [=](cudaStream_t s) {
                      kf<<<grid, block, smem, s>>>(d_vec, cvec, rows, d_out);
                      CK(cudaGetLastError());
                    }});
    };
    add("row 256x4, 4/SM", row_kernel<256, 4, 4, false>, 256, false);
    add("row 256x4, 8/SM", row_kernel<256, 4, 8, false>, 256, false);
    add("row 256x4, held to 4/SM", row_kernel<256, 4, 8, false>, 256, false, 4);
    add("row 256x4, held to 6/SM", row_kernel<256, 4, 8, false>, 256, false, 6);
    add("row 512x4, held to 2/SM", row_kernel<512, 4, 4, false>, 512, false, 2);
    add("row 256x4 blocked, 8/SM", row_kernel<256, 4, 8, true>, 256, false);
    add("row 256x4, 4/SM, resident grid", row_kernel<256, 4, 4, false>, 256, true);
    add("row 128x8, 8/SM", row_kernel<128, 8, 8, false>, 128, false);
    add("row 128x8, 16/SM", row_kernel<128, 8, 16, false>, 128, false);
    add("row 512x2, 4/SM", row_kernel<512, 2, 4, false>, 512, false);
    add("row 256x8, 4/SM", row_kernel<256, 8, 4, false>, 256, false);
    add("row 64x16, 16/SM", row_kernel<64, 16, 16, false>, 64, false);
    if (cvec == 256 * 4) {
      add("ring 256x4, 4/SM", ring_kernel<256, 4, 4>, 256, true);
      add("ring 256x4, 8/SM", ring_kernel<256, 4, 8>, 256, true);
    }
    if (cvec == 128 * 8) add("ring 128x8, 8/SM", ring_kernel<128, 8, 8>, 128, true);
    // The whole matrix as one 1-D sum, a block a chunk of 16 KiB (or 32 KiB).
    auto add1d = [&](const char* name, auto kf, int block, size_t chunk_vecs) {
      int per_sm = 0;
      CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kf, block, 0));
      const unsigned grid = unsigned((n / 4 + chunk_vecs - 1) / chunk_vecs);
      char label[128];
      std::snprintf(label, sizeof label, "%s [%d/SM, grid %u]", name, per_sm, grid);
      vs.push_back({label, [=](cudaStream_t s) {
                      kf<<<grid, block, 0, s>>>(d_vec, n / 4, d_ctr, d_part, d_out + rmax + 1);
                      CK(cudaGetLastError());
                    }, false});
    };
    add1d("1-D: chunk 256x4 (16 KiB), last block", chunk_kernel<256, 4, 8>, 256, 1024);
    add1d("1-D: chunk 256x8 (32 KiB), last block", chunk_kernel<256, 8, 4>, 256, 2048);
    add1d("1-D: chunk 512x4 (32 KiB), last block", chunk_kernel<512, 4, 4>, 512, 2048);

    // Each variant's row sums against CUB's (the same floats in another order).
    std::vector<float> ref(rows), got(rows);
    std::vector<double> err;
    vs[0].call(st);
    CK(cudaMemcpyAsync(ref.data(), d_ref, rows * 4, cudaMemcpyDeviceToHost, st));
    CK(cudaStreamSynchronize(st));
    for (auto& v : vs) {
      double e = 0;
      if (v.per_row && &v != &vs[0]) {
        CK(cudaMemsetAsync(d_out, 0xff, rows * 4, st));
        v.call(st);
        CK(cudaMemcpyAsync(got.data(), d_out, rows * 4, cudaMemcpyDeviceToHost, st));
        CK(cudaStreamSynchronize(st));
        for (unsigned r = 0; r < rows; ++r)
          e = std::max(e, std::fabs(double(got[r]) - ref[r]) / std::max(1.0, std::fabs(double(ref[r]))));
      } else if (!v.per_row && &v != &vs[1]) {  // a 1-D sum against CUB's 1-D sum (vs[1])
        vs[1].call(st);
        v.call(st);
        float h[2];
        CK(cudaMemcpyAsync(h, d_out + rmax, 8, cudaMemcpyDeviceToHost, st));
        CK(cudaStreamSynchronize(st));
        e = std::fabs(double(h[1]) - h[0]) / std::max(1.0, std::fabs(double(h[0])));
      }
      err.push_back(e);
    }
    char title[96];
    std::snprintf(title, sizeof title, "2^%d x 2^%d f32 rows", shape[k], shape[k + 1]);
    probe::report(title, vs, err, n * 4, st, 56);
  }
  probe::free_all({d_ctr, d_part, d_begin, d_end, d_ref, d_out, d_in});
  CK(cudaStreamDestroy(st));
  return 0;
}
