// What the two `tally bench dist` runs (one process per GPU, dist_bench.cpp; one process for
// every GPU, dist_local_bench.cpp) share: the data's seed, NCCL's check and a result's bits.
#pragma once

#include <nccl.h>

#include <cstdint>
#include <cstring>
#include <string>

#include "tally/tally.hpp"

namespace tally::bench::dist_common {

inline constexpr std::uint64_t kSeed = 2026;
inline constexpr std::uint64_t kGolden = 0x9e3779b97f4a7c15ull;  // fill_random's index multiplier

// Throws tally::error naming the NCCL call and NCCL's message.
inline void check_nccl(ncclResult_t r, const char* what) {
  if (r != ncclSuccess) throw error(std::string("tally bench dist: ") + what + " failed: " + ncclGetErrorString(r));
}

// A float result's bits (its value as a double), to compare results bitwise.
inline std::uint64_t bits_of(const value& v) {
  std::uint64_t b = 0;
  std::memcpy(&b, &v.f, sizeof b);
  return b;
}

}  // namespace tally::bench::dist_common
