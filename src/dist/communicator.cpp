// tally::dist::communicator: NCCL communicators made non-blocking (every wait has a deadline),
// and the record buffers of the exchange.
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <chrono>
#include <cstring>
#include <string>
#include <thread>

#include "core/context.hpp"
#include "dist/comm.hpp"
#include "dist/device_exchange.hpp"
#include "dist/record.hpp"

namespace tally::dist {

using core::check_cuda;
using clock = std::chrono::steady_clock;

void check_nccl(ncclResult_t r, const char* what) {
  if (r == ncclSuccess || r == ncclInProgress) return;
  throw error(std::string("tally::dist: ") + what + " failed: " + ncclGetErrorString(r) +
              " (NCCL " + std::to_string(NCCL_VERSION_CODE) + ")");
}

bool timed_out(const dist_options& o, clock::time_point start) {
  return o.timeout_ms > 0 && clock::now() - start > std::chrono::milliseconds(o.timeout_ms);
}

std::string no_answer(const communicator::impl& c, const char* what) {
  return std::string(what) + ": no answer from the other ranks within " + std::to_string(c.opt.timeout_ms) +
         " ms (a rank failed, or called something else)";
}

void pause_after(clock::time_point waiting) {
  const auto waited = clock::now() - waiting;
  if (waited < std::chrono::milliseconds(5)) return;
  if (waited < std::chrono::milliseconds(20)) std::this_thread::yield();
  else std::this_thread::sleep_for(std::chrono::microseconds(50));
}

void abort_comm(communicator::impl& c) noexcept {
  stop_device_exchange(c);  // its kernel gone before NCCL's abort; its memory freed after it
  // A borrowed communicator belongs to its owner: marked unusable here, aborted by them.
  if ((c.comm != nullptr || c.init != nullptr) && c.owned) {
    int was = 0;
    const bool got = cudaGetDevice(&was) == cudaSuccess;
    if (cudaSetDevice(c.device) == cudaSuccess) {
      if (c.comm != nullptr && c.comm != c.init) (void)ncclCommAbort(c.comm);
      if (c.init != nullptr) (void)ncclCommAbort(c.init);
    }
    if (got) (void)cudaSetDevice(was);
    c.comm = c.init = nullptr;  // aborted: nothing left to destroy
  }
  free_device_exchange(c);
  c.usable = false;
  (void)cudaGetLastError();
}

[[noreturn]] void abort_and_throw(communicator::impl& c, const std::string& why) {
  abort_comm(c);
  throw error("tally::dist: rank " + std::to_string(c.rank) + " of " + std::to_string(c.size) + ": " + why +
              (c.owned ? "; the communicator was aborted (make a new one)"
                       : "; the borrowed communicator is unusable now: abort it (ncclCommAbort) and make a new one"));
}

// Waits for a non-blocking communicator's pending operation to finish.
void wait_comm(communicator::impl& c, const char* what, clock::time_point start) {
  for (;;) {
    ncclResult_t st = ncclSuccess;
    check_nccl(ncclCommGetAsyncError(c.comm, &st), "ncclCommGetAsyncError");
    if (st == ncclSuccess) return;
    if (st != ncclInProgress) abort_and_throw(c, std::string(what) + ": " + ncclGetErrorString(st));
    if (timed_out(c.opt, start))
      abort_and_throw(c, std::string(what) + ": no answer from the other ranks within " +
                             std::to_string(c.opt.timeout_ms) + " ms (did every rank call it?)");
    std::this_thread::yield();
  }
}

namespace {

void allocate(communicator::impl& c) {
  const std::size_t rb = record_bytes();
  check_cuda(cudaStreamCreateWithFlags(&c.stream, cudaStreamNonBlocking), "cudaStreamCreate(the communicator's stream)");
  check_cuda(cudaEventCreateWithFlags(&c.ready, cudaEventDisableTiming), "cudaEventCreate(the communicator's event)");
  check_cuda(cudaEventCreateWithFlags(&c.header, cudaEventDisableTiming),
             "cudaEventCreate(the communicator's header event)");
  check_cuda(cudaMalloc(reinterpret_cast<void**>(&c.d_mine), rb), "cudaMalloc(the communicator's record)");
  check_cuda(cudaMalloc(reinterpret_cast<void**>(&c.d_all), rb * static_cast<std::size_t>(c.size)),
             "cudaMalloc(the communicator's records of every rank)");
  check_cuda(cudaMallocHost(reinterpret_cast<void**>(&c.h_mine), rb), "cudaMallocHost(the communicator's record)");
  check_cuda(cudaMallocHost(reinterpret_cast<void**>(&c.h_all), rb * static_cast<std::size_t>(c.size)),
             "cudaMallocHost(the communicator's records of every rank)");
  c.async = new async_state;
  async_state& a = *c.async;
  a.rank = c.rank;
  a.size = c.size;
  check_cuda(cudaMalloc(reinterpret_cast<void**>(&a.d_mine), rb), "cudaMalloc(the stream-ordered calls' record)");
  check_cuda(cudaMalloc(reinterpret_cast<void**>(&a.d_all), rb * static_cast<std::size_t>(c.size)),
             "cudaMalloc(the stream-ordered calls' records of every rank)");
  check_cuda(cudaEventCreateWithFlags(&a.done, cudaEventDisableTiming), "cudaEventCreate(the stream-ordered calls)");
  check_cuda(cudaMallocHost(reinterpret_cast<void**>(&a.h_all), rb * static_cast<std::size_t>(c.size)),
             "cudaMallocHost(the stream-ordered calls' records of every rank)");
  check_cuda(cudaMallocHost(reinterpret_cast<void**>(&a.h_result), kResultBytes),
             "cudaMallocHost(the stream-ordered calls' result)");
  // Every byte of the records defined once: a call writes its header and as much of the partial
  // as its op and mode carry, and the all-gather sends the whole record (compute-sanitizer's
  // initcheck reported the unwritten rest inside ncclAllGather, H100 2026-11-27 07:25 UTC). On
  // the communicator's stream, waited for here: the callers' kernels run on their own streams.
  check_cuda(cudaMemsetAsync(c.d_mine, 0, rb, c.stream), "cudaMemsetAsync(the communicator's record)");
  check_cuda(cudaMemsetAsync(a.d_mine, 0, rb, c.stream), "cudaMemsetAsync(the stream-ordered calls' record)");
  check_cuda(cudaStreamSynchronize(c.stream), "cudaStreamSynchronize(the records' first bytes)");
}

void free_async(async_state* a) {
  if (a == nullptr) return;
  cudaFree(a->d_mine);
  cudaFree(a->d_all);
  cudaFreeHost(a->h_all);
  cudaFreeHost(a->h_result);
  if (a->done != nullptr) cudaEventDestroy(a->done);
  delete a;
}

int device_or_current(int device) {
  if (device >= 0) return device;
  int d = 0;
  check_cuda(cudaGetDevice(&d), "cudaGetDevice");
  return d;
}

void check_device(int device) {
  int count = 0;
  check_cuda(cudaGetDeviceCount(&count), "cudaGetDeviceCount");
  if (device < 0 || device >= count)
    throw error("tally::dist: device " + std::to_string(device) + " does not exist (this process sees " +
                std::to_string(count) + " GPU(s))");
}

ncclConfig_t nonblocking() {
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = 0;
  return cfg;
}

}  // namespace

void wait_for(communicator::impl& c, cudaStream_t stream, const char* what, clock::time_point start) {
  // The exchange's end is found by polling the stream: a tight spin first (a poll is a
  // cudaStreamQuery, about 0.1 us), NCCL's state every 16th poll once it has said the collective
  // is queued (a failed peer leaves the stream waiting, and is found there), then a yield a poll
  // and past 20 ms a 50 us sleep, so that NCCL's own threads get the CPU. (Against a yield a
  // poll from the start: no measurable change on two H200s, one element a rank 30.2 against
  // 30.1 us, 2026-11-28; the spin costs no yield's latency where the end is near.)
  const clock::time_point waiting = clock::now();
  bool queued = false;  // NCCL said ncclSuccess: the collective is on the stream
  for (int polls = 0;; ++polls) {
    if (!queued || (polls & 15) == 0) {
      ncclResult_t st = ncclSuccess;
      const ncclResult_t r = ncclCommGetAsyncError(c.comm, &st);
      if (r != ncclSuccess) abort_and_throw(c, std::string("ncclCommGetAsyncError: ") + ncclGetErrorString(r));
      if (st != ncclSuccess && st != ncclInProgress) abort_and_throw(c, std::string(what) + ": " + ncclGetErrorString(st));
      queued = st == ncclSuccess;
    }
    if (queued) {
      const cudaError_t q = cudaStreamQuery(stream);
      if (q == cudaSuccess) return;
      if (q != cudaErrorNotReady) abort_and_throw(c, std::string(what) + ": " + cudaGetErrorString(q));
    }
    if ((polls & 15) == 0 && timed_out(c.opt, start)) abort_and_throw(c, no_answer(c, what));
    pause_after(waiting);
  }
}

namespace {

ncclConfig_t blocking_config() {
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = 1;
  return cfg;
}

}  // namespace

void warm_up(const std::vector<communicator::impl*>& cs, clock::time_point start) {
  for (communicator::impl* c : cs) {
    device_scope on(c->device);
    check_cuda(cudaMemsetAsync(c->d_mine, 0, record_bytes(), c->stream), "cudaMemsetAsync(the first exchange)");
  }
  check_nccl(ncclGroupStart(), "ncclGroupStart");
  for (communicator::impl* c : cs) {
    device_scope on(c->device);
    const ncclResult_t r = ncclAllGather(c->d_mine, c->h_all, record_bytes(), ncclUint8, c->comm, c->stream);
    if (r != ncclSuccess) {
      (void)ncclGroupEnd();
      check_nccl(r, "ncclAllGather(the first exchange)");
    }
  }
  check_nccl(ncclGroupEnd(), "ncclGroupEnd(the first exchange)");
  for (communicator::impl* c : cs) {
    device_scope on(c->device);
    wait_for(*c, c->stream, "the first exchange", start);
  }
}

void make_blocking(communicator::impl& c, clock::time_point start) {
  device_scope on(c.device);
  // Rank 0's new id, broadcast over the init communicator (non-blocking: polled, with the deadline).
  unique_id id{};
  if (c.rank == 0) id = make_unique_id();
  std::memcpy(c.h_mine, id.bytes, sizeof id.bytes);
  check_cuda(cudaMemcpyAsync(c.d_mine, c.h_mine, sizeof id.bytes, cudaMemcpyHostToDevice, c.stream),
             "cudaMemcpyAsync(the collectives' NCCL id)");
  const ncclResult_t r = ncclBroadcast(c.d_mine, c.d_all, sizeof id.bytes, ncclUint8, 0, c.comm, c.stream);
  if (r != ncclSuccess && r != ncclInProgress) abort_and_throw(c, std::string("ncclBroadcast: ") + ncclGetErrorString(r));
  if (r == ncclInProgress) wait_comm(c, "ncclBroadcast(the collectives' NCCL id)", start);
  check_cuda(cudaMemcpyAsync(c.h_all, c.d_all, sizeof id.bytes, cudaMemcpyDeviceToHost, c.stream),
             "cudaMemcpyAsync(the collectives' NCCL id)");
  wait_for(c, c.stream, "ncclBroadcast(the collectives' NCCL id)", start);
  ncclUniqueId nid;
  std::memcpy(&nid, c.h_all, sizeof nid);
  // Every rank has just taken part in the broadcast: the blocking init finds them all.
  ncclConfig_t cfg = blocking_config();
  ncclComm_t blocking = nullptr;
  const ncclResult_t ri = ncclCommInitRankConfig(&blocking, c.size, nid, c.rank, &cfg);
  if (ri != ncclSuccess) abort_and_throw(c, std::string("ncclCommInitRankConfig(blocking): ") + ncclGetErrorString(ri));
  c.init = c.comm;  // both aborted and destroyed together from here on
  c.comm = blocking;
  warm_up({&c}, start);
}

communicator::impl::~impl() {
  int was = 0;
  const bool got = cudaGetDevice(&was) == cudaSuccess;
  (void)cudaSetDevice(device);
  // A stream-ordered call still queued: waited for with the deadline first, so that its exchange
  // ends normally; if it does not end in time, the communicator is aborted below instead of
  // finalized (its kernels then end, and the queued host function and copy run).
  bool pending = false;
  if (async != nullptr && async->done != nullptr && async->used && usable) {
    for (const auto t0 = clock::now(); cudaEventQuery(async->done) == cudaErrorNotReady && !timed_out(opt, t0);)
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    pending = cudaEventQuery(async->done) == cudaErrorNotReady;
  }
  // The device exchange: its kernel stopped, its registration released where the communicator is
  // finalized (before it), its memory freed once NCCL is done (below).
  stop_device_exchange(*this);
  if (usable && !pending) deregister_device_exchange(*this);
  if (owned) {
    // The collectives' communicator (every operation on it was waited for), then the init's:
    // finalize (the init's is non-blocking: polled, with the communicator's deadline), then
    // destroy; abort when anything is still pending or failed (ncclCommDestroy only counts down
    // the process's communicators, so several destroyed one after another by one thread cannot
    // deadlock).
    for (ncclComm_t* pc : {&comm, &init}) {
      ncclComm_t x = *pc;
      if (x == nullptr || (pc == &comm && comm == init)) continue;
      ncclResult_t st = ncclInternalError;
      if (ncclCommGetAsyncError(x, &st) != ncclSuccess) st = ncclInternalError;
      if (usable && !pending && st == ncclSuccess) {
        const ncclResult_t r = ncclCommFinalize(x);
        st = r == ncclSuccess || r == ncclInProgress ? ncclInProgress : r;
        for (const auto t0 = clock::now(); st == ncclInProgress && !timed_out(opt, t0);) {
          if (ncclCommGetAsyncError(x, &st) != ncclSuccess) st = ncclInternalError;
          if (st == ncclInProgress) std::this_thread::sleep_for(std::chrono::microseconds(100));
        }
      }
      if (st == ncclSuccess) (void)ncclCommDestroy(x);
      else (void)ncclCommAbort(x);
    }
    comm = init = nullptr;
  }
  // NCCL's work on the stream is done or aborted; a borrowed, failed communicator may still
  // hold it, so only then is the wait skipped.
  if (stream != nullptr && (owned || usable)) (void)cudaStreamSynchronize(stream);
  free_device_exchange(*this);

  // The last stream-ordered call queued outside a graph: its host function and copy use the
  // async state (graphs that hold such calls must be destroyed before the communicator, README).
  // An owned communicator was finalized or aborted above, so that call has ended or will; a
  // borrowed one whose call still waits for a peer (or that failed) is its owner's to abort:
  // the state is left behind for that call rather than freed under it.
  const bool leave = async != nullptr && async->used && !owned && (pending || !usable);
  if (!leave && async != nullptr) {
    if (async->done != nullptr && async->used) (void)cudaEventSynchronize(async->done);
    free_async(async);
  }
  async = nullptr;
  cudaFree(d_mine);
  cudaFree(d_all);
  cudaFreeHost(h_mine);
  cudaFreeHost(h_all);

  if (ready != nullptr) cudaEventDestroy(ready);
  if (header != nullptr) cudaEventDestroy(header);
  if (stream != nullptr) cudaStreamDestroy(stream);
  (void)cudaGetLastError();
  if (got) (void)cudaSetDevice(was);
}

unique_id make_unique_id() {
  static_assert(sizeof(ncclUniqueId) == sizeof(unique_id::bytes), "NCCL's unique id is 128 bytes");
  ncclUniqueId id;
  check_nccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
  unique_id u;
  std::memcpy(u.bytes, &id, sizeof id);
  return u;
}

communicator::communicator(std::unique_ptr<impl> p) : p_(std::move(p)) {}
communicator::~communicator() = default;
communicator::communicator(communicator&&) noexcept = default;
communicator& communicator::operator=(communicator&&) noexcept = default;

namespace {
const communicator::impl& checked(const std::unique_ptr<communicator::impl>& p) {
  if (!p) throw error("tally::dist::communicator: this communicator was moved from");
  return *p;
}
}  // namespace

int communicator::rank() const { return checked(p_).rank; }
int communicator::size() const { return checked(p_).size; }
int communicator::device() const { return checked(p_).device; }
ncclComm* communicator::nccl() const { return checked(p_).comm; }
bool communicator::usable() const { return checked(p_).usable; }
std::string communicator::exchange() const {
  const impl& c = checked(p_);
  if (c.dx != nullptr || c.dx_used) return c.usable ? "NCCL device API" : "NCCL device API (aborted)";
  if (!c.dx_why.empty()) return "NCCL all-gather (device exchange unavailable: " + c.dx_why + ")";
  return "NCCL all-gather";
}

communicator communicator::init_rank(const unique_id& id, int rank, int size, int device, const dist_options& opt) {
  if (size < 1 || rank < 0 || rank >= size)
    throw error("tally::dist::communicator::init_rank: rank " + std::to_string(rank) + " of " + std::to_string(size) +
                ": need 0 <= rank < size");
  auto c = std::make_unique<impl>();
  c->rank = rank, c->size = size, c->device = device_or_current(device), c->opt = opt;
  check_device(c->device);
  device_scope on(c->device);
  allocate(*c);
  ncclUniqueId nid;
  std::memcpy(&nid, id.bytes, sizeof nid);
  ncclConfig_t cfg = nonblocking();
  const auto start = clock::now();
  const ncclResult_t r = ncclCommInitRankConfig(&c->comm, size, nid, rank, &cfg);
  if (r != ncclSuccess && r != ncclInProgress) {
    abort_comm(*c);
    check_nccl(r, "ncclCommInitRankConfig");
  }
  wait_comm(*c, "ncclCommInitRankConfig", start);
  make_blocking(*c, start);
  if (opt.device_exchange && size > 1) make_device_exchange(*c);
  else if (opt.device_exchange) c->dx_why = "one rank (nothing to exchange; NCCL gives one rank no symmetric memory)";
  return communicator(std::move(c));
}

std::vector<communicator> communicator::init_all(const std::vector<int>& devices, const dist_options& opt) {
  if (devices.empty()) throw error("tally::dist::communicator::init_all: no devices given");
  const int size = static_cast<int>(devices.size());
  std::vector<std::unique_ptr<impl>> cs;
  for (int k = 0; k < size; ++k) {
    auto c = std::make_unique<impl>();
    c->rank = k, c->size = size, c->device = devices[k], c->opt = opt;
    c->grouped = true;
    check_device(c->device);
    device_scope on(c->device);
    allocate(*c);
    cs.push_back(std::move(c));
  }
  const unique_id id = make_unique_id();
  ncclUniqueId nid;
  std::memcpy(&nid, id.bytes, sizeof nid);
  const auto start = clock::now();
  // One process: every rank is here, so the communicators are blocking ones from the start.
  ncclConfig_t cfg = blocking_config();
  try {
    check_nccl(ncclGroupStart(), "ncclGroupStart");
    for (int k = 0; k < size; ++k) {
      device_scope on(cs[k]->device);
      const ncclResult_t r = ncclCommInitRankConfig(&cs[k]->comm, size, nid, k, &cfg);
      if (r != ncclSuccess && r != ncclInProgress) {
        (void)ncclGroupEnd();
        check_nccl(r, "ncclCommInitRankConfig");
      }
    }
    check_nccl(ncclGroupEnd(), "ncclGroupEnd(the communicators' init)");
    std::vector<impl*> ps;
    for (auto& c : cs) ps.push_back(c.get());
    warm_up(ps, start);
  } catch (...) {
    for (auto& c : cs) abort_comm(*c);  // the group's init is shared: none of them is usable
    throw;
  }
  std::vector<communicator> out;
  for (auto& c : cs) out.push_back(communicator(std::move(c)));
  return out;
}

communicator communicator::borrow(ncclComm* comm, int device, const dist_options& opt) {
  if (comm == nullptr) throw error("tally::dist::communicator::borrow: the NCCL communicator is null");
  auto c = std::make_unique<impl>();
  c->comm = comm;
  c->owned = false;
  c->opt = opt;
  wait_comm(*c, "the borrowed communicator's pending operation", clock::now());
  check_nccl(ncclCommCount(comm, &c->size), "ncclCommCount");
  check_nccl(ncclCommUserRank(comm, &c->rank), "ncclCommUserRank");
  int cu = -1;
  check_nccl(ncclCommCuDevice(comm, &cu), "ncclCommCuDevice");
  c->device = device >= 0 ? device : cu;
  if (c->device != cu)
    throw error("tally::dist::communicator::borrow: device " + std::to_string(c->device) +
                " given, but the NCCL communicator is on device " + std::to_string(cu));
  device_scope on(c->device);
  allocate(*c);
  return communicator(std::move(c));
}

}  // namespace tally::dist
