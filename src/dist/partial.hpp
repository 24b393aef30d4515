// What every sharded call does first on its rank, the blocking calls (reduce.cpp) and the
// stream-ordered ones (async.cpp) alike: the communicator checked, the call's own arguments
// checked, and the shard's partial (or exact accumulator) launched into the rank's record.
#pragma once

#include <cuda_runtime_api.h>

#include <string>

#include "chunked/combine.hpp"
#include "dist/comm.hpp"
#include "dist/record.hpp"

namespace tally::dist {

// "dist::reduce", "dist::dot_async", ... (the core's checks add "tally::").
const char* fn_name(chunked::what w, bool async = false);
std::string qualified(const char* fn);

// The communicator's inside, or a tally::error naming fn (moved from, or aborted).
communicator::impl& usable(const communicator& c, const char* fn);

// This rank's checks and its shard's partial (or, exact modes, its exact accumulator, zeroed
// first), launched on `stream` into the record at d_record. Returns this rank's own error ("" when
// none): a bad argument, a shard on another GPU, a capturing stream where capture is not allowed,
// a failed launch. Never throws for those: the caller puts the error in the rank's header, so
// that every rank learns of it in the exchange instead of waiting for this one.
std::string launch_partial(communicator::impl& c, const shard& sh, const chunked::spec& s, cudaStream_t stream,
                           unsigned char* d_record, bool allow_capture);

// Enqueues a kernel on `stream` that writes h into the first kHeaderBytes of d_record (the header
// travels as the kernel's argument, so a captured graph writes the same bytes on every replay).
void enqueue_header_write(unsigned char* d_record, const header& h, cudaStream_t stream);

}  // namespace tally::dist
