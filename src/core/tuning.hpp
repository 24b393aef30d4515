// Tuning: plain data per element size, each constant with the measurement behind it, and the
// grid rule that uses them. Host code (tests, the launcher) and device code share this file.
// Re-measure with `tally bench tune` when the kernel changes.
#pragma once

#include <algorithm>
#include <cstdint>

namespace tally::core {

// How the body's 16-byte vectors are loaded (see load.cuh).
enum class load_hint { ldg, stream };
// How the body is shared among blocks: `contiguous`, one range per block; `strided`, grid-stride
// by whole blocks (at any moment the grid reads one contiguous window).
enum class layout { contiguous, strided };

// Elements of 1, 2 and 4 bytes. Measured on an H100 (132 SMs, read ceiling 3079-3083 GB/s) with
// `tally bench tune`, f32 and i32 sums, graph replay:
//   - 512 threads x 4 loads of 16 bytes, grid-stride by whole blocks, 2 blocks/SM: 3099 GB/s for
//     f32 and 3096 for i32 at 2^30 (contiguous ranges per block: 2998-3084; 256 x 8: 3098 only at
//     3 blocks/SM and 2738 at 2; 1024 x 4: 3098; 512 x 8: 3099).
//   - the L1::no_allocate + L2::256B hint and plain __ldg measured the same (3099 both); kept.
//   - one block up to 2^14 f32 (1.17-1.63 us; two blocks at 2^14: 2.36 us).
template <int ElemBytes, bool Binary = false>
struct tuning {
  static constexpr int block = 512;
  static constexpr int unroll = 4;
  static constexpr load_hint hint = load_hint::stream;
  static constexpr layout split = layout::strided;
  static constexpr int min_blocks = 1;  // __launch_bounds__ minimum blocks per SM
  // One block (no partials, no atomics) while n <= this many rounds of block x unroll vectors.
  static constexpr int single_block_rounds = 2;
  // Above that, enough blocks for about this many vectors per thread (f32: 16 blocks at 2^16
  // took 2.36 us, 64 at 2^18 2.48 us, 256 at 2^20 3.11 us; 1 or 8 blocks were slower).
  static constexpr int vectors_per_thread = 2;
};

// 2-byte elements (f16, bf16, i16, u16): 512 x 8 loads for the plain ops. Measured on an H100
// with `tally bench numerics --tables half`, f16 and bf16 sums, graph time against CUB's
// widening TransformReduce at 2^22 / 2^23 / 2^24 / 2^25 / 2^28: 512 x 8 4.0 / 5.1 / 7.9 / 24.5 /
// 174.5 us (CUB 5.0 / 6.7 / 9.4 / 26.1 / 180.0); 512 x 4 3.7-3.8 / 4.9 / 9.8-10.3 / 24.8 /
// 174.3 (2^24, 32 MiB in L2, was 0.92-0.96 of CUB); 1024 x 4 8.7-9.4 at 2^24; 512 x 4 or
// 256 x 8 at the full grid 9.0-10.8 at 2^24.
template <>
struct tuning<2, false> : tuning<1, false> {  // the 1- and 4-byte shape, with eight loads per round
  static constexpr int unroll = 8;
};

// 8-byte elements: 512 x 8 loads, one block per SM (the occupancy limit), grid-stride: 3100
// GB/s for f64 at 2^29 (512 x 4 at 2 blocks/SM: 3098; contiguous ranges: 3037-3041).
template <>
struct tuning<8, false> {
  static constexpr int block = 512;
  static constexpr int unroll = 8;
  static constexpr load_hint hint = load_hint::stream;
  static constexpr layout split = layout::strided;
  static constexpr int min_blocks = 1;
  static constexpr int single_block_rounds = 2;  // one block up to 2^14 f64
  static constexpr int vectors_per_thread = 2;
};

// Inputs up to this size run with at most one block per SM. Inputs that sit in L2 ran up to 40%
// slower with 2 blocks per SM than with 1 (f64 2^22: 10.4 us against 7.2-8.4 us; i32 2^22: 6.4
// against 4.8), and a partly filled SM (2 blocks where 3 fit) spreads blocks unevenly; from
// 256 MiB up, a full SM reads faster (f32 at 2 blocks/SM 3099 GB/s, at 1 block 3052).
inline constexpr std::uint64_t kFullGridMinBytes = std::uint64_t(96) << 20;

// Two-input ops (dot): the one-input shape unless measured otherwise. Measured on an H100 with
// `tally bench numerics --tables dot`, graph time against cuBLAS at 2^20 / 2^22:
//   - f32: 1024 x 4, one block per SM: 3.92 / 9.57 us (cuBLAS 6.3 / 9.9); 512 x 4 at two blocks
//     per SM 3.87 / 10.07; 512 x 8 4.2 / 9.7; 512 x 2 4.2 / 11.6; 256 x 8 4.4 / 11.1. 2^22
//     (two 16 MiB inputs, in L2) is the size that decides. Adopted, in the full run: 3.97 / 8.91
//     us, and 46.5 at 2^24 (cuBLAS 6.1 / 9.8 / 48.6).
//   - f64: 512 x 2: 5.1 / 24.5 us, 86.8 at 2^24 (cuBLAS 7.8 / 27.3 / 91.0); 512 x 8 6.4 / 25.2 /
//     88.0.
template <int ElemBytes>
struct tuning<ElemBytes, true> : tuning<ElemBytes, false> {};
template <>
struct tuning<4, true> : tuning<4, false> {
  static constexpr int block = 1024;
};
template <>
struct tuning<8, true> : tuning<8, false> {
  static constexpr int unroll = 2;
};

// Ops with a fold of their own (argmin/argmax, compensated sums, stats, sum of squares) and the
// exact sum keep 512 x 4 on 2-byte elements: eight loads in flight take them from 40-90
// registers to 78-128 (one block per SM; stats past its register budget).
template <int ElemBytes>
struct tuning_folding : tuning<ElemBytes> {};
template <>
struct tuning_folding<2> : tuning<2> {
  static constexpr int unroll = 4;
};

// Elements one block consumes in one round of loads.
template <int ElemBytes, class Tu = tuning<ElemBytes>>
constexpr std::uint64_t round_elements() {
  return std::uint64_t(Tu::block) * Tu::unroll * (16 / ElemBytes);
}

// Two-input ops (dot) read L2-resident inputs faster with the full resident grid: f32 dot at
// 2^22 (32 MiB) took 12.1 us with one block per SM, where cuBLAS took 9.7.
inline constexpr std::uint64_t kFullGridMinBytesBinary = std::uint64_t(8) << 20;

// Blocks to launch for n elements (binary ops: n counts both inputs) on `sms` SMs fitting
// `per_sm` blocks each.
template <int ElemBytes, class Tu = tuning<ElemBytes>>
unsigned int grid_for(std::uint64_t n, std::uint64_t sms, std::uint64_t per_sm, std::uint64_t max_blocks,
                      bool binary = false) {
  if (n <= round_elements<ElemBytes, Tu>() * Tu::single_block_rounds) return 1;
  const std::uint64_t per_block = std::uint64_t(Tu::block) * Tu::vectors_per_thread * (16 / ElemBytes);
  const std::uint64_t want = (n + per_block - 1) / per_block;
  const std::uint64_t full_from = binary ? kFullGridMinBytesBinary : kFullGridMinBytes;
  const std::uint64_t cap = n * ElemBytes >= full_from ? sms * per_sm : sms;
  return static_cast<unsigned int>(std::min({want, cap, max_blocks}));
}

}  // namespace tally::core
