// Sharded reductions: each rank's shard reduced by the core into its record's partial (or exact
// accumulator), one NCCL all-gather of the records, then every rank checks all the records and
// folds them in the shards' order on the host (src/dist/record.hpp). The all-gather writes the
// records straight into pinned host memory (NCCL takes any memory the GPU can reach): no copy
// back, 9 us less a call on two H200s than a copy after the exchange.
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "chunked/combine.hpp"
#include "core/api_internal.hpp"
#include "core/context.hpp"
#include "core/memory.hpp"
#include "dist/comm.hpp"
#include "dist/device_exchange.hpp"
#include "dist/partial.hpp"
#include "dist/record.hpp"
#include "dist/trace.hpp"

namespace tally::dist {

using core::check_cuda;
using clock = std::chrono::steady_clock;

namespace {

// This rank's part before the exchange: its own checks and its shard's partial, launched on
// `stream` into d_mine; then its header. Never throws for a bad argument of the call (nor for a
// capturing stream or a failed launch): the error goes into the header, so that every rank
// learns of it in the exchange. A failure after that aborts the communicator. Returns this rank's
// own error ("" when none), whole (the header holds only its first 199 characters). *exchange:
// the stream the all-gather goes on (null: the communicator's, after the partial).
std::string prepare(communicator::impl& c, const shard& sh, const chunked::spec& s, cudaStream_t stream,
                    cudaStream_t* exchange = nullptr) {
  const std::string own = launch_partial(c, sh, s, stream, c.d_mine, false);
  // The header goes on the communicator's own stream, while the shard's kernels run on the
  // caller's (its bytes are not the partial's). Where this rank failed (its stream may be
  // capturing or broken) the exchange waits for nothing of that stream, on the communicator's.
  // Else, given `exchange`, the all-gather follows the partial on the caller's stream, which waits
  // for the header first (copied long before the shard is read): no wait across streams between
  // the shard's last block and the exchange (tally bench dist on two H200s, 2026-11-28: a
  // one-element call 25.7 us against 30.9 before, the all-gather alone 15.9 against 18.4 on
  // that machine: about 2.7 us less of tally's own; docs/data/bench-dist-h200x2-1128{a,}.md).
  // Without `exchange` (one process driving every rank), the communicator's stream waits for
  // the partial.
  try {
    const header h = make_header(s, c.rank, c.size, sh.n, sh.first, own);
    std::memcpy(c.h_mine, &h, sizeof h);
    check_cuda(cudaMemcpyAsync(c.d_mine, c.h_mine, sizeof h, cudaMemcpyHostToDevice, c.stream),
               "cudaMemcpyAsync(the rank's header)");
    if (own.empty() && exchange != nullptr) {
      check_cuda(cudaEventRecord(c.header, c.stream), "cudaEventRecord(the rank's header)");
      check_cuda(cudaStreamWaitEvent(stream, c.header, 0), "cudaStreamWaitEvent(the rank's header)");
      check_cuda(cudaEventRecord(c.ready, stream), "cudaEventRecord(the shard's partial)");
      *exchange = stream;
    } else {
      check_cuda(cudaEventRecord(c.ready, own.empty() ? stream : c.stream),
                 "cudaEventRecord(the shard's partial)");
      if (own.empty())
        check_cuda(cudaStreamWaitEvent(c.stream, c.ready, 0), "cudaStreamWaitEvent(the shard's partial)");
      if (exchange != nullptr) *exchange = c.stream;
    }
  } catch (...) {
    abort_comm(c);
    throw;
  }
  return own;
}

// The all-gather on `stream` (prepare's choice). A non-blocking communicator may answer
// ncclInProgress before the collective is on the stream: then it is waited for, so that the copy
// queued after it is ordered after it.
void enqueue_exchange(communicator::impl& c, cudaStream_t stream) {
  const ncclResult_t r = ncclAllGather(c.d_mine, c.h_all, record_bytes(), ncclUint8, c.comm, stream);
  if (r != ncclSuccess && r != ncclInProgress) {
    abort_comm(c);
    check_nccl(r, "ncclAllGather(the ranks' partials)");
  }
  if (r == ncclInProgress) wait_comm(c, "ncclAllGather(the ranks' partials)", clock::now());
}

// Waits (without the peers' deadline) for this rank's own partial: the deadline is for the other
// ranks, not for a large shard or work queued before the call. A failed kernel aborts.
clock::time_point after_own_work(communicator::impl& c) {
  const cudaError_t e = cudaEventSynchronize(c.ready);
  if (e != cudaSuccess) {
    abort_comm(c);
    check_cuda(e, "the shard's reduction");
  }
  return clock::now();
}

// Every rank's header checked; throws the same message on every rank, except that a rank that
// failed itself says its own error whole (own: "rank k failed: ..."; "" for none).
void check_all(const communicator::impl& c, const chunked::spec& s, const std::string& own = "") {
  std::vector<header> hs(static_cast<std::size_t>(c.size));
  for (int k = 0; k < c.size; ++k) std::memcpy(&hs[k], c.h_all + static_cast<std::size_t>(k) * record_bytes(), sizeof(header));
  std::string why = check_headers(hs, s);
  if (why.empty()) return;
  if (!own.empty()) why = own;
  throw error(qualified(fn_name(s.w)) + " on rank " + std::to_string(c.rank) + " of " + std::to_string(c.size) + ": " + why);
}

// run_rank with the device API's exchange (src/dist/device_exchange.hpp): the shard's partial,
// then tally's exchange kernel as its programmatic dependent (the header its argument), then the
// host's wait on the word that kernel stores. A rank that failed itself (its stream may be
// capturing or broken) runs the exchange on the communicator's stream, its header saying why.
void run_rank_device(communicator::impl& c, const shard& sh, const chunked::spec& s, stream_t stream) {
  trace::mark(trace::start);
  device_scope on(c.device);
  core::relaxed_capture_scope waits_allowed;
  const cudaStream_t caller = reinterpret_cast<cudaStream_t>(stream);
  const std::string own = launch_partial(c, sh, s, caller, c.d_mine, false);
  header h;
  try {
    h = make_header(s, c.rank, c.size, sh.n, sh.first, own);
  } catch (...) {
    abort_comm(c);
    throw;
  }
  trace::mark(trace::launched);
  const cudaStream_t on_stream = own.empty() ? caller : c.stream;
  enqueue_device_exchange(c, h, on_stream);
  trace::mark(trace::queued);
  wait_device_exchange(c, on_stream, "the device exchange of the ranks' partials");
  trace::mark(trace::exchanged);
  check_all(c, s, own.empty() ? own : "rank " + std::to_string(c.rank) + " failed: " + own);
}

// One rank, one process: prepare, exchange, wait, check. The records are then at c.h_all.
void run_rank(communicator::impl& c, const shard& sh, const chunked::spec& s, stream_t stream) {
  if (c.dx != nullptr) return run_rank_device(c, sh, s, stream);
  trace::mark(trace::start);
  device_scope on(c.device);
  core::relaxed_capture_scope waits_allowed;  // a capturing caller's stream is refused, not fatal
  cudaStream_t exchange = c.stream;
  const std::string own = prepare(c, sh, s, reinterpret_cast<cudaStream_t>(stream), &exchange);
  trace::mark(trace::launched);
  enqueue_exchange(c, exchange);
  trace::mark(trace::queued);
  const auto start = after_own_work(c);
  trace::mark(trace::own_done);
  wait_for(c, exchange, "ncclAllGather(the ranks' partials)", start);
  trace::mark(trace::exchanged);
  check_all(c, s, own.empty() ? own : "rank " + std::to_string(c.rank) + " failed: " + own);
}

// Several ranks from this process: every rank prepared, the all-gathers in one NCCL group.
void run_all(const std::vector<communicator>& comms, const std::vector<shard>& shards, const chunked::spec& s,
             const std::vector<stream_t>& streams) {
  const char* fn = fn_name(s.w);
  if (comms.empty()) throw error(qualified(fn) + ": no communicators");
  if (shards.size() != comms.size())
    throw error(qualified(fn) + ": " + std::to_string(shards.size()) + " shards for " + std::to_string(comms.size()) +
                " communicators");
  if (!streams.empty() && streams.size() != comms.size())
    throw error(qualified(fn) + ": " + std::to_string(streams.size()) + " streams for " + std::to_string(comms.size()) +
                " communicators (give one per rank, or none)");
  std::vector<communicator::impl*> cs;
  for (std::size_t k = 0; k < comms.size(); ++k) {
    communicator::impl& c = usable(comms[k], fn);
    if (c.rank != static_cast<int>(k) || c.size != static_cast<int>(comms.size()))
      throw error(qualified(fn) + ": communicator " + std::to_string(k) + " is rank " + std::to_string(c.rank) + " of " +
                  std::to_string(c.size) + ": give every rank of one init_all, in rank order");
    cs.push_back(&c);
  }
  // The ranks' all-gathers form one NCCL group: a failure anywhere leaves the others' kernels
  // waiting, so it aborts every communicator of the set.
  std::string own;  // the first rank's own error, whole
  core::relaxed_capture_scope waits_allowed;
  try {
    for (std::size_t k = 0; k < cs.size(); ++k) {
      device_scope on(cs[k]->device);
      const cudaStream_t st = streams.empty() ? nullptr : reinterpret_cast<cudaStream_t>(streams[k]);
      const std::string e = prepare(*cs[k], shards[k], s, st);
      if (own.empty() && !e.empty()) own = "rank " + std::to_string(k) + " failed: " + e;
    }
    check_nccl(ncclGroupStart(), "ncclGroupStart");
    for (communicator::impl* c : cs) {
      device_scope on(c->device);
      const ncclResult_t r = ncclAllGather(c->d_mine, c->h_all, record_bytes(), ncclUint8, c->comm, c->stream);
      if (r != ncclSuccess && r != ncclInProgress) {
        (void)ncclGroupEnd();
        check_nccl(r, "ncclAllGather(the ranks' partials)");
      }
    }
    const ncclResult_t g = ncclGroupEnd();
    check_nccl(g, "ncclGroupEnd(the ranks' all-gathers)");
    if (g == ncclInProgress)
      for (communicator::impl* c : cs) wait_comm(*c, "ncclAllGather(the ranks' partials)", clock::now());
    clock::time_point start{};
    for (communicator::impl* c : cs) {
      device_scope on(c->device);
      start = std::max(start, after_own_work(*c));
    }
    for (communicator::impl* c : cs) {
      device_scope on(c->device);
      wait_for(*c, c->stream, "ncclAllGather(the ranks' partials)", start);
    }
  } catch (...) {
    for (communicator::impl* c : cs) abort_comm(*c);
    throw;
  }
  check_all(*cs[0], s, own);
}

}  // namespace

value reduce(const communicator& comm, const shard& s, dtype t, op o, const options& opt, stream_t stream) {
  const chunked::spec sp{chunked::what::reduce, t, o, opt};
  communicator::impl& c = usable(comm, fn_name(sp.w));
  run_rank(c, s, sp, stream);
  const value v = combine(c.h_all, c.size, sp);
  trace::mark(trace::combined);
  return v;
}

value dot(const communicator& comm, const shard& s, dtype t, const options& opt, stream_t stream) {
  const chunked::spec sp{chunked::what::dot, t, op::sum, opt};
  communicator::impl& c = usable(comm, fn_name(sp.w));
  run_rank(c, s, sp, stream);
  return combine(c.h_all, c.size, sp);
}

stats reduce_stats(const communicator& comm, const shard& s, dtype t, const options& opt, stream_t stream) {
  const chunked::spec sp{chunked::what::stats, t, op::sum, opt};
  communicator::impl& c = usable(comm, fn_name(sp.w));
  run_rank(c, s, sp, stream);
  return combine_stats(c.h_all, c.size, sp);
}

value reduce(const std::vector<communicator>& comms, const std::vector<shard>& shards, dtype t, op o,
             const options& opt, const std::vector<stream_t>& streams) {
  const chunked::spec sp{chunked::what::reduce, t, o, opt};
  run_all(comms, shards, sp, streams);
  return combine(comms[0].get()->h_all, comms[0].size(), sp);
}

stats reduce_stats(const std::vector<communicator>& comms, const std::vector<shard>& shards, dtype t,
                   const options& opt, const std::vector<stream_t>& streams) {
  const chunked::spec sp{chunked::what::stats, t, op::sum, opt};
  run_all(comms, shards, sp, streams);
  return combine_stats(comms[0].get()->h_all, comms[0].size(), sp);
}

}  // namespace tally::dist
