// The memory checks of the entry points (src/core/memory.hpp): host arrays where the GPU must
// reach memory itself (results, the segmented forms' inputs), freed pointers, inputs past the
// end of their allocation and result buffers too small are refused with an error naming the argument, before any launch, so nothing is written and the
// process and the GPU stay usable; pinned host and managed memory, which kernels can read, work.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "core/context.hpp"
#include "core/memory.hpp"
#include "support.hpp"
#include "tally/tally.hpp"

namespace tally::test {
namespace {

bool gpu_reads_pageable() { return core::current_context().pageable_access; }

void expect_refused(const std::function<void()>& call, const std::vector<std::string>& words) {
  const std::string why = error_of(call);
  ASSERT_FALSE(why.empty()) << "accepted, expected a refusal naming " << words.front();
  for (const std::string& w : words) EXPECT_NE(why.find(w), std::string::npos) << "'" << w << "' not in: " << why;
}

// The process and device stay usable: a plain reduction afterwards gives the right sum.
void expect_usable() {
  const std::vector<float> ones(1000, 1.0f);
  device_buffer d(ones.size() * 4);
  d.upload(ones.data(), ones.size() * 4);
  EXPECT_EQ(reduce_value(d.get(), ones.size(), dtype::f32, op::sum).as_double(), 1000.0);
}

TEST(MemoryGpu, HostArraysAreReducedOrRefusedByName) {
  TALLY_REQUIRE_GPU();
  if (gpu_reads_pageable()) GTEST_SKIP() << "this GPU reads pageable host memory (HMM/ATS): host arrays are valid";
  // reduce, dot and stats read pageable host arrays through the staging (src/chunked).
  std::vector<float> h(1 << 16, 1.0f);
  device_buffer out(8), dx(h.size() * 4);
  dx.upload(h.data(), h.size() * 4);
  EXPECT_EQ(reduce_value(h.data(), h.size(), dtype::f32, op::sum).as_double(), 65536.0);
  reduce(h.data(), h.size(), dtype::f32, op::sum, out.get());
  float got = 0;
  out.download(&got, 4);
  EXPECT_EQ(got, 65536.0f);
  EXPECT_EQ(dot_value(dx.get(), h.data(), h.size(), dtype::f32).as_double(), 65536.0);
  EXPECT_EQ(stats_value(h.data(), h.size(), dtype::f32).count, h.size());
  // Results, the other forms' inputs and offsets must be memory the GPU reaches.
  float h_out = 0;
  expect_refused([&] { reduce(dx.get(), 16, dtype::f32, op::sum, &h_out); }, {"d_out", "write"});
  expect_refused([&] { reduce_rows(h.data(), 16, 16, 16, dtype::f32, op::sum, out.get()); },
                 {"reduce_rows", "d_in", "not memory the GPU can read", "cudaHostRegister"});
  std::vector<std::int64_t> hb{0, 4}, he{4, 8};
  device_buffer db(16), de(16), seg_out(8);
  db.upload(hb.data(), 16);
  de.upload(he.data(), 16);
  expect_refused([&] { reduce_segments(dx.get(), 8, hb.data(), static_cast<const std::int64_t*>(de.get()), 2, dtype::f32,
                                       op::sum, seg_out.get()); },
                 {"d_begin"});
  expect_usable();
}

TEST(MemoryGpu, FreedPointerIsRefused) {
  TALLY_REQUIRE_GPU();
  if (gpu_reads_pageable()) GTEST_SKIP() << "this GPU reads pageable host memory: a stray pointer can not be told apart";
  expect_usable();  // the workspace exists before the pointer is freed
  void* p = nullptr;
  ASSERT_EQ(cudaMalloc(&p, 1 << 20), cudaSuccess);
  ASSERT_EQ(cudaFree(p), cudaSuccess);
  expect_refused([&] { reduce_value(p, 1000, dtype::f32, op::sum); }, {"d_in", "freed"});
  expect_usable();
}

TEST(MemoryGpu, InputPastItsAllocationIsRefused) {
  TALLY_REQUIRE_GPU();
  // Sizes are whole 4 KiB pages, so no allocation granularity hides the overrun.
  device_buffer d(1024 * 4), out(4096);
  const std::vector<float> zeros(1024, 0.0f);
  d.upload(zeros.data(), zeros.size() * 4);
  // 1025 floats from the start, or 1024 from one element in: 4 bytes past the end.
  expect_refused([&] { reduce_value(d.get(), 1025, dtype::f32, op::sum); }, {"d_in", "needs 4100 bytes", "has only 4096"});
  expect_refused([&] { reduce_value(static_cast<char*>(d.get()) + 4, 1024, dtype::f32, op::sum); }, {"has only 4092"});
  // Rows: the last row (start (rows - 1) * ld) runs past the end.
  expect_refused([&] { reduce_rows(d.get(), 10, 100, 103, dtype::f32, op::sum, out.get()); }, {"reduce_rows", "d_in"});
  expect_refused([&] { reduce_columns(d.get(), 11, 100, 100, dtype::f32, op::max, out.get()); }, {"d_in"});
  const std::uint64_t dims[3] = {8, 8, 17};
  expect_refused([&] { reduce_axis(d.get(), dims, 3, 1, 1, dtype::f32, op::sum, out.get()); }, {"reduce_axis", "d_in"});
  EXPECT_NO_THROW(reduce_value(d.get(), 1024, dtype::f32, op::sum));
  expect_usable();
}

TEST(MemoryGpu, ResultBufferTooSmallWritesNothing) {
  TALLY_REQUIRE_GPU();
  // 513 rows of 8 f64: 513 results; the buffer (one 4 KiB page) holds 512.
  const std::vector<double> x(513 * 8, 2.0);
  device_buffer d(x.size() * 8), small(8 * 512);
  d.upload(x.data(), x.size() * 8);
  const std::vector<double> sentinel(512, -7.0);
  small.upload(sentinel.data(), small.size());
  expect_refused([&] { reduce_rows(d.get(), 513, 8, 8, dtype::f64, op::sum, small.get()); },
                 {"d_out", "needs 4104 bytes", "has only 4096", "too small", "nothing was written"});
  expect_refused([&] { reduce_columns(d.get(), 8, 513, 513, dtype::f64, op::sum, small.get()); }, {"too small"});
  expect_refused([&] { stats_rows(d.get(), 86, 8, 8, dtype::f64, small.get()); }, {"too small"});  // 86 x 48 > 4096
  expect_refused([&] { reduce_rows(d.get(), 257, 8, 8, dtype::f64, op::argmax, small.get()); }, {"too small"});
  expect_refused([&] { dot_rows(d.get(), d.get(), 513, 8, 8, 8, dtype::f64, small.get()); }, {"too small"});
  // argmax of the whole array needs a 16-byte record: the last 8 bytes of the buffer are too few.
  expect_refused([&] { reduce(d.get(), 10, dtype::f64, op::argmax, static_cast<char*>(small.get()) + 8 * 511); },
                 {"too small"});
  std::vector<double> back(512);
  small.download(back.data(), back.size() * 8);
  EXPECT_EQ(back, sentinel);
  // With the check turned off (options::check_memory) a valid call runs as usual.
  options unchecked;
  unchecked.check_memory = false;
  reduce_rows(d.get(), 512, 8, 8, dtype::f64, op::max, small.get(), nullptr, unchecked);
  small.download(back.data(), back.size() * 8);
  EXPECT_EQ(back, std::vector<double>(512, 2.0));
  // Exactly enough room works.
  reduce_rows(d.get(), 512, 8, 8, dtype::f64, op::sum, small.get());
  small.download(back.data(), back.size() * 8);
  EXPECT_EQ(back, std::vector<double>(512, 16.0));
}

TEST(MemoryGpu, PinnedHostAndManagedMemoryAreRead) {
  TALLY_REQUIRE_GPU();
  const std::uint64_t n = 102400;  // 100 pages
  float* pinned = nullptr;
  float* managed = nullptr;
  ASSERT_EQ(cudaMallocHost(reinterpret_cast<void**>(&pinned), n * 4), cudaSuccess);
  ASSERT_EQ(cudaMallocManaged(reinterpret_cast<void**>(&managed), n * 4), cudaSuccess);
  for (std::uint64_t i = 0; i < n; ++i) pinned[i] = managed[i] = static_cast<float>(i % 7);
  double want = 0;
  for (std::uint64_t i = 0; i < n; ++i) want += static_cast<double>(i % 7);
  EXPECT_EQ(reduce_value(pinned, n, dtype::f32, op::sum, nullptr, options{nan_policy::propagate, accuracy::exact})
                .as_double(),
            want);
  EXPECT_EQ(reduce_value(managed, n, dtype::f32, op::sum, nullptr, options{nan_policy::propagate, accuracy::exact})
                .as_double(),
            want);
  EXPECT_EQ(core::inspect_memory(pinned).kind, core::memory_kind::host_pinned);
  EXPECT_EQ(core::inspect_memory(managed).kind, core::memory_kind::managed);
  // Past the end of pinned memory is refused like device memory.
  expect_refused([&] { reduce_value(pinned, n + 1, dtype::f32, op::sum); }, {"pinned host memory", "has only"});
  // A result written to pinned host memory.
  reduce(managed, n, dtype::f32, op::max, pinned);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(pinned[0], 6.0f);
  ASSERT_EQ(cudaFreeHost(pinned), cudaSuccess);
  ASSERT_EQ(cudaFree(managed), cudaSuccess);
}

// Another GPU's memory: read where this GPU has peer access to it, otherwise refused naming the
// device; never a fault (which would end the process's CUDA context). Needs two GPUs.
TEST(MemoryGpu, AnotherGpusMemoryIsReadOrRefusedByName) {
  TALLY_REQUIRE_GPU();
  if (device_count() < 2) GTEST_SKIP() << "needs two GPUs";
  int was = 0;
  ASSERT_EQ(cudaGetDevice(&was), cudaSuccess);
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  {
    const std::vector<float> ones(4096, 1.0f);
    device_buffer on0(ones.size() * 4);
    on0.upload(ones.data(), ones.size() * 4);
    ASSERT_EQ(cudaSetDevice(1), cudaSuccess);
    const std::string why = error_of([&] {
      EXPECT_EQ(reduce_value(on0.get(), ones.size(), dtype::f32, op::sum).as_double(), 4096.0);
    });
    const core::memory_facts f = core::inspect_memory(on0.get());
    std::printf("memory of device 0 seen from device 1: %s, peer_readable %d; %s\n", core::to_string(f.kind),
                f.peer_readable ? 1 : 0, why.empty() ? "read" : why.c_str());
    if (!why.empty()) {
      EXPECT_NE(why.find("device 0"), std::string::npos) << why;
    }
    EXPECT_EQ(cudaGetLastError(), cudaSuccess);
    expect_usable();  // on device 1
    ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  }
  ASSERT_EQ(cudaSetDevice(was), cudaSuccess);
}

// What the check costs per pointer, and a reduce call's host time, on a small and a large
// allocation (printed for the record; speed goals live in the benchmarks).
TEST(MemoryGpu, CheckCostIsPrinted) {
  TALLY_REQUIRE_GPU();
  for (std::size_t bytes : {std::size_t(1) << 20, std::size_t(1) << 30}) {
    device_buffer d(bytes), out(64);
    ASSERT_EQ(cudaMemset(d.get(), 0, 1 << 20), cudaSuccess);
    const int reps = 20000;
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < reps; ++i) (void)core::inspect_memory(static_cast<char*>(d.get()) + (i % 64) * 16);
    const double inspect_us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / reps;
    t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < reps; ++i) {
      cudaPointerAttributes a{};
      (void)cudaPointerGetAttributes(&a, d.get());
    }
    const double runtime_us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / reps;
    // A reduce call's host time, checks on and off, alternating rounds (the median of each).
    std::vector<double> on_us, off_us;
    for (int round = 0; round < 10; ++round) {
      for (bool on : {true, false}) {
        options opt;
        opt.check_memory = on;
        reduce(d.get(), 1024, dtype::f32, op::sum, out.get(), nullptr, opt);
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < 500; ++i) reduce(d.get(), 1024, dtype::f32, op::sum, out.get(), nullptr, opt);
        (on ? on_us : off_us)
            .push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / 500);
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      }
    }
    std::sort(on_us.begin(), on_us.end());
    std::sort(off_us.begin(), off_us.end());
    std::printf("[ info ] %zu-byte allocation: inspect_memory %.3f us, cudaPointerGetAttributes %.3f us, reduce of 2^10 "
                "enqueued in %.3f us per call with the memory checks, %.3f us without (%s)\n",
                bytes, inspect_us, runtime_us, on_us[5], off_us[5], current_device().name.c_str());
    EXPECT_EQ(core::inspect_memory(d.get()).kind, core::memory_kind::device);
  }
  device_buffer odd(504);
  const core::memory_facts f = core::inspect_memory(odd.get());
  std::printf("[ info ] a 504-byte cudaMalloc: range of %llu bytes, driver memory type %d, device %d\n",
              static_cast<unsigned long long>(f.end - f.begin), f.driver_type, f.device);
  EXPECT_EQ(f.end - f.begin, 504u);
}

}  // namespace
}  // namespace tally::test
