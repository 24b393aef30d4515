// tally_columns_probe: what a column sum of a rows x cols f32 matrix needs to read as fast as
// rows do (tally's column tiles trail CUB's rows of the transposed layout at 4096 x 4096 on the
// H200, 20.1 against 17.1 us, and take 5 us at 2^20 where the 1-D reduce takes 3: docs/tuning.md,
// "Column tiles at 2^20 elements" and "Columns at 2^24: a lean tile kernel"). Standalone (no
// libtally), one plain kernel body whose variants differ only in what they are named for:
//   tile cC xS uU MB/SM   a block of 256 threads over C 16-byte vectors of columns (4 C results)
//                         and 256 / C lanes along the axis, U loads in flight a lane, S blocks
//                         sharing a tile's axis (block b: tile b % tiles, share b / tiles, so
//                         blocks running together read adjacent tiles of the same rows), launch
//                         bounds of MB blocks an SM; the last block of a tile to arrive adds the S
//                         partials in order
// beside tally's lean columns kernel and its columns kernel on the same tiles and shares (launched
// here directly, with and without programmatic dependent launch as the library launches them),
// against CUB DeviceSegmentedReduce::Sum of the same bytes read as rows (the transposed layout:
// CUB has no column sum) and DeviceReduce::Sum of the whole matrix, all in one process, graph
// replay of a batch, every variant in turn in each repetition.
// Usage: tally_columns_probe [log2 rows log2 cols ...] (default 12 12 16 4 12 8 8 12).
#include <cmath>

#include "probe_common.cuh"
#include "probe_cub.cuh"
#include "segmented/kernels.cuh"  // tally's own column kernels, launched here on the same terms

namespace {

using probe::variant;

__device__ __forceinline__ float4 add4(float4 a, float4 b) {
  return make_float4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w);
}

// Lane (a, c) of the block's (256 / C) x C: the along-axis lanes' float4 sums of column vector c
// added in lane order into the threads of a == 0 (returned there). The first barrier waits for
// the previous call's readers.
template <int B, int C>
__device__ __forceinline__ float4 along_sum(float4 v, float4* sh) {
  constexpr int A = B / C;
  const int c = threadIdx.x % C, a = threadIdx.x / C;
  if (A == 1) return v;
  if (C < 32) {  // the lanes of a warp that share c first (xor over the bits above c's)
    for (int o = 16; o >= C; o >>= 1) {
      v.x += __shfl_xor_sync(0xffffffffu, v.x, o);
      v.y += __shfl_xor_sync(0xffffffffu, v.y, o);
      v.z += __shfl_xor_sync(0xffffffffu, v.z, o);
      v.w += __shfl_xor_sync(0xffffffffu, v.w, o);
    }
  }
  constexpr int W = C < 32 ? B / 32 : A;  // partials of c left (one a warp, or one a lane)
  constexpr int step = C < 32 ? 32 / C : 1;
  __syncthreads();
  if (a % step == 0) sh[(a / step) * C + c] = v;
  __syncthreads();
  if (a == 0) {
    float4 s = sh[c];
#pragma unroll
    for (int w = 1; w < W; ++w) s = add4(s, sh[w * C + c]);
    v = s;
  }
  return v;
}

template <int B, int C, int U, int MB>
__global__ void __launch_bounds__(B, MB)
    tile_kernel(const float4* __restrict__ in, unsigned rows, unsigned cvec, unsigned shares, float4* __restrict__ part,
                unsigned* __restrict__ counters, float4* __restrict__ out) {
  constexpr int A = B / C;
  __shared__ float4 sh[B];
  __shared__ bool last;
  const unsigned tiles = cvec / C;
  const unsigned tile = blockIdx.x % tiles, s = blockIdx.x / tiles;
  const unsigned per = (rows + shares - 1) / shares;
  const unsigned r0 = s * per, r1 = min(rows, r0 + per);
  const unsigned c = threadIdx.x % C, a = threadIdx.x / C;
  const float4* p = in + size_t(tile) * C + c;
  float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
  for (unsigned r = r0 + a; r < r1; r += U * A) {
    float4 v[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const unsigned ru = r + u * A;
      v[u] = ru < r1 ? __ldg(p + size_t(ru) * cvec) : make_float4(0.f, 0.f, 0.f, 0.f);
    }
#pragma unroll
    for (int u = 0; u < U; ++u) acc = add4(acc, v[u]);
  }
  acc = along_sum<B, C>(acc, sh);
  if (shares == 1) {
    if (a == 0) out[size_t(tile) * C + c] = acc;
    return;
  }
  if (a == 0) {
    part[(size_t(tile) * shares + s) * C + c] = acc;
    __threadfence();
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    last = atomicAdd(counters + tile, 1u) == shares - 1;
  }
  __syncthreads();
  if (!last) return;
  __threadfence();
  // Lane (a, c) adds shares a, a + A, ... of column vector c in order, then the lanes as above.
  float4 t = make_float4(0.f, 0.f, 0.f, 0.f);
  const float4* q = part + size_t(tile) * shares * C + c;
  for (unsigned k = a; k < shares; k += A) t = add4(t, __ldcg(q + size_t(k) * C));
  t = along_sum<B, C>(t, sh);
  if (a == 0) out[size_t(tile) * C + c] = t;
  if (threadIdx.x == 0) counters[tile] = 0;
}

// One thread a column, in double: the reference.
__global__ void ref_kernel(const float* __restrict__ in, unsigned rows, unsigned cols, float* __restrict__ out) {
  const unsigned j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= cols) return;
  double s = 0;
  for (unsigned r = 0; r < rows; ++r) s += in[size_t(r) * cols + j];
  out[j] = float(s);
}

// tally's lean column kernel instantiated with a constant tile width of c vectors (nullptr: none).
using lean_t = void (*)(tally::seg::seg_args<float, tally::core::op_sum<float>>);
lean_t lean_constant(int c) {
  using Op = tally::core::op_sum<float>;
  switch (c) {
    case 4: return tally::seg::seg_columns_lean_kernel<float, Op, 256, 4>;
    case 8: return tally::seg::seg_columns_lean_kernel<float, Op, 256, 8>;
    case 16: return tally::seg::seg_columns_lean_kernel<float, Op, 256, 16>;
    case 32: return tally::seg::seg_columns_lean_kernel<float, Op, 256, 32>;
    case 64: return tally::seg::seg_columns_lean_kernel<float, Op, 256, 64>;
    default: return nullptr;
  }
}

using kernel_t = void (*)(const float4*, unsigned, unsigned, unsigned, float4*, unsigned*, float4*);

struct kinfo {
  int c, u, mb;
  kernel_t k;
};

const kinfo kKernels[] = {
    {4, 4, 8, tile_kernel<256, 4, 4, 8>},       {4, 8, 4, tile_kernel<256, 4, 8, 4>},
    {8, 4, 8, tile_kernel<256, 8, 4, 8>},       {8, 8, 4, tile_kernel<256, 8, 8, 4>},
    {16, 4, 8, tile_kernel<256, 16, 4, 8>},     {16, 8, 4, tile_kernel<256, 16, 8, 4>},
    {32, 4, 8, tile_kernel<256, 32, 4, 8>},     {32, 8, 4, tile_kernel<256, 32, 8, 4>},
    {32, 4, 4, tile_kernel<256, 32, 4, 4>},     {64, 4, 8, tile_kernel<256, 64, 4, 8>},
    {64, 8, 4, tile_kernel<256, 64, 8, 4>},     {128, 4, 8, tile_kernel<256, 128, 4, 8>},
    {128, 8, 4, tile_kernel<256, 128, 8, 4>},   {256, 4, 8, tile_kernel<256, 256, 4, 8>},
    {256, 8, 4, tile_kernel<256, 256, 8, 4>},
};

}  // namespace

int main(int argc, char** argv) {
  const std::vector<int> shape = probe::shape_pairs(argc, argv, {12, 12, 16, 4, 12, 8, 8, 12}, "tally_columns_probe [log2 rows log2 cols ...]");
  if (shape.empty()) return 2;
  size_t nmax = 0, cmax = 0, smax = 0;
  for (size_t k = 0; k < shape.size(); k += 2) {
    if (shape[k] < 0 || shape[k + 1] < 4 || shape[k] + shape[k + 1] > 30 || shape[k + 1] > 24) {
      std::fprintf(stderr, "cols 2^4..2^24, at most 2^30 elements\n");
      return 2;
    }
    nmax = std::max(nmax, size_t(1) << (shape[k] + shape[k + 1]));
    cmax = std::max(cmax, size_t(1) << shape[k + 1]);
    smax = std::max(smax, size_t(1) << std::max(shape[k], shape[k + 1]));
  }
  const int sms = probe::describe_gpu();
  float *d_in = probe::filled_input(nmax, sms), *d_out = nullptr, *d_ref = nullptr, *d_seg = nullptr;
  float4* d_part = nullptr;
  unsigned* d_ctr = nullptr;
  long long *d_begin = nullptr, *d_end = nullptr;
  CK(cudaMalloc(&d_out, cmax * 4 + 64));
  CK(cudaMalloc(&d_ref, cmax * 4 + 64));
  CK(cudaMalloc(&d_seg, smax * 4 + 64));
  const size_t part_vecs = size_t(16) * sms * 256;  // at most 16 blocks an SM's worth of partials
  CK(cudaMalloc(&d_part, part_vecs * 16));
  CK(cudaMalloc(&d_ctr, cmax * 4));
  CK(cudaMemset(d_ctr, 0, cmax * 4));
  CK(cudaMalloc(&d_begin, smax * 8));
  CK(cudaMalloc(&d_end, smax * 8));
  cudaStream_t st;
  CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  const float4* d_vec = reinterpret_cast<const float4*>(d_in);

  for (size_t k = 0; k < shape.size(); k += 2) {
    const unsigned rows = 1u << shape[k], cols = 1u << shape[k + 1], cvec = cols / 4;
    const size_t n = size_t(rows) * cols;
    // CUB: the same bytes as `cols` segments of `rows` (the transposed matrix's rows).
    std::vector<variant> vs;
    const probe::cub_baselines cub(vs, "CUB DeviceSegmentedReduce::Sum (transposed)", false, d_in, cols,
                                   static_cast<long long>(rows), d_begin, d_end, d_seg, d_seg + smax, st);
    // tally's kernels on tiles of c vectors shared by sh blocks (a block a share), with the
    // library's programmatic dependent launch (pdl) or without.
    const auto add_tally = [&](int c, unsigned sh, size_t blocks) {
      using Op = tally::core::op_sum<float>;
      tally::seg::seg_args<float, Op> a{};
      a.d_in = d_in;
      a.d_out = d_out;
      a.p.outer = 1, a.p.length = rows, a.p.inner = cols, a.p.length_stride = cols, a.p.aligned16 = true;
      a.per_seg = sh;
      a.col_vecs = c;
      a.vec = true;
      a.d_partials = reinterpret_cast<float*>(d_part);
      a.d_counters = d_ctr;
      using K = void (*)(tally::seg::seg_args<float, Op>);
      // (Held to 3 or 2 blocks an SM the lean kernel took the same 64 registers and times within
      // 0.3%: docs/data/columns-probe-tally-h200-1129-fixed.txt.)
      const K kernels[] = {tally::seg::seg_columns_lean_kernel<float, Op, 256>,
                           tally::seg::seg_columns_kernel<float, Op, 256>, lean_constant(c)};
      // The lean kernel with the tile's vectors a compile-time constant: what its run-time tile width
      // still costs (2026-11-29, H200: 0.16-0.35 us a call at 2^20, after the combine's quotients
      // became shifts and its loops unrolled; a microsecond before).
      const char* names[] = {"lean", "columns kernel", "lean, tile width a constant,"};
      for (int k = 0; k < 3; ++k) {
        const K kf = kernels[k];
        if (kf == nullptr) continue;
        const bool pdl = true;
        cudaFuncAttributes at{};
        CK(cudaFuncGetAttributes(&at, kf));
        char label[128];
        std::snprintf(label, sizeof label, "tally %s c%d x%u [%d regs, grid %zu]", names[k], c, sh, at.numRegs, blocks);
        vs.push_back({label, [=](cudaStream_t s) { probe::launch_pdl(kf, unsigned(blocks), 256, s, pdl, a); }});
      }
    };
    for (const kinfo& ki : kKernels) {
      if (unsigned(ki.c) > cvec || cvec % ki.c != 0) continue;
      int per_sm = 0;
      CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, ki.k, 256, 0));
      cudaFuncAttributes at{};
      CK(cudaFuncGetAttributes(&at, ki.k));
      const unsigned tiles = cvec / ki.c, along = 256 / ki.c;
      // Shares: powers of two and the ones that give 1, 2, 4 or 8 blocks an SM, from half the SMs
      // up to 16 blocks an SM, while every lane along the axis has a row.
      std::vector<unsigned> shares;
      for (unsigned sh = 1; sh <= rows; sh *= 2) shares.push_back(sh);
      for (unsigned m : {1u, 2u, 4u, 8u}) shares.push_back((m * sms + tiles - 1) / tiles);
      std::sort(shares.begin(), shares.end());
      shares.erase(std::unique(shares.begin(), shares.end()), shares.end());
      for (unsigned sh : shares) {
        const size_t blocks = size_t(tiles) * sh;
        if (blocks < size_t(sms) / 2 && sh < rows / along) continue;
        if (blocks > size_t(16) * sms || size_t(rows) / sh < along) break;
        char label[128];
        std::snprintf(label, sizeof label, "tile c%d x%u u%d, %d/SM [%d regs, %zu B spill, grid %zu]", ki.c, sh, ki.u,
                      ki.mb, at.numRegs, size_t(at.localSizeBytes), blocks);
        const kernel_t kf = ki.k;
        float4* out4 = reinterpret_cast<float4*>(d_out);
        vs.push_back({label, [=](cudaStream_t s) {
                        kf<<<unsigned(blocks), 256, 0, s>>>(d_vec, rows, cvec, sh, d_part, d_ctr, out4);
                        CK(cudaGetLastError());
                      }});
        if (ki.u == 8 && ki.mb == 4) add_tally(ki.c, sh, blocks);
      }
    }
    // Each variant's column sums against the double reference.
    std::vector<float> ref(cols), got(cols);
    ref_kernel<<<(cols + 255) / 256, 256, 0, st>>>(d_in, rows, cols, d_ref);
    CK(cudaGetLastError());
    CK(cudaMemcpyAsync(ref.data(), d_ref, cols * 4, cudaMemcpyDeviceToHost, st));
    CK(cudaStreamSynchronize(st));
    std::vector<double> err;
    for (auto& v : vs) {
      double e = 0;
      if (v.per_row) {
        CK(cudaMemsetAsync(d_out, 0xff, cols * 4, st));
        v.call(st);
        v.call(st);  // twice: the counters reset themselves
        CK(cudaMemcpyAsync(got.data(), d_out, cols * 4, cudaMemcpyDeviceToHost, st));
        CK(cudaStreamSynchronize(st));
        for (unsigned j = 0; j < cols; ++j)
          e = std::max(e, std::fabs(double(got[j]) - ref[j]) / std::max(1.0, std::fabs(double(ref[j]))));
      }
      err.push_back(e);
    }
    char title[96];
    std::snprintf(title, sizeof title, "2^%d x 2^%d f32 columns", shape[k], shape[k + 1]);
    probe::report(title, vs, err, n * 4, st, 62);
  }
  probe::free_all({d_ctr, d_part, d_begin, d_end, d_seg, d_ref, d_out, d_in});
  CK(cudaStreamDestroy(st));
  return 0;
}
