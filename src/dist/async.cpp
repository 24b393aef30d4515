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
  communicator::impl& c = *static_cast<communicator::impl*>(p);
  std::string why;
  try {
    why = combine_into(c.h_all_async, c.size, c.rank, c.h_result);
  } catch (...) {
    why = "tally::dist: the combine failed on rank " + std::to_string(c.rank);
  }
  if (why.empty()) return;
  try {
    std::lock_guard<std::mutex> lk(c.async_mutex);
    if (c.async_error.empty()) c.async_error = why;
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
  device_scope on(c.device);
  const cudaStream_t st = reinterpret_cast<cudaStream_t>(stream);
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
  if (own.empty()) own = launch_partial(c, sh, s, st, c.d_mine_async, true);
  // From here on every rank's sequence must be queued whole: a failure aborts the communicator.
  try {
    enqueue_header_write(c.d_mine_async, make_header(s, c.rank, c.size, sh.n, sh.first, own), st);
    const ncclResult_t r = ncclAllGather(c.d_mine_async, c.h_all_async, record_bytes(), ncclUint8, c.comm, st);
    if (r != ncclSuccess && r != ncclInProgress) {
      abort_comm(c);
      check_nccl(r, "ncclAllGather(the ranks' partials)");
    }
    // A borrowed non-blocking communicator: the collective is on the stream once this returns.
    if (r == ncclInProgress) wait_comm(c, "ncclAllGather(the ranks' partials)", clock::now());
    check_cuda(cudaLaunchHostFunc(st, combine_on_host, &c), "cudaLaunchHostFunc(the ranks' combine)");
    if (own.empty())
      check_cuda(cudaMemcpyAsync(d_out, c.h_result, bytes, cudaMemcpyHostToDevice, st), "cudaMemcpyAsync(the result)");
  } catch (...) {
    abort_comm(c);
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
    wait_for(c, reinterpret_cast<cudaStream_t>(stream), "the stream-ordered calls' exchange", clock::now());
  }
  std::string why;
  {
    std::lock_guard<std::mutex> lk(c.async_mutex);
    why.swap(c.async_error);
  }
  if (!why.empty()) throw error(why);
  if (!c.usable) throw error("tally::dist::synchronize: the communicator was aborted after an earlier failure; make a new one");
}

}  // namespace tally::dist
