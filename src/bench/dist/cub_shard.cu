// The competitor's per-shard reduce for `tally bench dist`: cub::DeviceReduce::Sum of f32 (the
// MPI side of the benchmark is plain C++, so CUB lives in this one CUDA file).
#include "bench/competitors.cuh"
#include "bench/dist/cub_shard.hpp"

namespace tally::bench {

cudaError_t cub_sum_f32(void* d_temp, std::size_t& bytes, const float* d_in, float* d_out, std::uint64_t n,
                        cudaStream_t s) {
  return competitors::cub_sum(d_temp, bytes, d_in, d_out, n, s);
}

}  // namespace tally::bench
