// The single-pass device-wide reduction: one launch for every size.
//
// Each block reduces one contiguous range of the aligned body with 16-byte loads, UNROLL of them
// in flight per thread into UNROLL independent accumulators. A grid of one block writes the
// result directly. A larger grid writes one partial per block; the last block to arrive (an
// acquire-release counter that wraps back to zero for the next call) combines the partials in
// block order. Every combine order is fixed by n and the grid, so results are bitwise repeatable.
//
//   reduce_kernel<float, op_sum<float>, 512, 8><<<1, 512>>>(x, 3, out, ...)  // x = {1,2,3} -> 6
#pragma once

#include <cstdint>
#include <type_traits>

#include "block.cuh"
#include "load.cuh"
#include "ops.cuh"

namespace tally::core {

template <class T, class Op>
struct reduce_args {
  const T* d_in;
  std::uint64_t n;
  typename Op::out_type* d_out;
  typename Op::acc_type* d_partials;  // one per block when gridDim.x > 1
  unsigned int* d_counter;            // zero between calls
  const T* d_in2 = nullptr;           // the second input of binary ops (dot)
};

// Programmatic dependent launch: wait for the previous kernel in the stream to finish (its
// writes visible), and let the next one start launching while this one runs.
__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
__device__ __forceinline__ void pdl_launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// atomicInc with acquire-release ordering at device scope: publishes this block's partial and,
// for the last block, makes every other block's partial visible. Wraps to 0 after `limit`.
__device__ __forceinline__ unsigned int atomic_inc_acq_rel(unsigned int* p, unsigned int limit) {
  unsigned int old;
  asm volatile("atom.acq_rel.gpu.global.inc.u32 %0, [%1], %2;"
               : "=r"(old)
               : "l"(p), "r"(limit)
               : "memory");
  return old;
}

// Load that bypasses L1 (which is not coherent across SMs), for the partials of other blocks:
// 4-byte words, or halves or bytes for 1- and 2-byte values.
template <class A>
__device__ __forceinline__ A load_cg(const A* p) {
  using U = std::conditional_t<sizeof(A) % 4 == 0, unsigned int, std::conditional_t<sizeof(A) % 2 == 0, unsigned short, unsigned char>>;
  constexpr int W = sizeof(A) / sizeof(U);
  U w[W];
#pragma unroll
  for (int k = 0; k < W; ++k) w[k] = __ldcg(reinterpret_cast<const U*>(p) + k);
  A r;
  __builtin_memcpy(&r, w, sizeof(A));
  return r;
}

// Combine UNROLL accumulators pairwise in a fixed tree.
template <class Op, int N>
__device__ __forceinline__ typename Op::acc_type combine_all(const typename Op::acc_type (&a)[N]) {
  if constexpr (N == 1) {
    return a[0];
  } else {
    typename Op::acc_type t[N / 2 + N % 2];
#pragma unroll
    for (int k = 0; k < N / 2; ++k) t[k] = Op::combine(a[2 * k], a[2 * k + 1]);
    if constexpr (N % 2) t[N / 2] = a[N - 1];
    return combine_all<Op, N / 2 + N % 2>(t);
  }
}

// Element i's vector of the second input (dot): a 16-byte load when it shares the first input's
// alignment, else element loads (correct for any element-aligned pointer, slower).
template <load_hint H, class T>
__device__ __forceinline__ vec16<T> load_second(const T* __restrict__ d_y, std::uint64_t first, bool aligned) {
  if (aligned) return load_vec<H>(reinterpret_cast<const vec16<T>*>(d_y + first));
  vec16<T> r;
#pragma unroll
  for (int k = 0; k < vec16<T>::size; ++k) r.e[k] = d_y[first + k];
  return r;
}

// The per-block part: this block's share of the input reduced into thread 0's return value.
// UNROLL vectors are in flight per thread; they fold into min(UNROLL, the op's max_accs,
// ACCS_CAP) accumulators, each of which sees its elements in increasing index order
// (argmin/argmax rely on that).
// PIPE (one-input ops without a round fold): the next whole round's loads issued before this
// round folds (below); the vectors fold into the same accumulators in the same order, so the bits
// are those of the plain loop (tests/test_pipelined_gpu.cu).
template <class T, class Op, int BLOCK, int UNROLL, load_hint H, layout L, int ACCS_CAP = 8, bool PIPE = false>
__device__ __forceinline__ typename Op::acc_type reduce_block_range(const T* __restrict__ d_in,
                                                                    std::uint64_t n,
                                                                    unsigned int block,
                                                                    unsigned int blocks,
                                                                    const T* __restrict__ d_in2 = nullptr) {
  using Acc = typename Op::acc_type;
  using V = vec16<T>;
  constexpr int VN = V::size;
  constexpr int OP_ACCS = max_accs_v<Op> < ACCS_CAP ? max_accs_v<Op> : ACCS_CAP;
  constexpr int ACCS = UNROLL < OP_ACCS ? UNROLL : OP_ACCS;
  const split16 s = split_input(d_in, n);
  const V* __restrict__ d_vec = reinterpret_cast<const V*>(d_in + s.head);
  bool y_aligned = false;
  if constexpr (binary_v<Op>)
    y_aligned = ((reinterpret_cast<std::uintptr_t>(d_in2) ^ reinterpret_cast<std::uintptr_t>(d_in)) & 15u) == 0;

  // contiguous: one range per block, whole 128-byte lines (8 vectors) so warps stay aligned.
  // chunk: range `block` of `blocks`, whole rounds of BLOCK x UNROLL vectors.
  // strided: thread i of block b reads vectors b*BLOCK + i, then every blocks*BLOCK further.
  std::uint64_t i, end, stride;
  if constexpr (L == layout::contiguous || L == layout::chunk) {
    constexpr std::uint64_t unit = L == layout::chunk ? std::uint64_t(BLOCK) * UNROLL : 8;
    std::uint64_t per = (s.nvec + blocks - 1) / blocks;
    per = (per + unit - 1) / unit * unit;
    const std::uint64_t beg = per * block < s.nvec ? per * block : s.nvec;
    end = beg + per < s.nvec ? beg + per : s.nvec;
    i = beg + threadIdx.x;
    stride = BLOCK;
  } else {
    end = s.nvec;
    i = std::uint64_t(block) * BLOCK + threadIdx.x;
    stride = std::uint64_t(blocks) * BLOCK;
  }

  Acc acc[ACCS];
#pragma unroll
  for (int u = 0; u < ACCS; ++u) acc[u] = Op::identity();

  // Binary ops load the second input's vectors in the same batch, so 2 x UNROLL are in flight.
  constexpr int W = binary_v<Op> ? UNROLL : 1;
  auto fold_at = [&](Acc a, const V& v, const V& w, std::uint64_t j) {
    if constexpr (binary_v<Op>) return fold_vec2<Op>(a, v, w, s.head + j * VN);
    else return fold_vec<Op>(a, v, s.head + j * VN);
  };
  // One round of UNROLL vectors of a one-input op, starting at vector j.
  auto fold_round_at = [&](const V (&v)[UNROLL], std::uint64_t j) {
    if constexpr (round_fold_v<Op>) {
      Op::template fold_round<UNROLL, ACCS>(acc, v);
    } else {
#pragma unroll
      for (int u = 0; u < UNROLL; ++u) acc[u % ACCS] = fold_at(acc[u % ACCS], v[u], v[u], j + u * stride);
    }
  };
  if constexpr (PIPE) {
    static_assert(!binary_v<Op> && !round_fold_v<Op>, "the pipelined rounds are for one-input folds");
    // Round r + 1's loads go out before round r folds; then they move into place (the moves wait
    // for them, and the round after can go out only then): a round every max(fold, latency)
    // instead of fold + latency, one copy of the fold in the loop.
    if (i + (UNROLL - 1) * stride < end) {
      V cur[UNROLL];
#pragma unroll
      for (int u = 0; u < UNROLL; ++u) cur[u] = load_vec<H>(d_vec + i + u * stride);
#pragma unroll 1
      for (;;) {
        const std::uint64_t j = i + UNROLL * stride;
        const bool more = j + (UNROLL - 1) * stride < end;
        V nxt[UNROLL];
        if (more) {
#pragma unroll
          for (int u = 0; u < UNROLL; ++u) nxt[u] = load_vec<H>(d_vec + j + u * stride);
        }
        fold_round_at(cur, i);
        i = j;  // the first vector of the partial round, if any, when no whole round follows
        if (!more) break;
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) cur[u] = nxt[u];
      }
    }
  } else {
    for (; i + (UNROLL - 1) * stride < end; i += UNROLL * stride) {
      V v[UNROLL], w[W];
#pragma unroll
      for (int u = 0; u < UNROLL; ++u) {
        v[u] = load_vec<H>(d_vec + i + u * stride);
        if constexpr (binary_v<Op>) w[u] = load_second<H>(d_in2, s.head + (i + u * stride) * VN, y_aligned);
      }
      if constexpr (binary_v<Op>) {
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) acc[u % ACCS] = fold_at(acc[u % ACCS], v[u], w[u % W], i + u * stride);
      } else {
        fold_round_at(v, i);
      }
    }
  }
  // The last, partial round (fewer than UNROLL vectors). One-input ops issue every load before
  // the first fold, so the round costs one memory latency, not one per vector (f32 argmax at
  // 2^22: 5.3 -> 5.1 us). Two-input ops measured the other way round (f32 dot at 2^22, in L2:
  // 10.7 us batched, 10.1 one vector at a time), so they keep the plain loop, and so does the
  // dynamic schedule's chunk layout, where only the last chunk has a partial round: a second array
  // of UNROLL - 1 vectors there cost every chunk registers (ptxas for sm_90: the f32 sum's kernel
  // 128 registers -> 88, int8 sums and bitwise ops 1.1-1.6 KB of spills per thread -> none, f64
  // min/max 248 B -> none). So do 1-byte elements (16 per vector, widened to 32 bits), whose
  // 64-register deep shape spilled 100-900 B per thread in the main loop for it (int8/uint8
  // sum, prod, min, max). Either way vector i + u * stride folds into acc[u % ACCS], as it
  // would have in a full round: the same bits.
  if constexpr (pads_rounds_v<Op>) {
    // A whole round, its missing vectors filled with the op's pad (ops.cuh, pads_rounds): one
    // round's test for a thread holding any of it (the exact f32 sum in one deep block).
    V pad;
#pragma unroll
    for (int k = 0; k < VN; ++k) pad.e[k] = Op::pad();
    V v[UNROLL];
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
      v[u] = pad;
      if (u < UNROLL - 1 && i + u * stride < end) v[u] = load_vec<H>(d_vec + i + u * stride);
    }
    if (i < end) fold_round_at(v, i);
  } else if constexpr (binary_v<Op> || UNROLL == 1 || L == layout::chunk || sizeof(T) == 1) {
#pragma unroll
    for (int u = 0; u < UNROLL - 1; ++u) {
      if (i < end) {
        const V v = load_vec<H>(d_vec + i);
        V w = v;
        if constexpr (binary_v<Op>) w = load_second<H>(d_in2, s.head + i * VN, y_aligned);
        acc[u % ACCS] = fold_at(acc[u % ACCS], v, w, i);
      }
      i += stride;
    }
  } else {
    V v[UNROLL - 1];
#pragma unroll
    for (int u = 0; u < UNROLL - 1; ++u)
      if (i + u * stride < end) v[u] = load_vec<H>(d_vec + i + u * stride);
#pragma unroll
    for (int u = 0; u < UNROLL - 1; ++u)
      if (i + u * stride < end) acc[u % ACCS] = fold_at(acc[u % ACCS], v[u], v[u], i + u * stride);
  }

  // Scalar head and tail (fewer than 16 elements each) go to the last block.
  auto elem = [&](std::uint64_t j) {
    if constexpr (binary_v<Op>) return pair_elem<T>{d_in[j], d_in2[j]};
    else return d_in[j];
  };
  if (block == blocks - 1) {
    if (threadIdx.x < s.head) acc[0] = Op::combine(acc[0], transform_elem<Op>(elem(threadIdx.x), threadIdx.x));
    const std::uint64_t t = s.tail_begin + threadIdx.x;
    if (t < n) acc[ACCS - 1] = Op::combine(acc[ACCS - 1], transform_elem<Op>(elem(t), t));
  }
  return block_reduce<Op, BLOCK>(combine_all<Op, ACCS>(acc));
}

// Whether (T, Op) has a pipelined kernel in a shape of MIN_BLOCKS blocks an SM and layout L.
template <class T, class Op, int MIN_BLOCKS, layout L>
inline constexpr bool pipelines_v = pipelined_v<Op> && MIN_BLOCKS == 1 && L == layout::strided && !binary_v<Op> &&
                                    !round_fold_v<Op> && sizeof(T) >= 4;

// PIPE: the pipelined rounds (the launcher's choice by size, for ops with pipelined_v), where one
// block an SM leaves the registers for a second round of vectors (4- and 8-byte elements).
template <class T, class Op, int BLOCK, int UNROLL, load_hint H, layout L, int MIN_BLOCKS, int ACCS_CAP = 8,
          bool PIPE = false>
__global__ void __launch_bounds__(BLOCK, MIN_BLOCKS) reduce_kernel(reduce_args<T, Op> a) {
  using Acc = typename Op::acc_type;
  pdl_wait();
  pdl_launch_dependents();
  static_assert(!PIPE || pipelines_v<T, Op, MIN_BLOCKS, L>, "pipelined rounds where the op and shape allow them");
  const Acc v =
      reduce_block_range<T, Op, BLOCK, UNROLL, H, L, ACCS_CAP, PIPE>(a.d_in, a.n, blockIdx.x, gridDim.x, a.d_in2);
  if (gridDim.x == 1) {  // one block: no partials, no fences
    if (threadIdx.x == 0) *a.d_out = finalize_with<Op>(v, a.n, a.d_in);
    return;
  }
  __shared__ bool is_last;
  if (threadIdx.x == 0) {
    a.d_partials[blockIdx.x] = v;
    is_last = atomic_inc_acq_rel(a.d_counter, gridDim.x - 1) == gridDim.x - 1;
  }
  __syncthreads();
  if (!is_last) return;
  Acc p = Op::identity();
  for (unsigned int b = threadIdx.x; b < gridDim.x; b += BLOCK) p = Op::combine(p, load_cg(a.d_partials + b));
  p = block_reduce<Op, BLOCK>(p);
  if (threadIdx.x == 0) *a.d_out = finalize_with<Op>(p, a.n, a.d_in);
}

// The last block's fold of `count` partials: thread t combines slots t, t + BLOCK, t + 2 x BLOCK,
// ... in that order (so the bits are those of one load at a time), its loads issued a batch at a
// time. One at a time, each slot was an L2 round trip on the kernel's critical path: the dynamic
// schedule has a slot per chunk (2^30 f32: 32768 slots, 64 a thread). tally_layout_probe on an
// H200 (2026-11-28 12:56 UTC, docs/data/layout-probe-h200-1128.txt), f32 sum in 128 KiB chunks:
// 238.7 / 935.5 / 1864.4 us at 2^28 / 2^30 / 2^31 batched, 239.8 / 940.6 / 1873.6 one at a time
// (CUB 239.7 / 944.1 / 1887.4).
template <class Op, int BLOCK>
__device__ __forceinline__ typename Op::acc_type fold_partials(
    const typename Op::acc_type* __restrict__ partials, unsigned int count) {
  using Acc = typename Op::acc_type;
  constexpr int K = sizeof(Acc) <= 8 ? 16 : 8;
  Acc p = Op::identity();
  unsigned int b = threadIdx.x;
  for (; b + (K - 1) * BLOCK < count; b += K * BLOCK) {
    Acc v[K];
#pragma unroll
    for (int k = 0; k < K; ++k) v[k] = load_cg(partials + b + k * BLOCK);
#pragma unroll
    for (int k = 0; k < K; ++k) p = Op::combine(p, v[k]);
  }
  for (; b < count; b += BLOCK) p = Op::combine(p, load_cg(partials + b));
  return p;
}

// The dynamic schedule (launch.cuh, from kDynamicL2Multiple x the L2 up): a resident grid takes
// chunk indices from a counter (the next one fetched while the current chunk is read), reduces
// chunk c of `chunks` (layout::chunk: whole rounds, the scalar head and tail with the last one)
// and writes its partial to slot c. The last block to finish combines the slots in chunk order
// and resets the counter. A chunk's partial and the combine order depend on n and `chunks`
// only, not on which block took which chunk: bitwise repeatable.
template <class T, class Op>
struct dynamic_args {
  reduce_args<T, Op> r;
  unsigned int chunks;
  unsigned int* d_next;  // zero between calls
};

template <class T, class Op, int BLOCK, int UNROLL, load_hint H, int MIN_BLOCKS, int ACCS_CAP = 8>
__global__ void __launch_bounds__(BLOCK, MIN_BLOCKS) reduce_kernel_dynamic(dynamic_args<T, Op> a) {
  using Acc = typename Op::acc_type;
  pdl_wait();
  pdl_launch_dependents();
  __shared__ unsigned int slot[2];
  if (threadIdx.x == 0) slot[0] = atomicAdd(a.d_next, 1u);
  __syncthreads();
  unsigned int c = slot[0];
  for (int parity = 1; c < a.chunks; parity ^= 1) {
    // slot[parity] was last read before the barrier that ended the chunk before this one. (Kept
    // in a register until the chunk was reduced instead, the next index made the H200 slower.)
    if (threadIdx.x == 0) slot[parity] = atomicAdd(a.d_next, 1u);
    const Acc v = reduce_block_range<T, Op, BLOCK, UNROLL, H, layout::chunk, ACCS_CAP>(a.r.d_in, a.r.n, c, a.chunks,
                                                                                    a.r.d_in2);
    if (threadIdx.x == 0) a.r.d_partials[c] = v;
    __syncthreads();
    c = slot[parity];
  }
  __shared__ bool is_last;
  if (threadIdx.x == 0) is_last = atomic_inc_acq_rel(a.r.d_counter, gridDim.x - 1) == gridDim.x - 1;
  __syncthreads();
  if (!is_last) return;
  const Acc p = block_reduce<Op, BLOCK>(fold_partials<Op, BLOCK>(a.r.d_partials, a.chunks));
  if (threadIdx.x == 0) {
    *a.r.d_out = finalize_with<Op>(p, a.r.n, a.r.d_in);
    *a.d_next = 0;  // every block has taken its last index
  }
}

}  // namespace tally::core
