// Ragged segments in one cooperative launch: the offset check, the tiles and their fix-up as
// three phases of one grid, joined by grid barriers.
#pragma once

#include "check.cuh"
#include "tiles.cuh"

namespace tally::seg {

// The one-launch kernel's words in the workspace (seg_args::d_once; zero between calls, and the
// last block to leave zeroes them again): arrivals at the grid barriers, blocks done, and the
// check's verdicts (some offset bad; the segments not in order).
enum once_word : int { kOnceArrive = 0, kOnceDone = 1, kOnceBad = 2, kOnceUnsorted = 3, kOnceWords = 4 };

__device__ __forceinline__ unsigned load_acquire_gpu(const unsigned* p) {
  unsigned v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

// The k-th barrier of the grid in this launch (every block resident: a cooperative launch): it
// waits for k * gridDim.x arrivals. Writes before it are visible after it to loads that bypass L1
// (load_cg, __ldcg): L1 is not coherent across SMs.
__device__ __forceinline__ void grid_barrier(unsigned* arrive, unsigned k) {
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    atomicAdd(arrive, 1u);
    const unsigned target = k * gridDim.x;
    while (load_acquire_gpu(arrive) < target) __nanosleep(32);
    __threadfence();
  }
  __syncthreads();
}

// Ragged segments, one launch (inputs of at most kTileMaxChunk elements, so no segment is longer
// than the plan's chunk and none goes to the chunk kernel). Phase 1: every thread checks a share
// of the segments (check_segments_share) and writes the tiles' partition; the verdicts go to the
// launch's words. Barrier. Phase 2: bad offsets: nothing is written; out of order: a warp a
// segment; in order: tile_body over the
// tiles (block b takes tiles b, b + grid, ...), which writes the segments inside a tile and leaves
// the partials of the ones crossing its edges. Barrier. Phase 3 (in order): a warp a tile (warp w
// of the grid takes tiles w, w + warps, ...); where a segment begun in tile k runs past its end,
// its partial there, then the entering partials of the tiles it reaches (lane l takes every 32nd,
// then the warp's tree), written as the segment's result: the same association for any grid.
// Against the offset check, tiles, chunks and fix-up (a memset and four launches), one launch: at
// 2^20 elements the launches' latency, not the bytes, was the time (docs/tuning.md, "Ragged
// segments in one launch").
//   W = 4096: segments [0, 5000) [5000, 5000) [5000, 9000), n = 9000: tiles 0-2; phase 2 writes
//   segment 1 (empty), tile 0 leaves segment 0's 4096-element partial, tile 1 its 904 and segment
//   2's first 3192, tile 2 segment 2's last 808; phase 3: tile 0's warp writes segment 0, tile 1's
//   segment 2.
template <class T, class Op, int BLOCK>
__global__ void __launch_bounds__(BLOCK, kTileMinBlocks<Op>) seg_once_kernel(seg_args<T, Op> a) {
  using Acc = typename Op::acc_type;
  __shared__ tile_smem<T, Op, BLOCK> sm;
  __shared__ unsigned long long block_writes;  // the partition's writes of this block
  static_assert(BLOCK >= tile_smem<T, Op, BLOCK>::kWords, "at most a word of each mark map a thread");
  core::pdl_wait();  // (a cooperative launch is not a dependent one: this returns at once)
  unsigned* const words = a.d_once;
  const ragged_ws<Acc> ws(a.d_partials, a.chunks, a.tiles);
  const std::uint64_t G = gridDim.x;
  if (threadIdx.x == 0) block_writes = 0;
  if (threadIdx.x < tile_smem<T, Op, BLOCK>::kWords) sm.bmap[threadIdx.x] = 0, sm.gmap[threadIdx.x] = 0;
  __syncthreads();
  // Phase 1: the check and the partition.
  {
    const tile_partition part{ws.first, static_cast<std::uint64_t>(kTileElems), a.tiles, a.chunk};
    bool sorted = true;
    const std::uint64_t bad = check_segments_share(a.p.d_begin, a.p.d_end, a.p.outer, a.p.n, part, &block_writes,
                                                   blockIdx.x * std::uint64_t(BLOCK) + threadIdx.x, G * BLOCK, sorted);
    const bool any_bad = __syncthreads_or(bad != UINT64_MAX);
    const bool any_unsorted = __syncthreads_or(!sorted);
    if (threadIdx.x == 0) {
      if (any_bad) atomicOr(words + kOnceBad, 1u);
      if (any_unsorted) atomicOr(words + kOnceUnsorted, 1u);
    }
  }
  grid_barrier(words + kOnceArrive, 1);
  const bool bad = __ldcg(words + kOnceBad) != 0, in_order = __ldcg(words + kOnceUnsorted) == 0;  // grid-uniform
  // Phase 2.
  if (!bad && !in_order) {
    // A warp a segment (warp w of the grid takes segments w, w + warps, ...: warp_segment, as the
    // lane groups read their longer segments). (The lane groups' body here cost a sixth of each
    // element type's build of the segmented kernels for a path the rule's inputs rarely take.)
    const unsigned lane = threadIdx.x & 31u;
    const std::uint64_t warps = G * (BLOCK / 32);
    for (std::uint64_t s = blockIdx.x * std::uint64_t(BLOCK / 32) + threadIdx.x / 32; s < a.p.outer; s += warps) {
      const std::int64_t b = a.p.d_begin[s], e = a.p.d_end[s];
      warp_segment<T, Op, 4>(a, s, static_cast<std::uint64_t>(b), static_cast<std::uint64_t>(e - b), lane);
    }
  } else if (!bad) {
    tiles_of_block<T, Op, BLOCK>(a, ws, sm);  // the partition was written in phase 1: past L1
  }
  if (!bad && in_order) {
    grid_barrier(words + kOnceArrive, 2);
    core::pdl_launch_dependents();
    // Phase 3: the segments crossing tiles.
    constexpr std::int64_t W = kTileElems;
    const unsigned lane = threadIdx.x & 31u;
    const std::uint64_t warps = G * (BLOCK / 32);
    for (std::uint64_t k = blockIdx.x * std::uint64_t(BLOCK / 32) + threadIdx.x / 32; k < a.tiles; k += warps) {
      const std::int64_t s = __ldcg(ws.tail_seg + k);
      if (s < 0 || static_cast<std::uint64_t>(s) >= a.p.outer) continue;  // warp-uniform
      const std::int64_t b = a.p.d_begin[s], e = a.p.d_end[s];
      const std::uint64_t last = static_cast<std::uint64_t>(e - 1) / static_cast<std::uint64_t>(W);
      Acc r = Op::identity();
      for (std::uint64_t t = k + 1 + lane; t <= last; t += 32) r = Op::combine(r, core::load_cg(ws.head_part + t));
      r = core::warp_reduce<Op, true>(r);
      if (lane == 0)
        a.d_out[s] = core::finalize_with<Op>(Op::combine(core::load_cg(ws.tail_part + k), r),
                                             static_cast<std::uint64_t>(e - b), a.d_in + b);
    }
  }
  // The last block to leave zeroes the words for the next call (every block has passed its
  // barriers and read the verdicts before it counts itself done).
  __syncthreads();
  if (threadIdx.x == 0 && core::atomic_inc_acq_rel(words + kOnceDone, gridDim.x - 1) == gridDim.x - 1) {
    atomicExch(words + kOnceArrive, 0u);
    atomicExch(words + kOnceBad, 0u);
    atomicExch(words + kOnceUnsorted, 0u);
  }
}

}  // namespace tally::seg
