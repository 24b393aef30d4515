#include "chunked/staging.hpp"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

#include "chunked/head_start.hpp"
#include "core/api_internal.hpp"
#include "core/memory.hpp"

namespace tally::chunked {

using core::check_cuda;

namespace {

constexpr int kDeviceBuffers = 3;  // chunks on the device at once: one copying, one reducing, one spare
constexpr int kMaxInputs = 2;

// Copies pageable memory into a pinned slot with streaming stores: the slot is read next by the
// copy engine, not by this core, so writing around the cache saves the read-for-ownership and
// leaves the cache to the source. dst is 16-byte aligned.
void copy_to_slot(void* dst, const void* src, std::size_t bytes) {
#if defined(__x86_64__)
  auto* d = static_cast<unsigned char*>(dst);
  const auto* s = static_cast<const unsigned char*>(src);
  std::size_t i = 0;
  for (; i + 64 <= bytes; i += 64) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 16));
    const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 32));
    const __m128i e = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 48));
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i), a);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 16), b);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 32), c);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 48), e);
  }
  _mm_sfence();
  if (i < bytes) std::memcpy(d + i, s + i, bytes - i);
#else
  std::memcpy(dst, src, bytes);
#endif
}

int env_int(const char* name, int fallback, int lo, int hi) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  const long x = std::strtol(v, &end, 10);
  if (end == v || *end != '\0' || x < lo || x > hi)
    throw error(std::string("tally: ") + name + "='" + v + "' is not a number from " + std::to_string(lo) + " to " +
                std::to_string(hi));
  return static_cast<int>(x);
}

// Worker threads kept for the life of the process (started by a device's first feed that needs
// them, more when a later one asks for more): a feed hands them its job instead of starting and
// joining threads of its own, which cost tens of microseconds each on every feed.
class worker_pool {
 public:
  // Runs job() on `threads` of the workers at once; wait() returns when every one has returned.
  // One job at a time (the device's staging is held while it runs).
  void start(int threads, int ordinal, const std::function<void()>& job) {
    std::lock_guard<std::mutex> lk(m_);
    while (started_ < threads) {
      std::thread([this, ordinal] { loop(ordinal); }).detach();
      ++started_;
    }
    job_ = &job;
    ++generation_;
    wanted_ = threads;
    taken_ = 0;
    remaining_ = threads;
    work_.notify_all();
  }
  void wait() {
    std::unique_lock<std::mutex> lk(m_);
    done_.wait(lk, [&] { return remaining_ == 0; });
    job_ = nullptr;
  }

 private:
  void loop(int ordinal) {
    if (cudaSetDevice(ordinal) != cudaSuccess) (void)cudaGetLastError();  // the job checks it again
    std::uint64_t seen = 0;
    for (;;) {
      const std::function<void()>* job = nullptr;
      {
        std::unique_lock<std::mutex> lk(m_);
        work_.wait(lk, [&] { return generation_ != seen && taken_ < wanted_; });
        seen = generation_;
        ++taken_;
        job = job_;
      }
      (*job)();  // catches its own exceptions
      std::lock_guard<std::mutex> lk(m_);
      if (--remaining_ == 0) done_.notify_all();
    }
  }
  std::mutex m_;
  std::condition_variable work_, done_;
  const std::function<void()>* job_ = nullptr;
  std::uint64_t generation_ = 0;
  int started_ = 0, wanted_ = 0, taken_ = 0, remaining_ = 0;
};

// The pipeline's memory and synchronisation on one device, made on its first host feed.
struct device_staging {
  std::mutex busy;  // one feed at a time on a device
  staging_shape shape;
  int inputs = 0;                          // inputs the buffers were made for
  unsigned char* h_slots[kMaxInputs] = {};  // slots x chunk_bytes each, pinned
  unsigned char* d_buffers[kMaxInputs] = {};  // kDeviceBuffers x chunk_bytes each
  cudaStream_t copy = nullptr;
  std::vector<cudaEvent_t> slot_free;  // the last copy out of each slot
  cudaEvent_t copied[kDeviceBuffers] = {}, reduced[kDeviceBuffers] = {};
  std::mutex one_shot_mutex;  // host_reduce's accumulation memory
  std::unique_ptr<accumulation_memory> one_shot;
  worker_pool workers;

  void release() noexcept {
    if (copy != nullptr && cudaStreamSynchronize(copy) != cudaSuccess) (void)cudaGetLastError();
    for (int i = 0; i < kMaxInputs; ++i) {
      cudaFreeHost(h_slots[i]);
      cudaFree(d_buffers[i]);
      h_slots[i] = d_buffers[i] = nullptr;
    }
    inputs = 0;
  }
  // Buffers for `need` inputs cut as `s`, (re)made when they are not.
  void prepare(const staging_shape& s, int need) {
    if (copy == nullptr) {
      check_cuda(cudaStreamCreateWithFlags(&copy, cudaStreamNonBlocking), "cudaStreamCreateWithFlags(staging copies)");
      for (int b = 0; b < kDeviceBuffers; ++b) {
        check_cuda(cudaEventCreateWithFlags(&copied[b], cudaEventDisableTiming), "cudaEventCreateWithFlags");
        check_cuda(cudaEventCreateWithFlags(&reduced[b], cudaEventDisableTiming), "cudaEventCreateWithFlags");
      }
    }
    if (inputs >= need && shape.chunk_bytes == s.chunk_bytes && shape.slots == s.slots) {
      shape.threads = s.threads;
      return;
    }
    const int make = std::max(need, inputs);
    release();
    shape = s;
    while (static_cast<int>(slot_free.size()) < s.slots) {
      cudaEvent_t e;
      check_cuda(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreateWithFlags");
      slot_free.push_back(e);
    }
    for (int i = 0; i < make; ++i) {
      const std::size_t pinned = s.chunk_bytes * static_cast<std::size_t>(s.slots);
      cudaError_t e = cudaHostAlloc(reinterpret_cast<void**>(&h_slots[i]), pinned, cudaHostAllocDefault);
      if (e != cudaSuccess) {
        release();
        core::throw_cuda(e, ("cudaHostAlloc(" + std::to_string(pinned >> 20) + " MiB of pinned staging for host data)").c_str());
      }
      e = cudaMalloc(reinterpret_cast<void**>(&d_buffers[i]), s.chunk_bytes * kDeviceBuffers);
      if (e != cudaSuccess) {
        release();
        core::throw_cuda(e, "cudaMalloc(device chunk buffers for host data)");
      }
    }
    inputs = make;
  }
};

device_staging* const g_staging = new device_staging[64];  // never destroyed (see context.cpp)

// Set while this thread runs a chunk's fill (a producer's callback): a host feed from inside one
// would wait for the staging that the running feed holds.
thread_local bool t_filling = false;
struct filling {
  filling() { t_filling = true; }
  ~filling() { t_filling = false; }
  filling(const filling&) = delete;
  filling& operator=(const filling&) = delete;
};

device_staging& staging_of(const core::device_context& dev) { return g_staging[dev.ordinal]; }

}  // namespace

source source_for(const char* fn, const char* name, const void* p, std::uint64_t n, dtype t, bool check_memory,
                  const core::device_context& dev) {
  source s;
  s.p = p;
  if (n > 0 && check_memory && core::check_input_or_host(fn, name, p, n, dtype_size(t), to_string(t), dev))
    s.kind = source::from::host;
  return s;
}

staging_shape current_shape() {
  const unsigned hw = std::max(1u, std::thread::hardware_concurrency());
  staging_shape s;
  // Measured on the H100 machine (16 cores, tally bench host, 2026-11-23): pageable f32 at 2^30
  // staged at 7.0-8.8 GB/s with 1 thread, 25-28 with 4, 35-43 with 8, 41-50 with 12, 42 with 16
  // (two runs); the chunk size changed nothing from 2 to 64 MiB. Three quarters of the cores
  // leave one for the dispatching thread and the copies' interrupts.
  s.threads = env_int("TALLY_HOST_THREADS", static_cast<int>(std::min(16u, std::max(1u, hw * 3 / 4))), 1, 256);
  const char* forced = std::getenv("TALLY_CHUNK_MIB");
  s.chunk_forced = forced != nullptr && *forced != '\0';
  s.chunk_bytes = static_cast<std::size_t>(env_int("TALLY_CHUNK_MIB", 8, 1, 1024)) << 20;
  s.slots = s.threads + 3;
  return s;
}

std::uint64_t chunk_elements(const staging_shape& s, std::uint64_t n, std::size_t elem) {
  std::size_t bytes = s.chunk_bytes;
  if (!s.chunk_forced)
    while (bytes > (std::size_t(1) << 20) && n * elem < 32 * std::uint64_t(bytes)) bytes /= 2;
  return bytes / elem;
}

void prepare_staging(const core::device_context& dev, int inputs) {
  const core::device_scope on(dev.ordinal, "cudaSetDevice(preparing the staging)");
  device_staging& st = staging_of(dev);
  std::lock_guard<std::mutex> busy(st.busy);
  st.prepare(current_shape(), inputs);
}

void feed(accumulation& acc, const source* src, int inputs, std::uint64_t n) {
  if (n == 0) return;
  bool all_device = true;
  for (int i = 0; i < inputs; ++i) all_device = all_device && src[i].kind == source::from::device;
  if (all_device) {
    acc.piece(src[0].p, inputs > 1 ? src[1].p : nullptr, n);
    return;
  }
  const std::size_t elem = dtype_size(acc.what_of().t);
  device_staging& st = staging_of(acc.device());
  if (t_filling)
    throw error("tally: a producer (reducer::feed_from) gave host data to tally while its own feed was running (the "
                "staging is busy with that feed): inside a producer, reduce only device memory");
  std::lock_guard<std::mutex> busy(st.busy);
  st.prepare(current_shape(), inputs);
  const staging_shape shape = st.shape;
  const std::uint64_t chunk = chunk_elements(shape, n, elem);
  const std::uint64_t chunks = (n + chunk - 1) / chunk;
  const int slots = shape.slots;

  // Handshake between the workers (fill chunk j into slot j % slots once the copy of chunk
  // j - slots out of it has been issued and has finished) and this thread (send chunk j once it
  // is filled).
  std::mutex m;
  std::condition_variable cv;
  std::vector<std::int64_t> ready(slots, -1), issued(slots, -1);
  bool abort = false;
  std::exception_ptr failure;
  std::atomic<std::uint64_t> next{0};

  auto fill_chunk = [&](std::uint64_t j, int s) {
    const filling mark;
    const std::uint64_t first = j * chunk, count = std::min(chunk, n - first);
    for (int i = 0; i < inputs; ++i) {
      unsigned char* dst = st.h_slots[i] + static_cast<std::size_t>(s) * shape.chunk_bytes;
      if (src[i].kind == source::from::host)
        copy_to_slot(dst, static_cast<const unsigned char*>(src[i].p) + first * elem, count * elem);
      else if (src[i].kind == source::from::producer)
        src[i].fill(src[i].context, i, dst, first, count);
    }
  };
  const int ordinal = acc.device().ordinal;
  const std::function<void()> worker = [&]() {
    try {
      // This thread's CUDA calls (event waits) belong to the reducer's device, not device 0.
      check_cuda(cudaSetDevice(ordinal), "cudaSetDevice(a staging worker)");
      for (;;) {
        const std::uint64_t j = next.fetch_add(1);
        if (j >= chunks) return;
        const int s = static_cast<int>(j % slots);
        {
          std::unique_lock<std::mutex> lk(m);
          cv.wait(lk, [&] { return abort || j < std::uint64_t(slots) || issued[s] >= std::int64_t(j - slots); });
          if (abort) return;
        }
        // The slot's last copy (this feed's chunk j - slots, or an earlier feed's) has finished.
        check_cuda(cudaEventSynchronize(st.slot_free[s]), "cudaEventSynchronize(a staging slot)");
        fill_chunk(j, s);
        {
          std::lock_guard<std::mutex> lk(m);
          ready[s] = static_cast<std::int64_t>(j);
        }
        cv.notify_all();
      }
    } catch (...) {
      std::lock_guard<std::mutex> lk(m);
      if (!failure) failure = std::current_exception();
      abort = true;
      cv.notify_all();
    }
  };

  const int nthreads = static_cast<int>(std::min<std::uint64_t>(shape.threads, chunks));
  bool started = false;
  try {
    if (nthreads > 1) {
      st.workers.start(nthreads, ordinal, worker);
      started = true;
    }
    const cudaStream_t reduce_stream = acc.stream();
    for (std::uint64_t j = 0; j < chunks; ++j) {
      const int s = static_cast<int>(j % slots), b = static_cast<int>(j % kDeviceBuffers);
      const std::uint64_t first = j * chunk, count = std::min(chunk, n - first);
      if (nthreads <= 1) {
        check_cuda(cudaEventSynchronize(st.slot_free[s]), "cudaEventSynchronize(a staging slot)");
        fill_chunk(j, s);
      } else {
        std::unique_lock<std::mutex> lk(m);
        cv.wait(lk, [&] { return abort || ready[s] == static_cast<std::int64_t>(j); });
        if (abort) break;
      }
      const void* in[kMaxInputs] = {};
      check_cuda(cudaStreamWaitEvent(st.copy, st.reduced[b], 0), "cudaStreamWaitEvent(a device chunk buffer)");
      for (int i = 0; i < inputs; ++i) {
        if (src[i].kind == source::from::device) {
          in[i] = static_cast<const unsigned char*>(src[i].p) + first * elem;
          continue;
        }
        unsigned char* d = st.d_buffers[i] + static_cast<std::size_t>(b) * shape.chunk_bytes;
        check_cuda(cudaMemcpyAsync(d, st.h_slots[i] + static_cast<std::size_t>(s) * shape.chunk_bytes, count * elem,
                                   cudaMemcpyHostToDevice, st.copy),
                   "cudaMemcpyAsync(a chunk of host data to the device)");
        in[i] = d;
      }
      check_cuda(cudaEventRecord(st.slot_free[s], st.copy), "cudaEventRecord(a staging slot)");
      check_cuda(cudaEventRecord(st.copied[b], st.copy), "cudaEventRecord(a device chunk buffer)");
      {
        std::lock_guard<std::mutex> lk(m);
        issued[s] = static_cast<std::int64_t>(j);
      }
      cv.notify_all();
      check_cuda(cudaStreamWaitEvent(reduce_stream, st.copied[b], 0), "cudaStreamWaitEvent(a copied chunk)");
      acc.piece(in[0], in[1], count);
      check_cuda(cudaEventRecord(st.reduced[b], reduce_stream), "cudaEventRecord(a reduced chunk)");
    }
  } catch (...) {
    std::lock_guard<std::mutex> lk(m);
    if (!failure) failure = std::current_exception();
    abort = true;
    cv.notify_all();
  }
  if (started) st.workers.wait();
  if (failure) std::rethrow_exception(failure);
}

void host_reduce(const char* fn, const spec& s, const source* src, int inputs, std::uint64_t n, void* d_out,
                 cudaStream_t stream, const core::device_context& dev) {
  if (core::capturing(stream))
    throw error(std::string("tally::") + fn +
                ": the input is pageable host memory, which a captured graph cannot read: pin it (cudaHostRegister) "
                "or copy it to the device before capturing");
  if (t_filling)  // before the lock below, which the running feed's caller may hold
    throw error(std::string("tally::") + fn +
                ": a producer (reducer::feed_from) gave host data to tally while its own feed was running (the "
                "staging is busy with that feed): inside a producer, reduce only device memory");
  device_staging& st = staging_of(dev);
  std::lock_guard<std::mutex> lock(st.one_shot_mutex);
  if (!st.one_shot) st.one_shot = std::make_unique<accumulation_memory>();
  if (inputs == 1 && src[0].kind == source::from::host && host_share_applies(s, n)) {
    // The host's cores and the GPU share the array, exactly (head_start.hpp; TALLY_HOST_SHARE=1).
    spec exact = s;
    exact.opt.mode = accuracy::exact;
    accumulation acc(exact, dev, stream, *st.one_shot);
    unsigned char bytes[accumulation_memory::kMaxPartial] = {};
    const std::size_t size = encode_result(s, reduce_host_shared(s, acc, n, src[0].p), bytes);
    check_cuda(cudaMemcpyAsync(d_out, bytes, size, cudaMemcpyDefault, stream), "cudaMemcpyAsync(the result to d_out)");
    return;
  }
  accumulation acc(s, dev, stream, *st.one_shot);
  feed(acc, src, inputs, n);
  unsigned char bytes[accumulation_memory::kMaxPartial] = {};
  std::size_t size = 0;
  if (s.w == what::stats) {
    const stats r = acc.stats_result();
    std::memcpy(bytes, &r, sizeof r);
    size = sizeof r;
  } else {
    size = encode_result(s, acc.result(), bytes);
  }
  // From pageable memory: returns once the bytes are staged, so the local may go.
  check_cuda(cudaMemcpyAsync(d_out, bytes, size, cudaMemcpyDefault, stream), "cudaMemcpyAsync(the result to d_out)");
}

}  // namespace tally::chunked
