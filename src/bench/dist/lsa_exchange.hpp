// An experiment for `tally bench dist` "after a kernel": the exchange of the ranks' records done
// inside the kernel that ends, through NCCL's device API (NCCL 2.28: a device communicator, a
// symmetric window, load/store-accessible peer pointers and an LSA barrier), where tally::dist
// launches NCCL's all-gather after its shard's kernel. The kernel spins like the table's other
// rows, writes its record into every rank's window, meets the others at the barrier and stores
// the gathered records into pinned host memory: no second kernel after the first. Measured here
// only; tally::dist does not use it (yet).
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstddef>
#include <functional>
#include <string>

namespace tally::bench::lsa {

struct exchange;

// Collective on `comm` (every rank calls it): the window and the device communicator. Returns ""
// with *out set, or why the device API is not available (then *out is null; nothing is left
// allocated). `agree(ok)` answers whether every rank's step went well (an MPI all-reduce): a
// collective step is taken only where every rank took the one before, so one rank's failure never
// leaves the others waiting in NCCL.
std::string make(ncclComm_t comm, std::size_t record_bytes, const std::function<bool(bool)>& agree, exchange** out);
// Enqueues one kernel on `stream`: `spin_ns` of spinning, then this rank's record (zeros, rank
// and call number in its first words) into every rank's window, the barrier, and the gathered
// records into h_all (pinned, size x record_bytes).
cudaError_t run(exchange* x, cudaStream_t stream, unsigned long long spin_ns, void* h_all);
// Checks h_all after a run: every rank's record says that rank and the last call. "" or why not.
std::string check(const exchange* x, const void* h_all);
// Collective: frees everything make() made.
void destroy(exchange* x);

}  // namespace tally::bench::lsa
