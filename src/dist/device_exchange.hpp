// The blocking calls' exchange through NCCL's device API (dist_options::device_exchange;
// EXPERIMENTAL, not yet run on a GPU). Where the all-gather path launches NCCL's collective after
// the shard's kernel and polls the stream, this path launches one small kernel of tally's own as
// a programmatic dependent of the shard's kernel (it is resident before that kernel ends and waits
// for it with griddepcontrol.wait). That kernel writes this rank's record (the header from the
// host, the partial and exact accumulator from d_mine) into every rank's slot of a symmetric NCCL
// window through the load/store pointers NCCL gives (ncclGetLsaPointer), raises its flag in every
// window, waits for every rank's flag in its own, copies the records into pinned host memory and
// stores the call's number into a pinned word, on which the host spins (no stream query between
// the kernel's end and the result; `tally bench calls`: 7.2 against 10.3 us for a synchronize).
//
// Window layout: flags (two halves x ranks, 8 bytes each, in 4096 bytes), then records
// (two halves x ranks x record_bytes()). Call c uses half c % 2: a rank still copying call c's
// records out of a half has not raised its flag for call c + 1, which every writer of call c + 2
// waits for first. A rank that never comes: the host, past dist_options::timeout_ms from its own
// kernel's end, raises an abort word the kernel polls; the kernel leaves, the communicator is
// aborted (which stops any exchange kernel first), the GPU stays usable.
#pragma once

#include <chrono>
#include <string>

#include "dist/comm.hpp"
#include "dist/record.hpp"

namespace tally::dist {

// Collective (every rank of c, after make_blocking; every rank must ask for it, as for any other
// argument of a collective call): the window, the device communicator and the pinned words, each
// step agreed by every rank over the communicator (with a deadline of its own) before the next
// collective one. Sets c.dx, or leaves it null and c.dx_why saying why (nothing then throws: the
// all-gather stays); the device API is used only where NCCL at run time is the version tally was
// built with (its structures differ between 2.28 releases). Throws only what the agreement's own
// exchange throws (a rank gone: aborted).
void make_device_exchange(communicator::impl& c);
// Teardown, in this order around NCCL's finalize or abort (abort_comm, ~impl). Stop: an exchange
// kernel still running leaves at the abort word (waited for at most a second). Deregister (only
// where the communicator is being finalized, not aborted): the device communicator and the
// window's registration, local calls. Free, after NCCL's finalize or abort (freeing memory
// synchronizes the device, which waits for an NCCL kernel stuck on a missing peer until the
// abort): the window, the pinned words, the event; a kernel that did not stop keeps its memory.
// For c.dx and a set-up that failed part way. Never throw.
void stop_device_exchange(communicator::impl& c) noexcept;
void deregister_device_exchange(communicator::impl& c) noexcept;
void free_device_exchange(communicator::impl& c) noexcept;
// Enqueues the exchange kernel on `stream` after the shard's partial (programmatic dependent
// launch), with this rank's header `h`. Throws (having aborted the communicator) on a launch error.
void enqueue_device_exchange(communicator::impl& c, const header& h, cudaStream_t stream);
// Waits until every rank's record is at c.h_all: the deadline counts from this rank's own kernel's
// end. On a timeout raises the abort word, waits for the kernel to leave, aborts and throws.
void wait_device_exchange(communicator::impl& c, cudaStream_t stream, const char* what);

}  // namespace tally::dist
