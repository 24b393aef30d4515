// Host side of the single-pass kernel: grid choice and the launch itself, per (type, op).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <type_traits>

#include "context.hpp"
#include "device.cuh"
#include "tuning.hpp"

namespace tally::core {

// Blocks of kernel K that fit on one SM, read once per device (cache: one per kernel).
template <class K>
int blocks_per_sm(std::atomic<int> (&cache)[64], K kernel, int block, const device_context& dev) {
  int v = cache[dev.ordinal].load(std::memory_order_relaxed);
  if (v > 0) return v;
  check_cuda(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&v, kernel, block, 0),
             "cudaOccupancyMaxActiveBlocksPerMultiprocessor");
  v = std::max(v, 1);
  cache[dev.ordinal].store(v, std::memory_order_relaxed);
  return v;
}

template <class T, class Op>
cudaError_t launch_reduce_kernel(const T* d_in, std::uint64_t n, typename Op::out_type* d_out,
                                 const launch_ctx& c, unsigned int blocks) {
  using Tu = tuning<sizeof(T)>;
  static_assert(sizeof(typename Op::acc_type) <= kMaxAccBytes);
  static_assert(Tu::block >= kMinBlockThreads, "capture workspaces are sized for blocks this large");
  reduce_args<T, Op> args{d_in, n, d_out, static_cast<typename Op::acc_type*>(c.ws->d_partials),
                          c.ws->d_counter};
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(blocks);
  cfg.blockDim = dim3(Tu::block);
  cfg.stream = c.stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  return cudaLaunchKernelEx(&cfg, reduce_kernel<T, Op, Tu::block, Tu::unroll, Tu::hint, Tu::split, Tu::min_blocks>, args);
}

template <class T, class Op>
void launch(const void* d_in, std::uint64_t n, void* d_out, const launch_ctx& c) {
  using Tu = tuning<sizeof(T)>;
  static std::atomic<int> occupancy[64] = {};
  const int per_sm = blocks_per_sm(occupancy, reduce_kernel<T, Op, Tu::block, Tu::unroll, Tu::hint, Tu::split, Tu::min_blocks>,
                                   Tu::block, *c.dev);
  const unsigned int blocks =
      grid_for<sizeof(T)>(n, c.dev->sm_count, per_sm, c.ws ? c.ws->max_blocks : kMaxBlocks);
  record_launch({static_cast<unsigned>(sizeof(T)), n, blocks, static_cast<unsigned>(Tu::block),
                 static_cast<unsigned>(per_sm * c.dev->sm_count)});
  if (c.dry_run) return;
  check_cuda(launch_reduce_kernel<T, Op>(static_cast<const T*>(d_in), n,
                                         static_cast<typename Op::out_type*>(d_out), c, blocks),
             "launching the reduce kernel (cudaLaunchKernelEx)");
}

// The launchers of every op defined on element type T (nullptr where undefined).
template <class T>
launch_fn launcher_for(op o) {
  constexpr bool is_int = std::is_integral_v<T>;
  switch (o) {
    case op::sum: return &launch<T, op_sum<T>>;
    case op::prod: return &launch<T, op_prod<T>>;
    case op::min: return &launch<T, op_min<T>>;
    case op::max: return &launch<T, op_max<T>>;
    case op::all: return &launch<T, op_all<T>>;
    case op::any: return &launch<T, op_any<T>>;
    case op::bit_and: if constexpr (is_int) return &launch<T, op_bit_and<T>>; else return nullptr;
    case op::bit_or: if constexpr (is_int) return &launch<T, op_bit_or<T>>; else return nullptr;
    case op::bit_xor: if constexpr (is_int) return &launch<T, op_bit_xor<T>>; else return nullptr;
  }
  return nullptr;
}

}  // namespace tally::core

// One translation unit per element type keeps the build parallel and each unit small.
#define TALLY_INSTANTIATE_LAUNCHERS(T) \
  template tally::core::launch_fn tally::core::launcher_for<T>(tally::op);
