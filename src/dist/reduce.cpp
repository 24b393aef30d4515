// Sharded reductions: each rank's shard reduced by the core into its record's partial (or exact
// accumulator), one NCCL all-gather of the records, then every rank checks all the records and
// folds them in the shards' order on the host (src/dist/record.hpp).
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
#include "dist/comm.hpp"
#include "dist/record.hpp"

namespace tally::dist {

using core::check_cuda;
using clock = std::chrono::steady_clock;

namespace {

const char* fn_name(chunked::what w) {
  switch (w) {
    case chunked::what::reduce: return "dist::reduce";  // the core's checks add "tally::"
    case chunked::what::dot: return "dist::dot";
    case chunked::what::stats: return "dist::reduce_stats";
  }
  return "dist";
}
std::string qualified(const char* fn) { return std::string("tally::") + fn; }

communicator::impl& usable(const communicator& c, const char* fn) {
  communicator::impl* p = c.get();
  if (p == nullptr) throw error(qualified(fn) + ": the communicator was moved from");
  if (!p->usable) throw error(qualified(fn) + ": the communicator was aborted after an earlier failure; make a new one");
  return *p;
}

void refuse_capture(cudaStream_t s, const char* fn) {
  if (core::capturing(s))
    throw error(qualified(fn) + ": the stream is being captured; a sharded reduction combines the ranks' partials on "
                                "the host, which a graph cannot do");
}

// This rank's part before the exchange: its own checks and its shard's partial, launched on
// `stream` into d_mine; then its header. Never throws for a bad argument of the call (nor for a
// capturing stream or a failed launch): the error goes into the header, so that every rank
// learns of it in the exchange. A failure after that aborts the communicator.
void prepare(communicator::impl& c, const shard& sh, const chunked::spec& s, cudaStream_t stream) {
  const char* fn = fn_name(s.w);
  std::string own;
  try {
    refuse_capture(stream, fn);
    const chunked::piece_plan pp = chunked::plan_for(s);  // refuses unsupported (dtype, op, options)
    if (sh.n > 0) {
      core::check_input_pointer(fn, "the shard", sh.d_in, sh.n, s.t);
      if (s.w == chunked::what::dot) core::check_input_pointer(fn, "the shard of y", sh.d_in2, sh.n, s.t);
      const core::device_context& dev = core::current_context();
      if (s.opt.check_memory) {
        core::check_input_reach(fn, "the shard", sh.d_in, sh.n, s.t, dev);
        if (s.w == chunked::what::dot) core::check_input_reach(fn, "the shard of y", sh.d_in2, sh.n, s.t, dev);
      }
      if (pp.exact) {
        long long* carry = reinterpret_cast<long long*>(c.d_mine + kCarryOffset);
        check_cuda(cudaMemsetAsync(carry, 0, chunked::carry_bytes(), stream), "cudaMemsetAsync(the shard's exact accumulator)");
        core::launch_kind(pp.kind, s.t, sh.d_in, sh.d_in2, sh.n, nullptr, stream, dev, carry);
      } else {
        unsigned char* slot = c.d_mine + kPartialOffset;
        core::launch_kind(pp.kind, s.t, sh.d_in, sh.d_in2, sh.n, slot, stream, dev);
        if (pp.with_mean) core::launch_kind(core::kind::mean, s.t, sh.d_in, sh.d_in2, sh.n, slot + 8, stream, dev);
      }
    }
  } catch (const std::exception& e) {
    own = e.what();
  }
  // The header goes on the caller's stream after the partial, or, where this rank failed (its
  // stream may be capturing or broken), on the communicator's own stream.
  const cudaStream_t hs = own.empty() ? stream : c.stream;
  try {
    const header h = make_header(s, c.rank, c.size, sh.n, sh.first, own);
    std::memcpy(c.h_mine, &h, sizeof h);
    check_cuda(cudaMemcpyAsync(c.d_mine, c.h_mine, sizeof h, cudaMemcpyHostToDevice, hs), "cudaMemcpyAsync(the rank's header)");
    check_cuda(cudaEventRecord(c.ready, hs), "cudaEventRecord(the shard's partial)");
    check_cuda(cudaStreamWaitEvent(c.stream, c.ready, 0), "cudaStreamWaitEvent(the shard's partial)");
  } catch (...) {
    abort_comm(c);
    throw;
  }
}

void enqueue_exchange(communicator::impl& c) {
  const ncclResult_t r = ncclAllGather(c.d_mine, c.d_all, record_bytes(), ncclUint8, c.comm, c.stream);
  if (r != ncclSuccess && r != ncclInProgress) {
    abort_comm(c);
    check_nccl(r, "ncclAllGather(the ranks' partials)");
  }
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

void enqueue_copy_back(communicator::impl& c) {
  check_cuda(cudaMemcpyAsync(c.h_all, c.d_all, record_bytes() * static_cast<std::size_t>(c.size), cudaMemcpyDeviceToHost,
                             c.stream),
             "cudaMemcpyAsync(the ranks' partials to the host)");
}

// Every rank's header checked; throws the same message on every rank.
void check_all(const communicator::impl& c, const chunked::spec& s) {
  std::vector<header> hs(static_cast<std::size_t>(c.size));
  for (int k = 0; k < c.size; ++k) std::memcpy(&hs[k], c.h_all + static_cast<std::size_t>(k) * record_bytes(), sizeof(header));
  const std::string why = check_headers(hs, s);
  if (!why.empty())
    throw error(qualified(fn_name(s.w)) + " on rank " + std::to_string(c.rank) + " of " + std::to_string(c.size) + ": " + why);
}

// One rank, one process: prepare, exchange, wait, check. The records are then at c.h_all.
void run_rank(communicator::impl& c, const shard& sh, const chunked::spec& s, stream_t stream) {
  device_scope on(c.device);
  prepare(c, sh, s, reinterpret_cast<cudaStream_t>(stream));
  enqueue_exchange(c);
  const auto start = after_own_work(c);
  wait_for(c, c.stream, "ncclAllGather(the ranks' partials)", start);
  enqueue_copy_back(c);
  wait_for(c, c.stream, "copying the ranks' partials", start);
  check_all(c, s);
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
  try {
    for (std::size_t k = 0; k < cs.size(); ++k) {
      device_scope on(cs[k]->device);
      const cudaStream_t st = streams.empty() ? nullptr : reinterpret_cast<cudaStream_t>(streams[k]);
      prepare(*cs[k], shards[k], s, st);
    }
    check_nccl(ncclGroupStart(), "ncclGroupStart");
    for (communicator::impl* c : cs) {
      device_scope on(c->device);
      const ncclResult_t r = ncclAllGather(c->d_mine, c->d_all, record_bytes(), ncclUint8, c->comm, c->stream);
      if (r != ncclSuccess && r != ncclInProgress) {
        (void)ncclGroupEnd();
        check_nccl(r, "ncclAllGather(the ranks' partials)");
      }
    }
    check_nccl(ncclGroupEnd(), "ncclGroupEnd(the ranks' all-gathers)");
    clock::time_point start{};
    for (communicator::impl* c : cs) {
      device_scope on(c->device);
      start = std::max(start, after_own_work(*c));
    }
    for (communicator::impl* c : cs) {
      device_scope on(c->device);
      wait_for(*c, c->stream, "ncclAllGather(the ranks' partials)", start);
    }
    communicator::impl& c0 = *cs[0];
    device_scope on(c0.device);
    enqueue_copy_back(c0);
    wait_for(c0, c0.stream, "copying the ranks' partials", start);
  } catch (...) {
    for (communicator::impl* c : cs) abort_comm(*c);
    throw;
  }
  check_all(*cs[0], s);
}

}  // namespace

value reduce(const communicator& comm, const shard& s, dtype t, op o, const options& opt, stream_t stream) {
  const chunked::spec sp{chunked::what::reduce, t, o, opt};
  communicator::impl& c = usable(comm, fn_name(sp.w));
  run_rank(c, s, sp, stream);
  return combine(c.h_all, c.size, sp);
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
