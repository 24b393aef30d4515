// CUB's baselines of the row and column probes (tally_rows_probe, tally_columns_probe): the sums of
// `segs` back-to-back segments of `len` floats (DeviceSegmentedReduce::Sum: the matrix's rows, or
// its columns read as the rows of the transposed layout) and the 1-D sum of all of them
// (DeviceReduce::Sum), as the probe's first two variants. Owns the offsets' fill and CUB's
// temporary buffers for one shape (freed with it, after the report).
#pragma once

#include <cub/device/device_reduce.cuh>
#include <cub/device/device_segmented_reduce.cuh>

#include "probe_common.cuh"

namespace probe {

__global__ void even_offsets(long long* begin, long long* end, unsigned segs, long long len) {
  for (unsigned r = blockIdx.x * blockDim.x + threadIdx.x; r < segs; r += gridDim.x * blockDim.x) {
    begin[r] = r * len;
    end[r] = (r + 1) * len;
  }
}

struct cub_baselines {
  void* d_tmp = nullptr;   // the segmented sum's
  void* d_tmp1 = nullptr;  // the 1-D sum's
  // seg_name labels the segmented variant; seg_per_row says whether its results are the probe's
  // own (one a row: checked) or another layout's (the columns probe: not per column).
  cub_baselines(std::vector<variant>& vs, const char* seg_name, bool seg_per_row, const float* d_in, unsigned segs,
                long long len, long long* d_begin, long long* d_end, float* d_seg_out, float* d_flat_out,
                cudaStream_t st) {
    even_offsets<<<256, 256, 0, st>>>(d_begin, d_end, segs, len);
    CK(cudaGetLastError());
    const long long n = static_cast<long long>(segs) * len;
    size_t tmp_bytes = 0, tmp1_bytes = 0;
    CK(cub::DeviceSegmentedReduce::Sum(d_tmp, tmp_bytes, d_in, d_seg_out, static_cast<long long>(segs), d_begin, d_end));
    CK(cudaMalloc(&d_tmp, std::max<size_t>(tmp_bytes, 16)));
    CK(cub::DeviceReduce::Sum(d_tmp1, tmp1_bytes, d_in, d_flat_out, n));
    CK(cudaMalloc(&d_tmp1, std::max<size_t>(tmp1_bytes, 16)));
    void* t = d_tmp;
    void* t1 = d_tmp1;
    vs.push_back({seg_name, [=](cudaStream_t s) {
                    size_t tb = tmp_bytes;
                    CK(cub::DeviceSegmentedReduce::Sum(t, tb, d_in, d_seg_out, static_cast<long long>(segs), d_begin,
                                                       d_end, s));
                  }, seg_per_row});
    vs.push_back({"CUB DeviceReduce::Sum (all, 1-D)", [=](cudaStream_t s) {
                    size_t tb = tmp1_bytes;
                    CK(cub::DeviceReduce::Sum(t1, tb, d_in, d_flat_out, n, s));
                  }, false});
  }
  ~cub_baselines() { free_all({d_tmp, d_tmp1}); }
  cub_baselines(const cub_baselines&) = delete;
  cub_baselines& operator=(const cub_baselines&) = delete;
};

}  // namespace probe
