#include "chunked/head_start.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "chunked/accumulation.hpp"
#include "chunked/staging.hpp"
#include "core/api_internal.hpp"
#include "cpu/exact_sum.hpp"

namespace tally::chunked {
namespace {

// Bytes a host thread reads and reduces at a time: small enough to stay in its core's L2 between
// the read and the sum, large enough that claiming one costs nothing.
constexpr std::size_t kHostPieceBytes = std::size_t(1) << 20;
// Elements the GPU takes per feed, between progress reports.
constexpr std::uint64_t kGpuStepBytes = std::uint64_t(1) << 30;
// Bytes the GPU claims at a time when it shares the counter with the host (TALLY_HEAD_START_SHARE).
constexpr std::uint64_t kGpuGroupBytes = std::uint64_t(64) << 20;
// Smallest pageable input the library's host path shares with the host's cores (TALLY_HOST_SHARE):
// below it, starting the threads costs more than they save.
constexpr std::uint64_t kHostShareMinBytes = std::uint64_t(64) << 20;

using steady = std::chrono::steady_clock;
double seconds_since(steady::time_point t0) { return std::chrono::duration<double>(steady::now() - t0).count(); }

// The producer seen from the GPU's side: elements from `base` on.
struct shifted {
  reducer::fill_fn fill;
  void* context;
  std::uint64_t base;
};
void fill_shifted(void* context, int input, void* dst, std::uint64_t first, std::uint64_t count) {
  const auto* s = static_cast<const shifted*>(context);
  s->fill(s->context, input, dst, s->base + first, count);
}

}  // namespace

bool head_start_applies(const spec& s) {
  const char* env = std::getenv("TALLY_HEAD_START");
  if (env != nullptr && std::strcmp(env, "0") == 0) return false;
  return s.w == what::reduce && (s.o == op::sum || s.o == op::mean) && cpu::exact_sum_takes(s.t);
}

namespace {

// The host's threads and the GPU over one input. given: the GPU side, ready (the library's host
// path), or null: made on a thread of its own (CUDA's context, the accumulation's memory, the
// staging's pinned slots) while the host starts. fill null: the input is host_data itself, which
// the GPU's share reads through the staging as pageable memory.
value run(const spec& s, std::uint64_t n, reducer::fill_fn fill, void* context, const void* host_data, int ordinal,
          accumulation* given, bool share, const std::function<void(std::uint64_t)>& progress,
          head_start_report* report) {
  const auto t0 = steady::now();
  spec exact = s;
  exact.opt.mode = accuracy::exact;  // both shares exact: the split cannot change the result
  const std::size_t elem = dtype_size(s.t);

  // Everything that can throw before the threads start: the shape of the host's share.
  const std::uint64_t piece = std::max<std::uint64_t>(1, kHostPieceBytes / elem);
  const std::uint64_t pieces = (n + piece - 1) / piece;
  // Every core but one (the GPU's thread spends CUDA's start-up on it), at most 32; or
  // TALLY_HOST_THREADS (checked as for the staging).
  const unsigned hw = std::max(1u, std::thread::hardware_concurrency());
  const char* threads_env = std::getenv("TALLY_HOST_THREADS");
  const int wanted = threads_env != nullptr && *threads_env != '\0' ? current_shape().threads
                                                                     : static_cast<int>(std::min(32u, std::max(1u, hw - 1)));
  const int threads = static_cast<int>(std::min<std::uint64_t>(wanted, std::max<std::uint64_t>(pieces, 1)));
  // Tests: TALLY_HEAD_START_MIN_MIB, the host goes on to at least this much after the GPU is
  // ready; TALLY_HEAD_START_MAX_MIB, it takes no more than this (both MiB from the start; neither
  // applies when sharing to the end).
  const auto mib_pieces = [&](const char* name, std::uint64_t fallback) {
    const char* v = std::getenv(name);
    if (v == nullptr || *v == '\0' || share) return fallback;
    const std::uint64_t mib = std::min<std::uint64_t>(std::strtoull(v, nullptr, 10), std::uint64_t(1) << 40);
    return ((mib << 20) / elem + piece - 1) / piece;
  };
  // Sharing: TALLY_HEAD_START_SHARE_THREADS=k keeps only k of the host's threads going once the GPU
  // is ready (its staging workers need cores too; an experiment's knob, default all of them).
  const char* keep_env = share ? std::getenv("TALLY_HEAD_START_SHARE_THREADS") : nullptr;
  const int keep_after_ready =
      keep_env != nullptr && *keep_env != '\0' ? static_cast<int>(std::min<unsigned long long>(std::strtoull(keep_env, nullptr, 10), 1024))
                                               : threads;
  const std::uint64_t min_pieces = mib_pieces("TALLY_HEAD_START_MIN_MIB", 0);
  const std::uint64_t max_pieces = mib_pieces("TALLY_HEAD_START_MAX_MIB", ~std::uint64_t(0));
  std::vector<std::unique_ptr<cpu::exact_sum>> sums;
  for (int k = 0; k < threads; ++k) sums.push_back(std::make_unique<cpu::exact_sum>(s.t));

  std::mutex m;
  std::condition_variable cv;
  bool gpu_ready = given != nullptr;
  std::atomic<bool> ready{given != nullptr}, failed{false};  // the host stops on failed (and on ready unless sharing)
  std::exception_ptr gpu_error, host_error;
  double ready_s = 0;
  std::atomic<std::uint64_t> next{0}, host_done{0};

  // The GPU side made here lives in these, released on the GPU's device (declared before the
  // threads: destroyed after they are joined).
  std::unique_ptr<accumulation_memory> memory;
  std::unique_ptr<accumulation> made;
  struct release_on_gpu {
    std::unique_ptr<accumulation>& made;
    std::unique_ptr<accumulation_memory>& memory;
    int ordinal;
    ~release_on_gpu() {
      if (!made && !memory) return;
      int was = -1;
      if (cudaGetDevice(&was) != cudaSuccess) (void)cudaGetLastError();
      if (was != ordinal && cudaSetDevice(ordinal) != cudaSuccess) (void)cudaGetLastError();
      made.reset();
      memory.reset();
      if (was >= 0 && was != ordinal && cudaSetDevice(was) != cudaSuccess) (void)cudaGetLastError();
    }
  } release{made, memory, ordinal};
  accumulation* acc = given;

  // Every thread started here is joined on every way out, and told to stop first.
  std::thread gpu;
  std::vector<std::thread> workers;
  struct joiner {
    std::atomic<bool>& failed;
    std::thread& gpu;
    std::vector<std::thread>& workers;
    void join_workers() {
      for (std::thread& w : workers)
        if (w.joinable()) w.join();
    }
    ~joiner() {
      failed = true;
      if (gpu.joinable()) gpu.join();
      join_workers();
    }
  } threads_of{failed, gpu, workers};

  if (given == nullptr) gpu = std::thread([&] {
    try {
      int count = 0;
      if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
        (void)cudaGetLastError();
        (void)core::current_context();  // throws, saying that there is no GPU and why
      }
      if (ordinal < 0 || ordinal >= count)
        throw error("tally: the head start's GPU " + std::to_string(ordinal) + " does not exist (" +
                    std::to_string(count) + " CUDA GPUs)");
      core::check_cuda(cudaSetDevice(ordinal), "cudaSetDevice(the head start's GPU)");
      const core::device_context& dev = core::current_context();
      memory = std::make_unique<accumulation_memory>();
      made = std::make_unique<accumulation>(exact, dev, nullptr, *memory);
      prepare_staging(dev, 1);
    } catch (...) {
      gpu_error = std::current_exception();
    }
    std::lock_guard<std::mutex> lk(m);
    gpu_ready = true;
    ready_s = seconds_since(t0);
    ready = true;
    if (gpu_error) failed = true;
    cv.notify_all();
  });

  // The host's share: threads claim pieces from the first on until the GPU is ready. The claimed
  // pieces are then a prefix [0, claimed) of the input, each reduced whole. (share: the host
  // keeps taking pieces after the GPU is ready, the GPU taking groups of them from the same
  // counter, so each side takes what it can; the shares then interleave, and still add exactly.)
  for (int k = 0; k < threads; ++k)
    workers.emplace_back([&, k] {
      try {
        std::vector<unsigned char> buf(host_data != nullptr ? 0 : piece * elem);
        for (;;) {
          if (failed.load(std::memory_order_acquire)) return;
          if (!share && ready.load(std::memory_order_acquire) && next.load() >= min_pieces) return;
          if (share && k >= keep_after_ready && ready.load(std::memory_order_acquire)) return;
          if (next.load() >= max_pieces) return;
          const std::uint64_t j = next.fetch_add(1);
          if (j >= pieces || j >= max_pieces) return;  // past the end: not taken by anyone
          const std::uint64_t first = j * piece, count = std::min(piece, n - first);
          if (host_data != nullptr) {
            sums[static_cast<std::size_t>(k)]->add(static_cast<const unsigned char*>(host_data) + first * elem, count);
          } else {
            fill(context, 0, buf.data(), first, count);
            sums[static_cast<std::size_t>(k)]->add(buf.data(), count);
          }
          host_done.fetch_add(count, std::memory_order_relaxed);
        }
      } catch (...) {
        std::lock_guard<std::mutex> lk(m);
        if (!host_error) host_error = std::current_exception();
        failed = true;
        cv.notify_all();
      }
    });
  {
    std::unique_lock<std::mutex> lk(m);
    while (!gpu_ready && !host_error) {
      cv.wait_for(lk, std::chrono::milliseconds(100));
      if (progress && !gpu_ready && !host_error) {
        lk.unlock();
        progress(host_done.load());
        lk.lock();
      }
    }
  }
  if (gpu.joinable()) gpu.join();
  acc = given != nullptr ? given : made.get();
  std::exception_ptr early;
  {
    std::lock_guard<std::mutex> lk(m);
    early = host_error ? host_error : gpu_error;
  }
  if (early) std::rethrow_exception(early);  // threads_of stops and joins the host's threads
  if (!share) {
    threads_of.join_workers();
    if (host_error) std::rethrow_exception(host_error);
  }

  // The GPU's share, streamed through the staging into the exact carry: the rest after the
  // host's prefix, or (shared) groups of pieces claimed while the host goes on.
  const core::device_scope on_gpu(ordinal, "cudaSetDevice(the head start's GPU)");
  shifted rest{fill, context, 0};
  source src;
  src.kind = fill != nullptr ? source::from::producer : source::from::host;
  src.fill = fill_shifted;
  src.context = &rest;
  const auto gpu_takes = [&](std::uint64_t first, std::uint64_t count) {
    rest.base = first;
    if (fill == nullptr) src.p = static_cast<const unsigned char*>(host_data) + first * elem;
    feed(*acc, &src, 1, count);
  };
  std::uint64_t gpu_elements = 0;
  if (!share) {
    const std::uint64_t host_end = std::min(n, std::min(std::min(next.load(), pieces), max_pieces) * piece);
    const std::uint64_t step = std::max<std::uint64_t>(1, kGpuStepBytes / elem);
    for (std::uint64_t at = host_end; at < n;) {
      const std::uint64_t count = std::min(step, n - at);
      gpu_takes(at, count);
      at += count;
      gpu_elements += count;
      if (progress) progress(at);
    }
  } else {
    const std::uint64_t group = std::max<std::uint64_t>(1, (kGpuGroupBytes / elem) / piece);
    for (;;) {
      if (failed.load(std::memory_order_acquire)) break;
      const std::uint64_t j = next.fetch_add(group);
      if (j >= pieces) break;
      const std::uint64_t first = j * piece, count = std::min(std::min(group, pieces - j) * piece, n - first);
      gpu_takes(first, count);
      gpu_elements += count;
      if (progress) progress(host_done.load() + gpu_elements);
    }
    threads_of.join_workers();
    if (host_error) std::rethrow_exception(host_error);
    if (progress) progress(host_done.load() + gpu_elements);  // the host's last pieces too: n
  }
  // Both shares, added exactly, rounded once.
  cpu::exact_sum host(s.t);
  for (const auto& h : sums) host.merge(*h);
  if (host.count() + gpu_elements != n) throw error("tally: internal error: the head start lost elements");
  acc->add_exact(host.words(), host.flags(), host.count());
  const value v = acc->result();
  if (report != nullptr) {
    report->host_elements = host.count();
    report->host_threads = threads;
    report->gpu_ready_s = ready_s;
    report->total_s = seconds_since(t0);
  }
  return v;
}

}  // namespace

value reduce_with_head_start(const spec& s, std::uint64_t n, reducer::fill_fn fill, void* context, int ordinal,
                             const std::function<void(std::uint64_t)>& progress, head_start_report* report,
                             const void* host_data) {
  if (!head_start_applies(s)) throw error("tally: internal error: a head start for a reduction it does not apply to");
  if (fill == nullptr) throw error("tally: internal error: a head start without its producer");
  // TALLY_HEAD_START_SHARE=1 (an experiment, not yet measured on a GPU machine): the host goes
  // on after the GPU is ready (a page-cached file on many cores may be done sooner by the host).
  const char* share_env = std::getenv("TALLY_HEAD_START_SHARE");
  const bool share = share_env != nullptr && std::strcmp(share_env, "1") == 0;
  return run(s, n, fill, context, host_data, ordinal, nullptr, share, progress, report);
}

bool host_share_applies(const spec& s, std::uint64_t n) {
  const char* env = std::getenv("TALLY_HOST_SHARE");
  return env != nullptr && std::strcmp(env, "1") == 0 && n * dtype_size(s.t) >= kHostShareMinBytes &&
         head_start_applies(s);
}

value reduce_host_shared(const spec& s, accumulation& acc, std::uint64_t n, const void* data, head_start_report* report) {
  if (!acc.plan_exact()) throw error("tally: internal error: a shared host reduction into an accumulation that is not exact");
  return run(s, n, nullptr, nullptr, data, acc.device().ordinal, &acc, true, nullptr, report);
}

}  // namespace tally::chunked
