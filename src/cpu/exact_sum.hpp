// Reductions on the host's cores (src/cpu): the share of a host-resident input that the CPU
// reduces itself while the GPU is not ready for it (src/chunked/head_start).
//
// exact_sum: the exact sum of float16, bfloat16, float32 or float64 elements in the core's long
// accumulator format (core/exact.cuh: kWords words, then the special-value flags), so that the
// host's share and the GPU's exact carry add without rounding and the result is the one exact
// sum, rounded once, whichever processor read which elements.
//
// How: an element is +-M * 2^(e - bias - p + 1) with M an integer of at most p bits (p the
// format's precision, the implicit bit included; subnormals take e = 1). The integers M of each
// sign and exponent add up in one bin, an unsigned integer (64-bit for the 16- and 32-bit formats,
// 128-bit for float64) indexed by the element's top bits, so an element costs a mask, a compare
// and an add, with no branch and no floating-point error-free transformation: about 7 GB/s of
// float32 per core (AMD EPYC build machine, 1 MiB pieces), so a core keeps up with its share of
// the host's memory bandwidth. Every 2^30 elements the bins empty into the long accumulator.
//
//   cpu::exact_sum s(dtype::f32);
//   s.add(data, n);  s.add(more, m);       // any number of pieces, any split
//   s.merge(other_thread_s);               // exact: the order of merges does not matter
//   const long long* w = s.words();        // kWords words (normalised), then s.flags()
#pragma once

#include <cstdint>
#include <vector>

#include "tally/tally.hpp"

namespace tally::cpu {

// Whether exact_sum takes elements of t (f16, bf16, f32, f64).
bool exact_sum_takes(dtype t);

class exact_sum {
 public:
  explicit exact_sum(dtype t);  // throws tally::error for a dtype exact_sum does not take
  // Adds n elements of the dtype at data (any alignment).
  void add(const void* data, std::uint64_t n);
  // Adds another accumulator of the same dtype.
  void merge(const exact_sum& o);
  // The accumulator, normalised (core::exact::kWords words), and the special values seen
  // (core::exact::kNaN, kPosInf, kNegInf).
  const long long* words() const noexcept { return words_.data(); }
  unsigned flags() const noexcept { return flags_; }
  std::uint64_t count() const noexcept { return count_; }
  dtype type() const noexcept { return t_; }

 private:
  dtype t_;
  std::vector<long long> words_;
  std::vector<unsigned long long> bins_;  // add()'s bins (16-byte aligned by the allocator)
  unsigned flags_ = 0;
  std::uint64_t count_ = 0;
};

}  // namespace tally::cpu
