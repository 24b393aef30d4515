// Host side of the single-pass kernel: grid choice and the launch itself, per (type, op).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <type_traits>

#include "context.hpp"
#include "device.cuh"
#include "device_exact.cuh"
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

// The kernel shape for op Op on element type T (two-input ops and ops with their own fold have
// their own).
template <class T, class Op>
using tuning_for = std::conditional_t<binary_v<Op>, tuning<sizeof(T), true>,
                                      std::conditional_t<custom_fold_v<Op> || indexed_v<Op>,
                                                         tuning_folding<sizeof(T)>, tuning<sizeof(T)>>>;
// __launch_bounds__ minimum blocks per SM: the larger of the tuning's and the op's own.
template <class T, class Op>
constexpr int min_blocks_for() {
  return min_blocks_v<Op> > tuning_for<T, Op>::min_blocks ? min_blocks_v<Op> : tuning_for<T, Op>::min_blocks;
}

// Launches kernel(args) with programmatic dependent launch allowed.
template <class Kernel, class Args>
cudaError_t launch_pdl(Kernel kernel, const Args& args, unsigned int blocks, int block, cudaStream_t stream) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(blocks);
  cfg.blockDim = dim3(block);
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  return cudaLaunchKernelEx(&cfg, kernel, args);
}

template <class T, class Op>
cudaError_t launch_reduce_kernel(const T* d_in, std::uint64_t n, typename Op::out_type* d_out,
                                 const launch_ctx& c, unsigned int blocks) {
  using Tu = tuning_for<T, Op>;
  static_assert(sizeof(typename Op::acc_type) <= kMaxAccBytes);
  static_assert(Tu::block >= kMinBlockThreads, "capture workspaces are sized for blocks this large");
  reduce_args<T, Op> args{d_in, n, d_out, static_cast<typename Op::acc_type*>(c.ws->d_partials),
                          c.ws->d_counter, static_cast<const T*>(c.d_in2)};
  return launch_pdl(reduce_kernel<T, Op, Tu::block, Tu::unroll, Tu::hint, Tu::split, min_blocks_for<T, Op>()>,
                    args, blocks, Tu::block, c.stream);
}

// The grid for n elements (binary ops read two inputs: sized as 2n elements).
template <class T, class Tu, class K>
unsigned int plan_grid(std::atomic<int> (&occupancy)[64], K kernel, std::uint64_t n, bool binary,
                       const launch_ctx& c, int max_per_sm = 0) {
  constexpr int block = Tu::block;
  int per_sm = blocks_per_sm(occupancy, kernel, block, *c.dev);
  if (max_per_sm > 0 && per_sm > max_per_sm) per_sm = max_per_sm;
  const std::uint64_t n_eff = binary ? 2 * n : n;
  const unsigned int blocks = grid_for<sizeof(T), Tu>(n_eff, c.dev->sm_count, per_sm,
                                                      c.ws ? c.ws->max_blocks : kMaxBlocks, binary);
  record_launch({static_cast<unsigned>(sizeof(T)), n, blocks, static_cast<unsigned>(block),
                 static_cast<unsigned>(per_sm * c.dev->sm_count)});
  return blocks;
}

template <class T, class Op>
void launch(const void* d_in, std::uint64_t n, void* d_out, const launch_ctx& c) {
  using Tu = tuning_for<T, Op>;
  static std::atomic<int> occupancy[64] = {};
  const unsigned int blocks =
      plan_grid<T, Tu>(occupancy, reduce_kernel<T, Op, Tu::block, Tu::unroll, Tu::hint, Tu::split, min_blocks_for<T, Op>()>,
                       n, binary_v<Op>, c, max_per_sm_v<Op>);
  if (c.dry_run) return;
  check_cuda(launch_reduce_kernel<T, Op>(static_cast<const T*>(d_in), n,
                                         static_cast<typename Op::out_type*>(d_out), c, blocks),
             "launching the reduce kernel (cudaLaunchKernelEx)");
}

template <class T, exact_form F>
void launch_exact(const void* d_in, std::uint64_t n, void* d_out, const launch_ctx& c) {
  using Tu = tuning_folding<sizeof(T)>;
  static_assert(sizeof(exact_partial) <= kMaxAccBytes);
  auto kernel = exact_kernel<T, F, Tu::block, Tu::unroll, Tu::hint>;
  static std::atomic<int> occupancy[64] = {};
  const unsigned int blocks = plan_grid<T, Tu>(occupancy, kernel, n, F == exact_form::dot, c);
  if (c.dry_run) return;
  exact_args<T> args{static_cast<const T*>(d_in), static_cast<const T*>(c.d_in2), n, d_out,
                     static_cast<exact_partial*>(c.ws->d_partials), c.ws->d_counter, c.ws->d_exact};
  check_cuda(launch_pdl(kernel, args, blocks, Tu::block, c.stream),
             "launching the exact reduce kernel (cudaLaunchKernelEx)");
}

// argmin/argmax: the packed form while every index fits in 32 bits, the general one past that.
template <class T, bool Max, bool Ignore>
void launch_arg(const void* d_in, std::uint64_t n, void* d_out, const launch_ctx& c) {
  if (n >= kPackedArgMaxN) launch<T, op_arg<T, Max, Ignore>>(d_in, n, d_out, c);
  else launch<T, op_arg_packed<T, Max, Ignore>>(d_in, n, d_out, c);
}

// The plain ops on element type T (nullptr where undefined).
template <class T>
launch_fn launcher_basic(kind k) {
  constexpr bool is_int = std::is_integral_v<T>, is_fp = is_float_v<T>;
  switch (k) {
    case kind::sum: return &launch<T, op_sum<T>>;
    case kind::prod: return &launch<T, op_prod<T>>;
    case kind::min: return &launch<T, op_min<T>>;
    case kind::max: return &launch<T, op_max<T>>;
    case kind::all: return &launch<T, op_all<T>>;
    case kind::any: return &launch<T, op_any<T>>;
    case kind::bit_and: if constexpr (is_int) return &launch<T, op_bit_and<T>>; else return nullptr;
    case kind::bit_or: if constexpr (is_int) return &launch<T, op_bit_or<T>>; else return nullptr;
    case kind::bit_xor: if constexpr (is_int) return &launch<T, op_bit_xor<T>>; else return nullptr;
    case kind::min_ignore: if constexpr (is_fp) return &launch<T, op_min_ignore<T>>; else return nullptr;
    case kind::max_ignore: if constexpr (is_fp) return &launch<T, op_max_ignore<T>>; else return nullptr;
    default: return nullptr;
  }
}

// argmin/argmax, transform-reductions, accuracy modes, dot and stats on element type T.
template <class T>
launch_fn launcher_numerics(kind k) {
  constexpr bool is_fp = is_float_v<T>;
  switch (k) {
    case kind::argmin: return &launch_arg<T, false, false>;
    case kind::argmax: return &launch_arg<T, true, false>;
    case kind::mean:
      if constexpr (is_fp) return &launch<T, op_mean<op_sum<T>, mean_out_t<T>>>;
      else return &launch<T, op_mean_int<T>>;
    case kind::stats: return &launch<T, op_stats<T, false>>;
    default: break;
  }
  if constexpr (is_fp) {
    switch (k) {
      case kind::argmin_ignore: return &launch_arg<T, false, true>;
      case kind::argmax_ignore: return &launch_arg<T, true, true>;
      case kind::stats_ignore: return &launch<T, op_stats<T, true>>;
      case kind::sum_sq: return &launch<T, op_sum_sq<T, false>>;
      case kind::norm2:
        if constexpr (std::is_same_v<T, double>) return &launch<T, op_norm2_f64>;
        else return &launch<T, op_sum_sq<T, true>>;
      case kind::sum_comp: return &launch<T, op_sum_comp<T>>;
      case kind::mean_comp: return &launch<T, op_mean<op_sum_comp<T>, num_t<T>>>;
      case kind::sum_exact: return &launch_exact<T, exact_form::sum>;
      case kind::mean_exact: return &launch_exact<T, exact_form::mean>;
      case kind::dot: return &launch<T, op_dot<T>>;
      case kind::dot_comp: return &launch<T, op_dot_comp<T>>;
      case kind::dot_exact: return &launch_exact<T, exact_form::dot>;
      default: break;
    }
  }
  return nullptr;
}

}  // namespace tally::core

// Two translation units per element type keep the build parallel and each unit small.
#define TALLY_INSTANTIATE_BASIC(T) template tally::core::launch_fn tally::core::launcher_basic<T>(tally::core::kind);
#define TALLY_INSTANTIATE_NUMERICS(T) \
  template tally::core::launch_fn tally::core::launcher_numerics<T>(tally::core::kind);
