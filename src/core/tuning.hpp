// Tuning as data: the kernel shapes compiled for each op family, each with the measurement
// behind it, and the grid rule that uses them. Which compiled shape a launch uses, and the
// thresholds of the grid rule, are chosen at run time from the device's properties by
// policy.hpp. Host code (tests, the launcher, the benchmarks) and device code share this file.
// Re-measure with `tally bench tune --measure` when a kernel changes (docs/tuning.md).
#pragma once

#include <algorithm>
#include <cstdint>

namespace tally::core {

// How the body's 16-byte vectors are loaded (see load.cuh).
enum class load_hint { ldg, stream };
// How the body is shared among blocks: `contiguous`, one range per block; `strided`, grid-stride
// by whole blocks (at any moment the grid reads one contiguous window); `chunk`, one range of
// whole rounds per chunk of the dynamic schedule (device.cuh, reduce_kernel_dynamic).
enum class layout { contiguous, strided, chunk };

// Ops that share a kernel shape: plain one-input ops (sum, min, max, bitwise, logical); ops with
// a per-vector fold of their own (argmin/argmax, compensated sums, sum of squares, norms, stats,
// integer means); two-input ops (dot); the exact sum and dot.
enum class family : int { plain, folding, binary, exact };
inline constexpr int kFamilies = 4;
const char* to_string(family f);

// Each family is compiled in two shapes: `base`, and `deep`, which keeps more bytes in flight
// per SM for GPUs whose memory delivers more bytes per SM per microsecond (policy.hpp decides).
enum class depth : int { base, deep };

// A kernel shape: threads per block, 16-byte vectors loaded per thread per round (kept in
// flight together), the __launch_bounds__ minimum of resident blocks (which caps registers), and
// the most accumulators a thread keeps (the op's own cap may be lower).
struct shape {
  int block, unroll, min_blocks, accs;
};

// The compiled shapes. Figures: `tally bench tune --measure`, graph replay, on an H100 80GB HBM3
// (132 SMs, read ceiling 3079-3091 GB/s) and an H200 (132 SMs, 4490-4530 GB/s); the full tables
// are docs/data/tune-h100.md and docs/data/tune-h200.md.
constexpr shape compiled_shape(int elem_bytes, family f, depth d) {
  const bool deep = d == depth::deep;
  switch (f) {
    case family::plain:
      // 4- and 1-byte elements: 512 x 4 at 2 blocks/SM (64 KiB in flight per SM) read 3099 GB/s
      // for f32 at 2^30 on the H100 and 4540 GB/s on the H200 (101% of each ceiling); 512 x 8 at
      // 2/SM (128 KiB) the same on both, so deep is for GPUs that need more in flight.
      // 2-byte: 512 x 8 (f16 sum at 2^24, in L2: 7.9 us, 512 x 4 9.8-10.3, CUB 9.4; H100).
      // 8-byte: 512 x 8, one block per SM (its registers): f64 at 2^29 3100 GB/s (H100), 4550 (H200).
      if (elem_bytes == 8) return deep ? shape{512, 8, 2, 2} : shape{512, 8, 1, 8};
      if (elem_bytes == 2) return deep ? shape{512, 8, 2, 8} : shape{512, 8, 1, 8};
      return deep ? shape{512, 8, 2, 8} : shape{512, 4, 1, 8};
    case family::folding:
      // Ops with a fold of their own keep 512 x 4 on narrow elements: argmax f32 (40 registers,
      // 3 blocks/SM, 96 KiB in flight) and the f32 compensated sum (56, 2 blocks/SM) read at
      // 99.7-100.5% of the fast sum on both GPUs. The statistics need 76 registers at 512 x 4:
      // one block per SM, 32 KiB in flight, below the rule's need on either GPU, so they take
      // deep, 512 x 8 at one block per SM (64 KiB): stats f32 at 2^28 99.2% of the fast sum on
      // the H100 and 97.7% on the H200 (512 x 4: 97.3% / 92%).
      if (elem_bytes == 8) return deep ? shape{512, 4, 2, 2} : shape{512, 8, 1, 8};
      return deep ? shape{512, 8, 1, 8} : shape{512, 4, 1, 8};
    case family::binary:
      // dot f32: 1024 x 4 at one block per SM, 3.92 / 9.57 us at 2^20 / 2^22 (cuBLAS 6.3 / 9.9;
      // 512 x 4 at 2/SM 3.87 / 10.07; 512 x 8 4.2 / 9.7; H100). dot f64: 512 x 2, 5.1 / 24.5 us
      // (cuBLAS 7.8 / 27.3; 512 x 8 6.4 / 25.2). With ld.global.nc both read at 101% of the
      // ceiling on the H200 at 2^28 (cuBLAS 98%).
      if (elem_bytes == 8) return deep ? shape{512, 4, 2, 8} : shape{512, 2, 1, 8};
      if (elem_bytes == 2) return deep ? shape{512, 8, 2, 8} : shape{512, 8, 1, 8};
      return deep ? shape{512, 8, 2, 8} : shape{1024, 4, 1, 8};
    case family::exact:
      // The strided layout (below exact_dynamic's size; exact_stream_shape above it). Two
      // expansions per thread; f32 512 x 4 at two blocks per SM (64 registers, 64 KiB): at 2^24
      // 29.4 us against 31.8 for 512 x 8 at one block in the dynamic schedule (H100).
      // f64: 512 x 4 at two blocks per SM beat 512 x 8 at one (2^28: 97.8% / 96.0% of the fast
      // sum on the H100 / H200, against 96.4% / 94.5%).
      if (elem_bytes == 8) return deep ? shape{512, 8, 2, 1} : shape{512, 4, 2, 2};
      return deep ? shape{512, 8, 1, 2} : shape{512, 4, 2, 2};
  }
  return {512, 4, 1, 8};
}

// The compiled shape as compile-time constants for the kernel templates.
template <int ElemBytes, family F, depth D>
struct tuning {
  static constexpr shape s = compiled_shape(ElemBytes, F, D);
  static constexpr int block = s.block, unroll = s.unroll, min_blocks = s.min_blocks, accs = s.accs;

  // The plain read-only path (ld.global.nc). The L1::no_allocate + L2::256B form the H100 was
  // tuned with measured the same there (f32 sum at 2^30: 3096 against 3095 GB/s) and held every
  // op to 93-95% of the H200's ceiling (f32 sum at 2^30: 4278 GB/s against 4540 with ldg).
  static constexpr load_hint hint = load_hint::ldg;
  static constexpr layout split = layout::strided;
};

// One block (no partials, no atomics) while n fits in this many rounds of block x unroll
// vectors: f32 up to 2^14 took 1.17-1.63 us on one block, two blocks at 2^14 2.36 us (H100).
inline constexpr int kSingleBlockRounds = 2;
// Above that, enough blocks for about this many vectors per thread (f32 on an H100: 16 blocks at
// 2^16 took 2.36 us, 64 at 2^18 2.48 us, 256 at 2^20 3.11 us; 1 or 8 vectors were slower).
inline constexpr int kVectorsPerThread = 2;

// The exact sum's dynamic schedule (device_exact.cuh, exact_block_dynamic) from this multiple of
// the L2 up; below, the strided layout. Graph replay, the dynamic schedule against the strided
// one: f32 at 2^26 (256 MiB) 94.0 against 94.4 us on the H100 (50 MiB L2), 69.4 against 67.5 on
// the H200 (60 MiB); at 2^28 347.6 against 387.3 and 246.8 against 281.5.
inline constexpr std::uint64_t kExactDynamicL2Multiple = 8;

// Ops with pipelined rounds (ops.cuh, pipelined_v: the f64 statistics) take their pipelined
// kernel from this multiple of the L2 up (bytes read), where the reads come from DRAM; below, the
// plain kernel. A/B in one session on the H100 (scripts/ab.sh, graph us, 2026-11-27 23:4x UTC,
// pipelined against plain): stats f64 at 2^26 / 2^28 / 2^30 1.3 / 1.6 / 1.8% faster (97.1 /
// 97.0 / 97.3% of the fast sum, from 95.7 / 95.5 / 95.5), 2^24 the same; but 3-13% slower from
// 2^10 to 2^22 (f32: 10-20% slower at 2^10-2^16 and no faster at any size), even where no thread
// had a whole round to pipeline: so one kernel each, chosen by size, and f64 only.
inline constexpr std::uint64_t kPipelineL2Multiple = 2;
constexpr bool pipeline_rounds(std::uint64_t bytes, std::uint64_t l2_bytes) {
  return bytes > 0 && bytes >= kPipelineL2Multiple * l2_bytes;
}

// Where the rule (policy.hpp, choose_depth: a measured entry's depth included) picks deep for a
// family, the one-pass ops (launch.cuh, launch_choice::at) still take base for an input that fits
// in the L2: the L2 answers sooner than memory, so base's bytes in flight cover
// the need there, and its shorter code and fewer registers finish sooner. Stats f32, graph
// replay, base / deep: 2^10-2^22 0.94-1.01 on an H200 (2026-11-28 23:0x UTC,
// docs/data/tune-stats-h200-1128-2300.md) and 0.95-1.01 on an H100 (docs/data/tune-h100-1128.md),
// deep faster from 2^24 (1.03 on the H200). A forced depth holds at every size.
constexpr bool deep_reads_memory(std::uint64_t bytes, std::uint64_t l2_bytes) { return bytes > l2_bytes; }
// The exact f32 sums and means (launch.cuh, launch_exact) of an input that one round of a deep
// block holds and that fills more than a third of it take one block of the deep shape: all its
// loads go out at once. Its kernel has the round's grid test (device_exact.cuh, exact_grid_round)
// for every thread, a thread's partial round padded to a whole one (ops.cuh, pads_rounds). Tune,
// graph, exact f32 at 2^14, this kernel against the base kernel: H200 2.78 against 2.95 us
// (2026-11-28 23:24 UTC, docs/data/tune-exact-stats-h200-1128-2325.md), H100 2.81 against 2.97
// (2026-11-28 01:44 UTC, docs/data/tune-h100-1128.md). Before the padding
// the threads of a partial round tested each add, and the window (then from one base round, 8193
// elements) lost where no thread held a whole round: 12288 elements 3.15 us against base's 2.90
// (docs/data/ab-small-shapes-h200-1129.md). Padded, in the library against base (`tally bench
// numerics --depth base`, A B A B, H200 2026-11-29 20:45 UTC, docs/data/ab-exact-padded-h200-1129.md),
// graph us: 4097 / 5000 / 6144 / 7000 / 8192 / 12288 / 14336 / 2^14 elements 2.55 / 2.33 / 2.35 /
// 2.35 / 2.36 / 2.40 / 2.39 / 2.61 against 2.43 / 2.29 / 2.40 / 2.73 / 2.34 / 2.88 / 3.04 / 2.98: a
// quarter-full round (4097) pays for its pads (six of a thread's eight vectors); from about a third
// full to a half it breaks even (6144 and 7000 faster, 8192 and a second run's 5462 within 1%), and
// past one base round it wins by up to 21%. The bound sits between the measured 5000 (2% slower)
// and 6144 (2% faster). A forced depth takes the forced shape instead.
constexpr bool one_deep_round(std::uint64_t bytes, const shape& base, const shape& deep) {
  const std::uint64_t base_round = std::uint64_t(base.block) * base.unroll * 16;
  const std::uint64_t deep_round = std::uint64_t(deep.block) * deep.unroll * 16;
  return deep_round > base_round && 3 * bytes > deep_round && bytes <= deep_round;
}
// The exact sums and means take blocks of half the threads (exact_half_shape) on twice the grid
// where the base shape's grid of heavy blocks (grid_for: a block per vector a thread, so the
// unroll does not matter there) would hold more than one block and a block in at most every
// second SM: the block merges (two trees a block, then the last block's merge of the partials)
// are one level shorter and twice the SMs fold. Tune, graph: exact f64 at 2^14 / 2^16, 256 x 4 on
// 32 / 128 blocks against 512 x 4 on 16 / 64: H200 4.07 / 4.20 against 4.37 / 4.46 us
// (docs/data/tune-exact-stats-h200-1128-2325.md), H100 4.09 / 4.26 against 4.44 / 4.48
// (docs/data/tune-h100-1128.md); at 2^18 (256 base blocks, more than one an SM) 5.49 against 4.92
// on the H200. f32 (256 x 8 in the tune) at 2^16 on 64 blocks: H200 4.22 against 4.32, H100
// 4.25 against 4.38; at 2^18 on 256 blocks 4.60 against 4.46 (H200). In the library on the H200
// (A/B, docs/data/ab-exact-small-shapes-h200-1129.md): f32 2^15-2^17 and f64 2^14-2^16 6-7% faster.
constexpr shape exact_half_shape() { return shape{256, 4, 2, 2}; }
constexpr bool exact_half_blocks(std::uint64_t base_blocks, std::uint64_t sms) {
  return base_blocks > 1 && 2 * base_blocks <= sms;
}

// The statistics (a block merge of two trees, ops_stats.cuh) likewise take blocks of half the
// threads where the base shape's grid would hold a block in at most every second SM: fewer warps
// in the block's trees and, for f64, more SMs folding. Where base's grid is one block, only if the
// narrow grid is one block too or spreads the fold over at least kStatsSplitBlocks blocks (a grid
// of a few blocks pays the partials' hand-over and a second merge for little folding saved).
// Tune, graph, H200 (2026-11-29 18:08 UTC, docs/data/tune-small-h200-1129.md), against the base
// shape at 2^10 / 2^12 / 2^14 / 2^16: f64 256 x 4 (80 registers, three blocks an SM) 1.99 / 2.63 /
// 3.90 / 4.32 us (256 x 8: 2.19 / 2.61 / 4.11 / 4.50; base 512 x 8: 2.62 / 3.04 / 4.77 / 4.87; at
// 2^18, past the window, on the base grid's 132 blocks, 6.70 against 5.54); f32 256 x 8 (96
// registers, two blocks an SM) 1.91 / 2.15 / 3.03 / 3.74 (base 512 x 4: 1.95 / 2.29 / 3.13 / 3.97;
// 256 x 4 1.83 / 2.06 / 3.56 / 3.64: its one block holds half of 2^14, which then takes 16
// blocks). f32 from 2^16 to the window's end (66 base blocks on 132 SMs: 135168 elements), in the
// library on the H200 (2026-11-29 20:45 UTC, docs/data/ab-exact-padded-h200-1129.md): 2^15 /
// 100000 / 2^17 elements 3.54 / 3.74 / 3.81 us against base's 3.85 / 3.93 / 3.96. In the library
// (`tally bench numerics --depth base` against the policy, twice each, H200 2026-11-29 18:31 UTC,
// docs/data/ab-small-shapes-h200-1129.md): f64 at 6144 / 8192 elements on 12 / 16 narrow blocks
// 3.67 / 3.70 us against one base block's 3.21 / 3.60, at 2^14 on 32 blocks 3.75 against 4.69. f32
// and f64; the other element types keep their shapes (not measured).
constexpr shape stats_narrow_shape(int elem_bytes) {
  return elem_bytes == 8 ? shape{256, 4, 2, 2} : shape{256, 8, 1, 2};
}
inline constexpr std::uint64_t kStatsSplitBlocks = 32;
// The exact sums' sparse-grid rule, and the one-block case on its own terms.
constexpr bool stats_narrow_blocks(std::uint64_t base_blocks, std::uint64_t narrow_blocks, std::uint64_t sms) {
  return exact_half_blocks(base_blocks, sms) ||
         (base_blocks == 1 && 2 <= sms && (narrow_blocks == 1 || narrow_blocks >= kStatsSplitBlocks));
}

// Elements one block consumes in one round of loads.
constexpr std::uint64_t round_elements(const shape& s, int elem_bytes) {
  return std::uint64_t(s.block) * s.unroll * (16 / elem_bytes);
}

// f32 exact sums and means that one round of one exact_half_shape block reads (4096 elements)
// take that block too: tune, graph, H200 (2026-11-29 18:08 UTC, docs/data/tune-small-h200-1129.md),
// 256 x 4 at 2^10 / 2^12 2.05 / 2.20 us against base's 512 x 4 2.07 / 2.45 (the fast sum 1.12 /
// 1.19); in the library (18:31 UTC, docs/data/ab-small-shapes-h200-1129.md) 1.93 / 2.10 against 1.97 / 2.33,
// but at two of its rounds (6144 / 8192 elements) 2.50 / 2.47 against 2.49 / 2.42. f64 in the
// tune: 2.26 / 2.97 against 2.27 / 2.89, not taken.
constexpr bool exact_half_single(int elem_bytes, std::uint64_t n) {
  return elem_bytes == 4 && n > 0 && n <= round_elements(exact_half_shape(), elem_bytes);
}

// The grid rule's run-time thresholds (policy.hpp sets them from the device's L2 size).
struct grid_policy {
  // From this many bytes up, the full resident grid; below, at most one block per SM.
  std::uint64_t full_grid_min_bytes = std::uint64_t(96) << 20;
  std::uint64_t full_grid_min_bytes_binary = std::uint64_t(8) << 20;  // two-input ops
};

// Whether a one-input exact sum of n elements takes the dynamic schedule on a GPU with l2_bytes
// of L2.
constexpr bool exact_dynamic(int elem_bytes, std::uint64_t n, std::uint64_t l2_bytes) {
  return n > 0 && n * std::uint64_t(elem_bytes) >= kExactDynamicL2Multiple * l2_bytes;
}
// The dynamic schedule's shape: f32/f16/bf16 (the round's grid test) 512 x 8 at one block per SM
// (122 registers, 64 KiB in flight): 94.0 / 99.8 / 100.6% of the fast sum at 2^26 / 2^28 / 2^30
// on the H100, 89.6 / 97.0 / 99.5% on the H200 (512 x 4 at two blocks spills at 64 registers:
// 81.5 / 91.7 / 93.4%). f64: its strided base shape (98.1 / 99.6 / 100.6% on the H100 at 2^26 /
// 2^28 / 2^29, strided 95.4 / 98.4 / 99.0).
constexpr shape exact_stream_shape(int elem_bytes) {
  return elem_bytes == 8 ? shape{512, 4, 2, 2} : shape{512, 8, 1, 2};
}

// The dynamic schedule of the one-pass kernel (device.cuh, reduce_kernel_dynamic) from this
// multiple of the L2 up (the bytes read; two inputs for dot), on GPUs whose measured entry says
// so (policy.hpp): the body is cut into chunks of whole rounds, a resident grid takes them from a
// counter, and each chunk's partial has its own slot, combined in chunk order, so the bits do not
// depend on which block took which chunk. Why: a chunk is one contiguous range, and the grid no
// longer waits for a slowest block. tally_layout_probe (src/bench/probes, graph replay, f32 sum,
// 2026-11-24): H100 2^28 / 2^30 340.2 / 1346.9 us against the strided 512x4 grid's 346.9 /
// 1385.4 (CUB 345.9 / 1384.3); H200 235.3 / 923.6 against 235.5 / 926.8 (CUB 234.5 / 921.6),
// and in the library slower than the strided grid there (docs/tuning.md). At 2^26 (5 L2s on
// the H100) it was within 0.5% of the strided grid, and below the L2 the strided grid wins:
// hence eight. The statistics (a block merge of two trees, custom_block) keep the strided
// schedule: once per chunk it cost more than the schedule saved (H100, stats f64 at 2^26: 226 us
// in 1-round chunks, 198.6 in 4-round ones, against 181.6 strided).
inline constexpr std::uint64_t kDynamicL2Multiple = 8;
// Heavy ops (the compensated sums) take chunks of at least this many rounds, so their merge
// runs less often: H100 compensated f32 at 2^26 / 2^28 / 2^30 89.0 / 341.7 / 1350.3 us against
// 89.0 / 347.6 / 1389.2 strided, f64 175.5 / 679.9 / 2711.8 against 175.4 / 693.5 / 2778.9 (in
// 1-round chunks f64 at 2^26 took 181.5).
inline constexpr std::uint64_t kHeavyChunkRounds = 4;
constexpr bool dynamic_schedule(std::uint64_t bytes, std::uint64_t l2_bytes) {
  return bytes > 0 && bytes >= kDynamicL2Multiple * l2_bytes;
}
// Its shape: a round of 512 x 16 vectors (128 KiB) at one block per SM for one-input ops was
// the fastest chunk in the probe on both GPUs (64 KiB chunks: H100 2^30 1358.8 us, H200 932.0;
// 32 KiB: 1402.5 / 1022.7); ops with a fold of their own and dot (two inputs) take 512 x 8 (H100,
// `tally bench numerics`: argmax f32 at 2^30 1347.3 us, CUB 1447.3; dot f32 2693.8, cuBLAS
// 2781.6).
// `deep`: 512 x 8 at two blocks an SM (four accumulators, two for 8-byte elements: eight spilled
// in the f32 min/max kernels at the 64-register cap), for GPUs whose SMs need more in flight
// than a one-block shape keeps: a lone block has nothing in flight while it merges its chunk and
// takes the next. `tally bench tune` on the
// H200 (2026-11-28 12:58 UTC, docs/data/tune-h200-1128.md): argmax f32 at 2^28 / 2^30 239.0 /
// 937.6 us against base's 289.6 / 985.6 (strided 240.0 / 949.1, CUB 243.0 / 957.4); f32 sum
// 237.3 / 935.6 against 239.0 / 935.5; on the H100 (2026-11-28 01:44 UTC) base was as fast or
// faster (f32 sum at 2^30 1349.4 against 1356.1). One-input ops with a light fold only
// (has_dynamic_deep): the heavy ones' registers do not fit two blocks an SM.
constexpr shape dynamic_shape(int elem_bytes, family f, depth d = depth::base) {
  if (d == depth::deep) return shape{512, 8, 2, elem_bytes == 8 ? 2 : 4};
  return f == family::plain ? shape{512, 16, 1, 8} : shape{512, 8, 1, 8};
}
constexpr bool has_dynamic_deep(family f, bool heavy) {
  return !heavy && (f == family::plain || f == family::folding);
}
// The chunks' partials fill at most this many bytes of a workspace's partial slots (every
// workspace, captured or not, has them), so a call cuts its body the same way wherever it runs.
inline constexpr std::uint64_t kChunkPartialBytes = std::uint64_t(256) << 10;
// The number of chunks for nvec 16-byte vectors, rounds of round_vecs, partials of acc_bytes:
// min_rounds per chunk while the partials fit, else as few rounds more as make them fit.
constexpr std::uint64_t dynamic_chunks(std::uint64_t nvec, std::uint64_t round_vecs, std::uint64_t acc_bytes,
                                       std::uint64_t min_rounds = 1) {
  const std::uint64_t rounds = (nvec + round_vecs - 1) / round_vecs;
  const std::uint64_t cap = kChunkPartialBytes / acc_bytes;
  const std::uint64_t fit = (rounds + cap - 1) / cap;
  const std::uint64_t per = fit > min_rounds ? fit : min_rounds;
  return rounds == 0 ? 1 : (rounds + per - 1) / per;
}

// Blocks to launch for n elements (binary ops: n per input) of elem_bytes with shape s on `sms`
// SMs fitting `per_sm` blocks each. Heavy ops (a fold that costs more than its load) are
// compute-bound while their input sits in L2: they take a block per vector per thread and the
// whole resident grid at every size (the exact f32 sum at 2^24 on an H200: 42 us on 132 blocks,
// 31 us on 264), where the plain ops keep one block per SM below the L2-sized threshold.
inline unsigned int grid_for(const shape& s, int elem_bytes, std::uint64_t n, bool binary, bool heavy,
                             std::uint64_t sms, std::uint64_t per_sm, std::uint64_t max_blocks, const grid_policy& g) {
  const std::uint64_t n_eff = binary ? 2 * n : n;
  if (n_eff <= round_elements(s, elem_bytes) * kSingleBlockRounds) return 1;
  const std::uint64_t per_block = std::uint64_t(s.block) * (heavy ? 1 : kVectorsPerThread) * (16 / elem_bytes);
  const std::uint64_t want = (n_eff + per_block - 1) / per_block;
  const std::uint64_t full_from = binary ? g.full_grid_min_bytes_binary : g.full_grid_min_bytes;
  const std::uint64_t cap = heavy || n_eff * elem_bytes >= full_from ? sms * per_sm : sms;
  return static_cast<unsigned int>(std::min({want, cap, max_blocks}));
}

}  // namespace tally::core
