// Ragged chunks (the long segments' parts) and the fix-up that joins the partials of chunks,
// tiles and stripes.
#pragma once

#include "groups.cuh"

namespace tally::seg {

// Ragged, offsets in order: chunk k of the input, [k * chunk, (k + 1) * chunk). The block reduces
// the part of segment A (covering the chunk's start, begun before it) and of segment B
// (beginning in it, ending past it) that lie in the chunk, each to a partial. A grid of at most
// the resident blocks: block g takes chunks g, g + grid, ..., BLOCK at a time; each thread checks
// one chunk's marks against the offsets, and the block reads only the chunks with a long segment
// (most have none where the segments are short: 16384 chunks of 64 KiB at 2^28 f32).
template <class T, class Op, int BLOCK>
__global__ void __launch_bounds__(BLOCK) seg_chunk_kernel(seg_args<T, Op> a) {
  core::pdl_wait();  // the previous launch's writes (offset check, marks) are visible
  // (no early trigger: the fix-up would hold SM slots)
  using Acc = typename Op::acc_type;
  if (status_bad(a.d_status) || a.d_status[1] != kSorted) return;
  __shared__ std::int64_t sh_ab[BLOCK], sh_ae[BLOCK], sh_bb[BLOCK];  // A's begin and end, B's begin (or -1)
  __shared__ std::uint64_t sh_k[BLOCK];
  __shared__ unsigned count;
  ragged_ws<Acc> w(a.d_partials, a.chunks, a.tiles);
  const std::uint64_t G = gridDim.x;
  for (std::uint64_t i0 = 0; i0 * G + blockIdx.x < a.chunks; i0 += BLOCK) {  // block-uniform
    if (threadIdx.x == 0) count = 0;
    __syncthreads();
    const std::uint64_t k = (i0 + threadIdx.x) * G + blockIdx.x;
    if (k < a.chunks) {
      const std::uint64_t cs = k * a.chunk, ce = cs + a.chunk < a.p.n ? cs + a.chunk : a.p.n;
      std::int64_t ab = -1, ae = -1, bb = -1;
      const std::int64_t sa = w.cover_a[k], sb = w.cover_b[k];
      if (sa >= 0 && static_cast<std::uint64_t>(sa) < a.p.outer) {
        const std::int64_t b = a.p.d_begin[sa], e = a.p.d_end[sa];
        if (b < static_cast<std::int64_t>(cs) && e > static_cast<std::int64_t>(cs) &&
            static_cast<std::uint64_t>(e - b) > a.chunk)
          ab = b, ae = e;
      }
      if (sb >= 0 && static_cast<std::uint64_t>(sb) < a.p.outer) {
        const std::int64_t b = a.p.d_begin[sb], e = a.p.d_end[sb];
        if (b >= static_cast<std::int64_t>(cs) && b < static_cast<std::int64_t>(ce) &&
            static_cast<std::uint64_t>(e - b) > a.chunk)
          bb = b;
      }
      if (ab >= 0 || bb >= 0) {
        const unsigned j = atomicAdd(&count, 1u);  // the list's order: any (each chunk's partials are its own)
        sh_ab[j] = ab, sh_ae[j] = ae, sh_bb[j] = bb, sh_k[j] = k;
      }
    }
    __syncthreads();
    const unsigned listed = count;
    for (unsigned j = 0; j < listed; ++j) {
      const std::uint64_t kk = sh_k[j];
      const std::uint64_t cs = kk * a.chunk, ce = cs + a.chunk < a.p.n ? cs + a.chunk : a.p.n;
      const std::int64_t ab = sh_ab[j], ae = sh_ae[j], bb = sh_bb[j];
      if (ab >= 0) {  // block-uniform
        const std::uint64_t hi = (static_cast<std::uint64_t>(ae) < ce ? static_cast<std::uint64_t>(ae) : ce) - ab;
        Acc v = range_share<T, Op>(a.d_in + ab, cs - ab, hi, threadIdx.x, BLOCK);
        v = core::block_reduce<Op, BLOCK>(v);
        if (threadIdx.x == 0) w.part_a[kk] = v;
        __syncthreads();  // block_reduce's shared memory is free again
      }
      if (bb >= 0) {
        Acc v = range_share<T, Op>(a.d_in + bb, 0, ce - bb, threadIdx.x, BLOCK);
        v = core::block_reduce<Op, BLOCK>(v);
        if (threadIdx.x == 0) w.part_b[kk] = v;
        __syncthreads();
      }
    }
    __syncthreads();  // every thread has read `count`
  }
}

// Ragged, offsets in order: a warp per chunk; where a long segment begins in the chunk, the warp
// combines its partials in a fixed order (B of this chunk, then A of each later chunk it reaches:
// lane l takes every 32nd, then the warp's tree) and writes the segment's result. Tile plans
// add a thread per tile after the chunks' warps: where a segment begun in the tile runs past
// its end, the thread adds the partials of the tiles it reaches, in order (a segment of at most
// a chunk: a few tiles). Stripe plans (no chunks), a warp a stripe instead: where a segment begun
// in stripe k runs past its end, its partial there, then the entering partials of the stripes it
// reaches (lane l takes every 32nd, then the warp's tree), written as the segment's result.
template <class T, class Op, int BLOCK>
__global__ void __launch_bounds__(BLOCK) seg_fixup_kernel(seg_args<T, Op> a) {
  kernel_entry();
  using Acc = typename Op::acc_type;
  if (status_bad(a.d_status) || a.d_status[1] != kSorted) return;
  const ragged_ws<Acc> w(a.d_partials, a.chunks, a.tiles);
  if (a.stripes > 0) {  // stripe plans: a warp a stripe
    const std::uint64_t k = (std::uint64_t(blockIdx.x) * BLOCK + threadIdx.x) / 32;
    const unsigned lane = threadIdx.x & 31u;
    if (k >= a.stripes) return;  // warp-uniform
    const std::int64_t s = w.tail_seg[k];
    if (s < 0 || static_cast<std::uint64_t>(s) >= a.p.outer) return;
    const std::int64_t b = a.p.d_begin[s], e = a.p.d_end[s];
    const std::uint64_t last = static_cast<std::uint64_t>(e - 1) / a.stripe;
    Acc r = Op::identity();
    for (std::uint64_t t = k + 1 + lane; t <= last; t += 32) r = Op::combine(r, w.head_part[t]);
    r = core::warp_reduce<Op, true>(r);
    if (lane == 0) a.d_out[s] = core::finalize_with<Op>(Op::combine(w.tail_part[k], r), static_cast<std::uint64_t>(e - b), a.d_in + b);
    return;
  }
  const std::uint64_t chunk_blocks = (a.chunks * 32 + BLOCK - 1) / BLOCK;
  if (blockIdx.x >= chunk_blocks) {  // block-uniform: the tiles' part
    const std::uint64_t k = (std::uint64_t(blockIdx.x) - chunk_blocks) * BLOCK + threadIdx.x;
    if (k >= a.tiles) return;
    const std::int64_t s = w.tail_seg[k];
    if (s < 0 || static_cast<std::uint64_t>(s) >= a.p.outer) return;
    const std::int64_t b = a.p.d_begin[s], e = a.p.d_end[s];
    constexpr std::int64_t W = kTileElems;
    Acc r = w.tail_part[k];
    for (std::uint64_t t = k + 1; static_cast<std::int64_t>(t) * W < e; ++t) r = Op::combine(r, w.head_part[t]);
    a.d_out[s] = core::finalize_with<Op>(r, static_cast<std::uint64_t>(e - b), a.d_in + b);
    return;
  }
  const std::uint64_t k = (std::uint64_t(blockIdx.x) * BLOCK + threadIdx.x) / 32;
  const unsigned lane = threadIdx.x & 31u;
  if (k >= a.chunks) return;  // warp-uniform
  const std::uint64_t cs = k * a.chunk, ce = cs + a.chunk < a.p.n ? cs + a.chunk : a.p.n;
  const std::int64_t sb = w.cover_b[k];
  if (sb < 0 || static_cast<std::uint64_t>(sb) >= a.p.outer) return;
  const std::int64_t b = a.p.d_begin[sb], e = a.p.d_end[sb];
  if (b < static_cast<std::int64_t>(cs) || b >= static_cast<std::int64_t>(ce) || static_cast<std::uint64_t>(e - b) <= a.chunk)
    return;
  const std::uint64_t last = (static_cast<std::uint64_t>(e) - 1) / a.chunk;
  Acc r = Op::identity();
  for (std::uint64_t i = lane; i <= last - k; i += 32) r = Op::combine(r, i == 0 ? w.part_b[k] : w.part_a[k + i]);
  r = core::warp_reduce<Op, true>(r);
  if (lane == 0) a.d_out[sb] = core::finalize_with<Op>(r, static_cast<std::uint64_t>(e - b), a.d_in + b);
}

}  // namespace tally::seg
