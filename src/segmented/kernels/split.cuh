// A block or several a contiguous segment: long rows (split) and exact sums (exact_block).
#pragma once

#include "groups.cuh"

namespace tally::seg {

// Long contiguous segments: per_seg blocks per segment, each reducing a grid-stride share with
// the core's block code (reduce_block_range: aligned 16-byte body, scalar head and tail, the
// op's own fold and block tree); the last block of a segment combines the partials in order.
// 512 threads (two blocks per SM) for long rows; 256 (four per SM, the same 64 registers a
// thread) for rows of about one round of 256 x 4 vectors, which a 512-thread block would read
// with half its threads and half the loads in flight per SM.
template <class T, class Op, int BLOCK>
__global__ void __launch_bounds__(BLOCK, kSplitThreadsPerSm / BLOCK) seg_split_kernel(seg_args<T, Op> a) {
  kernel_entry();
  using Acc = typename Op::acc_type;
  if (status_bad(a.d_status)) return;
  __shared__ bool last;
  const std::uint64_t work = a.p.outer * a.per_seg;
  for (std::uint64_t w = blockIdx.x; w < work; w += gridDim.x) {
    const std::uint64_t s = w / a.per_seg;
    const unsigned c = static_cast<unsigned>(w % a.per_seg);
    std::uint64_t off = 0, len = 0;
    segment_range(a.p, s, off, len);
    const T* base = a.d_in + off;
    const Acc v = core::reduce_block_range<T, Op, BLOCK, 4, core::load_hint::ldg, core::layout::strided>(
        base, len, c, a.per_seg, second_row(a, s));
    if (a.per_seg == 1) {
      if (threadIdx.x == 0) a.d_out[s] = core::finalize_with<Op>(v, len, base);
      continue;
    }
    if (threadIdx.x == 0) {
      a.d_partials[w] = v;
      const unsigned old = core::atomic_inc_acq_rel(a.d_counters + s, a.per_seg - 1);
      last = old == a.per_seg - 1;
    }
    __syncthreads();
    if (last && threadIdx.x < 32) {
      Acc r = Op::identity();
      for (unsigned k = threadIdx.x; k < a.per_seg; k += 32)
        r = Op::combine(r, core::load_cg(a.d_partials + s * a.per_seg + k));
      r = core::warp_reduce<Op, true>(r);
      if (threadIdx.x == 0) a.d_out[s] = core::finalize_with<Op>(r, len, base);
    }
    __syncthreads();  // `last` is reused by the next segment
  }
}

// Plain ops' rows of whole aligned vectors, a block a row (the rule: rows the split kernel reads
// with one 256-thread block, up to four rounds of BLOCK x 4 vectors; the sweep: any length;
// plan.cpp, lean_split_fits): the split
// kernel's fold without its generic parts (no head or tail, no blocks sharing a row, 32-bit
// indices), so that it fits 32 registers a thread and the SM holds 2048 threads (8 blocks) of it.
// Vector i + u BLOCK folds into acc[u % ACCS] in the order reduce_block_range gives it, one block
// of one: the same bits as the split kernel. Ops whose accumulators spill at 32 registers keep
// the split kernel (launch.cuh, lean_split_ok).
template <class T, class Op, int BLOCK>
__global__ void __launch_bounds__(BLOCK, kSplitLeanThreadsPerSm / BLOCK) seg_split_lean_kernel(seg_args<T, Op> a) {
  kernel_entry();
  using Acc = typename Op::acc_type;
  using V = vec16<T>;
  constexpr int UNROLL = 4, VN = V::size;
  constexpr int OP_ACCS = core::max_accs_v<Op> < 8 ? core::max_accs_v<Op> : 8;
  constexpr int ACCS = UNROLL < OP_ACCS ? UNROLL : OP_ACCS;
  const unsigned rows = static_cast<unsigned>(a.p.outer), nvec = static_cast<unsigned>(a.p.length / VN);
  for (unsigned s = blockIdx.x; s < rows; s += gridDim.x) {
    const T* base = a.d_in + std::uint64_t(s) * a.p.outer_stride;
    const V* __restrict__ row = reinterpret_cast<const V*>(base);
    Acc acc[ACCS];
#pragma unroll
    for (int u = 0; u < ACCS; ++u) acc[u] = Op::identity();
    unsigned i = threadIdx.x;
    for (; i + (UNROLL - 1) * BLOCK < nvec; i += UNROLL * BLOCK) {
      V v[UNROLL];
#pragma unroll
      for (int u = 0; u < UNROLL; ++u) v[u] = core::load_vec<core::load_hint::ldg>(row + i + u * BLOCK);
#pragma unroll
      for (int u = 0; u < UNROLL; ++u)
        acc[u % ACCS] = core::fold_vec<Op>(acc[u % ACCS], v[u], std::uint64_t(i + u * BLOCK) * VN);
    }
#pragma unroll
    for (int u = 0; u < UNROLL - 1; ++u) {
      const unsigned j = i + u * BLOCK;
      if (j < nvec) acc[u % ACCS] = core::fold_vec<Op>(acc[u % ACCS], core::load_vec<core::load_hint::ldg>(row + j),
                                                       std::uint64_t(j) * VN);
    }
    const Acc r = core::block_reduce<Op, BLOCK>(core::combine_all<Op, ACCS>(acc));
    if (threadIdx.x == 0) a.d_out[s] = core::finalize_with<Op>(r, a.p.length, base);
  }
}

// Exact sums and means of contiguous segments: a block per segment with the block's exact
// accumulator (the core's exact op), normalised and rounded once by warp 0 (the same rounding of
// the same exact sum as the 1-D exact reduce, so the same bits).
template <class T, class Op, int BLOCK>
__global__ void __launch_bounds__(BLOCK, 2) seg_exact_kernel(seg_args<T, Op> a) {
  kernel_entry();
  using R = typename Op::out_type;
  if (status_bad(a.d_status)) return;
  core::exact_block_state& st = core::exact_block();
  for (std::uint64_t s = blockIdx.x; s < a.p.outer; s += gridDim.x) {
    for (int k = threadIdx.x; k < core::exact::kWords; k += BLOCK) st.words[k] = 0;
    if (threadIdx.x == 0) st.flushed = 0;
    __syncthreads();
    std::uint64_t off = 0, len = 0;
    segment_range(a.p, s, off, len);
    const core::exact_acc v = core::reduce_block_range<T, Op, BLOCK, 4, core::load_hint::ldg, core::layout::strided,
                                                       Op::max_accs>(a.d_in + off, len, 0, 1, second_row(a, s));
    __syncthreads();  // every flush is in st.words
    if (threadIdx.x < 32) core::exact_finish<R, Op::form>(v, len, a.d_out + s);
    __syncthreads();  // st is reused by the next segment
  }
}

}  // namespace tally::seg
