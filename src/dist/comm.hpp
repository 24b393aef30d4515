// The inside of a tally::dist::communicator: the NCCL communicator, its stream, and the record
// buffers of one exchange (allocated once, so a reduction allocates nothing per call).
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <chrono>
#include <mutex>
#include <string>
#include <vector>

#include "core/context.hpp"
#include "tally/dist.hpp"

namespace tally::dist {

// What the stream-ordered calls use beside the communicator: record buffers of their own (so that a
// blocking call never overwrites what a queued combine has yet to read), and what the combine, a
// host function on the caller's stream, reads and writes.
struct async_state {
  int rank = 0, size = 1;
  unsigned char* d_mine = nullptr;    // this rank's record
  unsigned char* d_all = nullptr;     // every rank's, under capture (then copied to h_all)
  unsigned char* h_all = nullptr;     // every rank's (pinned): what the combine reads
  unsigned char* h_result = nullptr;  // the combine's result (pinned): copied to the caller's d_out
  cudaEvent_t done = nullptr;         // after the last call queued outside a graph
  bool used = false;                  // a call was queued outside a graph
  std::mutex mutex;
  std::string error;                  // the first error a combine found since synchronize()
};

struct communicator::impl {
  // The collectives' communicator. tally's own is a BLOCKING one, made once the ranks have met
  // through `init`: a non-blocking NCCL communicator hands every collective to a helper thread (75 us a
  // call on two H200s, milliseconds where a rank is bound to one core), while the init with a
  // deadline needs the non-blocking kind. A borrowed communicator is used as it is.
  ncclComm_t comm = nullptr;
  ncclComm_t init = nullptr;  // the non-blocking communicator of the init (tally's own only)
  bool owned = true;    // tally destroys it (not a borrowed one)
  bool usable = true;   // false once aborted
  int rank = 0, size = 1, device = 0;
  dist_options opt;
  cudaStream_t stream = nullptr;  // the exchange's stream
  cudaEvent_t ready = nullptr;    // the shard's partial is written (on the caller's stream)
  cudaEvent_t header = nullptr;   // the rank's header is in d_mine (on the exchange's stream)
  unsigned char* d_mine = nullptr;     // this rank's record
  unsigned char* d_all = nullptr;      // device scratch of the init's exchange
  unsigned char* h_mine = nullptr;     // pinned mirrors
  unsigned char* h_all = nullptr;      // every rank's record, rank order: the all-gather's
                                       // receive buffer (pinned host memory)
  // The stream-ordered calls' state (src/dist/async.cpp), a heap block of its own: a borrowed
  // communicator destroyed while such a call is still queued (a peer never came) leaves it
  // behind for the queued work instead of freeing what that work will still touch.
  struct async_state* async = nullptr;
  bool grouped = false;  // made by init_all (one thread drives every rank)
  // The device-API exchange (src/dist/device_exchange.hpp): null when the all-gather is used;
  // dx_why says why where dist_options::device_exchange asked for it.
  struct device_exchange* dx = nullptr;
  struct device_exchange* dx_parked = nullptr;  // a set-up that failed part way: freed at the end
  bool dx_used = false;  // the device exchange was set up (c.dx goes at an abort)
  std::string dx_why;
  ~impl();
};

// Throws tally::error naming the NCCL call and NCCL's own message.
void check_nccl(ncclResult_t r, const char* what);
// Waits until the communicator has no NCCL operation in progress (non-blocking communicators
// return ncclInProgress) and `stream`'s work is done, at most opt.timeout_ms; on a timeout or an
// asynchronous NCCL error, aborts the communicator and throws naming `what`.
void wait_for(communicator::impl& c, cudaStream_t stream, const char* what,
              std::chrono::steady_clock::time_point start);

// Waits until a non-blocking communicator's pending operation (an init, or a collective that
// returned ncclInProgress) is done, so that what follows on its stream is ordered after it: at
// most opt.timeout_ms from `start`; aborts and throws naming `what` on a timeout or an error.
void wait_comm(communicator::impl& c, const char* what, std::chrono::steady_clock::time_point start);

// After the non-blocking init has met every rank (c.comm): a blocking communicator made with an id
// that rank 0 broadcasts over the first, then one exchange on it, so that its connections are
// made while every rank is here (a later call never waits on the host for a peer). Collective;
// aborts and throws on a failure or timeout.
void make_blocking(communicator::impl& c, std::chrono::steady_clock::time_point start);
// The first exchange on each communicator (in one NCCL group), which makes the connections.
void warm_up(const std::vector<communicator::impl*>& cs, std::chrono::steady_clock::time_point start);

// Aborts an owned communicator (a borrowed one is only marked unusable). Never throws.
void abort_comm(communicator::impl& c) noexcept;
// abort_comm, then throws tally::error naming this rank and `why`.
[[noreturn]] void abort_and_throw(communicator::impl& c, const std::string& why);
// Whether opt.timeout_ms (0: never) has passed since `start`.
bool timed_out(const dist_options& o, std::chrono::steady_clock::time_point start);
// "<what>: no answer from the other ranks within <timeout> ms (...)": the waits' timeout message.
std::string no_answer(const communicator::impl& c, const char* what);
// The waits' pause between two polls, by the time waited so far: none for 5 ms (so a call as long
// as 2^33 f32 on four H200s, 1.9 ms, waits without a system call, as a one-GPU call's spinning
// synchronize does; it was 200 us before 2026-11-28 21:07), then a yield a poll, past 20 ms a
// 50 us sleep, so that NCCL's own threads get the CPU.
void pause_after(std::chrono::steady_clock::time_point waiting);

// The communicator's device made current for a scope (the core's device_scope).
struct device_scope : core::device_scope {
  explicit device_scope(int d) : core::device_scope(d, "cudaSetDevice(the communicator's device)") {}
};

}  // namespace tally::dist
