// The exactly rounded sum, mean and dot product in one launch (accuracy::exact).
//
// Each thread keeps a two-term floating-point expansion (exact.cuh: TwoSum twice per element)
// and flushes whatever does not fit into its block's long fixed-point accumulator in shared
// memory (integer atomics: the order of the adds does not matter). For ordinary data nothing is
// flushed inside the loop, so the loop is two TwoSums per element. Threads merge their
// expansions warp by warp; a block writes its expansion as its partial and, only if it flushed
// anything, adds its normalised accumulator into a global one. The last block merges every
// partial, takes the global accumulator (resetting it to zero for the next call), normalises
// and rounds once. The result is the exact sum rounded to nearest-even: the same bits for any
// grid, block size, GPU or order of the elements.
//
//   exact_kernel<float, exact_sum, false, 512, 4>: {1e30f, 1.f, -1e30f} -> 1.f  (fast: 0.f)
#pragma once

#include <cstdint>

#include "device.cuh"
#include "exact.cuh"

namespace tally::core {

// What one block hands the last one: its merged expansion and the special values it saw.
struct exact_partial {
  double a0, a1;
  unsigned flags, pad;
};

template <class T>
struct exact_args {
  const T* d_in;
  const T* d_in2;  // dot: the second vector
  std::uint64_t n;
  void* d_out;
  exact_partial* d_partials;
  unsigned int* d_counter;  // zero between calls
  long long* d_acc;         // exact::kWords words, zero between calls
};

enum class exact_form { sum, mean, dot };

// Per element: f32/f16/bf16 values (and their products: 48 bits) are exact in f64 and usually
// add exactly to a0 (fpe_add_narrow: one add and a test); f64 values take both TwoSums; f64
// products go through TwoProduct, or straight to the accumulator outside its exact range.
template <exact_form F, class T, class Flush, class AddWord>
__device__ __forceinline__ void exact_feed(exact::fpe2& f, unsigned& flags, const T& x, const T* y,
                                           Flush& flush, AddWord& add_word) {
  if constexpr (F == exact_form::dot) {
    if constexpr (std::is_same_v<num_t<T>, double>)
      exact::fpe_add_product(f, as_num(x), as_num(*y), flags, flush, add_word);
    else
      exact::fpe_add(f, __dmul_rn(double(as_num(x)), double(as_num(*y))), flags, flush);
  } else if constexpr (std::is_same_v<num_t<T>, double>) {
    exact::fpe_add(f, as_num(x), flags, flush);
  } else {
    exact::fpe_add_narrow(f, static_cast<double>(as_num(x)), flags, flush);
  }
}

// Merges every thread's expansion into thread 0's (warp shuffles, then warp 0's leaders).
template <int BLOCK, class Flush>
__device__ __forceinline__ void exact_block_merge(exact::fpe2& f, unsigned& flags, Flush& flush) {
  constexpr int kWarps = BLOCK / 32;
  __shared__ exact::fpe2 warp_fpe[kWarps];
  __shared__ unsigned warp_flags[kWarps];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  auto warp_merge = [&](int width) {
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) {
      if (offset >= width) continue;
      const exact::fpe2 g{__shfl_down_sync(0xffffffffu, f.a0, offset), __shfl_down_sync(0xffffffffu, f.a1, offset)};
      const unsigned gf = __shfl_down_sync(0xffffffffu, flags, offset);
      if (lane < offset) {
        exact::fpe_merge(f, g, flags, flush);
        flags |= gf;
      }
    }
  };
  warp_merge(32);
  __syncthreads();  // an earlier call's readers are done with warp_fpe
  if (lane == 0) {
    warp_fpe[warp] = f;
    warp_flags[warp] = flags;
  }
  __syncthreads();
  if (warp == 0) {  // the warps' expansions, merged by a second shuffle tree in warp 0
    f = lane < kWarps ? warp_fpe[lane] : exact::fpe2{0.0, 0.0};
    flags = lane < kWarps ? warp_flags[lane] : 0u;
    warp_merge(kWarps);
  }
}

template <class R, exact_form F>
__device__ __forceinline__ R exact_result(const long long* words, unsigned flags, std::uint64_t n) {
  if constexpr (F == exact_form::mean) {
    if (n == 0) return R(__builtin_nan(""));
    return static_cast<R>(exact::round_to<double>(words, flags) / static_cast<double>(n));
  } else {
    return exact::round_to<R>(words, flags);
  }
}

template <class T, exact_form F, int BLOCK, int UNROLL, load_hint H>
__global__ void __launch_bounds__(BLOCK, 1) exact_kernel(exact_args<T> a) {
  using R = num_t<T>;
  using V = vec16<T>;
  constexpr int VN = V::size;
  __shared__ long long acc[exact::kWords];
  __shared__ unsigned int adds;  // word adds into acc (each below 2^32 in magnitude)
  __shared__ bool is_last;
  for (int k = threadIdx.x; k < exact::kWords; k += BLOCK) acc[k] = 0;
  if (threadIdx.x == 0) adds = 0;
  __syncthreads();
  pdl_wait();
  pdl_launch_dependents();

  auto add_word = [&](int k, long long d) {
    atomicAdd(reinterpret_cast<unsigned long long*>(&acc[k]), static_cast<unsigned long long>(d));
    atomicAdd(&adds, 1u);
  };
  auto flush = [&](double v) { exact::add(v, 0, add_word); };

  exact::fpe2 f{0.0, 0.0};
  unsigned flags = 0;
  const T* __restrict__ x = a.d_in;
  const T* __restrict__ y = a.d_in2;
  const split16 s = split_input(x, a.n);
  const V* __restrict__ xv = reinterpret_cast<const V*>(x + s.head);
  bool y_aligned = false;
  if constexpr (F == exact_form::dot)
    y_aligned = ((reinterpret_cast<std::uintptr_t>(y) ^ reinterpret_cast<std::uintptr_t>(x)) & 15u) == 0;
  auto feed_vec = [&](const V& v, std::uint64_t j) {
    if constexpr (F == exact_form::dot) {
      const V w = load_second<H>(y, s.head + j * VN, y_aligned);
#pragma unroll
      for (int k = 0; k < VN; ++k) exact_feed<F>(f, flags, v.e[k], &w.e[k], flush, add_word);
    } else {
#pragma unroll
      for (int k = 0; k < VN; ++k) exact_feed<F>(f, flags, v.e[k], static_cast<const T*>(nullptr), flush, add_word);
    }
  };

  const std::uint64_t end = s.nvec, stride = std::uint64_t(gridDim.x) * BLOCK;
  std::uint64_t i = std::uint64_t(blockIdx.x) * BLOCK + threadIdx.x;
  for (; i + (UNROLL - 1) * stride < end; i += UNROLL * stride) {
    V v[UNROLL];
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) v[u] = load_vec<H>(xv + i + u * stride);
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) feed_vec(v[u], i + u * stride);
  }
  for (; i < end; i += stride) feed_vec(load_vec<H>(xv + i), i);
  if (blockIdx.x == gridDim.x - 1) {
    const std::uint64_t t = s.tail_begin + threadIdx.x;
    auto feed_at = [&](std::uint64_t j) {
      exact_feed<F>(f, flags, x[j], F == exact_form::dot ? y + j : nullptr, flush, add_word);
    };
    if (threadIdx.x < s.head) feed_at(threadIdx.x);
    if (t < a.n) feed_at(t);
  }
  exact_block_merge<BLOCK>(f, flags, flush);

  if (gridDim.x == 1) {
    __syncthreads();  // every flush into acc is done
    if (threadIdx.x == 0) {
      exact::fpe_finish(f, flush);
      exact::normalize(acc);
      *static_cast<R*>(a.d_out) = exact_result<R, F>(acc, flags, a.n);
    }
    return;
  }

  // Publish: the expansion as this block's partial, and the accumulator (if anything was
  // flushed) into the global one. Fewer than 2^16 adds leave every word below 2^48, so even 4096
  // blocks stay far from overflow; more adds than that are normalised first (words < 2^32).
  __syncthreads();
  if (threadIdx.x == 0) {
    a.d_partials[blockIdx.x] = exact_partial{f.a0, f.a1, flags, 0u};
    if (adds >= (1u << 16)) exact::normalize(acc);
  }
  __syncthreads();
  if (adds != 0) {
    for (int k = threadIdx.x; k < exact::kWords; k += BLOCK)
      if (acc[k] != 0) atomicAdd(reinterpret_cast<unsigned long long*>(a.d_acc + k), static_cast<unsigned long long>(acc[k]));
    __threadfence();
  }
  __syncthreads();
  if (threadIdx.x == 0) is_last = atomic_inc_acq_rel(a.d_counter, gridDim.x - 1) == gridDim.x - 1;
  __syncthreads();
  if (!is_last) return;

  // The last block: start from a clean accumulator (its own flushes are in the global one).
  for (int k = threadIdx.x; k < exact::kWords; k += BLOCK) acc[k] = 0;
  __syncthreads();
  f = exact::fpe2{0.0, 0.0};
  flags = 0;
  for (unsigned b = threadIdx.x; b < gridDim.x; b += BLOCK) {
    const exact_partial p = load_cg(a.d_partials + b);
    exact::fpe_merge(f, exact::fpe2{p.a0, p.a1}, flags, flush);
    flags |= p.flags;
  }
  exact_block_merge<BLOCK>(f, flags, flush);
  __syncthreads();
  for (int k = threadIdx.x; k < exact::kWords; k += BLOCK) {
    const long long g = static_cast<long long>(atomicExch(reinterpret_cast<unsigned long long*>(a.d_acc + k), 0ull));
    atomicAdd(reinterpret_cast<unsigned long long*>(&acc[k]), static_cast<unsigned long long>(g));
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    exact::fpe_finish(f, flush);
    exact::normalize(acc);
    *static_cast<R*>(a.d_out) = exact_result<R, F>(acc, flags, a.n);
  }
}

}  // namespace tally::core
