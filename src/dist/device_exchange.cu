#include "dist/device_exchange.hpp"

#include <cuda/atomic>
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>

#include "core/context.hpp"
#include "core/launch.cuh"
#include "dist/trace.hpp"

#include "dist/nccl_device.hpp"

namespace tally::dist {

using clock = std::chrono::steady_clock;

#ifdef TALLY_DIST_DEVICE_API

namespace {

constexpr int kHeadWords = kHeaderBytes / 4;  // the header, in 4-byte words
constexpr unsigned kThreads = 256;

// A record travels as LL words (NCCL's LL protocol): 8 bytes, 4 of the record and the call's flag.
// An 8-byte store lands whole, so a word whose flag is the call's holds the call's data: no fence
// and no separate flag between a store and the reader that polls it.
std::size_t ll_words() { return record_bytes() / 4; }

}  // namespace

struct device_exchange {
  void* window = nullptr;  // ncclMemAlloc: two halves x ranks x ll_words() LL words (device_exchange.hpp)
  std::size_t window_bytes = 0;
  ncclWindow_t win = nullptr;
  ncclDevComm dev{};
  unsigned char dev_room[1024] = {};  // past dev: room for a newer NCCL's larger ncclDevComm
  bool dev_made = false;
  // Pinned, mapped: [0] the last call whose own kernel (the shard's) has ended; abort: raised by
  // the host on a timeout.
  volatile unsigned long long* state = nullptr;
  volatile unsigned int* abort = nullptr;
  // Pinned, mapped: every rank's record as LL words, rank order, which the kernel forwards from
  // its window and the host unpacks into h_all.
  volatile unsigned long long* h_ll = nullptr;
  bool stopped = false;        // stop() saw no exchange kernel left running
  cudaEvent_t done = nullptr;  // after the last exchange kernel (waited for before the window goes)
  unsigned long long calls = 0;  // the calls so far: call c uses the windows' half c % 2
  unsigned int flag = 0;         // the last call's flag: one more a call, 0 (the first value) skipped
};

namespace {

struct kernel_args {
  ncclWindow_t win;
  int rank, size;
  unsigned int words;  // LL words of a record (4 bytes of it each)
  unsigned int flag;   // the call's flag (never 0, the window's first value)
  unsigned long long call;
  const unsigned int* mine;  // d_mine: the partial and the exact accumulator (past the header)
  volatile unsigned long long* h_ll;
  volatile unsigned long long* state;
  const volatile unsigned int* abort;
  unsigned int head[kHeadWords];  // this rank's header
};

__device__ __forceinline__ std::size_t d_slot(unsigned long long call, int rank, int size, unsigned int words) {
  return (static_cast<std::size_t>(call & 1u) * static_cast<std::size_t>(size) + static_cast<std::size_t>(rank)) * words;
}

// One block (device_exchange.hpp).
__global__ void __launch_bounds__(kThreads) exchange_kernel(const kernel_args a) {
  // The shard's kernel (the programmatic primary) has ended and its partial is visible.
  core::pdl_wait();
  if (threadIdx.x == 0) *a.state = a.call;  // posted; nothing waits for it
  const unsigned long long tag = static_cast<unsigned long long>(a.flag) << 32;
  // This rank's record, as LL words, into its slot of every rank's window.
  const std::size_t mine_at = d_slot(a.call, a.rank, a.size, a.words) * sizeof(unsigned long long);
  for (int peer = 0; peer < a.size; ++peer) {
    auto* to = static_cast<volatile unsigned long long*>(ncclGetLsaPointer(a.win, mine_at, peer));
    for (unsigned int w = threadIdx.x; w < a.words; w += blockDim.x)
      to[w] = tag | (w < static_cast<unsigned int>(kHeadWords) ? a.head[w] : a.mine[w]);
  }
  // Every rank's words from this window, each as soon as its flag is the call's, forwarded as they
  // are to pinned host memory (the host polls their flags in turn); the host's abort word now and then.
  const auto* all = static_cast<const volatile unsigned long long*>(
      ncclGetLsaPointer(a.win, d_slot(a.call, 0, a.size, a.words) * sizeof(unsigned long long), a.rank));
  const unsigned int n = a.words * static_cast<unsigned int>(a.size);
  for (unsigned int w = threadIdx.x; w < n; w += blockDim.x) {
    unsigned long long v = all[w];
    for (unsigned int polls = 1; static_cast<unsigned int>(v >> 32) != a.flag; ++polls) {
      if ((polls & 1023u) == 0 && *a.abort != 0u) return;
      v = all[w];
    }
    a.h_ll[w] = v;
  }
}

std::string nccl_text(const char* what, ncclResult_t r) { return std::string(what) + ": " + ncclGetErrorString(r); }

// Whether `ok` holds on every rank: a small all-gather on the communicator's stream (waited for
// with the deadline; a rank gone aborts and throws).
bool every_rank(communicator::impl& c, bool ok, clock::time_point start) {
  const std::uint64_t v = ok ? 1 : 0;
  std::memcpy(c.h_mine, &v, sizeof v);
  core::check_cuda(cudaMemcpyAsync(c.d_mine, c.h_mine, sizeof v, cudaMemcpyHostToDevice, c.stream),
                   "cudaMemcpyAsync(the device exchange's agreement)");
  const ncclResult_t r = ncclAllGather(c.d_mine, c.h_all, sizeof v, ncclUint8, c.comm, c.stream);
  if (r != ncclSuccess && r != ncclInProgress) abort_and_throw(c, nccl_text("ncclAllGather(the device exchange's agreement)", r));
  if (r == ncclInProgress) wait_comm(c, "ncclAllGather(the device exchange's agreement)", start);
  wait_for(c, c.stream, "ncclAllGather(the device exchange's agreement)", start);
  bool all = true;
  for (int k = 0; k < c.size; ++k) {
    std::uint64_t w = 0;
    std::memcpy(&w, c.h_all + static_cast<std::size_t>(k) * sizeof w, sizeof w);
    all = all && w == 1;
  }
  return all;
}

}  // namespace

void make_device_exchange(communicator::impl& c) {
  device_scope on(c.device);
  // Parked until every step is done: freed with the communicator whatever happens on the way.
  auto* x = new device_exchange;
  c.dx_parked = x;
  c.dx_why.clear();
  std::string why;
  // Each step where every rank took the one before (so no rank waits alone in a collective one);
  // each agreement with a deadline of its own.
  // Every rank agrees at every step, also one that failed before it (so the agreements pair up).
  const auto step = [&](const char* what, auto&& f) {
    const std::string mine = why.empty() ? f() : std::string();
    (void)cudaGetLastError();
    const bool all = every_rank(c, why.empty() && mine.empty(), clock::now());
    if (!why.empty()) return;
    if (!mine.empty()) why = std::string(what) + ": " + mine;
    else if (!all) why = std::string("another rank failed at ") + what;
  };
  // The device API's structures are those of the headers tally was built with: the same NCCL
  // at run time, or the all-gather.
  int version = 0;
  if (ncclGetVersion(&version) != ncclSuccess || version != NCCL_VERSION_CODE)
    why = "NCCL " + std::to_string(version) + " at run time, tally built with NCCL " + std::to_string(NCCL_VERSION_CODE) +
          "'s headers";
  x->window_bytes = 2 * static_cast<std::size_t>(c.size) * ll_words() * sizeof(unsigned long long);
  step("ncclMemAlloc", [&]() -> std::string {
    const ncclResult_t r = ncclMemAlloc(&x->window, x->window_bytes);
    return r == ncclSuccess ? "" : ncclGetErrorString(r);
  });
  step("ncclCommWindowRegister", [&]() -> std::string {
    const ncclResult_t r = ncclCommWindowRegister(c.comm, x->window, x->window_bytes, &x->win, NCCL_WIN_COLL_SYMMETRIC);
    if (r != ncclSuccess) return ncclGetErrorString(r);
    return x->win != nullptr ? "" : "NCCL gave no window (no symmetric memory on this communicator)";
  });
  step("ncclDevCommCreate", [&]() -> std::string {
    ncclDevCommRequirements reqs = lsa_requirements(0);  // no barrier: the kernel's flags are its own
    const ncclResult_t r = ncclDevCommCreate(c.comm, &reqs, &x->dev);
    if (r != ncclSuccess) return ncclGetErrorString(r);
    x->dev_made = true;
    if (x->dev.lsaSize != c.size || x->dev.lsaRank != c.rank)
      return "not every rank is reachable by load/store from this one (NCCL's load/store team has " +
             std::to_string(x->dev.lsaSize) + " of " + std::to_string(c.size) + " ranks)";
    return "";
  });
  step("the window's and the pinned words' first values", [&]() -> std::string {
    void* words = nullptr;
    if (cudaHostAlloc(&words, 64, cudaHostAllocMapped) != cudaSuccess) return "cudaHostAlloc(the exchange's words)";
    std::memset(words, 0, 64);
    x->state = static_cast<volatile unsigned long long*>(words);
    x->abort = reinterpret_cast<volatile unsigned int*>(static_cast<unsigned char*>(words) + 32);
    const std::size_t ll_bytes = static_cast<std::size_t>(c.size) * ll_words() * sizeof(unsigned long long);
    void* ll = nullptr;
    if (cudaHostAlloc(&ll, ll_bytes, cudaHostAllocMapped) != cudaSuccess) return "cudaHostAlloc(the exchange's records)";
    std::memset(ll, 0, ll_bytes);
    x->h_ll = static_cast<volatile unsigned long long*>(ll);
    if (cudaEventCreateWithFlags(&x->done, cudaEventDisableTiming) != cudaSuccess) return "cudaEventCreate";
    if (cudaMemsetAsync(x->window, 0, x->window_bytes, c.stream) != cudaSuccess ||
        cudaStreamSynchronize(c.stream) != cudaSuccess)
      return "cudaMemset(the window)";
    return "";
  });
  // Every rank has zeroed its window before any rank writes into it.
  const bool all_zeroed = every_rank(c, why.empty(), clock::now());
  if (why.empty() && !all_zeroed) why = "another rank failed at the last agreement";
  if (why.empty()) {
    c.dx_used = true;
    c.dx = x;
    c.dx_parked = nullptr;
  } else {
    c.dx_why = why;
  }
}

namespace {

// An exchange kernel still running leaves at the abort word (a peer that never came). Waits at
// most a second for it (a stream stuck in an NCCL collective ahead of it waits for NCCL's abort):
// false then, and its memory is left alone.
bool stop(device_exchange* x) noexcept {
  if (x == nullptr) return true;
  if (x->done == nullptr) return x->stopped = true;
  if (x->abort != nullptr) *x->abort = 1u;
  std::atomic_thread_fence(std::memory_order_seq_cst);
  const clock::time_point t0 = clock::now();
  cudaError_t q = cudaEventQuery(x->done);
  while (q == cudaErrorNotReady && clock::now() - t0 < std::chrono::seconds(1)) {
    std::this_thread::sleep_for(std::chrono::microseconds(100));
    q = cudaEventQuery(x->done);
  }
  (void)cudaGetLastError();
  return x->stopped = q != cudaErrorNotReady;
}

struct on_device {
  int was = 0;
  bool got = false;
  explicit on_device(int d) {
    got = cudaGetDevice(&was) == cudaSuccess;
    (void)cudaSetDevice(d);
  }
  ~on_device() {
    (void)cudaGetLastError();
    if (got) (void)cudaSetDevice(was);
  }
};

}  // namespace

void stop_device_exchange(communicator::impl& c) noexcept {
  if (c.dx == nullptr && c.dx_parked == nullptr) return;
  on_device d(c.device);
  for (device_exchange* x : {c.dx, c.dx_parked}) (void)stop(x);
}

void deregister_device_exchange(communicator::impl& c) noexcept {
  if (c.comm == nullptr) return;
  on_device d(c.device);
  for (device_exchange* x : {c.dx, c.dx_parked}) {
    if (x == nullptr || !x->stopped) continue;
    if (x->dev_made) (void)ncclDevCommDestroy(c.comm, &x->dev);
    if (x->win != nullptr) (void)ncclCommWindowDeregister(c.comm, x->win);
    x->dev_made = false;
    x->win = nullptr;
  }
}

void free_device_exchange(communicator::impl& c) noexcept {
  if (c.dx == nullptr && c.dx_parked == nullptr) return;
  on_device d(c.device);
  for (device_exchange* x : {c.dx, c.dx_parked}) {
    if (x == nullptr || !x->stopped) continue;  // a kernel that did not stop: its memory stays (leaked)
    if (x->window != nullptr) (void)ncclMemFree(x->window);
    if (x->done != nullptr) (void)cudaEventDestroy(x->done);
    if (x->state != nullptr) (void)cudaFreeHost(const_cast<unsigned long long*>(x->state));
    if (x->h_ll != nullptr) (void)cudaFreeHost(const_cast<unsigned long long*>(x->h_ll));
    delete x;
  }
  c.dx = c.dx_parked = nullptr;
}

void enqueue_device_exchange(communicator::impl& c, const header& h, cudaStream_t stream) {
  device_exchange& x = *c.dx;
  kernel_args a{};
  a.win = x.win;
  a.rank = c.rank;
  a.size = c.size;
  a.words = static_cast<unsigned int>(ll_words());
  // The call's number (its half: the halves alternate) and its flag, which differs from the last
  // call's and is never 0 (the first value of the windows and the host's words), on every rank alike.
  a.call = ++x.calls;
  a.flag = x.flag = next_flag(x.flag);
  a.mine = reinterpret_cast<const unsigned int*>(c.d_mine);
  a.h_ll = x.h_ll;
  a.state = x.state;
  a.abort = x.abort;
  static_assert(sizeof(header) <= sizeof a.head, "the header fits the kernel's argument");
  std::memcpy(a.head, &h, sizeof h);
  cudaError_t e = core::launch_pdl(exchange_kernel, a, 1, static_cast<int>(kThreads), stream);
  if (e == cudaSuccess) e = cudaEventRecord(x.done, stream);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    // A kernel that did start (the event failed) leaves at the abort word before the abort.
    *x.abort = 1u;
    std::atomic_thread_fence(std::memory_order_seq_cst);
    (void)cudaStreamSynchronize(stream);
    (void)cudaGetLastError();
    abort_and_throw(c, std::string("the device exchange's kernel: ") + cudaGetErrorString(e));
  }
}

void wait_device_exchange(communicator::impl& c, cudaStream_t stream, const char* what) {
  // Locals only: abort_and_throw frees c.dx.
  volatile unsigned long long* const state = c.dx->state;
  volatile unsigned int* const abort_word = c.dx->abort;
  const volatile unsigned long long* const ll = c.dx->h_ll;
  const cudaEvent_t done = c.dx->done;
  const unsigned long long call = c.dx->calls;
  const unsigned int flag = c.dx->flag;
  const std::size_t n = ll_words() * static_cast<std::size_t>(c.size);
  auto* const out = reinterpret_cast<unsigned int*>(c.h_all);  // record_bytes() a rank, as the all-gather's
  std::size_t next = 0;  // the words before it are the call's, unpacked
  // The LL words in turn, each unpacked once its flag is the call's (an 8-byte word lands whole).
  const auto records_in = [&] {
    for (; next < n; ++next) {
      const unsigned long long v = ll[next];
      if (static_cast<unsigned int>(v >> 32) != flag) return false;
      out[next] = static_cast<unsigned int>(v);
    }
    return true;
  };
  clock::time_point waiting = clock::now(), queried = waiting;
  clock::time_point own{};  // when this rank's own kernel was seen ended (the deadline's start)
  bool own_seen = false;
  for (;;) {
    if (records_in()) {
      if (!own_seen) trace::mark(trace::own_done);  // (where the records came before a look at the own word)
      return;
    }
    if (!own_seen && *state == call) {
      own_seen = true, own = waiting = clock::now();  // the pauses count from here too
      trace::mark(trace::own_done);
    }
    // Every few microseconds: the stream's errors, the peers' deadline, a pause.
    const clock::time_point now = clock::now();
    if (now - queried < std::chrono::microseconds(5)) continue;
    queried = now;
    const cudaError_t q = cudaStreamQuery(stream);
    if (q != cudaSuccess && q != cudaErrorNotReady) abort_and_throw(c, std::string(what) + ": " + cudaGetErrorString(q));
    if (q == cudaSuccess && !records_in())
      abort_and_throw(c, std::string(what) + ": the exchange's kernel ended without the records");
    if (own_seen && timed_out(c.opt, own)) {
      // The kernel leaves at the abort word; the records may have come meanwhile.
      *abort_word = 1u;
      std::atomic_thread_fence(std::memory_order_seq_cst);
      // At most a second (as stop()): a kernel past its polls leaves within 1024 of them.
      const clock::time_point raised = clock::now();
      while (cudaEventQuery(done) == cudaErrorNotReady && clock::now() - raised < std::chrono::seconds(1))
        std::this_thread::sleep_for(std::chrono::microseconds(50));
      (void)cudaGetLastError();
      if (records_in()) {
        *abort_word = 0u;
        return;
      }
      abort_and_throw(c, no_answer(c, what));
    }
    pause_after(waiting);
  }
}

#else  // built without NCCL's device API

struct device_exchange {};

void make_device_exchange(communicator::impl& c) {
  c.dx = nullptr;
  c.dx_why = "this build has no NCCL device API (nccl_device.h, NCCL 2.28 or later)";
}
void stop_device_exchange(communicator::impl&) noexcept {}
void deregister_device_exchange(communicator::impl&) noexcept {}
void free_device_exchange(communicator::impl& c) noexcept { c.dx = c.dx_parked = nullptr; }
void enqueue_device_exchange(communicator::impl& c, const header&, cudaStream_t) {
  abort_and_throw(c, "the device exchange is not built");
}
void wait_device_exchange(communicator::impl& c, cudaStream_t, const char*) {
  abort_and_throw(c, "the device exchange is not built");
}

#endif

}  // namespace tally::dist
