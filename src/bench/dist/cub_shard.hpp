// cub::DeviceReduce::Sum of f32, callable from plain C++ (`tally bench dist`).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace tally::bench {

// CUB's two-phase call: d_temp null asks for the temporary bytes.
cudaError_t cub_sum_f32(void* d_temp, std::size_t& bytes, const float* d_in, float* d_out, std::uint64_t n,
                        cudaStream_t s);

}  // namespace tally::bench
