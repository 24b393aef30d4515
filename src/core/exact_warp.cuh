// The long accumulator's normalisation and rounding by one warp instead of one thread.
//
// exact::normalize walks the 136 words serially (a carry chain through shared memory) and
// exact::round_to scans them again: on one thread that was 10-14 us on an H100, the whole fixed
// cost of an exact sum of a few thousand elements. Here lane L owns the five words 5L..5L+4:
// each lane normalises its words locally, then only the carries between lanes remain, and they
// shrink to -1, 0 or +1 after one step, so two or three shuffle steps finish the typical case
// (a run of all-ones digits can ripple one lane per step: at most 28 steps). The normalised form
// is unique (digits in [0, 2^32), a signed top word), so the words come out exactly as
// exact::normalize leaves them, and the leading digits feed the same exact::round_digits: the
// same bits as the serial path.
//
//   __shared__ long long w[exact::kWords];  ... (warp 0, all 32 lanes)
//   exact::normalize_warp(w);  float r = exact::round_warp<float>(w, flags);  // lane 0's is the value
#pragma once

#include "exact.cuh"

namespace tally::core::exact {

inline constexpr int kWordsPerLane = (kDigits + 31) / 32;  // 5: 160 digit slots >= 137 digits
static_assert(kWordsPerLane * 32 >= kDigits, "every digit has a lane");

// Normalises w (kWords words in shared or global memory) in place, as exact::normalize does.
// Called by all 32 lanes of one warp; the words must be visible to the warp and nobody else may
// write them meanwhile. Ends with the words written and visible to the warp (__syncwarp).
__device__ inline void normalize_warp(long long* w) {
  constexpr unsigned kAll = 0xffffffffu;
  constexpr long long kLow = 0xffffffffll;
  const int lane = static_cast<int>(threadIdx.x & 31u);
  const int k0 = lane * kWordsPerLane;
  long long d[kWordsPerLane];
#pragma unroll
  for (int i = 0; i < kWordsPerLane; ++i) d[i] = k0 + i < kWords ? w[k0 + i] : 0;
  // Adds c at this lane's first word and carries through its words; returns the carry out. The
  // top word (kWords - 1) takes whatever arrives and carries nothing.
  auto ripple = [&](long long c, bool split) {
#pragma unroll
    for (int i = 0; i < kWordsPerLane; ++i) {
      const int k = k0 + i;
      if (k < kWords - 1) {
        const long long x = d[i];
        const long long lo = split ? (x & kLow) : x;
        const long long hi = split ? (x >> 32) : 0;  // floor(x / 2^32): arithmetic shift
        const long long t = lo + c;
        d[i] = t & kLow;
        c = hi + (t >> 32);
      } else if (k == kWords - 1) {
        d[i] += c;
        c = 0;
      }
    }
    return c;
  };
  // Local pass: the raw words (any signed values) into digits; carry out |c| <= 2^31 + 2.
  long long carry = ripple(0, true);
  // Carries between lanes: digits are in [0, 2^32) now, so after the first step each carry out is
  // -1, 0 or +1.
  for (;;) {
    long long c = __shfl_up_sync(kAll, carry, 1);
    if (lane == 0) c = 0;
    if (!__any_sync(kAll, c != 0)) break;
    carry = c != 0 ? ripple(c, false) : 0;
  }
#pragma unroll
  for (int i = 0; i < kWordsPerLane; ++i)
    if (k0 + i < kWords) w[k0 + i] = d[i];
  __syncwarp();
}

// exact::leading_digits of a normalised accumulator, by one warp (all 32 lanes); every lane
// gets the record.
__device__ inline lead_digits leading_digits_warp(const long long* w) {
  constexpr unsigned kAll = 0xffffffffu;
  const int lane = static_cast<int>(threadIdx.x & 31u);
  const int k0 = lane * kWordsPerLane;
  unsigned int raw[kWordsPerLane];
#pragma unroll
  for (int i = 0; i < kWordsPerLane; ++i) raw[i] = k0 + i < kDigits ? raw_digit(w, k0 + i) : 0u;
  lead_digits g;
  g.negative = w[kWords - 1] < 0;
  // j: the lowest nonzero raw digit (a negative value has one).
  int j = 0;
  if (g.negative) {
    unsigned lowest = 0xffffffffu;
#pragma unroll
    for (int i = kWordsPerLane - 1; i >= 0; --i)
      if (raw[i] != 0) lowest = static_cast<unsigned>(k0 + i);
    j = static_cast<int>(__reduce_min_sync(kAll, lowest));
  }
  unsigned int mag[kWordsPerLane];
  int highest = -1;
#pragma unroll
  for (int i = 0; i < kWordsPerLane; ++i) {
    mag[i] = k0 + i < kDigits ? magnitude_digit(raw[i], k0 + i, g.negative, j) : 0u;
    if (mag[i] != 0) highest = k0 + i;
  }
  g.h = static_cast<int>(__reduce_max_sync(kAll, static_cast<unsigned>(highest + 1))) - 1;
  if (g.h < 0) return g;
  bool below = false;
#pragma unroll
  for (int i = 0; i < kWordsPerLane; ++i) below = below || (k0 + i <= g.h - 3 && mag[i] != 0);
  g.below = __any_sync(kAll, below);
  // Digits h, h-1, h-2 from the lanes that hold them.
  auto digit = [&](int k) -> unsigned int {
    unsigned int mine = 0;
#pragma unroll
    for (int i = 0; i < kWordsPerLane; ++i)
      if (k0 + i == k) mine = mag[i];
    return k < 0 ? 0u : __shfl_sync(kAll, mine, k / kWordsPerLane);
  };
  g.d2 = digit(g.h);
  g.d1 = digit(g.h - 1);
  g.d0 = digit(g.h - 2);
  return g;
}

// exact::round_to by one warp (all 32 lanes). Each lane rounds with its own flags, so the lane
// that holds the merged flags holds the value.
template <class R>
__device__ inline R round_warp(const long long* w, unsigned flags) {
  const lead_digits g = leading_digits_warp(w);  // collective: before anything lane-dependent
  return round_digits<R>(g, flags);
}

}  // namespace tally::core::exact
