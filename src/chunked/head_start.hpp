// A head start for host-resident input (src/chunked): the host's cores reduce it from the first
// element on while the GPU gets ready (CUDA creates its context, about 0.2 s on the H100 and H200
// hosts, and the staging is pinned), then the GPU streams the rest through the staging.
//
// Only where the split cannot change the result: sums and means of float16, bfloat16, float32 and
// float64, computed exactly on both sides (the host's share in cpu::exact_sum, the GPU's share in
// the exact carry, added without rounding). So these reductions give the exact mode's result in
// every mode, the same bits however much the host happened to reduce. Every other reduction of a
// host-resident stream keeps the GPU-only path (tally::reducer).
//
//   if (head_start_applies(s)) v = reduce_with_head_start(s, n, fill, ctx, 0, on_progress);
#pragma once

#include <cstdint>
#include <functional>

#include "chunked/accumulation.hpp"
#include "chunked/combine.hpp"
#include "tally/tally.hpp"

namespace tally::chunked {

// reduce of op sum or mean over a dtype cpu::exact_sum takes; TALLY_HEAD_START=0 turns it off
// (benchmarks: the GPU-only path for comparison).
bool head_start_applies(const spec& s);

struct head_start_report {
  std::uint64_t host_elements = 0;  // reduced by the host's cores
  int host_threads = 0;
  double gpu_ready_s = 0;           // when the GPU side was ready, seconds after the call
  double total_s = 0;
};

// The reduce of n elements that fill (as reducer::feed_from's: input 0, elements [first, first +
// count) into dst; called from several threads at once) produces, on GPU `ordinal` (made current
// on a thread of its own, so the caller's thread need not have touched CUDA). progress, if set,
// is called on the calling thread with the elements done so far, about every 100 ms while the
// host reduces and after each GiB the GPU takes. Errors (the fill's, the GPU's, no GPU) are
// thrown once every thread has stopped. host_data, if set, is the whole input addressable in host
// memory (a mapped file): the host's threads then sum it in place instead of filling buffers
// (the GPU's share still comes through fill, into the pinned staging).
value reduce_with_head_start(const spec& s, std::uint64_t n, reducer::fill_fn fill, void* context, int ordinal,
                             const std::function<void(std::uint64_t)>& progress, head_start_report* report = nullptr,
                             const void* host_data = nullptr);

// The library's host path (reduce, reduce_value of pageable memory; TALLY_HOST_SHARE=1, an
// experiment not yet measured on a GPU machine): the host's cores sum the array in place while the
// GPU reduces pieces of it through the staging, both claiming from one counter, exactly.
// host_share_applies: the experiment is on, the reduction is one head_start_applies takes, and
// the input is at least 64 MiB. acc: the caller's accumulation, made for the exact mode of s.
bool host_share_applies(const spec& s, std::uint64_t n);
value reduce_host_shared(const spec& s, accumulation& acc, std::uint64_t n, const void* data,
                         head_start_report* report = nullptr);

}  // namespace tally::chunked
