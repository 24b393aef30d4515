// `tally bench calls` (see calls_bench.hpp).
#include "bench/calls_bench.hpp"

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "bench/probe.hpp"
#include "bench/timing.hpp"
#include "core/context.hpp"
#include "core/memory.hpp"
#include "tally/tally.hpp"

namespace tally::bench {
namespace {

template <class Fn>
Fn driver_entry(const char* name) {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult found{};
  check(cudaGetDriverEntryPointByVersion(name, &p, 12000, cudaEnableDefault, &found), name);
  if (found != cudaDriverEntryPointSuccess) throw error(std::string("tally bench calls: the driver has no ") + name);
  return reinterpret_cast<Fn>(p);
}

using get_attribute_fn = CUresult (*)(void*, CUpointer_attribute, CUdeviceptr);
using get_attributes_fn = CUresult (*)(unsigned int, CUpointer_attribute*, void**, CUdeviceptr);
using address_range_fn = CUresult (*)(CUdeviceptr*, size_t*, CUdeviceptr);

// Host microseconds per call of f: `loops` loops of `calls` calls, each loop followed by a
// synchronise of the stream (so launches never fill the queue), the median loop.
template <class F>
double host_us(const calls_bench_options& opt, cudaStream_t s, F&& f) {
  for (int i = 0; i < 200; ++i) f();
  check(cudaStreamSynchronize(s), "cudaStreamSynchronize(bench calls)");
  std::vector<double> us;
  for (int l = 0; l < opt.loops; ++l) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < opt.calls; ++i) f();
    us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / opt.calls);
    check(cudaStreamSynchronize(s), "cudaStreamSynchronize(bench calls)");
  }
  return median(us);
}

// Host microseconds per call of f, a call that waits for its own result: `loops` loops of
// `calls`, the median loop.
template <class F>
double trip_us(int calls, int loops, F&& f) {
  for (int i = 0; i < std::max(3, calls / 10); ++i) f();
  std::vector<double> us;
  for (int l = 0; l < loops; ++l) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < calls; ++i) f();
    us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / calls);
  }
  return median(us);
}

// A blocking call's round trip, part by part: what the host waits for beyond the kernel itself
// (the launch reaching the GPU, the copy of the result, the synchronise), at 2^10 and at 2^27
// f32 (512 MiB, an issue-13 shard: 2^28 over two GPUs), against the same kernels replayed in a
// graph, where none of it shows.
table round_trips(const calls_bench_options& opt, cudaStream_t s) {
  const auto sync = [&] { check(cudaStreamSynchronize(s), "cudaStreamSynchronize(bench calls)"); };
  pinned_bytes pinned(64);
  auto* h_word = reinterpret_cast<unsigned int*>(pinned.p);
  device_buffer dev_out(64);
  auto* d_word = static_cast<unsigned int*>(dev_out.get());
  const auto to_host = [&] {
    check(cudaMemcpyAsync(h_word, dev_out.get(), 4, cudaMemcpyDeviceToHost, s), "cudaMemcpyAsync(bench calls)");
  };
  options off;
  off.check_memory = false;  // the result into pinned host memory: not a place reduce checks for
  const stream_t ts = reinterpret_cast<stream_t>(s);
  struct row {
    std::string what;
    std::uint64_t n;
    std::function<void()> f;
  };
  const std::uint64_t big = std::uint64_t(1) << 27;
  device_buffer small_in(1024 * sizeof(float)), big_in(big * sizeof(float));
  fill_random(small_in.get(), 1024, dtype::f32, 7, -1.0, 1.0, s);
  fill_random(big_in.get(), big, dtype::f32, 7, -1.0, 1.0, s);
  sync();
  std::vector<row> rows = {
      {"cudaStreamSynchronize, nothing queued", 0, [&] { sync(); }},
      {"cudaMemcpyAsync of 4 B to pinned host + synchronize", 0, [&] { to_host(); sync(); }},
      {"an empty kernel + synchronize", 0, [&] { check(launch_empty(s, false), "empty kernel"); sync(); }},
      {"an empty kernel + 4 B copied to the host + synchronize", 0,
       [&] { check(launch_empty(s, false), "empty kernel"); to_host(); sync(); }},
      {"one thread storing 4 B into device memory + synchronize", 0,
       [&] { check(launch_store(s, d_word, 1), "store kernel"); sync(); }},
      {"one thread storing 4 B into pinned host memory + synchronize", 0,
       [&] { check(launch_store(s, h_word, 1), "store kernel"); sync(); }},
      {"one thread storing 4 B into pinned host memory, the host spinning on it", 0,
       [&] {
         volatile unsigned int* h = h_word;
         *h = 0;
         check(launch_store(s, h_word, 1), "store kernel");
         // The stream asked every 4096 spins, so that a failed kernel ends the wait.
         for (unsigned spins = 1; *h == 0; ++spins)
           if (spins % 4096 == 0 && cudaStreamQuery(s) != cudaErrorNotReady && *h == 0) {
             sync();  // throws for a failed kernel
             if (*h == 0) throw error("tally bench calls: the store kernel ended without its store showing");
           }
       }},
  };
  void* d_out = dev_out.get();
  for (const std::uint64_t n : {std::uint64_t(1024), big}) {
    const void* in = n == big ? big_in.get() : small_in.get();
    rows.push_back({"tally::reduce into device memory + synchronize", n, [in, n, d_out, ts, &sync] {
                      reduce(in, n, dtype::f32, op::sum, d_out, ts);
                      sync();
                    }});
    rows.push_back({"tally::reduce into device memory + 4 B copied to the host + synchronize", n,
                    [in, n, d_out, ts, &sync, &to_host] {
                      reduce(in, n, dtype::f32, op::sum, d_out, ts);
                      to_host();
                      sync();
                    }});
    rows.push_back({"tally::reduce into pinned host memory + synchronize", n, [in, n, ts, off, h_word, &sync] {
                      reduce(in, n, dtype::f32, op::sum, h_word, ts, off);
                      sync();
                    }});
    rows.push_back({"tally::reduce_value (blocking)", n, [in, n, ts] { (void)reduce_value(in, n, dtype::f32, op::sum, ts); }});
  }
  table t{"a blocking call's round trip (host us per call, each call waits for its result; f32)",
          {{"what", "what"}, {"n", "n"}, {"us", "us", 2}, {"over", "over the graph replay", 2}},
          {}};
  // The kernels alone: tally::reduce replayed from a graph of many calls (per call).
  std::vector<double> graph_us;
  for (const std::uint64_t n : {std::uint64_t(1024), big}) {
    const void* in = n == big ? big_in.get() : small_in.get();
    const int k = n == big ? 20 : 200;
    cudaGraph_t g = nullptr;
    cudaGraphExec_t ge = nullptr;
    check(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture(bench calls)");
    for (int i = 0; i < k; ++i) reduce(in, n, dtype::f32, op::sum, dev_out.get(), ts);
    check(cudaStreamEndCapture(s, &g), "cudaStreamEndCapture(bench calls)");
    check(cudaGraphInstantiate(&ge, g, 0), "cudaGraphInstantiate(bench calls)");
    const double us = trip_us(n == big ? 10 : 100, opt.loops, [&] {
                        check(cudaGraphLaunch(ge, s), "cudaGraphLaunch(bench calls)");
                        sync();
                      }) / k;
    check(cudaGraphExecDestroy(ge), "cudaGraphExecDestroy");
    check(cudaGraphDestroy(g), "cudaGraphDestroy");
    graph_us.push_back(us);
    t.rows.push_back({{"what", "tally::reduce, graph replay (per call; the kernel alone)"}, {"n", n}, {"us", us}, {"over", 0.0}});
  }
  for (const row& r : rows) {
    const double us = trip_us(r.n == big ? 200 : 2000, opt.loops, r.f);
    if (r.n == 0)
      t.rows.push_back({{"what", r.what}, {"n", "-"}, {"us", us}, {"over", "-"}});
    else
      t.rows.push_back({{"what", r.what}, {"n", r.n}, {"us", us}, {"over", us - graph_us[r.n == big ? 1 : 0]}});
  }
  return t;
}

}  // namespace

report run_calls_bench(const calls_bench_options& opt) {
  const device_info dev = current_device();
  report rep;
  stamp_report(rep, "calls", dev, ceiling{});
  rep.meta.erase("read_ceiling_gbps");  // no bandwidth here
  rep.meta.erase("theoretical_gbps");
  rep.meta["timing"] = "host wall clock per call: loops of " + std::to_string(opt.calls) +
                       " calls, a stream synchronise after each loop, the median of " + std::to_string(opt.loops);
  auto say = [&](const std::string& s) {
    if (opt.progress) opt.progress(s);
  };
  cudaStream_t s = nullptr;
  check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreateWithFlags(bench calls)");
  const std::uint64_t n = 1024;
  device_buffer in(n * sizeof(float)), out(64);
  check(cudaMemset(in.get(), 0, n * sizeof(float)), "cudaMemset(bench calls)");
  const auto get1 = driver_entry<get_attribute_fn>("cuPointerGetAttribute");
  const auto get5 = driver_entry<get_attributes_fn>("cuPointerGetAttributes");
  const auto range = driver_entry<address_range_fn>("cuMemGetAddressRange");
  const auto dp = reinterpret_cast<CUdeviceptr>(in.get());
  volatile unsigned long long sink = 0;

  // The queries alone.
  struct step {
    const char* name;
    std::function<void()> f;
  };
  const std::vector<step> queries = {
      {"cudaGetDevice", [&] { int d = 0; (void)cudaGetDevice(&d); sink = sink + d; }},
      {"cudaStreamIsCapturing", [&] { cudaStreamCaptureStatus c{}; (void)cudaStreamIsCapturing(s, &c); sink = sink + c; }},
      {"cuPointerGetAttribute(BUFFER_ID)", [&] { unsigned long long id = 0; (void)get1(&id, CU_POINTER_ATTRIBUTE_BUFFER_ID, dp); sink = sink + id; }},
      {"cuPointerGetAttribute(RANGE_SIZE)", [&] { size_t z = 0; (void)get1(&z, CU_POINTER_ATTRIBUTE_RANGE_SIZE, dp); sink = sink + z; }},
      {"cuMemGetAddressRange", [&] { CUdeviceptr b = 0; size_t z = 0; (void)range(&b, &z, dp); sink = sink + z; }},
      {"cuPointerGetAttributes (5 attributes)", [&] {
         CUpointer_attribute a[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                                    CU_POINTER_ATTRIBUTE_IS_MANAGED, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
                                    CU_POINTER_ATTRIBUTE_RANGE_SIZE};
         unsigned long long v[5] = {};
         void* d[5] = {&v[0], &v[1], &v[2], &v[3], &v[4]};
         (void)get5(5, a, d, dp);
         sink = sink + v[4];
       }},
      {"cudaPointerGetAttributes", [&] { cudaPointerAttributes a{}; (void)cudaPointerGetAttributes(&a, in.get()); sink = sink + a.device; }},
      {"core::inspect_memory (tally's check of one pointer)", [&] { sink = sink + core::inspect_memory(in.get()).end; }},
  };
  table q{"the queries alone (host us per call)", {{"query", "query"}, {"us", "us", 3}}, {}};
  say("queries");
  for (const step& st : queries) q.rows.push_back({{"query", st.name}, {"us", host_us(opt, s, st.f)}});

  // A reduce of 2^10 f32, checks on and off, and checks off plus two of each query (as many
  // as a checked call makes): does a query cost the launch after it more than its own time?
  options on, off;
  off.check_memory = false;
  auto reduce_with = [&](const options& o) { reduce(in.get(), n, dtype::f32, op::sum, out.get(), s, o); };
  table r{"reduce of 2^10 f32 enqueued in a loop (host us per call)",
          {{"call", "call"}, {"us", "us", 3}, {"over", "over checks off (the lower of its two runs)", 3}}, {}};
  say("reduce");
  // The baseline twice (first and last); the rows compare with the lower of the two, since the
  // first loops of a process can run slower.
  std::vector<std::pair<std::string, double>> got;
  auto add = [&](const std::string& name, double us) { got.emplace_back(name, us); };
  add("cudaMemsetAsync of 4 bytes (an enqueue's floor)", host_us(opt, s, [&] { (void)cudaMemsetAsync(out.get(), 0, 4, s); }));
  add("an empty kernel, <<<>>>", host_us(opt, s, [&] { (void)launch_empty(s, false); }));
  add("an empty kernel, cudaLaunchKernelEx with PDL", host_us(opt, s, [&] { (void)launch_empty(s, true); }));
  add("core::plan (reduce's planning, nothing launched)",
      host_us(opt, s, [&] { sink = sink + core::plan(dtype::f32, op::sum, n, off).blocks; }));
  add("tally::reduce, memory checks off", host_us(opt, s, [&] { reduce_with(off); }));
  add("tally::reduce, memory checks on", host_us(opt, s, [&] { reduce_with(on); }));
  for (const step& st : queries)
    add(std::string("checks off + 2 x ") + st.name, host_us(opt, s, [&] { st.f(); st.f(); reduce_with(off); }));
  add("tally::reduce, memory checks off (again)", host_us(opt, s, [&] { reduce_with(off); }));
  double base = got.back().second;
  for (const auto& g : got)
    if (g.first == "tally::reduce, memory checks off") base = std::min(base, g.second);
  for (const auto& g : got) r.rows.push_back({{"call", g.first}, {"us", g.second}, {"over", g.second - base}});
  say("round trips");
  table rt = round_trips(opt, s);
  check(cudaStreamDestroy(s), "cudaStreamDestroy(bench calls)");
  rep.tables.push_back(std::move(q));
  rep.tables.push_back(std::move(r));
  rep.tables.push_back(std::move(rt));
  return rep;
}

}  // namespace tally::bench
