// Shared helpers for lab variants: typed factories, checked launches, device scratch, results
// and host finishing. Each variant file keeps its own kernels; only plumbing lives here.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "lab/lab.hpp"

namespace tally::lab {

// Throws tally::error naming the call when a CUDA call or launch failed.
void check(cudaError_t e, const char* what);
inline void check_launch(const char* kernel) { check(cudaGetLastError(), kernel); }

inline bool is_pow2(long long v) { return v > 0 && (v & (v - 1)) == 0; }
// Enforces a power-of-two parameter with a clear message (the originals assume one).
void require_pow2(const run_args& a, const char* param, const char* why);
// Enforces lo <= value <= hi.
void require_range(const run_args& a, const char* param, int lo, int hi, const char* why);
inline int p(const run_args& a, const char* name) { return a.params.at(name); }

inline unsigned blocks_for(std::uint64_t n, std::uint64_t per_block) {
  return static_cast<unsigned>((n + per_block - 1) / per_block);
}

// Grows-only device scratch owned by a variant.
class scratch {
 public:
  void* get(std::size_t bytes);
  template <class T>
  T* as(std::size_t count) {
    return static_cast<T*>(get(count * sizeof(T)));
  }

 private:
  tally::device_buffer buf_;
};

// Copies `count` elements back and adds them on the host, in index order, in T (as the
// originals do) — the host finishing step of several tutorials.
template <class T>
T host_sum(const T* d, std::uint64_t count, cudaStream_t s) {
  std::vector<T> h(count);
  check(cudaMemcpyAsync(h.data(), d, count * sizeof(T), cudaMemcpyDeviceToHost, s), "cudaMemcpyAsync(partials)");
  check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
  T acc = T(0);
  for (const T& v : h) acc += v;
  return acc;
}

template <class T>
lab_value to_value(T v) {
  lab_value r;
  if constexpr (std::is_integral_v<T>) {
    r.is_int = true;
    r.i = static_cast<std::int64_t>(v);
  } else {
    r.f = static_cast<double>(v);
  }
  return r;
}

// Reads one T from device memory after the stream finishes.
template <class T>
lab_value fetch_device(const T* d, cudaStream_t s) {
  T h{};
  check(cudaMemcpyAsync(&h, d, sizeof(T), cudaMemcpyDeviceToHost, s), "cudaMemcpyAsync(result)");
  check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
  return to_value(h);
}

// A variant class template V<T> becomes a factory for f32, f64 and i32.
template <template <class> class V>
std::unique_ptr<variant> make_typed(dtype t) {
  switch (t) {
    case dtype::f32: return std::make_unique<V<float>>();
    case dtype::f64: return std::make_unique<V<double>>();
    case dtype::i32: return std::make_unique<V<std::int32_t>>();
    default: throw config_error(std::string("lab variants run on f32, f64 and i32, not ") + to_string(t));
  }
}

// The tree step shared by several tutorials is written out in each variant on purpose: the
// lab shows each kernel whole. These device helpers are only for the plumbing around them.
template <class T>
__device__ __forceinline__ T warp_sum_shfl(T v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
  return v;
}

// Relaunches a block-partials kernel until one value is left, as the CUDA tutorial and the
// optimisation log do: pass k reads the partials of pass k-1. `launch(in, count, out, grid)`
// enqueues one pass that writes `grid` partials; `per_block` is how many inputs one block takes.
// Returns the device address of the final value.
template <class T, class L>
T* reduce_passes(const run_args& a, scratch& s0, scratch& s1, std::uint64_t per_block, L&& launch) {
  const T* in = static_cast<const T*>(a.d_x);
  std::uint64_t count = a.n;
  T* bufs[2] = {s0.as<T>(blocks_for(a.n, per_block) + 1), s1.as<T>(blocks_for(blocks_for(a.n, per_block), per_block) + 1)};
  int k = 0;
  do {
    const unsigned grid = count ? blocks_for(count, per_block) : 1;  // n = 0: one block writes 0
    launch(in, count, bufs[k], grid);
    in = bufs[k];
    count = grid;
    k ^= 1;
  } while (count > 1);
  return const_cast<T*>(in);
}

// The CUDA tutorial's block-partials kernels (one 32-bit-indexed kernel per step, relaunched
// until one value is left) differ only in the kernel, how many elements a block covers per
// thread, and the smallest block the kernel allows; this class is the rest.
template <class T, void (*Kernel)(const T*, std::uint32_t, T*), int ElemsPerThread, int MinBlock>
class tree_passes_variant : public variant {
 public:
  void prepare(const run_args& a) override {
    require_pow2(a, "block", "the tree halves the block at every step");
    require_range(a, "block", MinBlock, 1024,
                  MinBlock > 32 ? "the unrolled last warp reads slot tx + 32, so a block needs 64 threads"
                                : "a CUDA block holds 32 to 1024 threads");
    if (a.n >= (std::uint64_t(1) << 32))
      throw config_error("n must be below 2^32: the original indexes with 32-bit integers");
  }
  void launch(const run_args& a) override {
    const unsigned block = static_cast<unsigned>(p(a, "block"));
    result_ = reduce_passes<T>(a, s0_, s1_, std::uint64_t(ElemsPerThread) * block,
                               [&](const T* in, std::uint64_t count, T* out, unsigned grid) {
                                 Kernel<<<grid, block, block * sizeof(T), a.stream>>>(
                                     in, static_cast<std::uint32_t>(count), out);
                                 check_launch("tutorial reduction kernel");
                               });
  }
  lab_value fetch(const run_args& a) override { return fetch_device(result_, a.stream); }

 private:
  scratch s0_, s1_;
  T* result_ = nullptr;
};

}  // namespace tally::lab

// Registers variant class template V; META_FN is a function returning its variant_meta.
#define TALLY_LAB_REGISTER(V, META_FN) \
  static const ::tally::lab::registrar tally_lab_registrar_##V(META_FN(), &::tally::lab::make_typed<V>)
