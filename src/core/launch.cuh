// Host side of the single-pass kernel: grid choice and the launch itself, per (type, op).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <string>
#include <type_traits>

#include "context.hpp"
#include "policy.hpp"
#include "device.cuh"
#include "device_exact.cuh"
#include "ops_stats.cuh"
#include "tuning.hpp"

namespace tally::core {

// The shape family of op Op (tuning.hpp).
template <class Op>
inline constexpr family family_v = binary_v<Op> ? family::binary
                                   : (custom_fold_v<Op> || indexed_v<Op>) ? family::folding
                                                                          : family::plain;

template <class T, class Op, depth D>
using tuning_of = tuning<sizeof(T), family_v<Op>, D>;

// __launch_bounds__ minimum blocks per SM: the larger of the shape's and the op's own.
template <class T, class Op, depth D>
constexpr int min_blocks_of() {
  return min_blocks_v<Op> > tuning_of<T, Op, D>::min_blocks ? min_blocks_v<Op> : tuning_of<T, Op, D>::min_blocks;
}

// The reduce kernel of (T, Op) in shape D (PIPE: its pipelined twin, where pipelines_in).
template <class T, class Op, depth D, bool PIPE = false>
constexpr auto reduce_kernel_of() {
  using Tu = tuning_of<T, Op, D>;
  static_assert(Tu::block >= kMinBlockThreads, "capture workspaces are sized for blocks this large");
  return reduce_kernel<T, Op, Tu::block, Tu::unroll, Tu::hint, Tu::split, min_blocks_of<T, Op, D>(), Tu::accs, PIPE>;
}
// Whether (T, Op) in shape D has a pipelined twin (device.cuh, pipelines_v).
template <class T, class Op, depth D>
inline constexpr bool pipelines_in = pipelines_v<T, Op, min_blocks_of<T, Op, D>(), tuning_of<T, Op, D>::split>;
// The exact kernel of (T, F) in shape D (the strided layout; narrow inputs with each add's own
// exactness test).
template <class T, exact_form F, depth D>
constexpr auto exact_kernel_of() {
  using Tu = tuning<sizeof(T), family::exact, D>;
  static_assert(Tu::block >= kMinBlockThreads, "capture workspaces are sized for blocks this large");
  return exact_kernel<T, op_exact<T, F, Tu::accs, false>, Tu::block, Tu::unroll, Tu::hint, Tu::min_blocks>;
}
// The exact sum's kernel for the dynamic schedule (exact_stream_shape; narrow inputs with the
// round's grid test).
template <class T, exact_form F>
constexpr auto exact_stream_kernel_of() {
  constexpr shape s = exact_stream_shape(sizeof(T));
  static_assert(s.block >= kMinBlockThreads, "capture workspaces are sized for blocks this large");
  return exact_kernel<T, op_exact<T, F, s.accs, true>, s.block, s.unroll, load_hint::ldg, s.min_blocks, true>;
}

// The kernel of (T, Op) in the dynamic schedule (tuning.hpp, dynamic_shape).
template <class T, class Op, depth D = depth::base>
constexpr auto dynamic_kernel_of() {
  static_assert(D == depth::base || has_dynamic_deep(family_v<Op>, heavy_v<Op>), "a deep dynamic shape");
  constexpr shape s = dynamic_shape(sizeof(T), family_v<Op>, D);
  static_assert(s.block >= kMinBlockThreads, "capture workspaces are sized for blocks this large");
  constexpr int mb = min_blocks_v<Op> > s.min_blocks ? min_blocks_v<Op> : s.min_blocks;
  return reduce_kernel_dynamic<T, Op, s.block, s.unroll, load_hint::ldg, mb, s.accs>;
}

static_assert(exact::kWords * 8 == kSegStatusOffset - kTailExactOffset, "the workspace's tail holds the exact accumulator");

// Blocks of kernel K of shape s that fit on one SM.
template <class K>
int occupancy_of(K kernel, const shape& s) {
  int v = 0;
  check_cuda(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&v, kernel, s.block, 0),
             "cudaOccupancyMaxActiveBlocksPerMultiprocessor");
  return v > 0 ? v : 1;
}
// occupancy_of, at most max_per_sm where that is positive, computed once per device in `cache`
// (one per launcher: a single-shape schedule has nothing else to choose).
template <class K>
int cached_occupancy(std::atomic<int> (&cache)[64], K kernel, const shape& s, int max_per_sm, const launch_ctx& c) {
  std::atomic<int>& slot = cache[c.dev->ordinal & 63];
  int per_sm = slot.load(std::memory_order_relaxed);
  if (per_sm == 0) {
    per_sm = occupancy_of(kernel, s);
    if (max_per_sm > 0) per_sm = std::min(per_sm, max_per_sm);
    slot.store(per_sm, std::memory_order_relaxed);
  }
  return per_sm;
}
// Registers per thread of kernel K (dry runs' descriptions).
template <class K>
int registers_of(K kernel) {
  cudaFuncAttributes at{};
  check_cuda(cudaFuncGetAttributes(&at, kernel), "cudaFuncGetAttributes");
  return at.numRegs;
}

// What a launcher uses on one device: the shape's depth and its resident blocks per SM, chosen
// once per device (and again when force_depth changes), and the base shape's blocks per SM for
// the inputs that fit in the L2 (deep_reads_memory).
struct launch_choice {
  depth d = depth::base;
  int per_sm = 1;
  int base_per_sm = 1;
  bool forced = false;
  // The depth for an input of `bytes` (all inputs where the depth is forced).
  depth at(std::uint64_t bytes, std::uint64_t l2_bytes) const {
    return d == depth::deep && (forced || deep_reads_memory(bytes, l2_bytes)) ? depth::deep : depth::base;
  }
  int per_sm_at(depth dd) const { return dd == d ? per_sm : base_per_sm; }
};
template <class KB, class KD>
launch_choice choose_shape(std::atomic<int> (&cache)[64], KB base_kernel, KD deep_kernel, family f, int elem_bytes,
                           bool binary, int max_per_sm, const launch_ctx& c) {
  // Cached as per_sm (8 bits) | base per_sm << 8 | depth << 16 | (forced + 2) << 17; 0 = not
  // chosen yet.
  const int forced = forced_depth() + 2;
  const int v = cache[c.dev->ordinal].load(std::memory_order_relaxed);
  if (v != 0 && (v >> 17) == forced && !c.describe)
    return {static_cast<depth>((v >> 16) & 1), v & 0xff, (v >> 8) & 0xff, forced >= 2};
  const shape sb = compiled_shape(elem_bytes, f, depth::base), sd = compiled_shape(elem_bytes, f, depth::deep);
  int pb = occupancy_of(base_kernel, sb), pd = occupancy_of(deep_kernel, sd);
  if (max_per_sm > 0) pb = std::min(pb, max_per_sm), pd = std::min(pd, max_per_sm);
  const device_policy& pol = policy_for(*c.dev);
  const double ib = inflight_bytes(sb, pb, binary), id = inflight_bytes(sd, pd, binary);
  const depth d = choose_depth(pol, f, ib, id);
  if (c.describe) {
    family_choice& fc = *c.describe;
    fc.family = to_string(f);
    fc.base = sb;
    fc.deep = sd;
    fc.base_per_sm = pb;
    fc.deep_per_sm = pd;
    fc.base_regs = registers_of(base_kernel);
    fc.deep_regs = registers_of(deep_kernel);
    fc.chosen = d;
    fc.why = why_depth(pol, f, ib, id);
    if (d == depth::deep && forced < 2) fc.why += "; base for inputs that fit in the L2";
  }
  const int per_sm = std::min(d == depth::deep ? pd : pb, 255);
  pb = std::min(pb, 255);
  cache[c.dev->ordinal].store(per_sm | (pb << 8) | (static_cast<int>(d) << 16) | (forced << 17),
                              std::memory_order_relaxed);
  return {d, per_sm, pb, forced >= 2};
}

// Launches kernel(args) with programmatic dependent launch allowed (and smem bytes of dynamic
// shared memory a block).
template <class Kernel, class Args>
cudaError_t launch_pdl(Kernel kernel, const Args& args, unsigned int blocks, int block, cudaStream_t stream,
                       std::size_t smem = 0) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(blocks);
  cfg.blockDim = dim3(block);
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  return cudaLaunchKernelEx(&cfg, kernel, args);
}

// The grid of a launch of shape s at n elements (binary ops: n per input), recorded.
inline unsigned int plan_grid(const shape& s, int elem_bytes, std::uint64_t n, bool binary, bool heavy, depth d,
                              int per_sm, const launch_ctx& c, bool dynamic = false, bool pipelined = false) {
  const device_policy& pol = policy_for(*c.dev);
  const unsigned int blocks = grid_for(s, elem_bytes, n, binary, heavy, c.dev->sm_count, per_sm,
                                       c.ws ? c.ws->max_blocks : kMaxBlocks, pol.grid);
  record_launch({static_cast<unsigned>(elem_bytes), n, blocks, static_cast<unsigned>(s.block),
                 static_cast<unsigned>(per_sm * c.dev->sm_count), static_cast<unsigned>(s.unroll),
                 d == depth::deep, dynamic, pipelined});
  return blocks;
}

template <class T, class Op, depth D>
void launch_reduce(const void* d_in, std::uint64_t n, void* d_out, const launch_ctx& c, int per_sm) {
  using Tu = tuning_of<T, Op, D>;
  static_assert(sizeof(typename Op::acc_type) <= kMaxAccBytes);
  // The pipelined twin from kPipelineL2Multiple x the L2 up (tuning.hpp): the same bits.
  auto kernel = reduce_kernel_of<T, Op, D>();
  bool pipe = false;
  if constexpr (pipelines_in<T, Op, D>) {
    pipe = pipeline_rounds(n * sizeof(T), c.dev->info.l2_bytes);
    if (pipe) kernel = reduce_kernel_of<T, Op, D, true>();
  }
  const unsigned int blocks = plan_grid(Tu::s, sizeof(T), n, binary_v<Op>, heavy_v<Op>, D, per_sm, c, false, pipe);
  if (c.dry_run) return;
  reduce_args<T, Op> args{static_cast<const T*>(d_in), n, static_cast<typename Op::out_type*>(d_out),
                          static_cast<typename Op::acc_type*>(c.ws->d_partials), c.ws->d_counter,
                          static_cast<const T*>(c.d_in2)};
  check_cuda(launch_pdl(kernel, args, blocks, Tu::block, c.stream), "launching the reduce kernel (cudaLaunchKernelEx)");
}

// Fills a dry run's description of a single-shape schedule (the dynamic ones).
template <class K>
void describe_single(family_choice& fc, family f, const shape& s, int per_sm, K kernel, std::string why) {
  fc.family = to_string(f);
  fc.base = s;
  fc.deep = shape{0, 0, 0, 0};
  fc.base_per_sm = per_sm;
  fc.base_regs = registers_of(kernel);
  fc.chosen = depth::base;
  fc.dynamic = true;
  fc.why = std::move(why);
}
inline std::string dynamic_why(std::uint64_t bytes, const launch_ctx& c, std::uint64_t multiple,
                               depth d = depth::base) {
  return "dynamic schedule: " + std::to_string(bytes >> 20) + " MiB >= " + std::to_string(multiple) + " x L2 (" +
         std::to_string(c.dev->info.l2_bytes >> 20) + " MiB); its own shape" +
         (d == depth::deep ? ", deep (two blocks an SM)" : "");
}

// The dynamic schedule: its own shape (base or deep, policy.hpp's dynamic_depth), the full
// resident grid, chunks of whole rounds (at least kHeavyChunkRounds for heavy ops, whose block
// merge costs more per chunk).
template <class T, class Op, depth D>
void launch_dynamic_shape(const void* d_in, std::uint64_t n, void* d_out, const launch_ctx& c) {
  constexpr shape s = dynamic_shape(sizeof(T), family_v<Op>, D);
  using Acc = typename Op::acc_type;
  static_assert(sizeof(Acc) <= kMaxAccBytes);
  static std::atomic<int> per_sm_cache[64] = {};
  const int per_sm = cached_occupancy(per_sm_cache, dynamic_kernel_of<T, Op, D>(), s, max_per_sm_v<Op>, c);
  const unsigned int blocks = plan_grid(s, sizeof(T), n, binary_v<Op>, true, D, per_sm, c, true);
  const std::uint64_t nvec = n * sizeof(T) / 16;
  const auto chunks = static_cast<unsigned int>(
      dynamic_chunks(nvec, std::uint64_t(s.block) * s.unroll, sizeof(Acc), heavy_v<Op> ? kHeavyChunkRounds : 1));
  if (c.describe)
    describe_single(*c.describe, family_v<Op>, s, per_sm, dynamic_kernel_of<T, Op, D>(),
                    dynamic_why((binary_v<Op> ? 2 : 1) * n * sizeof(T), c, kDynamicL2Multiple, D));
  if (c.dry_run) return;
  dynamic_args<T, Op> args{{static_cast<const T*>(d_in), n, static_cast<typename Op::out_type*>(d_out),
                            static_cast<Acc*>(c.ws->d_partials), c.ws->d_counter, static_cast<const T*>(c.d_in2)},
                           chunks,
                           c.ws->d_chunk_next};
  check_cuda(launch_pdl(dynamic_kernel_of<T, Op, D>(), args, blocks, s.block, c.stream),
             "launching the reduce kernel (cudaLaunchKernelEx)");
}

template <class T, class Op>
void launch(const void* d_in, std::uint64_t n, void* d_out, const launch_ctx& c) {
  // Ops with a block merge of their own (the statistics) keep the strided grid: no dynamic kernel
  // is compiled for them.
  if constexpr (!custom_block_v<Op>) {
    const device_policy& pol = policy_for(*c.dev);
    if (uses_dynamic(pol, family_v<Op>, (binary_v<Op> ? 2 : 1) * n * sizeof(T), heavy_v<Op>)) {
      if constexpr (has_dynamic_deep(family_v<Op>, heavy_v<Op>)) {
        if (dynamic_depth(pol, family_v<Op>, heavy_v<Op>) == depth::deep) {
          launch_dynamic_shape<T, Op, depth::deep>(d_in, n, d_out, c);
          return;
        }
      }
      launch_dynamic_shape<T, Op, depth::base>(d_in, n, d_out, c);
      return;
    }
  }
  static std::atomic<int> chosen[64] = {};
  const launch_choice ch = choose_shape(chosen, reduce_kernel_of<T, Op, depth::base>(),
                                        reduce_kernel_of<T, Op, depth::deep>(), family_v<Op>, sizeof(T),
                                        binary_v<Op>, max_per_sm_v<Op>, c);
  const depth d = ch.at((binary_v<Op> ? 2 : 1) * n * sizeof(T), c.dev->info.l2_bytes);
  if (d == depth::deep) launch_reduce<T, Op, depth::deep>(d_in, n, d_out, c, ch.per_sm_at(d));
  else launch_reduce<T, Op, depth::base>(d_in, n, d_out, c, ch.per_sm_at(d));
}

// Launches exact kernel K of shape s for one call on the grid the rule gives it (after a dry
// run's record, nothing), its arguments from the call's workspace (a second input for dot only).
template <class T, exact_form F, class K>
void launch_exact_kernel(K kernel, const shape& s, depth d, int per_sm, bool dynamic, const void* d_in,
                         std::uint64_t n, void* d_out, const launch_ctx& c, unsigned int chunk_rounds = 1,
                         unsigned int chunk_tail = 0) {
  static_assert(sizeof(exact_acc) <= kMaxAccBytes);
  const unsigned int blocks = plan_grid(s, sizeof(T), n, F == exact_form::dot, true, d, per_sm, c, dynamic);
  if (c.dry_run) return;
  const exact_args<T> args{static_cast<const T*>(d_in),
                           F == exact_form::dot ? static_cast<const T*>(c.d_in2) : nullptr,
                           n,
                           d_out,
                           static_cast<exact_acc*>(c.ws->d_partials),
                           c.ws->d_counter,
                           c.ws->d_exact,
                           c.ws->d_chunk_next,
                           c.d_carry,
                           chunk_rounds,
                           chunk_tail};
  check_cuda(launch_pdl(kernel, args, blocks, s.block, c.stream), "launching the exact reduce kernel (cudaLaunchKernelEx)");
}

// One block of the deep shape with the round's grid test for narrow inputs (device_exact.cuh), for a sum
// or mean that one deep round holds and that fills more than a third of it (tuning.hpp,
// one_deep_round), each thread's partial round padded to a whole one (ops.cuh, pads_rounds).
template <class T, exact_form F>
constexpr auto exact_one_round_kernel_of() {
  using Tu = tuning<sizeof(T), family::exact, depth::deep>;
  return exact_kernel<T, op_exact<T, F, Tu::accs, true>, Tu::block, Tu::unroll, Tu::hint, Tu::min_blocks>;
}
// Blocks of half the threads on twice the grid (tuning.hpp, exact_half_blocks) for sums and means
// whose base grid would leave at least every second SM without a block.
template <class T, exact_form F>
constexpr auto exact_half_kernel_of() {
  constexpr shape s = exact_half_shape();
  static_assert(s.block >= kMinBlockThreads, "capture workspaces are sized for blocks this large");
  return exact_kernel<T, op_exact<T, F, s.accs, false>, s.block, s.unroll, load_hint::ldg, s.min_blocks>;
}

// The dynamic schedule (sums and means from kExactDynamicL2Multiple x the L2 up): its own shape,
// the full resident grid.
template <class T, exact_form F>
void launch_exact_dynamic(const void* d_in, std::uint64_t n, void* d_out, const launch_ctx& c) {
  constexpr shape s = exact_stream_shape(sizeof(T));
  static std::atomic<int> per_sm_cache[64] = {};
  const int per_sm = cached_occupancy(per_sm_cache, exact_stream_kernel_of<T, F>(), s, 0, c);
  if (c.describe)
    describe_single(*c.describe, family::exact, s, per_sm, exact_stream_kernel_of<T, F>(),
                    dynamic_why(n * sizeof(T), c, kExactDynamicL2Multiple));
  const device_policy& pol = policy_for(*c.dev);
  launch_exact_kernel<T, F>(exact_stream_kernel_of<T, F>(), s, depth::base, per_sm, true, d_in, n, d_out, c,
                            static_cast<unsigned int>(exact_chunk_rounds(pol)),
                            static_cast<unsigned int>(exact_chunk_tail(pol)));
}

template <class T, exact_form F>
void launch_exact(const void* d_in, std::uint64_t n, void* d_out, const launch_ctx& c) {
  if constexpr (F != exact_form::dot) {
    if (exact_dynamic(sizeof(T), n, c.dev->info.l2_bytes) && forced_dynamic() != kDynamicOff) {
      launch_exact_dynamic<T, F>(d_in, n, d_out, c);
      return;
    }
  }
  static std::atomic<int> chosen[64] = {};
  const launch_choice ch = choose_shape(chosen, exact_kernel_of<T, F, depth::base>(), exact_kernel_of<T, F, depth::deep>(),
                                        family::exact, sizeof(T), F == exact_form::dot, 0, c);
  using TB = tuning<sizeof(T), family::exact, depth::base>;
  using TD = tuning<sizeof(T), family::exact, depth::deep>;
  // f32 and f64 sums and means below the grid's first wave: one deep block for an input one deep
  // round holds (f32), blocks of half the threads where base's grid is sparse (tuning.hpp). A
  // forced depth takes the forced shape at every size.
  if constexpr (F != exact_form::dot && (std::is_same_v<T, float> || std::is_same_v<T, double>)) {
    if (forced_depth() < 0 && ch.d == depth::base) {
      if (c.describe)
        c.describe->why += std::is_same_v<T, float>
                               ? "; sums and means that fill more than a third of one deep round: one deep "
                                 "block; where one 256-thread block holds them or base's grid holds a block in "
                                 "at most every second SM: 256-thread blocks"
                               : "; where base's grid holds a block in at most every second SM: 256-thread blocks";
      if constexpr (std::is_same_v<T, float>) {
        if (one_deep_round(n * sizeof(T), TB::s, TD::s)) {
          static std::atomic<int> one_round_per_sm[64] = {};
          const int per_sm = cached_occupancy(one_round_per_sm, exact_one_round_kernel_of<T, F>(), TD::s, 0, c);
          launch_exact_kernel<T, F>(exact_one_round_kernel_of<T, F>(), TD::s, depth::deep, per_sm, false, d_in, n,
                                    d_out, c);
          return;
        }
      }
      const std::uint64_t base_blocks = grid_for(TB::s, sizeof(T), n, false, true, c.dev->sm_count, ch.per_sm,
                                                 c.ws ? c.ws->max_blocks : kMaxBlocks, policy_for(*c.dev).grid);
      if (exact_half_blocks(base_blocks, c.dev->sm_count) || exact_half_single(sizeof(T), n)) {
        static std::atomic<int> half_per_sm[64] = {};
        const int per_sm = cached_occupancy(half_per_sm, exact_half_kernel_of<T, F>(), exact_half_shape(), 0, c);
        launch_exact_kernel<T, F>(exact_half_kernel_of<T, F>(), exact_half_shape(), depth::base, per_sm, false, d_in,
                                  n, d_out, c);
        return;
      }
    }
  }
  if (ch.d == depth::deep)
    launch_exact_kernel<T, F>(exact_kernel_of<T, F, depth::deep>(), TD::s, depth::deep, ch.per_sm, false, d_in, n, d_out, c);
  else
    launch_exact_kernel<T, F>(exact_kernel_of<T, F, depth::base>(), TB::s, depth::base, ch.per_sm, false, d_in, n, d_out, c);
}

// The statistics' narrow blocks (tuning.hpp, stats_narrow_shape) for f32 and f64 inputs where
// the base shape's grid is sparse (stats_narrow_blocks); elsewhere, or with a forced depth, the
// one-pass launcher.
template <class T, class Op>
constexpr auto stats_narrow_kernel_of() {
  constexpr shape s = stats_narrow_shape(sizeof(T));
  static_assert(s.block >= kMinBlockThreads, "capture workspaces are sized for blocks this large");
  constexpr int mb = min_blocks_v<Op> > s.min_blocks ? min_blocks_v<Op> : s.min_blocks;
  return reduce_kernel<T, Op, s.block, s.unroll, load_hint::ldg, layout::strided, mb, s.accs>;
}
template <class T, bool Ignore>
void launch_stats(const void* d_in, std::uint64_t n, void* d_out, const launch_ctx& c) {
  using Op = op_stats<T, Ignore>;
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    // The grids' sizes decide (their caps of blocks per SM do not: a grid that reaches one holds
    // a block in every SM).
    using TB = tuning_of<T, Op, depth::base>;
    constexpr shape s = stats_narrow_shape(sizeof(T));
    const device_policy& pol = policy_for(*c.dev);
    const unsigned int max_blocks = c.ws ? c.ws->max_blocks : kMaxBlocks;
    const std::uint64_t sms = c.dev->sm_count;
    const std::uint64_t base_blocks = grid_for(TB::s, sizeof(T), n, false, true, sms, 1, max_blocks, pol.grid);
    const std::uint64_t narrow_blocks = grid_for(s, sizeof(T), n, false, true, sms, 1, max_blocks, pol.grid);
    if (forced_depth() < 0 && stats_narrow_blocks(base_blocks, narrow_blocks, sms)) {
      static std::atomic<int> per_sm_cache[64] = {};
      const int per_sm = cached_occupancy(per_sm_cache, stats_narrow_kernel_of<T, Op>(), s, max_per_sm_v<Op>, c);
      const unsigned int blocks = plan_grid(s, sizeof(T), n, false, true, depth::base, per_sm, c);
      if (c.dry_run) return;
      reduce_args<T, Op> args{static_cast<const T*>(d_in), n, static_cast<typename Op::out_type*>(d_out),
                              static_cast<typename Op::acc_type*>(c.ws->d_partials), c.ws->d_counter, nullptr};
      check_cuda(launch_pdl(stats_narrow_kernel_of<T, Op>(), args, blocks, s.block, c.stream),
                 "launching the statistics kernel (cudaLaunchKernelEx)");
      return;
    }
  }
  launch<T, Op>(d_in, n, d_out, c);
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    if (c.describe && forced_depth() < 0)
      c.describe->why += "; where base's grid holds a block in at most every second SM: 256-thread blocks";
  }
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
    case kind::stats: return &launch_stats<T, false>;
    default: break;
  }
  if constexpr (is_fp) {
    switch (k) {
      case kind::argmin_ignore: return &launch_arg<T, false, true>;
      case kind::argmax_ignore: return &launch_arg<T, true, true>;
      case kind::stats_ignore: return &launch_stats<T, true>;
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
