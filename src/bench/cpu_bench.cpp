#include "bench/cpu_bench.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "core/exact.cuh"
#include "cpu/exact_sum.hpp"
#include "tally/tally.hpp"

namespace tally::bench {
namespace {

constexpr std::uint64_t kPiece = std::uint64_t(1) << 20;  // bytes, as the head start's pieces

std::string cpu_model() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("model name", 0) == 0) {
      const std::size_t c = line.find(':');
      return c == std::string::npos ? line : line.substr(c + 2);
    }
  return "unknown";
}

// Elements of t from normal values of spread magnitudes (as data is), as raw bytes.
std::vector<unsigned char> make_data(dtype t, std::uint64_t bytes) {
  std::vector<unsigned char> b(bytes);
  const std::size_t es = dtype_size(t);
  const std::uint64_t n = bytes / es;
  std::mt19937_64 g(11);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (std::uint64_t i = 0; i < n; ++i) {
    const float x = std::ldexp(nd(g), static_cast<int>(g() % 16) - 8);
    unsigned char* at = b.data() + i * es;
    if (t == dtype::f32) {
      std::memcpy(at, &x, 4);
    } else if (t == dtype::f64) {
      const double d = x;
      std::memcpy(at, &d, 8);
    } else {
      std::uint32_t u;
      std::memcpy(&u, &x, 4);
      // bf16: the top half (truncated); f16: a value in range built from the float's bits.
      std::uint16_t h = static_cast<std::uint16_t>(u >> 16);
      if (t == dtype::f16)
        h = static_cast<std::uint16_t>(((u >> 16) & 0x8000u) | (((u >> 23) & 0x0fu) + 8u) << 10 | ((u >> 13) & 0x3ffu));
      std::memcpy(at, &h, 2);
    }
  }
  return b;
}

struct result {
  double seconds;
  std::vector<long long> words;
  unsigned flags;
};

// The exact sum of n elements at data by `threads` threads, each taking every threads-th piece.
result sum_with(dtype t, const unsigned char* data, std::uint64_t n, int threads) {
  const std::size_t es = dtype_size(t);
  const std::uint64_t piece = kPiece / es, pieces = (n + piece - 1) / piece;
  std::vector<std::unique_ptr<cpu::exact_sum>> sums;
  for (int k = 0; k < threads; ++k) sums.push_back(std::make_unique<cpu::exact_sum>(t));
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> ts;
  for (int k = 0; k < threads; ++k)
    ts.emplace_back([&, k] {
      for (std::uint64_t j = static_cast<std::uint64_t>(k); j < pieces; j += static_cast<std::uint64_t>(threads)) {
        const std::uint64_t first = j * piece;
        sums[static_cast<std::size_t>(k)]->add(data + first * es, std::min(piece, n - first));
      }
    });
  for (auto& th : ts) th.join();
  cpu::exact_sum all(t);
  for (const auto& s : sums) all.merge(*s);
  const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return {sec, std::vector<long long>(all.words(), all.words() + core::exact::kWords), all.flags()};
}

}  // namespace

report run_cpu_bench(const cpu_bench_options& opt) {
  report rep;
  const unsigned hw = std::max(1u, std::thread::hardware_concurrency());
  rep.meta["benchmark"] = "cpu";
  rep.meta["date"] = utc_now();
  rep.meta["cpu"] = cpu_model();
  rep.meta["host_cores"] = hw;
  rep.meta["array"] = std::to_string(opt.mib) + " MiB per dtype in host memory, 1 MiB pieces";
  rep.meta["timing"] = "host wall clock (threads started and joined, partial sums merged), median of " +
                       std::to_string(opt.reps);
  std::vector<int> counts{1, 2, 4, 8, 16, 32};
  counts.erase(std::remove_if(counts.begin(), counts.end(), [&](int c) { return c >= static_cast<int>(hw); }),
               counts.end());
  if (hw > 1) counts.push_back(static_cast<int>(hw) - 1);  // the head start's threads
  counts.push_back(static_cast<int>(hw));
  std::sort(counts.begin(), counts.end());
  counts.erase(std::unique(counts.begin(), counts.end()), counts.end());
  table tb{"exact sum on the host's cores (cpu::exact_sum), GB/s",
           {{"dtype", "dtype"}, {"threads", "threads"}, {"gbps", "GB/s", 1}, {"per_thread", "GB/s per thread", 2},
            {"same_bits", "same bits as 1 thread"}},
           {}};
  bool all_same = true;
  for (dtype t : {dtype::f32, dtype::f64, dtype::f16, dtype::bf16}) {
    if (opt.progress) opt.progress(std::string("filling ") + to_string(t));
    const std::vector<unsigned char> data = make_data(t, opt.mib << 20);
    const std::uint64_t n = data.size() / dtype_size(t);
    const result one = sum_with(t, data.data(), n, 1);
    for (int c : counts) {
      if (opt.progress) opt.progress(std::string(to_string(t)) + ", " + std::to_string(c) + " threads");
      std::vector<double> secs;
      bool same = true;
      for (int r = 0; r < opt.reps; ++r) {
        const result x = sum_with(t, data.data(), n, c);
        secs.push_back(x.seconds);
        same = same && x.words == one.words && x.flags == one.flags;
      }
      std::sort(secs.begin(), secs.end());
      const double gb = static_cast<double>(data.size()) / 1e9 / secs[secs.size() / 2];
      all_same = all_same && same;
      tb.rows.push_back({{"dtype", to_string(t)}, {"threads", c}, {"gbps", gb}, {"per_thread", gb / c},
                         {"same_bits", same ? "yes" : "NO"}});
    }
  }
  rep.meta["same_bits"] = all_same ? "yes" : "NO";
  rep.tables.push_back(std::move(tb));
  return rep;
}

}  // namespace tally::bench
