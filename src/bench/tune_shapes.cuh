// The candidate kernel shapes `tally bench tune` times against each other and against CUB /
// cuBLAS, one group per (op, dtype): the measurements behind src/core/tuning.hpp and the rule in
// src/core/policy.cpp. A candidate is a kernel instantiated with an explicit shape (threads per
// block, 16-byte loads in flight per thread, __launch_bounds__ minimum blocks, accumulators per
// thread, load hint); the group times all of them and the competitor interleaved, at each size,
// with the grid the library's rule would give that shape.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "bench/report.hpp"
#include "bench/timing.hpp"
#include "core/context.hpp"
#include "core/device.cuh"
#include "core/device_exact.cuh"
#include "core/launch.cuh"
#include "core/tuning.hpp"

namespace tally::bench::tune {

// Device memory every candidate of a run shares: the inputs, the block partials, the counter and
// the exact accumulator (zeroed once; every kernel leaves them zeroed), the result slots.
struct sweep_buffers {
  void* d_in = nullptr;   // random data of the group's dtype
  void* d_in2 = nullptr;  // second input (dot)
  std::uint64_t capacity = 0;  // elements available at d_in (and d_in2)
  void* d_partials = nullptr;
  unsigned int* d_counter = nullptr;
  long long* d_exact = nullptr;
  unsigned int* d_chunk_next = nullptr;  // the dynamic schedules' chunk counter
  void* d_out = nullptr;  // 64 bytes per candidate; slot 63 is the competitor's
  void* d_temp = nullptr;  // the competitor's temporary storage
  std::size_t temp_bytes = 0;
  cudaStream_t stream = nullptr;
  int sm_count = 0;
  std::uint64_t l2_bytes = 0;
  unsigned int exact_chunk_rounds = 1, exact_chunk_tail = 0;  // the policy's (policy.hpp, exact_chunk_rounds)
};

struct candidate {
  std::string label;  // "512x8 mb2 acc2 ldg"
  int block = 0, unroll = 0, min_blocks = 0, accs = 0;
  bool ldg = false;
  bool heavy = false;      // the heavy-op grid rule (tuning.hpp, grid_for)
  bool reference = false;  // the fast sum the group's ratios are taken against (exact, stats)
  int max_per_sm = 0;      // resident blocks per SM at most this many (0: as many as fit; the op's cap)
  int elem_bytes = 0;
  bool binary = false;
  const void* kernel = nullptr;  // for occupancy and attributes
  std::function<void(cudaStream_t, std::uint64_t n, unsigned blocks, int slot)> launch;
};

struct competitor {
  std::string name;  // "CUB Sum", "" for none
  std::function<void(cudaStream_t, std::uint64_t n)> call;
};

struct group {
  std::string op, dtype;
  tally::dtype data = tally::dtype::f32;  // what fills the inputs
  double lo = -1.0, hi = 1.0;
  int elem_bytes = 4;
  bool binary = false;
  std::vector<candidate> candidates;
  competitor other;
  std::vector<int> log2_sizes;
};

// Grid for a candidate shape at n elements: the library's rule (tuning.hpp) with this shape.
unsigned grid_for_shape(const candidate& c, std::uint64_t n, int per_sm, const sweep_buffers& b);

template <class K>
candidate describe(const char* label, K kernel, int block, int unroll, int min_blocks, int accs, bool ldg,
                   int elem_bytes, bool binary) {
  candidate c;
  c.label = label;
  c.block = block;
  c.unroll = unroll;
  c.min_blocks = min_blocks;
  c.accs = accs;
  c.ldg = ldg;
  c.elem_bytes = elem_bytes;
  c.binary = binary;
  c.kernel = reinterpret_cast<const void*>(kernel);
  return c;
}

cudaError_t launch_with_pdl(const void* kernel, void** args, unsigned blocks, int block, cudaStream_t s);

// reduce_kernel<T, Op, B, U, H, strided, MB, A> as a candidate.
template <class T, class Op, int B, int U, core::load_hint H, int MB, int A = 8>
candidate reduce_candidate(const char* label, const sweep_buffers& b, int slot) {
  auto kernel = core::reduce_kernel<T, Op, B, U, H, core::layout::strided, MB, A>;
  constexpr int op_accs = core::max_accs_v<Op> < A ? core::max_accs_v<Op> : A;
  constexpr int accs = op_accs < U ? op_accs : U;
  candidate c = describe(label, kernel, B, U, MB, accs, H == core::load_hint::ldg, int(sizeof(T)),
                         core::binary_v<Op>);
  c.heavy = core::heavy_v<Op>;
  c.launch = [kernel, b, slot](cudaStream_t s, std::uint64_t n, unsigned blocks, int) {
    core::reduce_args<T, Op> a{static_cast<const T*>(b.d_in), n,
                               reinterpret_cast<typename Op::out_type*>(static_cast<char*>(b.d_out) + 64 * slot),
                               static_cast<typename Op::acc_type*>(b.d_partials), b.d_counter,
                               static_cast<const T*>(b.d_in2)};
    void* args[] = {&a};
    check(launch_with_pdl(reinterpret_cast<const void*>(kernel), args, blocks, B, s), "candidate launch");
  };
  return c;
}

// A kernel of the dynamic schedule (tuning.hpp) as a candidate, at every size, run as the
// library's launcher runs it past 8 x L2 (launch.cuh, launch_dynamic_shape): the full resident grid
// (at most the op's max_per_sm blocks per SM), chunks of whole rounds of sh.block x sh.unroll
// vectors (at least kHeavyChunkRounds for heavy ops).
template <class T, class Op, class K>
candidate dynamic_from(const char* label, K kernel, const core::shape& sh, bool ldg, const sweep_buffers& b, int slot) {
  constexpr int op_accs = core::max_accs_v<Op>;
  const int accs = std::min({op_accs, sh.accs, sh.unroll});
  candidate c = describe(label, kernel, sh.block, sh.unroll, sh.min_blocks, accs, ldg, int(sizeof(T)),
                         core::binary_v<Op>);
  c.heavy = true;  // the full resident grid
  c.max_per_sm = core::max_per_sm_v<Op>;
  const std::uint64_t round = std::uint64_t(sh.block) * sh.unroll;
  const std::uint64_t min_rounds = core::heavy_v<Op> ? core::kHeavyChunkRounds : 1;
  const int block = sh.block;
  c.launch = [kernel, b, slot, min_rounds, round, block](cudaStream_t s, std::uint64_t n, unsigned blocks, int) {
    using Acc = typename Op::acc_type;
    static_assert(sizeof(Acc) <= core::kMaxAccBytes);
    const std::uint64_t nvec = n * sizeof(T) / 16;
    const auto chunks = static_cast<unsigned>(core::dynamic_chunks(nvec, round, sizeof(Acc), min_rounds));
    core::dynamic_args<T, Op> a{{static_cast<const T*>(b.d_in), n,
                                 reinterpret_cast<typename Op::out_type*>(static_cast<char*>(b.d_out) + 64 * slot),
                                 static_cast<Acc*>(b.d_partials), b.d_counter, static_cast<const T*>(b.d_in2)},
                                chunks,
                                b.d_chunk_next};
    void* args[] = {&a};
    check(launch_with_pdl(reinterpret_cast<const void*>(kernel), args, blocks, block, s), "candidate launch");
  };
  return c;
}

// reduce_kernel_dynamic<T, Op, B, U, H, MB, A> as a candidate (see dynamic_from).
template <class T, class Op, int B, int U, core::load_hint H, int MB, int A = 8>
candidate dynamic_candidate(const char* label, const sweep_buffers& b, int slot) {
  return dynamic_from<T, Op>(label, core::reduce_kernel_dynamic<T, Op, B, U, H, MB, A>, core::shape{B, U, MB, A},
                             H == core::load_hint::ldg, b, slot);
}

// The library's own dynamic-schedule kernel of (T, Op) in shape D (launch.cuh, dynamic_kernel_of).
template <class T, class Op, core::depth D = core::depth::base>
candidate library_dynamic_candidate(const char* label, const sweep_buffers& b, int slot) {
  constexpr core::shape s = core::dynamic_shape(sizeof(T), core::family_v<Op>, D);
  // As dynamic_kernel_of compiles it: the op's own minimum blocks per SM where that is larger.
  constexpr core::shape sh{s.block, s.unroll, std::max(core::min_blocks_v<Op>, s.min_blocks), s.accs};
  return dynamic_from<T, Op>(label, core::dynamic_kernel_of<T, Op, D>(), sh, true, b, slot);
}

// exact_kernel<T, op_exact<T, F, A, GT>, B, U, H, MB> as a candidate (GT: the round's grid test
// for narrow inputs, a thread's partial round padded to a whole one since 2026-11-29 (ops.cuh,
// pads_rounds; tune tables before that date timed the per-element tests there), false: each
// element's own exactness test; DYN: the dynamic schedule where the launcher's size rule takes it
// (tuning.hpp, exact_dynamic), false: always the strided layout).
template <class T, core::exact_form F, int B, int U, core::load_hint H, int MB, int A, bool GT = true, bool DYN = true>
candidate exact_candidate(const char* label, const sweep_buffers& b, int slot) {
  using Op = core::op_exact<T, F, A, GT>;
  auto strided = core::exact_kernel<T, Op, B, U, H, MB, false>;
  // Only candidates that may take the dynamic schedule compile its kernel (each is a large one).
  auto dynamic = strided;
  if constexpr (DYN && F != core::exact_form::dot) dynamic = core::exact_kernel<T, Op, B, U, H, MB, true>;
  candidate c = describe(label, strided, B, U, MB, A, H == core::load_hint::ldg, int(sizeof(T)),
                         F == core::exact_form::dot);
  c.heavy = true;
  c.launch = [strided, dynamic, b, slot](cudaStream_t s, std::uint64_t n, unsigned blocks, int) {
    core::exact_args<T> a{static_cast<const T*>(b.d_in), static_cast<const T*>(b.d_in2), n,
                          static_cast<char*>(b.d_out) + 64 * slot, static_cast<core::exact_acc*>(b.d_partials),
                          b.d_counter, b.d_exact, b.d_chunk_next, nullptr, b.exact_chunk_rounds,
                          b.exact_chunk_tail};
    const bool dyn = DYN && F != core::exact_form::dot &&
                     core::exact_dynamic(int(sizeof(T)), n, b.l2_bytes);
    void* args[] = {&a};
    check(launch_with_pdl(reinterpret_cast<const void*>(dyn ? dynamic : strided), args, blocks, B, s),
          "candidate launch");
  };
  return c;
}

// The groups, by family (each in its own translation unit to keep the build parallel).
std::vector<group> core_groups(const sweep_buffers& b);      // sum f32/f64/i32, max f32, f16 sum
std::vector<group> numerics_groups(const sweep_buffers& b);  // argmax f32, dot f32/f64
std::vector<group> exact_groups(const sweep_buffers& b);     // exact sum f32/f64
std::vector<group> stats_groups(const sweep_buffers& b);     // stats f32/f64

// Times every group; one table row per (group, size, candidate).
table run_groups(std::vector<group>& groups, sweep_buffers& b, double ceiling_gbps, bool quick,
                 const std::function<void(const std::string&)>& progress);

}  // namespace tally::bench::tune
