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

constexpr std::size_t kFlagBytes = 4096;  // the flags: two halves x up to 256 ranks x 8 bytes
constexpr int kHeadWords = kHeaderBytes / 16;  // the header, in 16-byte words
constexpr unsigned kThreads = 256;

}  // namespace

struct device_exchange {
  void* window = nullptr;  // ncclMemAlloc: flags, then records (device_exchange.hpp)
  std::size_t window_bytes = 0;
  ncclWindow_t win = nullptr;
  ncclDevComm dev{};
  unsigned char dev_room[1024] = {};  // past dev: room for a newer NCCL's larger ncclDevComm
  bool dev_made = false;
  // Pinned, mapped: [0] the last call whose own kernel (the shard's) has ended, [1] the last call
  // whose records are all at h_all; abort: raised by the host on a timeout.
  volatile unsigned long long* state = nullptr;
  volatile unsigned int* abort = nullptr;
  bool stopped = false;        // stop() saw no exchange kernel left running
  cudaEvent_t done = nullptr;  // after the last exchange kernel (waited for before the window goes)
  unsigned long long calls = 0;
};

namespace {

struct kernel_args {
  ncclWindow_t win;
  int rank, size;
  unsigned int record_words;  // 16-byte words of a record
  unsigned long long call;
  const uint4* mine;  // d_mine: the partial and the exact accumulator (past the header)
  uint4* h_all;       // every rank's record, rank order (pinned)
  volatile unsigned long long* state;
  const volatile unsigned int* abort;
  uint4 head[kHeadWords];  // this rank's header
};

__device__ __forceinline__ std::size_t d_flag_offset(unsigned long long call, int rank, int size) {
  return (static_cast<std::size_t>(call & 1u) * static_cast<std::size_t>(size) + static_cast<std::size_t>(rank)) * 8;
}

__device__ __forceinline__ std::size_t d_record_offset(unsigned long long call, int rank, int size,
                                                       unsigned int record_words) {
  return kFlagBytes + (static_cast<std::size_t>(call & 1u) * static_cast<std::size_t>(size) +
                       static_cast<std::size_t>(rank)) *
                          record_words * sizeof(uint4);
}

// One block (device_exchange.hpp).
__global__ void __launch_bounds__(kThreads) exchange_kernel(const kernel_args a) {
  // The shard's kernel (the programmatic primary) has ended and its partial is visible.
  core::pdl_wait();
  if (threadIdx.x == 0) a.state[0] = a.call;
  // This rank's record into its slot of every rank's window.
  const std::size_t mine_at = d_record_offset(a.call, a.rank, a.size, a.record_words);
  for (int peer = 0; peer < a.size; ++peer) {
    uint4* to = static_cast<uint4*>(ncclGetLsaPointer(a.win, mine_at, peer));
    for (unsigned int w = threadIdx.x; w < a.record_words; w += blockDim.x)
      to[w] = w < static_cast<unsigned int>(kHeadWords) ? a.head[w] : a.mine[w];
  }
  __threadfence_system();
  __syncthreads();
  // This rank's flag in every window, after its record (release at system scope).
  if (threadIdx.x < static_cast<unsigned int>(a.size)) {
    auto* f = static_cast<unsigned long long*>(
        ncclGetLsaPointer(a.win, d_flag_offset(a.call, a.rank, a.size), static_cast<int>(threadIdx.x)));
    cuda::atomic_ref<unsigned long long, cuda::thread_scope_system>(*f).store(a.call, cuda::memory_order_release);
  }
  // Every rank's flag in this window; the host's abort word now and then.
  __shared__ int aborted;
  if (threadIdx.x == 0) aborted = 0;
  __syncthreads();
  if (threadIdx.x < static_cast<unsigned int>(a.size)) {
    auto* f = static_cast<unsigned long long*>(
        ncclGetLsaPointer(a.win, d_flag_offset(a.call, static_cast<int>(threadIdx.x), a.size), a.rank));
    cuda::atomic_ref<unsigned long long, cuda::thread_scope_system> flag(*f);
    for (unsigned int polls = 1; flag.load(cuda::memory_order_acquire) != a.call; ++polls) {
      if ((polls & 1023u) == 0 && (*a.abort != 0u || *reinterpret_cast<volatile int*>(&aborted) != 0)) {
        aborted = 1;
        break;
      }
    }
  }
  __syncthreads();
  if (aborted) return;
  // The records into pinned host memory, then the call's number after them.
  const uint4* all = static_cast<const uint4*>(ncclGetLsaPointer(a.win, d_record_offset(a.call, 0, a.size, a.record_words), a.rank));
  const unsigned int words = a.record_words * static_cast<unsigned int>(a.size);
  for (unsigned int w = threadIdx.x; w < words; w += blockDim.x) a.h_all[w] = all[w];
  __threadfence_system();
  __syncthreads();
  if (threadIdx.x == 0)
    cuda::atomic_ref<unsigned long long, cuda::thread_scope_system>(*const_cast<unsigned long long*>(a.state + 1))
        .store(a.call, cuda::memory_order_release);
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
  x->window_bytes = kFlagBytes + 2 * static_cast<std::size_t>(c.size) * record_bytes();
  // One thread of the kernel's block per rank's flag; the flags' part of the window holds them.
  if (c.size > static_cast<int>(kThreads) || 2 * static_cast<std::size_t>(c.size) * 8 > kFlagBytes)
    why = "more ranks (" + std::to_string(c.size) + ") than the exchange kernel's flags hold (" +
          std::to_string(kFlagBytes / 16) + " at most)";
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
  a.record_words = static_cast<unsigned int>(record_bytes() / sizeof(uint4));
  a.call = ++x.calls;
  a.mine = reinterpret_cast<const uint4*>(c.d_mine);
  a.h_all = reinterpret_cast<uint4*>(c.h_all);
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
  const cudaEvent_t done = c.dx->done;
  const unsigned long long call = c.dx->calls;
  clock::time_point waiting = clock::now();
  clock::time_point own{};  // when this rank's own kernel was seen ended (the deadline's start)
  bool own_seen = false;
  const auto records_in = [&] {
    return __atomic_load_n(const_cast<unsigned long long*>(state + 1), __ATOMIC_ACQUIRE) == call;
  };
  for (unsigned polls = 1;; ++polls) {
    if (records_in()) {
      trace::mark(trace::own_done);  // (where the records came before a look at the own word)
      return;
    }
    if ((polls & 15u) != 0) continue;
    // Now and then: the stream's errors, this rank's kernel, the peers' deadline.
    const cudaError_t q = cudaStreamQuery(stream);
    if (q != cudaSuccess && q != cudaErrorNotReady) abort_and_throw(c, std::string(what) + ": " + cudaGetErrorString(q));
    if (q == cudaSuccess && !records_in())
      abort_and_throw(c, std::string(what) + ": the exchange's kernel ended without the records");
    if (!own_seen && __atomic_load_n(const_cast<unsigned long long*>(state), __ATOMIC_ACQUIRE) == call) {
      own_seen = true, own = waiting = clock::now();  // the pauses count from here too
      trace::mark(trace::own_done);
    }
    if (own_seen && timed_out(c.opt, own)) {
      // The kernel leaves at the abort word; the records may have come meanwhile.
      *abort_word = 1u;
      std::atomic_thread_fence(std::memory_order_seq_cst);
      (void)cudaEventSynchronize(done);
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
