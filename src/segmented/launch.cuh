// Host side of the segmented layer: the launch of a plan for (T, Op), and the table of
// launchers per (element type, kind) that api.cpp looks up.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <type_traits>

#include "core/context.hpp"
#include "core/launch.cuh"
#include "kernels.cuh"
#include "segmented.hpp"

namespace tally::seg {

template <class T, class Op>
seg_args<T, Op> make_args(const void* d_in, const problem& p, const plan& pl, void* d_out, const seg_ctx& c) {
  return {static_cast<const T*>(d_in), static_cast<const T*>(p.d_in2), static_cast<typename Op::out_type*>(d_out), p,
          pl.group, pl.per_seg,
          pl.col_vecs, pl.vec,
          static_cast<typename Op::acc_type*>(
              core::segmented_scratch(*c.ws, scratch_bytes(p, pl, sizeof(T), sizeof(typename Op::acc_type)))),
          c.ws->d_seg_counters, c.d_status, pl.short_max, pl.chunk, pl.chunks, pl.tiles, pl.span, pl.span_segs, pl.span_mid,
          pl.stripe, pl.stripe > 0 ? (p.n + pl.stripe - 1) / pl.stripe : 0,
          p.ragged() ? reinterpret_cast<unsigned int*>(c.ws->d_seg_status + kOnceStatusWord) : nullptr};
}

// Ragged problems: the offset check (and, for tile plans, each tile's first segment) ahead of the
// plan's launches; the kernels read its words first. Pieces and the one-launch kernel check the
// offsets themselves.
template <class T, class Op>
void check_offsets(const problem& p, const plan& pl, const seg_args<T, Op>& a, const seg_ctx& c) {
  if (!p.ragged() || pl.how == strategy::pieces || pl.how == strategy::once) return;
  tile_partition part;
  if (pl.how == strategy::ragged && pl.tiles > 0 && pl.stripe == 0) {  // stripes find their own first segment
    const ragged_ws<typename Op::acc_type> w(a.d_partials, pl.chunks, pl.tiles);
    part.d_first = w.first;
    part.tile = static_cast<std::uint64_t>(kTileElems);
    part.tiles = pl.tiles;
    part.chunk = pl.chunk;
  }
  validate_offsets(p, c.ws->d_seg_status, c.stream, part);
}
// Whether a lean kernel keeps everything in registers on the current device (device `ordinal`),
// asked of the kernel loaded for it (cudaFuncGetAttributes: no local memory) once per device: a GPU
// of another architecture may JIT it from PTX to another register allocation.
template <auto Kernel>
bool fits_registers(int ordinal, const char* what) {
  static std::atomic<int> known[64];  // per device ordinal: 0 not asked, 1 fits, 2 spills
  std::atomic<int>& slot = known[ordinal & 63];
  int k = slot.load(std::memory_order_relaxed);
  if (k == 0) {
    cudaFuncAttributes at{};
    core::check_cuda(cudaFuncGetAttributes(&at, Kernel), what);
    k = at.localSizeBytes == 0 ? 1 : 2;
    slot.store(k, std::memory_order_relaxed);
  }
  return k == 1;
}
template <class Op>
inline constexpr bool kLeanOp = core::family_v<Op> == core::family::plain && !core::binary_v<Op>;
// Whether (T, Op) may take the lean split kernel: a plain op whose kernel fits 32 registers a
// thread (ptxas of nvcc 13.0 for sm_90 spills 8-60 bytes in the logical ops and the bitwise ops
// of 4- and 8-byte integers; every sum, product, min, max and float mean fits).
template <class T, class Op>
bool lean_split_ok(int ordinal) {
  if constexpr (!kLeanOp<Op>) {
    return false;
  } else {
    return fits_registers<seg_split_lean_kernel<T, Op, kSplitBlockSmall>>(ordinal,
                                                                           "cudaFuncGetAttributes (the lean split kernel)");
  }
}
// And the lean columns kernel: a plain op whose tile fits 64 registers a thread. Compiled for
// elements of 4 and 8 bytes, and of 2 bytes with accumulators of at most 4 bytes (f16 and bf16 in
// f32; i16 and u16 min, max, bitwise and logical ops), which fit for sm_90 since the combine
// stopped reading its results at a run-time index (a 32-byte stack frame before). 1-byte elements
// (16 results a vector: 700-2900 bytes of spill) and 2-byte integers' sums and products (8-byte
// accumulators: 800-900 bytes) never fit: their kernels are not compiled at all (each costs build
// time in all 12 element types' objects).
template <class T, class Op>
inline constexpr bool kLeanColumns =
    kLeanOp<Op> && (sizeof(T) >= 4 || (sizeof(T) == 2 && sizeof(typename Op::acc_type) <= 4));
template <class T, class Op>
bool lean_columns_ok(int ordinal) {
  if constexpr (!kLeanColumns<T, Op>) {
    return false;
  } else {
    return fits_registers<seg_columns_lean_kernel<T, Op, kColumnsBlock>>(
        ordinal, "cudaFuncGetAttributes (the lean columns kernel)");
  }
}

template <class T, class Op>
plan plan_of(const problem& p, bool exact, const seg_ctx& c) {
  // The benchmark's sweep of plans: a column plan for a strided axis, a row plan for rows, a
  // ragged plan for ragged segments.
  const plan* forced = exact ? nullptr : forced_plan();
  const bool row_plan = forced != nullptr && (forced->how == strategy::group || forced->how == strategy::split ||
                                              forced->how == strategy::rowtile);
  const bool ragged_plan = forced != nullptr && (forced->how == strategy::ragged || forced->how == strategy::pieces ||
                                                 forced->how == strategy::once);
  const bool fits = forced != nullptr && (p.ragged() ? ragged_plan : !ragged_plan && row_plan == p.contiguous());
  device_limits lim = c.limits;
  lim.commutes = kCommutes<Op> && !core::binary_v<Op>;
  lim.split_lean = !exact && p.contiguous() && lean_split_ok<T, Op>(c.dev->ordinal);
  lim.columns_lean = !exact && !p.contiguous() && lean_columns_ok<T, Op>(c.dev->ordinal);
  const plan pl = fits ? *forced : make_plan(p, sizeof(T), sizeof(typename Op::acc_type), exact, lim);
  // A forced ragged plan must fit this call (plan.cpp, forced_plan_refusal).
  if (fits) {
    const std::string why = forced_plan_refusal(p, pl, sizeof(T), sizeof(typename Op::acc_type), lim);
    if (!why.empty()) throw error("tally: internal error: " + why);
  }
  record_plan(pl);
  return pl;
}

// The plan of a unary op: for strided axes the rule also reads how many blocks of this op's
// columns kernel an SM holds (its registers decide; asked once per device and op).
template <class T, class Op>
plan plan_unary(const problem& p, const seg_ctx& c) {
  if (p.contiguous()) return plan_of<T, Op>(p, false, c);
  constexpr int kMaxDevices = 64;
  static std::atomic<int> per_sm[kMaxDevices];
  seg_ctx cc = c;
  const int dev = c.dev->ordinal;
  int n = dev >= 0 && dev < kMaxDevices ? per_sm[dev].load(std::memory_order_relaxed) : 0;
  if (n == 0) {
    n = core::occupancy_of(seg_columns_kernel<T, Op, kColumnsBlock>, core::shape{kColumnsBlock, 1, 1, 1});
    if (dev >= 0 && dev < kMaxDevices) per_sm[dev].store(n, std::memory_order_relaxed);
  }
  cc.limits.columns_blocks_per_sm = n;
  return plan_of<T, Op>(p, false, cc);
}

// Launches kernel(a) with programmatic dependent launch (each segmented kernel waits for the
// previous launch's writes first, so its launch overlaps that kernel's tail).
template <class Kernel, class Args>
void go(Kernel kernel, const Args& a, unsigned blocks, int block, const seg_ctx& c, const char* what) {
  core::check_cuda(core::launch_pdl(kernel, a, blocks, block, c.stream), what);
}

// The thin columns kernel of a plan: vector (vector_results) or element loads, one or four vectors per thread
// (four only where the accumulators are small: thin_wide_ok, which the plan rule asks too).
template <class T, class Op>
void launch_thin(const plan& pl, const seg_args<T, Op>& a, const seg_ctx& c) {
  constexpr int acc = sizeof(typename Op::acc_type);
  constexpr int VN = vector_results(static_cast<int>(sizeof(T)), acc);  // as the plan rule
  constexpr const char* what = "launching the segmented thin columns kernel";
  if (pl.group == kThinWide) {
    if constexpr (thin_wide_ok(VN, acc))
      if (pl.vec) return go(seg_thin_kernel<T, Op, kColumnsBlock, VN, kThinWide>, a, pl.blocks, kColumnsBlock, c, what);
    if constexpr (thin_wide_ok(1, acc))
      if (!pl.vec) return go(seg_thin_kernel<T, Op, kColumnsBlock, 1, kThinWide>, a, pl.blocks, kColumnsBlock, c, what);
  } else if (pl.group == 1) {
    if (pl.vec) return go(seg_thin_kernel<T, Op, kColumnsBlock, VN, 1>, a, pl.blocks, kColumnsBlock, c, what);
    return go(seg_thin_kernel<T, Op, kColumnsBlock, 1, 1>, a, pl.blocks, kColumnsBlock, c, what);
  }
  throw error("tally: internal error: thin columns plan with " + std::to_string(pl.group) + " vectors per thread");
}

// A grid-stride kernel's grid: the plan's, at most one wave of the blocks an SM really holds of
// this kernel (its registers decide; asked once per device). The plan rule counts
// max_threads_per_sm / block; a grid past the real wave would leave its last blocks to run all
// their rounds behind the others.
template <auto Kernel>
unsigned resident_grid(unsigned want, int block, const seg_ctx& c) {
  static std::atomic<int> per_sm[64];
  const int per = core::cached_occupancy(per_sm, Kernel, core::shape{block, 1, 1, 1}, 0,
                                         core::launch_ctx{c.dev, c.stream, c.ws});
  const std::uint64_t wave = std::uint64_t(std::max(1, c.limits.sm_count)) * static_cast<std::uint64_t>(per);
  return static_cast<unsigned>(std::min<std::uint64_t>(want, wave));
}
template <auto Kernel, class Args>
void go_resident(const Args& a, unsigned blocks, int block, const seg_ctx& c, const char* what) {
  go(Kernel, a, resident_grid<Kernel>(blocks, block, c), block, c, what);
}
// Row tiles and lane groups: the plan's flat grid as it is (plan::flat), else a resident one.
template <auto Kernel, class Args>
void go_rows(const plan& pl, const Args& a, const seg_ctx& c, const char* what) {
  if (pl.flat) go(Kernel, a, pl.blocks, kGroupBlock, c, what);
  else go_resident<Kernel>(a, pl.blocks, kGroupBlock, c, what);
}

// The span kernel of a plan: its window's shared memory for each warp of a block (dynamic; the
// kernel may take up to kSpanMaxBytes a warp, and the SM's largest carveout is asked for, so
// that the blocks the registers allow also fit their windows), a grid of at most the blocks an
// SM holds with that window (asked once per device and window size).
template <class T, class Op>
void launch_span(const plan& pl, const seg_args<T, Op>& a, const seg_ctx& c, const char* what) {
  constexpr auto kernel = seg_span_kernel<T, Op, kSpanBlock>;
  constexpr int kWarps = kSpanBlock / 32;
  constexpr int kSizes = 6;  // windows of 512 B .. 16 KiB
  static std::atomic<int> per_sm[64][kSizes];
  int li = 0;
  while (li + 1 < kSizes && (kSpanMinBytes << li) < pl.span) ++li;
  if ((kSpanMinBytes << li) != pl.span) throw error("tally: internal error: a span window of " + std::to_string(pl.span) + " bytes");
  const std::size_t smem = static_cast<std::size_t>(kWarps) * pl.span;
  std::atomic<int>& slot = per_sm[c.dev->ordinal & 63][li];
  int per = slot.load(std::memory_order_relaxed);
  // Past 48 KiB a block the launch needs the opt-in, set again before every such launch (a
  // device reset clears it; the cache below would not know).
  constexpr std::size_t kDefaultDynamic = std::size_t(48) << 10;
  if (per == 0 || smem > kDefaultDynamic) {
    core::check_cuda(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          static_cast<int>(kWarps * kSpanMaxBytes)),
                     "cudaFuncSetAttribute(span kernel, dynamic shared memory)");
    core::check_cuda(cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                          static_cast<int>(cudaSharedmemCarveoutMaxShared)),
                     "cudaFuncSetAttribute(span kernel, shared memory carveout)");
  }
  if (per == 0) {
    core::check_cuda(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per, kernel, kSpanBlock, smem),
                     "cudaOccupancyMaxActiveBlocksPerMultiprocessor(span kernel)");
    per = std::max(per, 1);
    slot.store(per, std::memory_order_relaxed);
  }
  const std::uint64_t wave = std::uint64_t(std::max(1, c.limits.sm_count)) * static_cast<std::uint64_t>(per);
  const auto blocks = static_cast<unsigned>(std::min<std::uint64_t>(pl.blocks, wave));
  core::check_cuda(core::launch_pdl(kernel, a, blocks, kSpanBlock, c.stream, smem), what);
}

// The stripe kernel of a plan (a warp a stripe; its stages, marks and runs in shared memory,
// 24,832 bytes a block for 4-byte elements, 41,216 for 8-byte ones: no opt-in; the SM's largest carveout asked
// for once per device, so that the blocks the registers allow also fit), then the stripes' fix-up.
template <class T, class Op>
void launch_stripes(const seg_args<T, Op>& a, const seg_ctx& c, const char* what) {
  constexpr auto kernel = seg_stripe_kernel<T, Op, kStripeBlock>;
  constexpr std::size_t smem = std::size_t(kStripeBlock / 32) * kStripeWarpBytes<T>;
  static_assert(smem <= (std::size_t(48) << 10), "the stripe kernel's shared memory without the opt-in");
  static std::atomic<bool> carveout[64];
  if (!carveout[c.dev->ordinal & 63].load(std::memory_order_relaxed)) {
    core::check_cuda(cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                          static_cast<int>(cudaSharedmemCarveoutMaxShared)),
                     "cudaFuncSetAttribute(stripe kernel, shared memory carveout)");
    carveout[c.dev->ordinal & 63].store(true, std::memory_order_relaxed);
  }
  constexpr std::uint64_t kWarps = kStripeBlock / 32;
  if (a.stripes == 0 || a.stripes > 0x7fffffffull) throw error("tally: internal error: ragged stripes out of range");
  core::check_cuda(core::launch_pdl(kernel, a, static_cast<unsigned>((a.stripes + kWarps - 1) / kWarps), kStripeBlock,
                                    c.stream, smem),
                   what);
  go(seg_fixup_kernel<T, Op, kFixupBlock>, a, static_cast<unsigned>((a.stripes * 32 + kFixupBlock - 1) / kFixupBlock),
     kFixupBlock, c, "launching the segmented fix-up kernel (stripes)");
}

// The one-launch ragged kernel of a plan: a cooperative launch (every block resident, which its
// grid barriers need; a grid past what the SMs hold is refused by the launch) of at most one wave
// of the kernel (resident_grid) and a block a tile. Not a dependent launch: it starts once the
// stream's earlier work is done.
template <class T, class Op>
void launch_once(const plan& pl, const seg_args<T, Op>& a, const seg_ctx& c) {
  constexpr auto kernel = seg_once_kernel<T, Op, kTileBlock>;
  if (pl.tiles == 0 || pl.tiles > 0x7fffffffull) throw error("tally: internal error: one-launch ragged tiles out of range");
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(resident_grid<kernel>(static_cast<unsigned>(std::min<std::uint64_t>(pl.tiles, pl.blocks)), kTileBlock, c));
  cfg.blockDim = dim3(kTileBlock);
  cfg.stream = c.stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeCooperative;
  attr[0].val.cooperative = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  record_kernel("launching the segmented one-launch kernel (cooperative)");
  core::check_cuda(cudaLaunchKernelEx(&cfg, kernel, a), "launching the segmented one-launch kernel (cooperative)");
}

// The plans of contiguous rows (unary or binary ops): row tiles, lane groups or split blocks.
// False for any other plan.
template <class T, class Op>
bool launch_rows(const plan& pl, const seg_args<T, Op>& a, const seg_ctx& c) {
  switch (pl.how) {
    case strategy::rowtile:
      if (pl.unroll == 8)
        go_rows<seg_rowtile_kernel<T, Op, kGroupBlock, 8>>(pl, a, c, "launching the segmented row-tile kernel");
      else
        go_rows<seg_rowtile_kernel<T, Op, kGroupBlock, 4>>(pl, a, c, "launching the segmented row-tile kernel");
      return true;
    case strategy::group:
      if (pl.unroll == 8)
        go_rows<seg_group_kernel<T, Op, kGroupBlock, 8>>(pl, a, c, "launching the segmented group kernel");
      else
        go_rows<seg_group_kernel<T, Op, kGroupBlock, 4>>(pl, a, c, "launching the segmented group kernel");
      return true;
    case strategy::split:
      if (pl.split_lean) {
        if constexpr (kLeanOp<Op>) {
          go(seg_split_lean_kernel<T, Op, kSplitBlockSmall>, a, pl.blocks, kSplitBlockSmall, c,
             "launching the segmented lean split kernel");
          return true;
        } else {
          throw error("tally: internal error: a lean split plan for an op outside the plain family");
        }
      }
      if (pl.split_block == kSplitBlockSmall)
        go(seg_split_kernel<T, Op, kSplitBlockSmall>, a, pl.blocks, kSplitBlockSmall, c, "launching the segmented split kernel");
      else
        go(seg_split_kernel<T, Op, kSplitBlock>, a, pl.blocks, kSplitBlock, c, "launching the segmented split kernel");
      return true;
    default: return false;
  }
}

// Any op but the exact ones: group, rowtile, split, columns or ragged.
template <class T, class Op>
void launch(const void* d_in, const problem& p, bool, void* d_out, const seg_ctx& c) {
  const plan pl = plan_unary<T, Op>(p, c);
  const auto a = make_args<T, Op>(d_in, p, pl, d_out, c);
  check_offsets(p, pl, a, c);
  if (pl.blocks == 0 || launch_rows(pl, a, c)) return;
  switch (pl.how) {
    case strategy::columns:
      if (pl.col_lean) {  // forced_plan_refusal: plain ops' 16-byte loads, never with the ring
        if constexpr (kLeanColumns<T, Op>)
          return go(seg_columns_lean_kernel<T, Op, kColumnsBlock>, a, pl.blocks, kColumnsBlock, c,
                    "launching the segmented lean columns kernel");
        throw error("tally: internal error: a lean column plan for an op outside the plain family, 1-byte elements "
                    "or 2-byte elements with accumulators over 4 bytes (no lean columns kernel is compiled for them)");
      }
      if (pl.col_ring) {  // forced_plan_refusal: 16-byte loads of 4-byte elements and accumulators only
        if constexpr (kColumnRing<T, Op>)
          if (pl.vec)
            return go(seg_columns_ring_kernel<T, Op, kColumnsBlock>, a, pl.blocks, kColumnsBlock, c,
                      "launching the segmented columns kernel (two rounds in flight)");
        throw error("tally: internal error: a column plan with two rounds in flight for this dtype and op");
      }
      return go(seg_columns_kernel<T, Op, kColumnsBlock>, a, pl.blocks, kColumnsBlock, c, "launching the segmented columns kernel");
    case strategy::thin: return launch_thin(pl, a, c);
    case strategy::ragged: {
      // Short and middle segments (long ones marked): tiles, spans or lane groups; then the chunks of
      // long ones, then the fix-up of both; the last two return at once where the offsets are
      // not in order (the tile and span kernels then run the lane groups' body).
      // (Eager plans other than four loads in flight over 4- or 8-byte elements are refused:
      // forced_plan_refusal; the rule makes none.) The main kernel is recorded (last_kernel).
      constexpr const char* kTile = "launching the segmented tile kernel";
      constexpr const char* kGroup = "launching the segmented group kernel";
      constexpr const char* kEager = "launching the segmented group kernel (eager)";
      constexpr const char* kSpan = "launching the segmented span kernel";
      constexpr const char* kStripe = "launching the segmented stripe kernel";
      if (pl.stripe > 0) {  // no chunks: a stripe folds segments of any length
        record_kernel(kStripe);
        return launch_stripes(a, c, kStripe);
      }
      if (pl.tiles > 0) {
        if (pl.tiles > 0x7fffffffull) throw error("tally: internal error: too many ragged tiles");
        record_kernel(kTile);
        go_resident<seg_tile_kernel<T, Op, kTileBlock>>(a, static_cast<unsigned>(pl.tiles), kTileBlock, c, kTile);
      } else if (pl.span > 0) {
        record_kernel(kSpan);
        launch_span(pl, a, c, kSpan);
      } else if (pl.unroll == 8) {
        record_kernel(kGroup);
        go_resident<seg_group_kernel<T, Op, kGroupBlock, 8>>(a, pl.blocks, kGroupBlock, c, kGroup);
      } else if (pl.eager) {
        if constexpr (sizeof(T) == 4 || sizeof(T) == 8) {
          record_kernel(kEager);
          go_resident<seg_group_kernel<T, Op, kGroupBlock, 4, true>>(a, pl.blocks, kGroupBlock, c, kEager);
        } else {
          throw error("tally: internal error: an eager ragged plan for elements of " + std::to_string(sizeof(T)) + " bytes");
        }
      } else {
        record_kernel(kGroup);
        go_resident<seg_group_kernel<T, Op, kGroupBlock, 4>>(a, pl.blocks, kGroupBlock, c, kGroup);
      }
      if (pl.chunks > 0x7fffffffull) throw error("tally: internal error: too many ragged chunks");
      go_resident<seg_chunk_kernel<T, Op, kChunkBlock>>(a, static_cast<unsigned>(pl.chunks), kChunkBlock, c,
                                                        "launching the segmented chunk kernel");
      const std::uint64_t fix_blocks =
          (pl.chunks * 32 + kFixupBlock - 1) / kFixupBlock + (pl.tiles + kFixupBlock - 1) / kFixupBlock;
      return go(seg_fixup_kernel<T, Op, kFixupBlock>, a, static_cast<unsigned>(fix_blocks), kFixupBlock, c, "launching the segmented fix-up kernel");
    }
    case strategy::pieces:
      return go_resident<seg_pieces_kernel<T, Op, kPiecesBlock>>(a, pl.blocks, kPiecesBlock, c,
                                                                  "launching the segmented pieces kernel");
    case strategy::once: return launch_once(pl, a, c);
    default:
      throw error("tally: internal error: segmented plan " + std::string(to_string(pl.how)) + " for a non-exact op");
  }
}

// Binary ops (dot of matching rows, fast and compensated): row tiles, the group or the split kernel.
template <class T, class Op>
void launch_binary(const void* d_in, const problem& p, bool, void* d_out, const seg_ctx& c) {
  const plan pl = plan_of<T, Op>(p, false, c);
  const auto a = make_args<T, Op>(d_in, p, pl, d_out, c);
  check_offsets(p, pl, a, c);
  if (pl.blocks == 0 || launch_rows(pl, a, c)) return;
  throw error("tally: internal error: segmented plan " + std::string(to_string(pl.how)) + " for a binary op");
}

// Exact sums, means and dot products (inner == 1): a block per segment, or the 1-D exact reduce per segment.
template <class T, core::exact_form F>
void launch_exact(const void* d_in, const problem& p, bool, void* d_out, const seg_ctx& c) {
  using Op = core::op_exact<T, F>;
  using R = typename Op::out_type;
  const plan pl = plan_of<T, Op>(p, true, c);
  const auto a = make_args<T, Op>(d_in, p, pl, d_out, c);
  check_offsets(p, pl, a, c);
  if (pl.how == strategy::exact_launches) {
    core::launch_ctx lc{c.dev, c.stream, c.ws};
    for (std::uint64_t s = 0; s < p.outer; ++s) {
      if constexpr (F == core::exact_form::dot) lc.d_in2 = static_cast<const T*>(p.d_in2) + s * p.outer_stride2;
      core::launch_exact<T, F>(static_cast<const T*>(d_in) + s * p.outer_stride, p.length, static_cast<R*>(d_out) + s, lc);
    }
    return;
  }
  if (pl.blocks == 0) return;
  go(seg_exact_kernel<T, Op, kSplitBlock>, a, pl.blocks, kSplitBlock, c, "launching the segmented exact kernel");
}

template <class Op>
struct op_tag {
  using type = Op;
};
// The plain kinds of T (core::family::plain: sum, prod, min, max, all, any; float means and
// NaN-ignoring min / max; integer bitwise ops): f(op_tag<Op>{}) with kind k's op, or `none` for
// any other kind. The one map from those kinds to their ops, for the launcher table and for
// lean_available.
template <class T, class R, class F>
R on_plain_kind(core::kind k, R none, F&& f) {
  using core::kind;
  switch (k) {
    case kind::sum: return f(op_tag<core::op_sum<T>>{});
    case kind::prod: return f(op_tag<core::op_prod<T>>{});
    case kind::min: return f(op_tag<core::op_min<T>>{});
    case kind::max: return f(op_tag<core::op_max<T>>{});
    case kind::all: return f(op_tag<core::op_all<T>>{});
    case kind::any: return f(op_tag<core::op_any<T>>{});
    default: break;
  }
  if constexpr (core::is_float_v<T>) {
    switch (k) {
      case kind::mean: return f(op_tag<core::op_mean<core::op_sum<T>, core::mean_out_t<T>>>{});
      case kind::min_ignore: return f(op_tag<core::op_min_ignore<T>>{});
      case kind::max_ignore: return f(op_tag<core::op_max_ignore<T>>{});
      default: break;
    }
  } else if constexpr (std::is_integral_v<T>) {
    switch (k) {
      case kind::bit_and: return f(op_tag<core::op_bit_and<T>>{});
      case kind::bit_or: return f(op_tag<core::op_bit_or<T>>{});
      case kind::bit_xor: return f(op_tag<core::op_bit_xor<T>>{});
      default: break;
    }
  }
  return none;
}

// The launcher of kind k on element type T (nullptr where undefined). argmin/argmax use the
// general form (value and 64-bit index), which never re-reads the input.
template <class T>
seg_launch_fn launcher(core::kind k) {
  using core::kind;
  constexpr bool is_fp = core::is_float_v<T>;
  if constexpr (std::is_same_v<T, bool>) {
    return nullptr;
  } else {
    const seg_launch_fn plain =
        on_plain_kind<T>(k, seg_launch_fn{}, [](auto t) -> seg_launch_fn { return &launch<T, typename decltype(t)::type>; });
    if (plain != nullptr) return plain;
    switch (k) {
      case kind::argmin: return &launch<T, core::op_arg<T, false, false>>;
      case kind::argmax: return &launch<T, core::op_arg<T, true, false>>;
      case kind::stats: return &launch<T, core::op_stats<T, false>>;
      case kind::mean:
        if constexpr (!is_fp) return &launch<T, core::op_mean_int<T>>;
        break;
      default: break;
    }
    if constexpr (is_fp) {
      switch (k) {
        case kind::argmin_ignore: return &launch<T, core::op_arg<T, false, true>>;
        case kind::argmax_ignore: return &launch<T, core::op_arg<T, true, true>>;
        case kind::stats_ignore: return &launch<T, core::op_stats<T, true>>;
        case kind::sum_sq: return &launch<T, core::op_sum_sq<T, false>>;
        case kind::norm2:
          if constexpr (std::is_same_v<T, double>) return &launch<T, core::op_norm2_f64>;
          else return &launch<T, core::op_sum_sq<T, true>>;
        case kind::sum_comp: return &launch<T, core::op_sum_comp<T>>;
        case kind::mean_comp: return &launch<T, core::op_mean<core::op_sum_comp<T>, core::num_t<T>>>;
        case kind::sum_exact: return &launch_exact<T, core::exact_form::sum>;
        case kind::mean_exact: return &launch_exact<T, core::exact_form::mean>;
        case kind::dot: return &launch_binary<T, core::op_dot<T>>;
        case kind::dot_comp: return &launch_binary<T, core::op_dot_comp<T>>;
        case kind::dot_exact: return &launch_exact<T, core::exact_form::dot>;
        default: break;
      }
    }
    return nullptr;
  }
}

// Whether kind k on T takes lean kernel `which` on the current device (device `ordinal`): the
// plain kinds whose lean kernel keeps its accumulators in registers (lean_split_ok,
// lean_columns_ok); every other kind never does. Tests and the benchmark's sweep ask before they
// force a lean plan.
template <class T>
bool lean_available(core::kind k, lean_kernel which, int ordinal) {
  if constexpr (std::is_same_v<T, bool>) {
    return false;
  } else {
    return on_plain_kind<T>(k, false, [which, ordinal](auto t) {
      using Op = typename decltype(t)::type;
      return which == lean_kernel::split ? lean_split_ok<T, Op>(ordinal) : lean_columns_ok<T, Op>(ordinal);
    });
  }
}

}  // namespace tally::seg

#define TALLY_INSTANTIATE_SEGMENTED(T)                                                       \
  template tally::seg::seg_launch_fn tally::seg::launcher<T>(tally::core::kind);            \
  template bool tally::seg::lean_available<T>(tally::core::kind, tally::seg::lean_kernel, int);
