// The blocking calls' exchange through NCCL's device API (dist_options::device_exchange;
// EXPERIMENTAL, not yet run on a GPU). Where the all-gather path launches NCCL's collective after
// the shard's kernel and polls the stream, this path launches one small kernel of tally's own as
// a programmatic dependent of the shard's kernel (it is resident before that kernel ends and waits
// for it with griddepcontrol.wait). That kernel writes this rank's record (the header from the
// host, the partial and exact accumulator from d_mine) into its slot of every rank's symmetric
// NCCL window through the load/store pointers NCCL gives (ncclGetLsaPointer), as LL words (NCCL's
// LL protocol: 8 bytes, 4 of data and the call's 4-byte flag, stored whole, so no fence and no
// separate flag), polls its own window until every word of every rank carries the call's flag,
// and forwards those words as they are to pinned host memory, where the host unpacks each into
// h_all once its flag is the call's (no stream query between the kernel's end and the result).
//
// Window layout: two halves x ranks x record_bytes() / 4 LL words. Call c uses half c % 2: a rank
// still reading call c's words out of a half has not written its words for call c + 1, which every
// writer of call c + 2 waited for first. Flags: a 32-bit count of the calls with 0 skipped, so a
// call's flag differs from the last call's (the host's words) and the one before (its half).
// A rank that never comes: the host, past dist_options::timeout_ms from its own
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

// The flag of the call after one whose flag was `last`: one more, 0 (the first value of the
// windows and of the host's words) skipped, so it differs from the last two calls' flags.
constexpr unsigned int next_flag(unsigned int last) { return last == 0xFFFFFFFFu ? 1u : last + 1u; }

}  // namespace tally::dist
