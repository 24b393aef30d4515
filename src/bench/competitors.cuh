// The competitors every benchmark runs in the same process as tally: CUB DeviceReduce (sum,
// min, max, argmin/argmax, a widening TransformReduce for f16/bf16) and cuBLAS dot. One place for
// them, so the core, numerics and tuning benchmarks call the libraries the same way.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cub/device/device_reduce.cuh>
#include <cuda/std/functional>


#include <fmt/format.h>

#include <cstddef>
#include <cstdint>

#include "bench/cublas_loader.hpp"
#include "bench/report.hpp"
#include "bench/timing.hpp"
#include "tally/tally.hpp"

namespace tally::bench::competitors {

template <class T, class Out>
cudaError_t cub_call(op o, void* d_temp, std::size_t& bytes, const T* d_in, Out* d_out,
                     std::uint64_t n, cudaStream_t s) {
  const auto nn = static_cast<long long>(n);
  switch (o) {
    case op::sum: return cub::DeviceReduce::Sum(d_temp, bytes, d_in, d_out, nn, s);
    case op::min: return cub::DeviceReduce::Min(d_temp, bytes, d_in, d_out, nn, s);
    case op::max: return cub::DeviceReduce::Max(d_temp, bytes, d_in, d_out, nn, s);
    default: return cudaErrorInvalidValue;
  }
}

// CUB's call for (dtype, op), with CUB's output type equal to tally's result type so both
// accumulate alike (an i32 sum into int64).
inline cudaError_t cub_reduce(dtype t, op o, void* d_temp, std::size_t& bytes, const void* d_in,
                       void* d_out, std::uint64_t n, cudaStream_t s) {
  switch (t) {
    case dtype::f32:
      return cub_call(o, d_temp, bytes, static_cast<const float*>(d_in), static_cast<float*>(d_out), n, s);
    case dtype::f64:
      return cub_call(o, d_temp, bytes, static_cast<const double*>(d_in), static_cast<double*>(d_out), n, s);
    case dtype::i32:
      if (o == op::sum)
        return cub_call(o, d_temp, bytes, static_cast<const std::int32_t*>(d_in),
                        static_cast<std::int64_t*>(d_out), n, s);
      return cub_call(o, d_temp, bytes, static_cast<const std::int32_t*>(d_in),
                      static_cast<std::int32_t*>(d_out), n, s);
    default: return cudaErrorInvalidValue;
  }
}

// Widening functors for CUB's f16 / bf16 sum, so that CUB accumulates in float as tally does.
struct half_to_float {
  __device__ float operator()(__half h) const { return __half2float(h); }
};
struct bf16_to_float {
  __device__ float operator()(__nv_bfloat16 h) const { return __bfloat162float(h); }
};

// The ArgMin / ArgMax overload with separate value and index outputs (CCCL 3.0): it writes a
// 64-bit index (cuda::std::int64_t) and streams over partitions of at most 2^31 - 1 items, so
// n = 2^30 and beyond index correctly. The KeyValuePair<int, T> overload (deprecated in CCCL 3.0)
// offsets with int. Ties go to the first index in both, as in tally.
template <class T>
cudaError_t cub_arg(op o, void* d_temp, std::size_t& bytes, const T* d_in, T* d_value,
                    std::int64_t* d_index, std::uint64_t n, cudaStream_t s) {
  const auto nn = static_cast<::cuda::std::int64_t>(n);
  if (o == op::argmax)
    return cub::DeviceReduce::ArgMax(d_temp, bytes, d_in, d_value, d_index, nn, s);
  return cub::DeviceReduce::ArgMin(d_temp, bytes, d_in, d_value, d_index, nn, s);
}

// CUB's plain sum, accumulating in the input type (as tally's fast sum does for f32 / f64).
template <class T>
cudaError_t cub_sum(void* d_temp, std::size_t& bytes, const T* d_in, T* d_out, std::uint64_t n,
                    cudaStream_t s) {
  return cub::DeviceReduce::Sum(d_temp, bytes, d_in, d_out, static_cast<long long>(n), s);
}

// f16 / bf16 widened to float and summed in float: cub::DeviceReduce::TransformReduce.
template <class H, class Widen>
cudaError_t cub_half_sum(void* d_temp, std::size_t& bytes, const H* d_in, float* d_out,
                         std::uint64_t n, cudaStream_t s) {
  return cub::DeviceReduce::TransformReduce(d_temp, bytes, d_in, d_out,
                                            static_cast<::cuda::std::int64_t>(n),
                                            ::cuda::std::plus<float>{}, Widen{}, 0.0f, s);
}

#if TALLY_HAVE_CUBLAS
inline void cublas_check(cublasStatus_t st, const char* what) {
  if (st != CUBLAS_STATUS_SUCCESS)
    throw tally::error(fmt::format("tally bench: {} failed: {}", what, cublas::api().status_string(st)));
}

// One cuBLAS handle on the bench stream, results in device memory (CUBLAS_POINTER_MODE_DEVICE:
// stream ordered like tally::dot, no synchronisation, capturable), with its own workspace so
// that nothing is allocated while a graph is being captured.
struct cublas_session {
  const cublas::functions& f = cublas::api();  // loads cuBLAS on the first session
  cublasHandle_t handle = nullptr;
  device_buffer workspace{std::size_t(32) << 20};
  explicit cublas_session(cudaStream_t s) {
    cublas_check(f.create(&handle), "cublasCreate");
    try {
      cublas_check(f.set_stream(handle, s), "cublasSetStream");
      // After cublasSetStream, which resets the workspace to cuBLAS's default pool.
      cublas_check(f.set_workspace(handle, workspace.get(), workspace.size()), "cublasSetWorkspace");
      cublas_check(f.set_pointer_mode(handle, CUBLAS_POINTER_MODE_DEVICE), "cublasSetPointerMode");
    } catch (...) {
      f.destroy(handle);
      throw;
    }
  }
  ~cublas_session() { f.destroy(handle); }
  cublas_session(const cublas_session&) = delete;
  cublas_session& operator=(const cublas_session&) = delete;
};
#endif

}  // namespace tally::bench::competitors
