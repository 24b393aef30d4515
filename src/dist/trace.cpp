#include "dist/trace.hpp"

#include <atomic>
#include <chrono>

namespace tally::dist::trace {
namespace {

std::atomic<bool> g_on{false};
std::vector<row> g_rows;
std::size_t g_capacity = 0;

}  // namespace

void record(std::size_t calls) {
  g_on.store(false, std::memory_order_relaxed);
  g_rows.clear();
  g_rows.reserve(calls);
  g_capacity = calls;
  g_on.store(calls > 0, std::memory_order_relaxed);
}

void mark(point p) {
  if (!g_on.load(std::memory_order_relaxed)) return;
  const long long t = std::chrono::duration_cast<std::chrono::nanoseconds>(
                          std::chrono::steady_clock::now().time_since_epoch())
                          .count();
  if (p == start) {
    if (g_rows.size() == g_capacity) return;  // full: the rest of the call is not recorded either
    g_rows.push_back(row{});
  } else if (g_rows.empty() || g_rows.back()[start] == 0) {
    return;
  }
  row& r = g_rows.back();
  if (r[p] == 0) r[p] = t;
}

std::vector<row> rows() { return g_rows; }

}  // namespace tally::dist::trace
