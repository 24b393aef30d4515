// tally::dist: reductions of an array sharded across GPUs and nodes (libtally_dist, NCCL).
//
// Every rank (one per GPU) holds a shard of one global array in device memory and passes it with
// the index of its first element in the global array; every rank gets the result over the whole
// array. NCCL carries the traffic; MPI (or any other launcher) only starts the processes and hands
// rank 0's NCCL id to the others (tally/dist_mpi.hpp does that in the caller's code, so the library
// itself does not link MPI).
//
//   // mpirun -np 2 ./app            (one process per GPU)
//   MPI_Init(&argc, &argv);
//   tally::dist::communicator comm = tally::dist::mpi_communicator(MPI_COMM_WORLD);
//   tally::value s = tally::dist::reduce(comm, d_shard, shard_n, first, tally::dtype::f32, tally::op::sum);
//
// Numerics. Each rank reduces its shard with tally's 1-D reduce into the op's partial (for exact
// modes: the exact accumulator, never rounded); the partials are exchanged with one NCCL
// all-gather and combined in rank order on every rank, on the host, as the chunked layer combines
// pieces (src/chunked/combine.hpp). So: integers, min/max, argmin/argmax (global indices, the
// first on ties), bitwise and logical ops are the same bits as one GPU's reduce over the whole
// array; the exact mode is the same bits for ANY number of ranks and any shard sizes (the exact
// accumulators add without rounding and the sum is rounded once); fast and compensated float
// results are the same bits from run to run for a given number of ranks and shard sizes.
//
// Failures. Before combining, every rank checks every rank's arguments (the same op, dtype,
// options and kind of call; shards that tile [0, total) without gaps or overlaps); a rank whose
// own arguments are bad still takes part, so all ranks throw tally::error naming the rank and
// what is wrong instead of hanging. A rank that never arrives (it crashed, or called something
// else) makes the others throw after dist_options::timeout_ms, having aborted the communicator.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tally/tally.hpp"

struct ncclComm;  // NCCL's communicator (ncclComm_t is ncclComm*)

namespace tally::dist {

// NCCL's unique id (ncclUniqueId: 128 bytes), made by rank 0 and sent to every rank.
struct unique_id {
  unsigned char bytes[128] = {};
};
unique_id make_unique_id();  // calls ncclGetUniqueId; rank 0 only

struct dist_options {
  // How long a rank waits for the others (the argument check and the exchange) before it aborts
  // the communicator and throws. 0: wait forever.
  std::uint64_t timeout_ms = 60000;
  // How the blocking calls of a communicator made by init_rank (or mpi_communicator) exchange
  // the ranks' records. true (the default): in one block of tally's own, launched as a
  // programmatic dependent of the shard's kernel, through NCCL's device API (a symmetric window,
  // load/store pointers to the peers' windows, NCCL's LL protocol), which forwards every record to
  // pinned host memory where the host polls for it (the README gives what it saves). false, or
  // where the device API is unavailable (NCCL before 2.28 or not the version tally was built
  // with, ranks not all reachable by load/store, one rank): NCCL's all-gather after the shard's
  // kernel, the stream polled. communicator::exchange() says which and why. Both give the same
  // bits. The stream-ordered calls and init_all / borrow use the all-gather.
  bool device_exchange = true;
};

class communicator {
 public:
  // One rank of `size` (collective: every rank calls it with rank 0's id), on CUDA device
  // `device` (the caller's current device when -1).
  static communicator init_rank(const unique_id& id, int rank, int size, int device = -1,
                                const dist_options& opt = {});
  // One process driving several GPUs: a communicator per device, rank k on devices[k].
  static std::vector<communicator> init_all(const std::vector<int>& devices, const dist_options& opt = {});
  // An existing NCCL communicator (as a training framework holds one); tally never destroys it.
  // device: the GPU of this rank (the current device when -1).
  static communicator borrow(ncclComm* comm, int device = -1, const dist_options& opt = {});

  ~communicator();
  communicator(communicator&&) noexcept;
  communicator& operator=(communicator&&) noexcept;
  communicator(const communicator&) = delete;
  communicator& operator=(const communicator&) = delete;

  int rank() const;
  int size() const;
  int device() const;
  ncclComm* nccl() const;  // the NCCL communicator
  // False after a timeout aborted it (every later call throws).
  bool usable() const;
  // How the blocking calls exchange the records: "NCCL all-gather", or "NCCL device API" (with
  // dist_options::device_exchange), or "NCCL all-gather (device exchange unavailable: why)".
  std::string exchange() const;

  struct impl;  // opaque (src/dist/communicator.cpp)
  impl* get() const noexcept { return p_.get(); }

 private:
  explicit communicator(std::unique_ptr<impl> p);
  std::unique_ptr<impl> p_;
};

// The shard of one rank: n elements at d_in (device memory of the communicator's GPU; null allowed
// only when n = 0), whose first element is element `first` of the global array.
struct shard {
  const void* d_in = nullptr;
  std::uint64_t n = 0;
  std::uint64_t first = 0;
  const void* d_in2 = nullptr;  // dot: the matching shard of y
};

// Collective: every rank of comm calls the same function with the same dtype, op and options.
// Blocks until the result is known (the shard's reduce runs on `stream`, the exchange on the
// communicator's own stream after it). The result is the same on every rank. A capturing stream
// is refused (the combine runs on the host before the call returns): capture the _async forms.
value reduce(const communicator& comm, const shard& s, dtype t, op o, const options& opt = {},
             stream_t stream = nullptr);
value dot(const communicator& comm, const shard& s, dtype t, const options& opt = {}, stream_t stream = nullptr);
stats reduce_stats(const communicator& comm, const shard& s, dtype t, const options& opt = {},
                   stream_t stream = nullptr);

// Stream-ordered and graph-capturable forms: the shard's reduce, the exchange (one NCCL all-gather
// of the records) and the combine (a host function, cudaLaunchHostFunc: the same fold in the same
// order as the blocking calls, so the same bits) are queued on `stream`, then a copy of the result
// to d_out (device memory of this rank's GPU: what tally::reduce writes, result_bytes(t, o); dot:
// one dot_result_dtype(t); stats: one tally::stats); the call returns before any of it has run.
// Capture it into a CUDA graph as any NCCL collective: every replay reduces the shards' contents
// at that time. Collective as the blocking calls: every rank queues the same calls in the same
// order. One communicator's calls run one after another (queue them on one stream, or order the
// streams), and not beside its blocking calls (synchronize() first). A graph holding such calls
// uses the communicator's buffers: destroy it before the communicator (the destructor waits only
// for calls queued outside graphs). Blocking calls and graph replays on one communicator rely on
// NCCL's graph mixing (NCCL_GRAPH_MIXING_SUPPORT, on by default). Communicators made by init_all
// (one thread driving every rank) are refused: use the blocking calls for them.
//
// Errors: this rank's own bad arguments (a null or host shard, an unsupported dtype or op, a bad
// d_out) throw tally::error here, after this rank has still joined the exchange with its failure
// in its record, so that no other rank waits for it (synchronize() then reports that failed
// exchange too, on every rank; under capture the exchange is joined when the graph is replayed). What only the exchange shows (another rank's failure, ranks that
// disagree, shards that do not tile the array) the combine finds on every rank: d_out then holds
// NaN (float results; stats: count 0 and NaN fields) or zero (integers; index -1 for
// argmin/argmax), and synchronize() throws the message.
void reduce_async(const communicator& comm, const shard& s, dtype t, op o, void* d_out, stream_t stream = nullptr,
                  const options& opt = {});
void dot_async(const communicator& comm, const shard& s, dtype t, void* d_out, stream_t stream = nullptr,
               const options& opt = {});
void reduce_stats_async(const communicator& comm, const shard& s, dtype t, void* d_out, stream_t stream = nullptr,
                        const options& opt = {});
// Waits until `stream`'s work is done, at most the communicator's timeout_ms counted from this call
// (all of the stream's work counts, this rank's own queued reductions too; a rank that never joins
// an exchange: the communicator is aborted and this throws), then throws the first error a
// combine of this communicator found since the last synchronize() (and forgets it). A capturing
// stream is refused.
void synchronize(const communicator& comm, stream_t stream = nullptr);

// One process driving all the ranks of `comms` (from communicator::init_all): shards[k] on
// comms[k]; returns the one result. streams: one per rank, or empty for the default streams.
value reduce(const std::vector<communicator>& comms, const std::vector<shard>& shards, dtype t, op o,
             const options& opt = {}, const std::vector<stream_t>& streams = {});
stats reduce_stats(const std::vector<communicator>& comms, const std::vector<shard>& shards, dtype t,
                   const options& opt = {}, const std::vector<stream_t>& streams = {});

}  // namespace tally::dist
