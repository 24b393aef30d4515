// Warp and block reductions in a fixed order, so a float result is the same bits every run.
//
//   block_reduce<op_sum<float>, 256>(v): 256 per-thread values -> their sum in thread 0
#pragma once

#include <cstdint>
#include <type_traits>

namespace tally::core {

// A 32-bit warp shuffle applied to every word of a trivially copyable value (accumulators,
// results): the one place that splits a value into words for the shuffles below.
template <class A, class Shfl>
__device__ __forceinline__ A shfl_words(A v, Shfl shfl) {
  static_assert(sizeof(A) % 4 == 0, "whole 32-bit words");
  constexpr int W = sizeof(A) / 4;
  std::uint32_t w[W];
  __builtin_memcpy(w, &v, sizeof(A));
#pragma unroll
  for (int k = 0; k < W; ++k) w[k] = shfl(w[k]);
  A r;
  __builtin_memcpy(&r, w, sizeof(A));
  return r;
}
// Down the whole warp, down within groups of `width` lanes (a power of two dividing 32), and
// from lane `src`.
template <class A>
__device__ __forceinline__ A shfl_down(A v, int offset) {
  return shfl_words(v, [offset](std::uint32_t x) { return __shfl_down_sync(0xffffffffu, x, offset); });
}
template <class A>
__device__ __forceinline__ A shfl_down_group(A v, int offset, int width) {
  return shfl_words(v, [offset, width](std::uint32_t x) { return __shfl_down_sync(0xffffffffu, x, offset, width); });
}
template <class A>
__device__ __forceinline__ A shfl_idx(A v, int src) {
  return shfl_words(v, [src](std::uint32_t x) { return __shfl_sync(0xffffffffu, x, src); });
}
// From lane (lane ^ mask): the butterfly exchange, every lane ending with a value.
template <class A>
__device__ __forceinline__ A shfl_xor(A v, int mask) {
  return shfl_words(v, [mask](std::uint32_t x) { return __shfl_xor_sync(0xffffffffu, x, mask); });
}

// Ops whose combine is a max of unsigned words may say `warp_redux = true` and give their own
// warp_reduce (redux.sync), which must equal the shuffle tree's result.
template <class Op, class = void>
inline constexpr bool warp_redux_v = false;
template <class Op>
inline constexpr bool warp_redux_v<Op, std::void_t<decltype(Op::warp_redux)>> = Op::warp_redux;

// Lane 0 ends with the combination of the warp's 32 values (tree: lanes i and i+16, ...).
// Rolled: one copy of the combine in a loop, for ops whose combine is long (the code of a
// kernel that runs once per SM is fetched cold, so its size is time).
template <class Op, bool Rolled = false>
__device__ __forceinline__ typename Op::acc_type warp_reduce(typename Op::acc_type v) {
  if constexpr (warp_redux_v<Op>) {
    return Op::warp_reduce(v);
  } else if constexpr (Rolled) {
#pragma unroll 1
    for (int offset = 16; offset > 0; offset >>= 1) v = Op::combine(v, shfl_down(v, offset));
    return v;
  } else {
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) v = Op::combine(v, shfl_down(v, offset));
    return v;
  }
}

// Ops may say `custom_block = true` and give their own block_reduce<BLOCK> (the exact sum: its
// combine has a side effect, so only the lanes whose results count may combine; the statistics:
// warp means and split warp steps instead of a tree of heavy merges).
template <class Op, class = void>
inline constexpr bool custom_block_v = false;
template <class Op>
inline constexpr bool custom_block_v<Op, std::void_t<decltype(Op::custom_block)>> = Op::custom_block;

// Thread 0 ends with the combination of all BLOCK threads' values. Every thread must call it.
// The shared scratch is reused on a second call only after the barrier at its start.
template <class Op, int BLOCK, bool Rolled = false>
__device__ __forceinline__ typename Op::acc_type block_reduce_generic(typename Op::acc_type v) {
  using Acc = typename Op::acc_type;
  constexpr int kWarps = BLOCK / 32;
  __shared__ Acc warp_partials[kWarps];
  v = warp_reduce<Op, Rolled>(v);
  if constexpr (kWarps == 1) {
    return v;
  } else {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    __syncthreads();  // an earlier call's readers are done with warp_partials
    if (lane == 0) warp_partials[warp] = v;
    __syncthreads();
    if (warp == 0) {
      v = lane < kWarps ? warp_partials[lane] : Op::identity();
      v = warp_reduce<Op, Rolled>(v);
    }
    return v;
  }
}

template <class Op, int BLOCK>
__device__ __forceinline__ typename Op::acc_type block_reduce(typename Op::acc_type v) {
  static_assert(BLOCK % 32 == 0 && BLOCK <= 1024, "block size is whole warps, at most 1024");
  if constexpr (custom_block_v<Op>) return Op::template block_reduce<BLOCK>(v);
  else return block_reduce_generic<Op, BLOCK>(v);
}

}  // namespace tally::core
