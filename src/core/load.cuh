// Tile loads: the input splits into a scalar head (up to the first 16-byte boundary), an aligned
// body read with 16-byte vector loads, and a scalar tail, so any element-aligned pointer works.
//
//   f32 at address 0x...04, n = 10: head = 3 elements, body = 1 vector of 4, tail = 3 elements
#pragma once

#include <cstdint>
#include <type_traits>

#include "ops.cuh"
#include "tuning.hpp"

namespace tally::core {

template <class T>
struct alignas(16) vec16 {
  static constexpr int size = 16 / sizeof(T);
  T e[size];
};

// Where the head ends, how many whole vectors the body has, and where the tail begins.
struct split16 {
  std::uint64_t head;       // elements before the first 16-byte aligned element
  std::uint64_t nvec;       // vectors in the aligned body
  std::uint64_t tail_begin; // first element after the body
};

template <class T>
__host__ __device__ inline split16 split_input(const T* p, std::uint64_t n) {
  constexpr std::uint64_t V = vec16<T>::size;
  const std::uint64_t misalign = reinterpret_cast<std::uintptr_t>(p) & 15u;
  std::uint64_t head = misalign ? (16u - misalign) / sizeof(T) : 0;
  if (head > n) head = n;
  const std::uint64_t nvec = (n - head) / V;
  return {head, nvec, head + nvec * V};
}

// Read-only 16-byte load. `stream`: the data is read once, so skip L1 allocation and ask the L2
// to fetch the whole 256-byte sector group; `ldg`: the plain read-only path.

template <load_hint H, class T>
__device__ __forceinline__ vec16<T> load_vec(const vec16<T>* p) {
  uint4 r;
  if constexpr (H == load_hint::stream) {
    asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
                 : "l"(p));
  } else {
    r = __ldg(reinterpret_cast<const uint4*>(p));
  }
  vec16<T> v;
  static_assert(sizeof(v) == sizeof(r));
  __builtin_memcpy(&v, &r, sizeof(v));
  return v;
}

// An op's transform of element x at index i (only argmin/argmax look at the index).
template <class Op, class E>
__device__ __forceinline__ typename Op::acc_type transform_elem(const E& x, std::uint64_t i) {
  if constexpr (indexed_v<Op>) return Op::transform_at(x, i);
  else return Op::transform(x);
}

// Folds one vector (elements base, base+1, ...) into an accumulator, element order fixed. Sums of
// 8- and 16-bit integers are first added in 32 bits (16 bytes can not overflow them), which cuts
// the 64-bit adds 16-fold. Ops with a fold of their own (argmin/argmax, compensated sums, dot,
// statistics) get the whole vector.
template <class Op, int VN, class E>
__device__ __forceinline__ typename Op::acc_type fold_elems(typename Op::acc_type acc, const E (&e)[VN],
                                                            std::uint64_t base) {
  if constexpr (is_narrow_int_sum_v<Op>) {
    std::int32_t s = 0;
#pragma unroll
    for (int k = 0; k < VN; ++k) s += static_cast<std::int32_t>(e[k]);
    return Op::combine(acc, static_cast<typename Op::acc_type>(static_cast<std::int64_t>(s)));
  } else if constexpr (custom_fold_v<Op>) {
    return Op::fold(acc, e, base);
  } else {
    typename Op::acc_type r = transform_elem<Op>(e[0], base);
#pragma unroll
    for (int k = 1; k < VN; ++k) r = Op::combine(r, transform_elem<Op>(e[k], base + k));
    return Op::combine(acc, r);
  }
}
template <class Op, class T>
__device__ __forceinline__ typename Op::acc_type fold_vec(typename Op::acc_type acc, const vec16<T>& v,
                                                          std::uint64_t base = 0) {
  return fold_elems<Op>(acc, v.e, base);
}
// Two inputs (dot): element k of the fold is {x.e[k], y.e[k]}.
template <class Op, class T>
__device__ __forceinline__ typename Op::acc_type fold_vec2(typename Op::acc_type acc, const vec16<T>& x,
                                                           const vec16<T>& y, std::uint64_t base) {
  constexpr int V = vec16<T>::size;
  pair_elem<T> e[V];
#pragma unroll
  for (int k = 0; k < V; ++k) e[k] = {x.e[k], y.e[k]};
  return fold_elems<Op>(acc, e, base);
}

}  // namespace tally::core
