// tally_rows_probe: what a row sum of a rows x cols f32 matrix needs to read as fast as CUB's
// DeviceSegmentedReduce (which leads tally's rows and columns at 4096 x 4096 on the H200:
// docs/tuning.md, "Rows of one block's round at 2^24"). Standalone (no libtally), so that the variants
// differ only in what they are named for:
//   row B x V, MB/SM   a block of B threads a row, V 16-byte loads in flight a thread (thread t
//                      reads vectors t, t + B, ...; `blocked`: t V .. t V + V - 1, CUB's
//                      arrangement), launch bounds of MB blocks an SM, a grid of one block a row
//   ring               a resident grid walking the rows, the next row's loads issued before this
//                      row's block reduce (rows of exactly one round, B x V vectors)
// and, for short rows (2 or 4 16-byte vectors: 2^24 x 16 at 2^28 writes a 4-byte result for every
// 64 bytes read), row tiles as tally's kernel has them (src/segmented/kernels/rowtile.cuh: m
// lanes a row, U = 4 steps of 32 / m rows in flight a lane, the steps reduce-scattered, a
// 128-byte store of 32 results a warp), named for what they change:
//   tile               the replica (plain stores), a resident grid
//   tile cs            results stored with st.global.cs (evict-first: written once, not read)
//   tile ldcs          the rows loaded with ld.global.cs (evict-first) instead of ld.global.nc
//   tile ring          the next step's loads issued before this step's shuffles and stores
//   tile no-store      the same reads and shuffles, no results written (the reads alone)
//   tile a block each  a grid of a block per 8 warps' rows, not a resident one
//   tally rowtile      tally's own kernel, launched as the library does (PDL, resident grid)
// and CUB DeviceSegmentedReduce::Sum (begin/end offsets) and DeviceReduce::Sum of the whole
// matrix, all in one process, graph replay of a batch, every variant in turn in each repetition.
// Usage: tally_rows_probe [log2 rows log2 cols ...] (default 12 12 14 12 10 14).
#include <cmath>
#include <type_traits>

#include "probe_common.cuh"
#include "probe_cub.cuh"
#include "segmented/kernels.cuh"  // tally's row-tile kernel, launched here on the same terms

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

// Short rows of M 16-byte vectors (M = 2, 4), as tally's row tiles (rowtile.cuh): lane l of a
// warp reads vector l % M of row l / M of a step of 32 / M rows; U = 4 steps' loads in flight; the
// steps' partials reduce-scattered over the M lanes of a row (each lane ends with U / M whole
// rows); the warp's 32 results stored by consecutive lanes. CS: st.global.cs stores; LDCS:
// ld.global.cs loads; RING: the next step's loads before this step's shuffles; STORE false: no
// results written (a sum of them kept, written only if it is a value it never takes).
template <int M, bool CS, bool LDCS, bool RING, bool STORE>
__global__ void __launch_bounds__(256)
    tile_kernel(const float4* __restrict__ in, size_t cvec, unsigned rows, float* __restrict__ out) {
  constexpr int U = 4;
  static_assert(M == 2 || M == 4, "rows of two or four 16-byte vectors");
  constexpr unsigned kRowsPerStep = 32 / M;
  const unsigned lane = threadIdx.x & 31u, lv = lane & (M - 1), gi = lane / M;
  const size_t warp = (size_t(blockIdx.x) * 256 + threadIdx.x) / 32, warps = size_t(gridDim.x) * 8;
  const size_t step = warps * kRowsPerStep * U;
  float4 v[U];
  const auto load = [&](size_t r0) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const size_t r = r0 + u * kRowsPerStep + gi;
      v[u] = make_float4(0.f, 0.f, 0.f, 0.f);
      if (r < rows) v[u] = LDCS ? __ldcs(in + r * cvec + lv) : __ldg(in + r * cvec + lv);
    }
  };
  float kept = 0.f;
  size_t r0 = warp * kRowsPerStep * U;
  if (RING && r0 < rows) load(r0);
  for (; r0 < rows; r0 += step) {
    if (!RING) load(r0);
    float pa[U];
#pragma unroll
    for (int u = 0; u < U; ++u) pa[u] = hsum(v[u]);
    if (RING && r0 + step < rows) load(r0 + step);
#pragma unroll
    for (int d = M / 2, h = U / 2; d >= 1; d /= 2, h /= 2) {
      const bool upper = (lv & unsigned(d)) != 0;
#pragma unroll
      for (int i = 0; i < h; ++i) {
        const float send = upper ? pa[i] : pa[i + h];
        const float keep = upper ? pa[i + h] : pa[i];
        pa[i] = keep + __shfl_xor_sync(0xffffffffu, send, d);
      }
    }
#pragma unroll
    for (int i = 0; i < U / M; ++i) {
      const size_t r = r0 + (size_t(lv) * (U / M) + i) * kRowsPerStep + gi;
      if (!STORE) {
        kept += pa[i];
      } else if (r < rows) {
        if (CS) __stcs(out + r, pa[i]);
        else out[r] = pa[i];
      }
    }
  }
  if (!STORE && kept == -1.f) out[0] = kept;  // never: the input is non-negative
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
    if (cvec == 2 || cvec == 4) {
      // Short rows: tile variants (a resident grid unless said), and tally's own kernel.
      const auto tiles = [&](auto m) {
        constexpr int M = decltype(m)::value;
        add("tile", tile_kernel<M, false, false, false, true>, 256, true);
        add("tile cs", tile_kernel<M, true, false, false, true>, 256, true);
        add("tile ldcs", tile_kernel<M, false, true, false, true>, 256, true);
        add("tile ldcs cs", tile_kernel<M, true, true, false, true>, 256, true);
        add("tile ring", tile_kernel<M, false, false, true, true>, 256, true);
        add("tile ring cs", tile_kernel<M, true, false, true, true>, 256, true);
        add("tile no-store", tile_kernel<M, false, false, false, false>, 256, true);
        add("tile ring no-store", tile_kernel<M, false, false, true, false>, 256, true);
        // A block for each 8 warps' 4 steps of rows (the grid covers the rows once).
        const unsigned rows_block = 8u * (32u / M) * 4u;
        const auto once = [&](const char* name, kernel_t kf) {
          const unsigned grid = (rows + rows_block - 1) / rows_block;
          char label[128];
          std::snprintf(label, sizeof label, "%s [grid %u]", name, grid);
          vs.push_back({label, [=](cudaStream_t s) {
                          kf<<<grid, 256, 0, s>>>(d_vec, cvec, rows, d_out);
                          CK(cudaGetLastError());
                        }});
        };
        once("tile a block each", tile_kernel<M, false, false, false, true>);
        once("tile a block each, cs", tile_kernel<M, true, false, false, true>);
      };
      if (cvec == 2) tiles(std::integral_constant<int, 2>{});
      else tiles(std::integral_constant<int, 4>{});
      // tally's row-tile kernel (four steps), launched as the library launches it: programmatic
      // dependent launch, a grid of the blocks one wave holds (the occupancy API).
      using Op = tally::core::op_sum<float>;
      tally::seg::seg_args<float, Op> a{};
      a.d_in = d_in;
      a.d_out = d_out;
      a.p.outer = rows, a.p.length = cols, a.p.inner = 1, a.p.outer_stride = cols, a.p.aligned16 = true;
      a.p.span = n;
      a.group = static_cast<int>(cvec);
      a.vec = true;
      constexpr auto kf = tally::seg::seg_rowtile_kernel<float, Op, 256, 4>;
      int per_sm = 0;
      CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kf, 256, 0));
      cudaFuncAttributes at{};
      CK(cudaFuncGetAttributes(&at, kf));
      const unsigned grid = std::min<unsigned>(unsigned((size_t(rows) / 4 * cvec + 255) / 256), unsigned(sms * per_sm));
      char label[128];
      std::snprintf(label, sizeof label, "tally rowtile (u4, PDL) [%d regs, %d/SM, grid %u]", at.numRegs, per_sm, grid);
      vs.push_back({label, [=](cudaStream_t s) { probe::launch_pdl(kf, grid, 256, s, true, a); }});
    } else {
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
    }
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
      if (v.name.find("no-store") != std::string::npos) {
        e = std::nan("");  // writes no results: nothing to check
      } else if (v.per_row && &v != &vs[0]) {
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
