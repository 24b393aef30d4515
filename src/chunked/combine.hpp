// Reductions of data that arrives in pieces (src/chunked): what each piece's launch computes, and
// how the pieces' partial results fold, in piece order, into the final one.
//
// A piece is reduced on the GPU by the core into one partial (the op's own result, or for mean
// the sum; integer means also the piece's mean, to recover the high bits of a wrapped sum); exact
// modes add each piece's exact sum into one accumulator on the device (the carry) instead, which
// is rounded once at the end. The fold runs on the host in piece order, so every mode is
// deterministic for a given sequence of pieces, and the exact mode, integer ops, min/max,
// argmin/argmax, bitwise and logical ops give the same bits as one reduce() over all the data.
// Plain C++: the CPU tests run the fold without a GPU.
//
//   combiner c({what::reduce, dtype::f32, op::argmax, {}});
//   c.fold(partial_of_piece_0, 0);        // index 7 inside piece 0
//   c.fold(partial_of_piece_1, 1 << 22);  // index 3 inside piece 1: global index (1 << 22) + 3
//   value v = c.result(nullptr, n);
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/context.hpp"
#include "tally/tally.hpp"

namespace tally::chunked {

enum class what { reduce, dot, stats };

// The reduction asked for (o is ignored for dot and stats).
struct spec {
  what w = what::reduce;
  dtype t = dtype::f32;
  op o = op::sum;
  options opt;
};

// Bytes of the exact carry: exact::kWords words, then the special-value flags.
std::size_t carry_bytes();

// What one piece's launch computes.
struct piece_plan {
  core::kind kind = core::kind::sum;  // written at partial + 0
  bool exact = false;                 // the pieces add into the carry; no partial
  bool with_mean = false;             // integer mean: kind::mean too, written at partial + 8
  std::size_t partial_bytes = 0;      // bytes per piece in the partials array (0 for exact)
};

// Throws tally::error (naming the reduction) for unsupported combinations.
piece_plan plan_for(const spec& s);

// Writes a reduce or dot result as the core writes it at d_out (argmin/argmax: the index, then the
// value at byte 8); returns the bytes written (at most 16).
std::size_t encode_result(const spec& s, const value& v, unsigned char* out);

class combiner {
 public:
  explicit combiner(const spec& s);
  const piece_plan& plan() const noexcept { return plan_; }
  // One piece's partial (plan().partial_bytes at p, as the core wrote it); first: the index of the
  // piece's first element in the whole input (argmin/argmax add it to the piece's index);
  // count: the piece's elements.
  void fold(const unsigned char* p, std::uint64_t first, std::uint64_t count);
  // The result of everything folded, n elements in all; carry: the exact modes' accumulator as
  // copied from the device (carry_bytes()), null otherwise. reduce and dot.
  value result(const long long* carry, std::uint64_t n) const;
  // Exact plans: adds an exact sum computed elsewhere (the host's share, src/cpu/exact_sum:
  // core::exact::kWords normalised words and the special-value flags) to the carry at result().
  void add_exact(const long long* words, unsigned flags);
  stats stats_result() const;
  void reset();

 private:
  spec spec_;
  piece_plan plan_;
  dtype r_ = dtype::f32;  // the result dtype
  // Running state (which fields count depends on the op).
  value best_;             // min, max, argmin, argmax, bitwise, logical, integer sum and prod
  double s_ = 0, c_ = 0;   // float sums (Neumaier's s and c), sum_sq, prod; norm2: scale and ssq
  bool nan_ = false;       // norm2: a NaN piece
  __int128 wide_ = 0;      // integer mean: the exact sum
  stats st_;               // stats
  std::vector<long long> extra_;  // exact plans: add_exact's words (empty: none)
  unsigned extra_flags_ = 0;
};

}  // namespace tally::chunked
