// The inside of a tally::dist::communicator: the NCCL communicator, its stream, and the record
// buffers of one exchange (allocated once, so a reduction allocates nothing per call).
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <chrono>
#include <string>

#include "core/context.hpp"
#include "tally/dist.hpp"

namespace tally::dist {

struct communicator::impl {
  ncclComm_t comm = nullptr;
  bool owned = true;    // tally destroys it (not a borrowed one)
  bool usable = true;   // false once aborted
  int rank = 0, size = 1, device = 0;
  dist_options opt;
  cudaStream_t stream = nullptr;  // the exchange's stream
  cudaEvent_t ready = nullptr;    // the shard's partial is written (on the caller's stream)
  unsigned char* d_mine = nullptr;     // this rank's record
  unsigned char* d_all = nullptr;      // every rank's record, rank order
  unsigned char* h_mine = nullptr;     // pinned mirrors
  unsigned char* h_all = nullptr;
  ~impl();
};

// Throws tally::error naming the NCCL call and NCCL's own message.
void check_nccl(ncclResult_t r, const char* what);
// Waits until the communicator has no NCCL operation in progress (non-blocking communicators
// return ncclInProgress) and `stream`'s work is done, at most opt.timeout_ms; on a timeout or an
// asynchronous NCCL error, aborts the communicator and throws naming `what`.
void wait_for(communicator::impl& c, cudaStream_t stream, const char* what,
              std::chrono::steady_clock::time_point start);

// Aborts an owned communicator (a borrowed one is only marked unusable). Never throws.
void abort_comm(communicator::impl& c) noexcept;

// The communicator's device made current for a scope (the core's device_scope).
struct device_scope : core::device_scope {
  explicit device_scope(int d) : core::device_scope(d, "cudaSetDevice(the communicator's device)") {}
};

}  // namespace tally::dist
