// The stream-ordered sharded reductions (tally::dist::reduce_async, dot_async, reduce_stats_async)
// and synchronize(). On the caller's stream, in order: the shard's partial (src/dist/partial.hpp),
// the rank's header (a kernel whose argument it is, so a graph replays the same bytes), one NCCL
// all-gather of the records into pinned host memory, the combine as a host function
// (record.hpp, combine_into: the blocking calls' checks and fold), and a copy of its result to the
// caller's d_out. Nothing waits on the host, so the sequence can be captured into a CUDA graph;
// errors the combine finds wait in the communicator for synchronize().
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <chrono>
#include <mutex>
#include <string>

#include "chunked/combine.hpp"
#include "core/api_internal.hpp"
#include "core/context.hpp"
#include "core/memory.hpp"
#include "dist/comm.hpp"
#include "dist/partial.hpp"
#include "dist/record.hpp"

namespace tally::dist {

using core::check_cuda;
using clock = std::chrono::steady_clock;

namespace {

// The host function: runs on a CUDA thread once the all-gather is done, before the copy to d_out.
// It may not call CUDA, and nothing may escape it.
void CUDART_CB combine_on_host(void* p) {
  async_state& c = *static_cast<async_state*>(p);
  std::string why;
  bool failed = false;
  try {
    why = combine_into(c.h_all, c.size, c.rank, c.h_result);
  } catch (...) {
    failed = true;  // (out of memory: no message can be built here)
  }
  if (why.empty() && !failed) return;
  try {
    std::lock_guard<std::mutex> lk(c.mutex);
    if (c.error.empty()) c.error = failed ? std::string("tally::dist: the combine failed (out of memory)") : why;
  } catch (...) {
  }
}

// d_out: non-null, aligned, and (with the memory checks) `bytes` this GPU may write.
void check_out(const char* fn, void* d_out, std::size_t bytes, std::size_t align, const chunked::spec& s) {
  core::check_output_pointer(fn, d_out, align, [&] { return std::to_string(bytes) + "-byte result"; });
  if (s.opt.check_memory) core::check_memory(fn, "d_out", d_out, 1, bytes, "result", true, core::current_context());
}

void enqueue(const communicator& comm, const shard& sh, const chunked::spec& s, void* d_out, stream_t stream) {
  const char* fn = fn_name(s.w, true);
  communicator::impl& c = usable(comm, fn);
  // One thread driving every rank (init_all) would have to group the ranks' collectives, which a
  // call per rank cannot do.
  if (c.grouped)
    throw error(qualified(fn) + ": the communicator is one of a set made by init_all, whose ranks one thread drives: "
                                "use the blocking dist::reduce(comms, shards, ...) there, or one thread or process per rank");
  device_scope on(c.device);
  const cudaStream_t st = reinterpret_cast<cudaStream_t>(stream);
  const bool capturing = core::capturing(st);
  // The result's size and alignment; an unsupported call has none (its refusal is the error).
  std::size_t bytes = 0, align = 8;
  std::string own;
  try {
    if (s.w == chunked::what::stats) {
      bytes = sizeof(stats);
    } else if (s.w == chunked::what::dot) {
      bytes = dtype_size(s.t == dtype::f64 ? dtype::f64 : dtype::f32);
      align = bytes;
    } else {
      bytes = result_bytes(s.t, s.o);
      align = s.o == op::argmin || s.o == op::argmax ? 8 : bytes;
    }
    check_out(fn, d_out, bytes, align, s);
  } catch (const std::exception& e) {
    own = e.what();
  }
  async_state& a = *c.async;
  if (own.empty()) own = launch_partial(c, sh, s, st, a.d_mine, true);
  // Then the rest of the sequence, whole, so that every rank's exchange finds this one. A failure
  // before the all-gather is queued (outside a capture) leaves the others waiting for this rank:
  // the communicator is aborted. Once it is queued, or while capturing (nothing has run; the graph
  // is unusable), the error is thrown and the communicator kept.
  bool gathered = false;
  try {
    enqueue_header_write(a.d_mine, make_header(s, c.rank, c.size, sh.n, sh.first, own), st);
    // Outside a graph NCCL writes the records straight into pinned memory; under capture into
    // device memory (NCCL may register a captured collective's buffers, which it does for device
    // memory), and a captured copy takes them to the host.
    unsigned char* into = capturing ? a.d_all : a.h_all;
    const ncclResult_t r = ncclAllGather(a.d_mine, into, record_bytes(), ncclUint8, c.comm, st);
    if (r != ncclSuccess && r != ncclInProgress) check_nccl(r, "ncclAllGather(the ranks' partials)");
    gathered = true;
    if (!capturing) a.used = true;  // from here the destructor waits for it (or leaves `a` to it)
    // A borrowed non-blocking communicator: the collective is on the stream once this returns.
    if (r == ncclInProgress) wait_comm(c, "ncclAllGather(the ranks' partials)", clock::now());
    if (capturing)
      check_cuda(cudaMemcpyAsync(a.h_all, a.d_all, record_bytes() * static_cast<std::size_t>(c.size),
                                 cudaMemcpyDeviceToHost, st),
                 "cudaMemcpyAsync(the ranks' records)");
    check_cuda(cudaLaunchHostFunc(st, combine_on_host, &a), "cudaLaunchHostFunc(the ranks' combine)");
    if (own.empty())
      check_cuda(cudaMemcpyAsync(d_out, a.h_result, bytes, cudaMemcpyHostToDevice, st), "cudaMemcpyAsync(the result)");
    if (!capturing) check_cuda(cudaEventRecord(a.done, st), "cudaEventRecord(the stream-ordered call)");
  } catch (...) {
    if (!capturing && !gathered) abort_comm(c);
    if (!capturing && gathered) (void)cudaEventRecord(a.done, st);  // the destructor waits for the all-gather
    (void)cudaGetLastError();
    throw;
  }
  if (!own.empty())
    throw error(qualified(fn) + " on rank " + std::to_string(c.rank) + " of " + std::to_string(c.size) + ": " + own);
}

}  // namespace

void reduce_async(const communicator& comm, const shard& s, dtype t, op o, void* d_out, stream_t stream,
                  const options& opt) {
  enqueue(comm, s, {chunked::what::reduce, t, o, opt}, d_out, stream);
}

void dot_async(const communicator& comm, const shard& s, dtype t, void* d_out, stream_t stream, const options& opt) {
  enqueue(comm, s, {chunked::what::dot, t, op::sum, opt}, d_out, stream);
}

void reduce_stats_async(const communicator& comm, const shard& s, dtype t, void* d_out, stream_t stream,
                        const options& opt) {
  enqueue(comm, s, {chunked::what::stats, t, op::sum, opt}, d_out, stream);
}

void synchronize(const communicator& comm, stream_t stream) {
  communicator::impl* p = comm.get();
  if (p == nullptr) throw error("tally::dist::synchronize: the communicator was moved from");
  communicator::impl& c = *p;
  if (c.usable) {
    device_scope on(c.device);
    const cudaStream_t st = reinterpret_cast<cudaStream_t>(stream);
    // A capturing stream cannot be waited for (querying it would end the capture).
    if (core::capturing(st))
      throw error("tally::dist::synchronize: the stream is being captured; synchronize after launching the graph");
    core::relaxed_capture_scope waits_allowed;  // this thread may be capturing another stream
    wait_for(c, st, "the stream-ordered calls' exchange", clock::now());
  }
  std::string why;
  {
    std::lock_guard<std::mutex> lk(c.async->mutex);
    why.swap(c.async->error);
  }
  if (!why.empty()) throw error(why);
  if (!c.usable) throw error("tally::dist::synchronize: the communicator was aborted after an earlier failure; make a new one");
}

}  // namespace tally::dist
