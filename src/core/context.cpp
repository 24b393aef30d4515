#include "context.hpp"
#include "tuning.hpp"

#include <algorithm>

#include <cstdio>
#include <cstdlib>
#include <atomic>
#include <memory>
#include <vector>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>

namespace tally::core {

[[noreturn]] void throw_cuda(cudaError_t e, const char* what) {
  (void)cudaGetLastError();  // clear a non-sticky error so the next call starts clean
  throw error(std::string("tally: ") + what + " failed: " + cudaGetErrorName(e) + ": " +
              cudaGetErrorString(e));
}

namespace {

constexpr int kMaxDevices = 64;

struct stream_key {
  cudaStream_t stream;
  std::thread::id thread;  // cudaStreamPerThread is a different stream on every thread
  bool operator==(const stream_key& o) const { return stream == o.stream && thread == o.thread; }
};
struct stream_key_hash {
  std::size_t operator()(const stream_key& k) const {
    return std::hash<const void*>()(k.stream) ^ (std::hash<std::thread::id>()(k.thread) << 1);
  }
};

struct device_slot {
  std::once_flag once;
  device_context ctx;
  std::mutex mutex;
  cudaStream_t setup_stream = nullptr;  // non-blocking: zeroing a workspace never waits on others
  std::unordered_map<stream_key, std::unique_ptr<workspace>, stream_key_hash> workspaces;
  std::vector<std::unique_ptr<workspace>> captured;  // owned by captured graphs: never freed
  char* slab = nullptr;                              // current capture slab and what is left
  std::size_t slab_left = 0;
};
// Never destroyed: freeing device memory while the CUDA runtime shuts down at exit is unsafe.
device_slot* const g_devices = new device_slot[kMaxDevices];

void init_device(device_slot& slot, int ordinal) {
  device_context& c = slot.ctx;
  cudaDeviceProp p{};
  check_cuda(cudaGetDeviceProperties(&p, ordinal), "cudaGetDeviceProperties");
  c.ordinal = ordinal;
  c.sm_count = p.multiProcessorCount;
  c.max_threads_per_sm = p.maxThreadsPerMultiProcessor;
  device_info& d = c.info;
  d.ordinal = ordinal;
  d.name = p.name;
  d.sm_count = p.multiProcessorCount;
  d.cc_major = p.major;
  d.cc_minor = p.minor;
  d.l2_bytes = static_cast<std::size_t>(p.l2CacheSize);
  d.global_mem_bytes = p.totalGlobalMem;
  int clock_khz = 0, bus_bits = 0;
  check_cuda(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrMemoryClockRate, ordinal),
             "cudaDeviceGetAttribute(memory clock)");
  check_cuda(cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, ordinal),
             "cudaDeviceGetAttribute(bus width)");
  int pageable = 0;
  check_cuda(cudaDeviceGetAttribute(&pageable, cudaDevAttrPageableMemoryAccess, ordinal),
             "cudaDeviceGetAttribute(pageable memory access)");
  c.pageable_access = pageable != 0;
  d.mem_clock_khz = clock_khz;
  d.bus_width_bits = bus_bits;
  d.theoretical_gbps = 2.0 * clock_khz * 1e3 * (bus_bits / 8.0) / 1e9;
  check_cuda(cudaStreamCreateWithFlags(&slot.setup_stream, cudaStreamNonBlocking),
             "cudaStreamCreateWithFlags(workspace set-up stream)");
}

int current_ordinal() {
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0) {
    (void)cudaGetLastError();
    throw error(std::string("tally: no CUDA GPU is available (cudaGetDeviceCount: ") +
                (e == cudaSuccess ? "0 devices" : cudaGetErrorString(e)) + ")");
  }
  int dev = 0;
  check_cuda(cudaGetDevice(&dev), "cudaGetDevice");
  if (dev < 0 || dev >= kMaxDevices) throw error("tally: device ordinal out of range");
  return dev;
}

// Allocation is not a stream operation, but in a stream being captured in global mode the
// runtime refuses it unless this thread relaxes its capture mode for the duration
// (relaxed_capture_scope, context.hpp).

std::atomic<std::size_t> g_created{0};
std::atomic<int> g_cache_generation{0};  // bumped when a workspace is freed

// cudaMalloc(bytes), then every byte set to `value` on the device's set-up stream (which never
// waits on others, so this is safe while a stream is being captured); freed again on failure.
void* alloc_filled(device_slot& slot, std::size_t bytes, int value, const char* what) {
  void* p = nullptr;
  check_cuda(cudaMalloc(&p, bytes), (std::string("cudaMalloc(") + what + ")").c_str());
  cudaError_t e = cudaMemsetAsync(p, value, bytes, slot.setup_stream);
  if (e == cudaSuccess) e = cudaStreamSynchronize(slot.setup_stream);
  if (e != cudaSuccess) {
    cudaFree(p);
    throw_cuda(e, (std::string("initialising the ") + what).c_str());
  }
  return p;
}

std::unique_ptr<workspace> make_workspace(device_slot& slot) {
  ++g_created;
  relaxed_capture_scope guard;
  auto w = std::make_unique<workspace>();
  const std::size_t partial_bytes = std::size_t(kMaxBlocks) * kMaxAccBytes;
  static_assert(std::size_t(kMaxBlocks) * kMaxAccBytes >= kChunkPartialBytes, "room for the chunk partials");
  char* base = nullptr;
  check_cuda(cudaMalloc(reinterpret_cast<void**>(&base), partial_bytes + kTailBytes),
             "cudaMalloc(tally stream workspace)");
  w->d_partials = base;
  w->max_blocks = kMaxBlocks;
  carve_tail(*w, base + partial_bytes);
  cudaError_t e = cudaMemsetAsync(base + partial_bytes, 0, kTailBytes, slot.setup_stream);
  if (e == cudaSuccess) e = cudaStreamSynchronize(slot.setup_stream);
  if (e == cudaSuccess) e = cudaMallocHost(&w->h_result, 64);
  if (e != cudaSuccess) {
    cudaFree(base);
    throw_cuda(e, "initialising the tally stream workspace");
  }
  return w;
}

// A captured call's workspace: a slice of an 8 MiB slab, zeroed when the slab is made. Its grid
// is capped at the largest resident grid of blocks of kMinBlockThreads; its partial slots hold
// that grid's partials or the dynamic schedule's chunk partials (kChunkPartialBytes), as a
// stream's workspace does, so a captured call cuts the body as an uncaptured one.
std::unique_ptr<workspace> make_capture_workspace(device_slot& slot) {
  relaxed_capture_scope guard;
  const device_context& c = slot.ctx;
  const unsigned max_blocks = static_cast<unsigned>(
      std::min<long long>(kMaxBlocks, (long long)c.sm_count * c.max_threads_per_sm / kMinBlockThreads));
  const std::size_t partial_bytes =
      std::max<std::size_t>((std::size_t(max_blocks) * kMaxAccBytes + 255) / 256 * 256, kChunkPartialBytes);
  const std::size_t chunk = (partial_bytes + kTailBytes + 255) / 256 * 256;
  if (slot.slab_left < chunk) {
    const std::size_t slab_bytes = std::max<std::size_t>(std::size_t(8) << 20, chunk);
    char* slab = static_cast<char*>(alloc_filled(slot, slab_bytes, 0, "tally capture workspace"));
    slot.slab = slab;
    slot.slab_left = slab_bytes;
  }
  ++g_created;
  auto w = std::make_unique<workspace>();
  w->owns_memory = false;
  w->d_partials = slot.slab;
  w->max_blocks = max_blocks;
  carve_tail(*w, slot.slab + partial_bytes);
  slot.slab += chunk;
  slot.slab_left -= chunk;
  return w;
}

}  // namespace

void carve_tail(workspace& w, char* tail) {
  static_assert(kTailChunkNextOffset + 4 <= kTailExactOffset);
  w.d_counter = reinterpret_cast<unsigned int*>(tail + kTailCounterOffset);
  w.d_chunk_next = reinterpret_cast<unsigned int*>(tail + kTailChunkNextOffset);
  w.d_exact = reinterpret_cast<long long*>(tail + kTailExactOffset);
  w.d_seg_status = reinterpret_cast<unsigned long long*>(tail + kSegStatusOffset);
  w.d_seg_counters = reinterpret_cast<unsigned int*>(tail + kSegCountersOffset);
}

const device_context& current_context() {
  const int dev = current_ordinal();
  device_slot& slot = g_devices[dev];
  // An exception leaves the once_flag unset, so a failed initialisation is retried next call.
  std::call_once(slot.once, [&] { init_device(slot, dev); });
  return slot.ctx;
}

workspace& stream_workspace(const device_context& dev, cudaStream_t stream) {
  device_slot& slot = g_devices[dev.ordinal];
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  check_cuda(cudaStreamIsCapturing(stream, &capture), "cudaStreamIsCapturing");
  if (capture == cudaStreamCaptureStatusActive) {
    std::lock_guard<std::mutex> lock(slot.mutex);
    slot.captured.push_back(make_capture_workspace(slot));
    return *slot.captured.back();
  }
  const stream_key key{stream, stream == cudaStreamPerThread ? std::this_thread::get_id()
                                                             : std::thread::id()};
  // One-entry cache per thread: a loop of calls on one stream takes no lock.
  thread_local int cached_dev = -1;
  thread_local stream_key cached_key{};
  thread_local workspace* cached = nullptr;
  thread_local int cached_generation = -1;
  const int generation = g_cache_generation.load(std::memory_order_acquire);
  if (cached && cached_dev == dev.ordinal && cached_key == key && cached_generation == generation) return *cached;

  std::lock_guard<std::mutex> lock(slot.mutex);
  auto it = slot.workspaces.find(key);
  if (it == slot.workspaces.end()) it = slot.workspaces.emplace(key, make_workspace(slot)).first;
  cached_dev = dev.ordinal;
  cached_key = key;
  cached = it->second.get();
  cached_generation = generation;
  return *cached;
}

workspace::~workspace() {
  if (d_seg_scratch) cudaFree(d_seg_scratch);
  if (!owns_memory) return;
  if (d_partials) cudaFree(d_partials);
  if (h_result) cudaFreeHost(h_result);
}

void* segmented_scratch(workspace& ws, std::size_t bytes) {
  if (bytes == 0) return nullptr;
  if (bytes > kSegScratchBytes) throw error("tally: internal error: a segmented plan needs more scratch than it has");
  if (ws.d_seg_scratch == nullptr) {
    relaxed_capture_scope guard;
    // Every byte defined (the ragged plan's chunk entries read -1, "no segment"), so nothing
    // ever reads memory that was never written.
    ws.d_seg_scratch = alloc_filled(g_devices[current_context().ordinal], ws.owns_memory ? kSegScratchBytes : bytes,
                                    0xff, "tally segmented workspace");
  }
  return ws.d_seg_scratch;
}

void release_workspace(cudaStream_t stream) {
  const device_context& dev = current_context();
  device_slot& slot = g_devices[dev.ordinal];
  const stream_key key{stream, stream == cudaStreamPerThread ? std::this_thread::get_id() : std::thread::id()};
  std::lock_guard<std::mutex> lock(slot.mutex);
  slot.workspaces.erase(key);
  ++g_cache_generation;  // every thread's one-entry cache may point at it: drop them all
}

std::size_t workspaces_created() { return g_created.load(); }

namespace {
thread_local launch_record t_last;
const bool g_debug_launch = [] {
  const char* v = std::getenv("TALLY_DEBUG_LAUNCH");
  return v && *v && *v != '0';
}();
}  // namespace

void record_launch(const launch_record& r) {
  t_last = r;
  if (g_debug_launch)
    std::fprintf(stderr, "tally: launch n=%llu elem_bytes=%u grid=%u block=%u unroll=%u shape=%s%s resident=%u\n",
                 static_cast<unsigned long long>(r.n), r.elem_bytes, r.blocks, r.block, r.unroll,
                 r.dynamic ? "dynamic" : r.deep ? "deep" : "base", r.pipelined ? " pipelined" : "", r.resident);
}
launch_record last_launch() { return t_last; }

}  // namespace tally::core
