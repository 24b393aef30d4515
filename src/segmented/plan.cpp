// The strategy rule of the segmented layer: from the shape (and, for ragged segments, the mean
// length) and the device's SM count. Deterministic: the same shape on the same GPU always gets
// the same plan, so results are the same bits run to run.
#include <algorithm>
#include <cstdint>
#include <string>

#include "problem.hpp"

namespace tally::seg {
namespace {

std::uint64_t ceil_div(std::uint64_t a, std::uint64_t b) { return (a + b - 1) / b; }
std::uint64_t pow2_floor(std::uint64_t x) {
  std::uint64_t p = 1;
  while (p * 2 <= x) p *= 2;
  return p;
}
std::uint64_t pow2_ceil(std::uint64_t x) {
  std::uint64_t p = 1;
  while (p < x) p *= 2;
  return p;
}
// Rows of whole blocks: 512-thread blocks from this many 16-byte vectors (16384 f32, two rounds
// of such a block); 256-thread blocks (four per SM) from kSmallBlockVectors (4096 f32, one round
// of 256 x 4 vectors), and from kFewRowsBlockVectors while the rows are fewer than one wave of
// 256-thread blocks (their warps would leave most of the GPU idle); shorter rows to lane groups.
// `tally bench segmented --sweep` on the H100 (2026-11-26 12:3x UTC, f32 sums, graph us; lane
// groups of 32 / 256-thread blocks / 512-thread blocks): 4096-element rows 4.37 / 2.18 / 2.39 (2^8
// rows), 26.8 / 22.9 / 30.5 (2^12), 355.6 / 340.4 / 406.4 (2^16); 8192-element rows 7.32 / 2.19 /
// 2.35 (2^7), 26.81 / 23.01 / 23.25 (2^11), 356.7 / 337.3 / 340.6 (2^15); 16384-element rows:
// 2.45 / 2.46 (2^6, blocks), 23.45 / 23.23 (2^10), 512 threads at 2^14; 2048-element rows 2.90 /
// 2.30 (2^9 rows), 24.63 / 26.96 (2^13), lane groups best at 2^17; 1024-element rows: lane groups
// at every count (2^10 rows: 2.28 / 3.56).
constexpr std::uint64_t kBlockSegmentVectors = 32 * 4 * 32;
constexpr std::uint64_t kSmallBlockVectors = kBlockSegmentVectors / 4;
constexpr std::uint64_t kFewRowsBlockVectors = kBlockSegmentVectors / 8;
// Row tiles take eight steps in flight (plan.unroll) where each resident warp of the rule's count
// has at least this many rounds of four steps: H100 sweep, 2026-11-26 14:0x UTC (graph us, four /
// eight steps): 2^24 rows of 16 f32 394.6 / 387.1, 2^22 rows of 64 383.5 / 377.1 (99 and 25
// rounds); 2^20 rows of 16 26.36 / 27.45, 2^18 rows of 64 25.78 / 27.28 (6 and 2 rounds). Ops with
// larger accumulators and dot keep four (their registers). The rounds are counted on the rule's
// warps (max_threads_per_sm / 32 per SM); the eight-step kernel holds 32 (f32 sum: 64 registers,
// four blocks), so each of its warps runs about twice the counted rounds. Ops whose combine
// commutes exactly (sums, means: device_limits::commutes) reduce-scatter their steps instead of a
// shuffle tree per step and a gather, and keep four steps: H100 sweep, 17:4x UTC (graph us, four /
// eight steps): 2^24 rows of 16 f32 380.6 / 400.5, 2^22 rows of 64 373.2 / 415.4 (eight steps
// then need 80 registers, three blocks an SM; capped at 64 they spill).
constexpr std::uint64_t kRowTileEightRounds = 16;
// Few rows (see make_plan) of at least this many vectors take lane groups rather than row tiles;
// of twice as many, eight vectors a lane with all their loads in flight.
constexpr std::uint64_t kFewRowsGroupVectors = 16;
constexpr int kRowTileEightMaxAcc = 8;
// Rows shorter than this many vectors get no split-block candidates in the sweep.
constexpr std::uint64_t kSplitMinCandidateVectors = 32;
// A block of the split kernel should keep at least this many rounds of its 4 loads per thread.
constexpr std::uint64_t kMinRoundsPerBlock = 4;
// Exact sums over at most this many segments, each at least this long, run as 1-D launches.
constexpr std::uint64_t kExactLaunchesMax = 64;
constexpr std::uint64_t kExactLaunchMinElems = std::uint64_t(1) << 22;
// A lane group reads at most this many rounds of 4 vectors per lane of a ragged segment; longer
// segments go to a whole warp, then (past a chunk) to blocks.
constexpr std::uint64_t kGroupRounds = 8;
// Ragged spans in the rule: at least this many batches of 32 segments for each warp of half the
// GPU's threads; windows of kSpanRuleWindow bytes, a lane per segment of up to kSpanRuleLaneBytes,
// the warp folding longer ones within a chunk from the windows.
constexpr std::uint64_t kSpanBatchesPerWarp = 4;
constexpr std::uint64_t kSpanRuleWindow = std::uint64_t(16) << 10, kSpanRuleLaneBytes = std::uint64_t(1) << 10;
// Ragged stripes in the rule: segments of a mean of at most this many elements.
constexpr std::uint64_t kStripeRuleMaxMean = 4096;
// Ragged inputs of at most this many bytes run in one launch (fill_once) where pieces do not.
constexpr std::uint64_t kOnceRuleMaxInputBytes = std::uint64_t(8) << 20;
// and at most this many segments a tile of kTileElems on average (a mean of at least 16 elements;
// the measured shapes have 64: docs/tuning.md, "Ragged segments in one launch").
constexpr std::uint64_t kOnceRuleMaxSegmentsPerTile = 256;
// Rows of at most this many 16-byte vectors (a power of two) run as row tiles.
constexpr std::uint64_t kRowTileVectors = 16;
// Row tiles and lane groups take a flat grid (make_flat) where it holds at least this many waves of
// the rule's resident grid (sms x 8 blocks of 256 threads; on 132 SMs 2112 blocks): rows of 16 f32
// from 540,417 (row tiles of four lanes a row, 256 rows a block), of 256 from 33,777 (lane groups of
// 16, 16 rows a block). `tally bench segmented --sweep-only --sweep-forms rows` (H200, 2026-11-29
// 22:22 UTC, docs/data/segmented-sweep-h200-rows-flat-1129.md), f32 sums, graph us, flat against
// resident: at 2^24 elements 2^20 x 16 (row tiles, 4096 flat blocks) 17.89 / 18.38, 2^16 x 256
// (g16) 17.88 / 18.37, 2^15 x 512 (g32) 17.71 / 18.20, 2^17 x 128 (g8) 18.24 / 18.75; at 2^28 2^24 x
// 16 260.1 (91.1% of the read ceiling), 2^20 x 256 246.0 / 254.1, 2^19 x 512 242.4 / 249.7, 2^18 x
// 1024 238.1 / 245.1, 2^21 x 128 253.1 / 262.6: lane groups and row tiles of 4 vectors (and of 2,
// in tally_rows_probe: flat_blocks) 2-4% faster at every shape measured; row tiles of 16 vectors
// were not (2^22 x 64 at 2^28, 22:30 UTC: 300.1 flat against 294.9): they keep the resident grid,
// and one-input ops' rows of 16 vectors take lane groups there instead (groups_flat in make_plan).
// Only f32 sums were measured (and dot_rows of 16 and 256 f32 in the table); the other types and
// ops take the same grids for the same reason (their results' writes). Grids of two to four waves
// were not measured (2^20 elements give one wave or less: the same grid either way; 2^24 about
// four).
constexpr std::uint64_t kRowFlatWaves = 2;
// Ragged chunks: about eight per resident block of the chunk kernel, 16 KiB to 64 KiB of input
// (a warp reads a middle segment alone, at a few GB/s: past a chunk, blocks share the work).
constexpr std::uint64_t kChunkMinBytes = std::uint64_t(16) << 10, kChunkMaxBytes = std::uint64_t(64) << 10;
constexpr std::uint64_t kChunksPerBlock = 8;
// Ragged pieces (few segments): about this many pieces per SM, of 8 KiB to 32 KiB of input, for
// inputs of at most kPiecesMaxInputBytes. `tally bench segmented --sweep` on the H100 (2026-11-26
// 19:0x UTC, docs/data/segmented-sweep-h100-ragged-pieces-first.md, f32 sums, graph us; pieces of
// 4 / 8 / 16 / 32 / 64 / 128 KiB, the lane groups' best candidate): 2^20 elements in 2^8
// segments 9.95 / 6.83 / 6.69 / 7.00 / 7.06 / 7.53, lane groups 14.6; 2^20 in 2^10 13.92 / 11.65
// / 11.09 / 10.50 / 10.65 / 10.41, lane groups 14.82 (16 KiB is 6% behind the best there, 3%
// ahead at 2^8); 2^24 in 2^10 105.0 / 61.8 / 41.0 / 33.6 / 36.8 / 36.2, lane groups 50.9; 2^28
// in 2^10 2001 / 1078 / 598 / 453 / 397 / 376, lane groups and chunks 354.6 (98% of the read
// ceiling: there the chunks' own blocks, 512 threads, a block per chunk, read better than
// persistent blocks looping pieces). The rule's picks again at 19:16 UTC
// (docs/data/segmented-sweep-h100-ragged-pieces.md): within 0.1 us of these.
constexpr std::uint64_t kPiecesPerSm = 1;
constexpr std::uint64_t kPiecesMinBytes = std::uint64_t(8) << 10, kPiecesMaxBytes = std::uint64_t(32) << 10;
constexpr std::uint64_t kPiecesMaxInputBytes = std::uint64_t(64) << 20;
// Column tiles sharing an axis: at most this many partials per tile for its last block to combine,
// and at least this many rows per lane along the axis.
constexpr std::uint64_t kTilePartials = std::uint64_t(16) << 10;
// The same for the lean columns kernel, whose shares read at four blocks an SM, so that the last
// block's combine is a larger part of a call: column sweep, H200, 2026-11-29 05:32 UTC
// (docs/data/segmented-sweep-h200-columns-lean-1129.md, f32 sum, graph us): 2^16 x 256 at 2^24
// c8 x33 18.51 (1056 partials a tile) against c16 x66 18.98 (4224); 2^12 x 256 at 2^20 c16 x16
// 4.02 against c32 x64 4.64 (8192).
constexpr std::uint64_t kLeanTilePartials = std::uint64_t(2) << 10;
// With the lean columns kernel, the thin kernel takes long axes only where the results number
// this many times the resident threads (else every one of them): 2^8 x 2^20 at 2^28 read 249.3 us
// as thin, 238.4 as lean c32 tiles (the same sweep; torch's column sum 240.5).
constexpr std::uint64_t kThinLeanItemsPerThread = 2;
// And lean tiles a block each narrow while they number fewer than this many waves of the lean
// kernel (but at least one): 2^8 x 2^20 c256 243.9 us (1024 tiles, two waves), c64 241.9, c32
// 238.4, c16 238.0 (the same sweep); 2^12 x 2^16 keeps c64 (256 tiles, under a wave: 235.4
// against c16's 238.8).
constexpr std::uint64_t kLeanTileWaves = 8;
constexpr std::uint64_t kColumnRowsPerLane = 8;
constexpr std::uint64_t kColumnWaves = 2;
// What the combine of a tile shared by several blocks costs, in rounds of kColumnLoads loads per
// lane (H100, 2^20 elements: about 2.4 us against 0.45 us a round).
constexpr std::uint64_t kCombineRounds = 4;
// Thin column plans: axes up to this long always (lanes along the axis would only add a combine),
// longer ones when the results give every resident thread its own; a grid of at most this many
// blocks (each thread loops over the rest).
constexpr std::uint64_t kThinLength = 16;
constexpr std::uint64_t kThinMaxBlocks = std::uint64_t(1) << 20;

// The kernel with two rounds of loads in flight (seg_columns_ring_kernel: 16-byte loads) exists
// for 4-byte elements and accumulators only (launch.cuh: kColumnRing); the rule, the candidates
// and the refusal of forced plans all ask here.
bool column_ring_fits(bool vec, int elem_bytes, int acc_bytes) { return vec && elem_bytes == 4 && acc_bytes == 4; }

// The lean columns kernel's tiles x shares (its grid: a block a work item) for tiles of cv vectors.
std::uint64_t column_lean_work(const problem& p, int elem_bytes, int acc_bytes, std::uint64_t cv, std::uint64_t per) {
  const std::uint64_t cpt = cv * static_cast<std::uint64_t>(vector_results(elem_bytes, acc_bytes));
  return p.outer * ceil_div(p.inner, cpt) * per;
}
// Whether the lean columns kernel takes column tiles of cv vectors, `per` blocks a tile: a plain
// op whose lean kernel fits its registers here (d.columns_lean), 16-byte loads, and counts that fit
// its 32-bit indices (its blocks, the axis plus the shares (an empty share's first row), the results
// of an outer slice and its first result past them: under 2^31).
bool column_lean_fits(const problem& p, bool vec, int elem_bytes, int acc_bytes, std::uint64_t cv, std::uint64_t per,
                      const device_limits& d) {
  constexpr std::uint64_t kMax = std::uint64_t(1) << 31;
  const std::uint64_t cpt = cv * static_cast<std::uint64_t>(vector_results(elem_bytes, acc_bytes));
  return d.columns_lean && vec && !p.contiguous() && !p.ragged() && !p.binary() && cv >= 1 && per >= 1 &&
         p.length + per < kMax && p.inner + cpt < kMax && column_lean_work(p, elem_bytes, acc_bytes, cv, per) < kMax;
}
void make_column_lean(plan& r, const problem& p, int elem_bytes, int acc_bytes) {
  r.col_lean = true;
  r.blocks = static_cast<unsigned>(
      column_lean_work(p, elem_bytes, acc_bytes, static_cast<std::uint64_t>(r.col_vecs), r.per_seg));
  r.why += ", the lean kernel (plain op, 32-bit counts, a block a tile's share) at " +
           std::to_string(kColumnsLeanBlocksPerSm) + " blocks an SM";
}

// A column-tiles plan: tiles of cv vectors of results (16-byte vectors when vec), per blocks
// sharing each tile's axis, a grid of at most four waves of resident blocks.
void fill_columns(plan& r, const problem& p, bool vec, std::uint64_t per_vec, std::uint64_t cv, std::uint64_t per,
                  std::uint64_t resident) {
  r.how = strategy::columns;
  r.vec = vec;
  r.col_vecs = static_cast<int>(cv);
  const std::uint64_t lanes = kColumnsBlock / cv;
  const std::uint64_t cols_per_tile = cv * per_vec;
  const std::uint64_t tiles = p.outer * ceil_div(p.inner, cols_per_tile);
  r.per_seg = static_cast<unsigned>(per);
  r.blocks = static_cast<unsigned>(std::min<std::uint64_t>(tiles * per, resident * 4));
  r.resident = static_cast<unsigned>(resident);
  r.why = "inner " + std::to_string(p.inner) + ", axis stride " + std::to_string(p.length_stride) + ": tiles of " +
          std::to_string(cols_per_tile) + " results x " + std::to_string(lanes) + " lanes along the axis" +
          (vec ? ", 16-byte loads" : ", element loads (rows not 16-byte aligned)") +
          (per > 1 ? ", " + std::to_string(per) + " blocks per tile" : "");
}
// A thin plan: a thread per `m` vectors of results.
void fill_thin(plan& r, const problem& p, bool vec, std::uint64_t per_vec, int m, std::uint64_t items, int elem_bytes) {
  r.how = strategy::thin;
  r.vec = vec;
  r.group = m;
  const std::uint64_t threads = ceil_div(items, static_cast<std::uint64_t>(m));
  r.blocks = static_cast<unsigned>(std::min<std::uint64_t>(ceil_div(threads, kColumnsBlock), kThinMaxBlocks));
  r.why = "inner " + std::to_string(p.inner) + ", axis " + std::to_string(p.length) + " (stride " +
          std::to_string(p.length_stride) + "): a thread per " + (m > 1 ? std::to_string(m) + " vectors" : "vector") +
          " of " + std::to_string(per_vec) + " results down the axis" +
          (vec ? ", " + std::to_string(per_vec * static_cast<std::uint64_t>(elem_bytes)) + "-byte loads"
               : std::string(", element loads (rows not 16-byte aligned)"));
}
// Resident blocks of the columns kernel on the whole GPU (the occupancy the launcher asked for, or
// max_threads_per_sm / kColumnsBlock per SM where unknown).
std::uint64_t columns_resident(const device_limits& d) {
  const std::uint64_t bps = d.columns_blocks_per_sm > 0 ? static_cast<std::uint64_t>(d.columns_blocks_per_sm)
                                                        : static_cast<std::uint64_t>(std::max(1, d.max_threads_per_sm / kColumnsBlock));
  return static_cast<std::uint64_t>(std::max(1, d.sm_count)) * bps;
}
bool columns_vec(const problem& p, int elem_bytes) {
  const std::uint64_t vn = 16 / static_cast<std::uint64_t>(elem_bytes);
  return p.aligned16 && p.inner % vn == 0 && (p.length_stride * elem_bytes) % 16 == 0 &&
         (p.outer_stride * elem_bytes) % 16 == 0;
}

// Lane groups of `g` lanes (1..32) per segment: the group kernel's grid for `segments`.
void fill_group(plan& r, std::uint64_t segments, std::uint64_t length, int g, std::uint64_t sms, const device_limits& d) {
  r.how = strategy::group;
  r.group = g;
  const std::uint64_t threads = std::max<std::uint64_t>(1, segments) * static_cast<std::uint64_t>(g);
  const std::uint64_t resident = sms * static_cast<std::uint64_t>(std::max(1, d.max_threads_per_sm / kGroupBlock));
  r.blocks = static_cast<unsigned>(std::min<std::uint64_t>(ceil_div(threads, kGroupBlock), resident));
  r.why = std::to_string(g) + " lane(s) per segment of " + std::to_string(length) + " elements";
}
// A row tile: a lane per vector of rows of nvec vectors (a power of two, at most 16).
void fill_rowtile(plan& r, std::uint64_t segments, std::uint64_t length, std::uint64_t nvec, std::uint64_t sms,
                  const device_limits& d) {
  r.how = strategy::rowtile;
  r.group = static_cast<int>(nvec);
  const std::uint64_t threads = ceil_div(std::max<std::uint64_t>(1, segments), 4) * r.group;
  const std::uint64_t resident = sms * static_cast<std::uint64_t>(std::max(1, d.max_threads_per_sm / kGroupBlock));
  r.blocks = static_cast<unsigned>(std::min<std::uint64_t>(ceil_div(threads, kGroupBlock), resident));
  r.why = std::to_string(r.group) + " lane(s) per row of " + std::to_string(length) +
          " elements, one 16-byte vector each: 512 contiguous bytes per warp load";
}
// The blocks of a flat grid (`plan::flat`; make_flat) of a row-tile or lane-group kernel over
// `segments` rows: a block for each share of rows its warps take in one pass (a warp's U steps of
// 32 / m rows for row tiles, 32 / g rows for lane groups), so every block reads its rows once and
// blocks start in the input's order. Why: rows that write a result for every few vectors read
// (2^24 x 16 f32: 64 MiB of results for 1 GiB) are bound by memory's mix of reads and writes, and
// a resident grid's blocks drift apart over their rounds. tally_rows_probe (H200, 2026-11-29 22:00
// UTC, docs/data/rows-probe-short-h200-1129-2200.txt), the row-tile kernel's body on a resident
// grid against a block each, graph us: 2^24 x 16 262.3 against 258.9 (the reads alone, no stores:
// 234.4), 2^24 x 8 139.8 against 136.5, 2^22 x 16 67.3 against 66.2; tally's kernel on its
// resident grid 264.7 / 139.4 / 67.8.
std::uint64_t flat_share(strategy how, int group, int unroll) {  // rows a block
  const std::uint64_t g = static_cast<std::uint64_t>(std::max(1, group));
  const std::uint64_t per_warp = how == strategy::rowtile ? (32 / g) * static_cast<std::uint64_t>(unroll) : 32 / g;
  return per_warp * static_cast<std::uint64_t>(kGroupBlock / 32);
}
std::uint64_t flat_blocks(strategy how, int group, int unroll, std::uint64_t segments) {
  return ceil_div(std::max<std::uint64_t>(1, segments), flat_share(how, group, unroll));
}
// The plan as its flat grid; false (the plan unchanged) where that grid would pass 2^31 - 1 blocks.
bool flat_grid(plan& r, std::uint64_t segments) {
  const std::uint64_t blocks = flat_blocks(r.how, r.group, r.unroll, segments);
  if (blocks > 0x7fffffffull) return false;
  r.flat = true;
  r.blocks = static_cast<unsigned>(blocks);
  r.why += ", a block for each " + std::to_string(flat_share(r.how, r.group, r.unroll)) + " rows (a flat grid, not a resident one)";
  return true;
}
// Whether a flat grid of these kernel parameters fits and holds at least `waves` of the rule's
// resident grid (no plan built: make_plan asks on every call).
bool flat_waves(strategy how, int group, int unroll, std::uint64_t segments, std::uint64_t sms, const device_limits& d,
                std::uint64_t waves) {
  const std::uint64_t blocks = flat_blocks(how, group, unroll, segments);
  const std::uint64_t wave = sms * static_cast<std::uint64_t>(std::max(1, d.max_threads_per_sm / kGroupBlock));
  return blocks <= 0x7fffffffull && blocks >= waves * wave;
}
bool flat_waves(const plan& r, std::uint64_t segments, std::uint64_t sms, const device_limits& d, std::uint64_t waves) {
  return flat_waves(r.how, r.group, r.unroll, segments, sms, d, waves);
}

// Blocks of `block` threads of the split kernel, `per` of them per segment.
void fill_split(plan& r, std::uint64_t segments, std::uint64_t length, std::uint64_t per, int block, std::uint64_t sms,
                const device_limits& d) {
  r.how = strategy::split;
  r.per_seg = static_cast<unsigned>(per);
  r.split_block = block;
  const std::uint64_t resident = sms * static_cast<std::uint64_t>(std::max(1, d.max_threads_per_sm / block));
  r.blocks = static_cast<unsigned>(std::min<std::uint64_t>(segments * per, resident * 8));
  r.why = (per > 1 ? std::to_string(per) + " blocks" : std::string("a block")) + " of " + std::to_string(block) +
          " threads per segment of " + std::to_string(length) + " elements";
}

// Whether the lean split kernel takes these rows: a plain op, a block a row of whole aligned
// 16-byte vectors (any length: rows of many rounds are sweep candidates), counts that fit its
// 32-bit indices (rows under 2^31, so that a block's next row, s + grid, never wraps).
bool lean_split_fits(const problem& p, int elem_bytes, std::uint64_t per, int block, const device_limits& d) {
  const std::uint64_t eb = static_cast<std::uint64_t>(elem_bytes), vn = 16 / eb;
  return d.split_lean && !p.binary() && per == 1 && block == kSplitBlockSmall && p.contiguous() && !p.ragged() &&
         p.aligned16 && p.length % vn == 0 && (p.outer_stride * eb) % 16 == 0 && p.outer < (std::uint64_t(1) << 31) &&
         p.length / vn < (std::uint64_t(1) << 31);
}
void make_lean(plan& r) {
  r.split_lean = true;
  r.why += ", the lean kernel (whole aligned vectors, 32-bit indices) at " +
           std::to_string(kSplitLeanThreadsPerSm / kSplitBlockSmall) + " blocks an SM";
}

// Ragged segments: lane groups of g lanes up to kGroupRounds rounds of four vectors a lane, a warp
// up to a chunk of chunk_bytes of input, longer segments in chunks (a block each); u loads in
// flight per lane of the groups (4 or 8, the same bits). The chunk grows where the workspace
// would not hold a partial per chunk.
void fill_ragged(plan& r, const problem& p, int g, std::uint64_t chunk_bytes, int u, bool tiles, int elem_bytes,
                 int acc_bytes, std::uint64_t sms, const device_limits& d) {
  const std::uint64_t vn = 16 / static_cast<std::uint64_t>(elem_bytes), eb = static_cast<std::uint64_t>(elem_bytes);
  const std::uint64_t segments = p.outer, mean = segments ? p.n / segments : 0;
  r.how = strategy::ragged;
  r.group = g;
  r.unroll = u;
  r.short_max = std::uint64_t(g) * 4 * vn * kGroupRounds;
  r.chunk = std::max<std::uint64_t>(1, chunk_bytes / eb);
  const std::uint64_t max_chunks = std::max<std::uint64_t>(1, d.partial_bytes / ragged_chunk_bytes(acc_bytes));
  if (ceil_div(p.n, r.chunk) > max_chunks) r.chunk = ceil_div(p.n, max_chunks);
  r.chunks = std::max<std::uint64_t>(1, ceil_div(p.n, r.chunk));
  r.short_max = std::min(r.short_max, r.chunk);
  // Tiles where the workspace holds their entries besides the chunks' (one op's inputs only).
  const std::uint64_t ntiles = std::max<std::uint64_t>(1, ceil_div(p.n, static_cast<std::uint64_t>(kTileElems)));
  r.tiles = tiles && tiles_fit(p, r.chunk) && (r.chunks + ntiles) * ragged_chunk_bytes(acc_bytes) <= d.partial_bytes ? ntiles : 0;
  const std::uint64_t threads = std::max<std::uint64_t>(1, segments) * static_cast<std::uint64_t>(g);
  const std::uint64_t resident = sms * static_cast<std::uint64_t>(std::max(1, d.max_threads_per_sm / kGroupBlock));
  r.blocks = static_cast<unsigned>(std::min<std::uint64_t>(ceil_div(threads, kGroupBlock), resident));
  if (r.tiles > 0)
    r.why = std::to_string(r.tiles) + " tiles of " + std::to_string(kTileElems) +
            " elements, a block each, for segments up to " + std::to_string(r.chunk) + " elements (mean " +
            std::to_string(mean) + "); longer ones in chunks of " + std::to_string(r.chunk) +
            " elements, a block each; offsets out of order: " + std::to_string(g) + " lane(s) per segment";
  else
    r.why = std::to_string(g) + " lane(s) per segment up to " + std::to_string(r.short_max) + " elements (mean " +
            std::to_string(mean) + "), a warp up to " + std::to_string(r.chunk) + ", longer ones in chunks of " +
            std::to_string(r.chunk) + " elements, a block each";
}

// The warps of half the GPU's threads (the spans' measure of segments filling the GPU).
std::uint64_t half_gpu_warps(std::uint64_t sms, const device_limits& d) {
  return std::max<std::uint64_t>(1, sms * static_cast<std::uint64_t>(std::max(32, d.max_threads_per_sm)) / 64);
}

// Ragged spans: the span kernel, a warp per span_segs segments copying the elements they cover
// through a window of win_bytes of shared memory; a lane folds a segment of up to lane_bytes of
// input, the warp longer ones up to a chunk (with `mid`, from the windows), blocks the rest
// (fill_ragged's chunks); offsets out of order: g lanes a segment. A warp takes 32 segments at a
// time where that leaves at least half the GPU's threads (as warps) a batch each, fewer (down to
// 4) where the segments are fewer.
void fill_span(plan& r, const problem& p, int g, std::uint64_t chunk_bytes, std::uint64_t win_bytes,
               std::uint64_t lane_bytes, bool mid, int elem_bytes, int acc_bytes, std::uint64_t sms,
               const device_limits& d) {
  fill_ragged(r, p, g, chunk_bytes, 4, false, elem_bytes, acc_bytes, sms, d);
  const std::uint64_t eb = static_cast<std::uint64_t>(elem_bytes), segments = p.outer;
  const std::uint64_t half_warps = half_gpu_warps(sms, d);
  r.span = win_bytes;
  r.span_segs = static_cast<int>(std::min<std::uint64_t>(32, std::max<std::uint64_t>(4, pow2_floor(std::max<std::uint64_t>(1, segments / half_warps)))));
  r.short_max = std::min(r.chunk, std::max<std::uint64_t>(1, lane_bytes / eb));
  const std::uint64_t threads = ceil_div(std::max<std::uint64_t>(1, segments), static_cast<std::uint64_t>(r.span_segs)) * 32;
  const std::uint64_t resident = sms * static_cast<std::uint64_t>(std::max(1, d.max_threads_per_sm / kSpanBlock));
  r.blocks = static_cast<unsigned>(std::min<std::uint64_t>(ceil_div(threads, kSpanBlock), resident));
  r.why = "a warp per " + std::to_string(r.span_segs) + " segments through a " + std::to_string(win_bytes) +
          "-byte window, a lane per segment up to " + std::to_string(r.short_max) + " elements (mean " +
          std::to_string(segments ? p.n / segments : 0) + "), a warp up to " + std::to_string(r.chunk) +
          ", longer ones in chunks of " + std::to_string(r.chunk) + " elements, a block each; offsets out of order: " +
          std::to_string(g) + " lane(s) per segment";
  r.span_mid = mid;
  if (mid) r.why += "; longer segments within a chunk folded by the warp from the windows";
}

// Ragged stripes: warps of the stripe kernel reading equal stripes of the input, whole tiles of
// kTileElems each, `per` stripes a resident warp of the kernel (eight blocks of four warps an
// SM); fill_ragged's tiles size the workspace (the per-tile entries hold the stripes' partials;
// no partition: a warp searches the begins for its stripe's first segment). Offsets out of
// order: g lanes a segment. False where the tiles do not fit (their segment count or the
// workspace) or the input is empty.
bool fill_stripes(plan& r, const problem& p, int g, std::uint64_t per, int elem_bytes, int acc_bytes, std::uint64_t sms,
                  const device_limits& d) {
  fill_ragged(r, p, g, kTileMaxChunk * static_cast<std::uint64_t>(elem_bytes), 4, true, elem_bytes, acc_bytes, sms, d);
  if (r.tiles == 0 || p.n == 0) return false;
  const std::uint64_t tile = static_cast<std::uint64_t>(kTileElems);
  const std::uint64_t warps = sms * static_cast<std::uint64_t>(kStripeWarpsPerSm) * per;
  r.stripe = ceil_div(ceil_div(p.n, warps), tile) * tile;
  const std::uint64_t stripes = ceil_div(p.n, r.stripe);
  r.blocks = static_cast<unsigned>(ceil_div(stripes, static_cast<std::uint64_t>(kStripeBlock / 32)));
  r.why = std::to_string(stripes) + " stripes of " + std::to_string(r.stripe) +
          " elements, a warp each, segments of any length (mean " + std::to_string(p.outer ? p.n / p.outer : 0) +
          "); offsets out of order: " + std::to_string(g) + " lane(s) per segment";
  return true;
}

// Ragged segments in one launch: the tiles of fill_ragged with a chunk of kTileMaxChunk elements
// (no segment of an input of at most that many is long: no chunks), every phase in one
// cooperative grid of at most kOnceBlocksPerSm blocks an SM and a block a tile (the launcher
// holds it to the blocks an SM really holds). Offsets out of order: a warp a segment (`group`,
// g, is only the lane groups' rule, which forced plans are checked against). False where the
// tiles do not fit, or the input is empty or longer than a chunk.
bool fill_once(plan& r, const problem& p, int g, int elem_bytes, int acc_bytes, std::uint64_t sms, const device_limits& d) {
  fill_ragged(r, p, g, kTileMaxChunk * static_cast<std::uint64_t>(elem_bytes), 4, true, elem_bytes, acc_bytes, sms, d);
  if (r.tiles == 0 || p.n == 0 || p.n > r.chunk) return false;
  r.how = strategy::once;
  r.blocks = static_cast<unsigned>(std::min<std::uint64_t>(r.tiles, sms * kOnceBlocksPerSm));
  r.why = "one launch: the offset check, " + std::to_string(r.tiles) + " tiles of " + std::to_string(kTileElems) +
          " elements (mean segment " + std::to_string(p.outer ? p.n / p.outer : 0) +
          "), the crossing segments' fix-up, joined by grid barriers; offsets out of order: a warp a segment";
  return true;
}

// Ragged pieces: segments cut into pieces of chunk_bytes of input from their starts, a block per
// piece; the piece grows where the workspace would not hold a partial per piece.
void fill_pieces(plan& r, const problem& p, std::uint64_t chunk_bytes, int elem_bytes, int acc_bytes,
                 std::uint64_t sms, const device_limits& d) {
  const std::uint64_t vn = 16 / static_cast<std::uint64_t>(elem_bytes), segments = p.outer;
  r.how = strategy::pieces;
  r.group = kPiecesBlock;
  // Whole 16-byte vectors' worth of elements (a segment's pieces share its alignment).
  r.chunk = std::max<std::uint64_t>(vn, chunk_bytes / static_cast<std::uint64_t>(elem_bytes) / vn * vn);
  const std::uint64_t slots = std::max<std::uint64_t>(1, d.partial_bytes / static_cast<std::uint64_t>(std::max(acc_bytes, 1)));
  if (ceil_div(p.n, r.chunk) + segments > slots && slots > segments)
    r.chunk = ceil_div(ceil_div(p.n, slots - segments), vn) * vn;
  r.chunks = ceil_div(p.n, r.chunk) + segments;
  const std::uint64_t resident = sms * static_cast<std::uint64_t>(std::max(1, d.max_threads_per_sm / kPiecesBlock));
  r.blocks = static_cast<unsigned>(std::min<std::uint64_t>(r.chunks, resident));
  r.why = std::to_string(segments) + " segments (mean " + std::to_string(segments ? p.n / segments : 0) +
          " elements) in pieces of " + std::to_string(r.chunk) + " elements, a block each, one launch";
}
// Whether a ragged problem may run as pieces: few segments (each block reads all their offsets,
// each has a workspace counter) and a partial per piece in the workspace.
bool pieces_fit(const problem& p, int acc_bytes, const device_limits& d) {
  const std::uint64_t slots = d.partial_bytes / static_cast<std::uint64_t>(std::max(acc_bytes, 1));
  return p.ragged() && !p.binary() && p.outer >= 1 && p.outer <= kPiecesMaxSegments && p.outer <= d.max_tiles &&
         2 * p.outer <= slots;
}

// The pieces' size: about kPiecesPerSm pieces a SM, kPiecesMinBytes to kPiecesMaxBytes of input.
std::uint64_t pieces_bytes(const problem& p, int elem_bytes, std::uint64_t sms) {
  const std::uint64_t bytes = pow2_floor(std::max<std::uint64_t>(1, p.n * static_cast<std::uint64_t>(elem_bytes) / (kPiecesPerSm * sms)));
  return std::min(std::max(bytes, kPiecesMinBytes), kPiecesMaxBytes);
}

}  // namespace

// The ragged rule of lane groups, warps and chunks (any number of segments).
plan ragged_groups_plan(const problem& p, int elem_bytes, int acc_bytes, const device_limits& d) {
  plan r;
  const std::uint64_t vn = 16 / static_cast<std::uint64_t>(elem_bytes);
  const std::uint64_t sms = static_cast<std::uint64_t>(std::max(1, d.sm_count));
  const std::uint64_t segments = p.outer;
  const std::uint64_t nvec = (segments ? p.n / segments : 0) / vn;  // of the mean length
  // Balanced by elements: a heavy tail puts most of the data in a few segments far longer
  // than the mean, so lane groups take the short ones, warps the middle ones and blocks cut
  // the long ones into chunks. A lane takes about eight vectors of a segment of the mean
  // length (two rounds of four loads; until 2026-11-27 four rounds, one lane a segment of 64 f32
  // elements, which read lengths uniform on 0-128 at 45% of the ceiling at 2^28: below).
  // Segments whose lane groups would hold less than half the
  // GPU's threads get wider groups, up to that half, and eight loads in flight (as few rows
  // do): `tally bench segmented --sweep` on the H100 (2026-11-26 16:05 UTC, f32 sums, graph
  // us, 2^20 elements): 2^14 segments of mean 64, one lane 21.2, eight lanes 16.1, with eight
  // loads 15.5; 2^8 of mean 4096, 32 lanes 15.7, with eight loads 14.6; at 2^24, 2^12 of mean
  // 4096 46.6 / 45.6; where the groups fill the GPU, eight loads were slower (2^16 segments at
  // 2^28: 394 / 402).
  int g = static_cast<int>(std::min<std::uint64_t>(32, pow2_floor(std::max<std::uint64_t>(1, nvec / 8))));
  const std::uint64_t half_gpu = sms * static_cast<std::uint64_t>(std::max(1, d.max_threads_per_sm)) / 2;
  const bool few = std::max<std::uint64_t>(1, segments) * static_cast<std::uint64_t>(g) <= half_gpu;
  while (few && g < 32 && std::max<std::uint64_t>(1, segments) * static_cast<std::uint64_t>(2 * g) <= half_gpu) g *= 2;
  const std::uint64_t eb = static_cast<std::uint64_t>(elem_bytes);
  const std::uint64_t resident_chunk = sms * std::max(1, d.max_threads_per_sm / kChunkBlock);
  std::uint64_t bytes = pow2_floor(std::max<std::uint64_t>(1, p.n * eb / (kChunksPerBlock * resident_chunk)));
  bytes = std::min(std::max(bytes, kChunkMinBytes), kChunkMaxBytes);
  // Short segments (a mean under 32 vectors) filling the GPU: chunks of at least the input over
  // the resident chunk blocks, up to 64 KiB (from 2^24 f32 elements on 132 SMs), so that a warp,
  // not the chunk kernel, takes the middle segments of a tail. Tiles stay a sweep candidate: they
  // lead on heavy tails where the lane groups fill the GPU a few times at most, and trail on light
  // ones. `tally bench segmented --sweep-only --sweep-forms ragged,ragged-uniform`, f32 sums,
  // graph us, Pareto lengths / uniform on 0-128, two lanes with 64 KiB chunks (the rule), one
  // lane with 64 KiB, tiles at their best chunk, and the best candidate (H100 2026-11-27 00:08 UTC,
  // docs/data/segmented-sweep-h100-ragged-lanes.md; H200 00:03 UTC, -h200-ragged-lanes.md):
  //   H100 2^24 in 2^18: 61.7 / 44.4, 66.2 / 51.0, 54.0 / 50.1, best 54.0 / 43.4
  //   H100 2^28 in 2^22: 562.7 / 570.7, 557.2 / 767.4, 559.7 / 571.7, best 556.2 / 533.2
  //   H200 2^24 in 2^18: 56.4 / 38.5, 60.9 / 43.1, 51.5 / 47.8, best 51.5 / 37.2
  //   H200 2^28 in 2^22: 474.0 / 460.5, 453.8 / 593.7, 530.3 / 552.2, best 453.8 / 431.9
  // The rule's worst over both tails, both GPUs and 2^24-2^28 is 14% over the best candidate (H100
  // 2^24, Pareto: tiles), one lane's 44% (H100 2^28, uniform), tiles' 34% (H200 2^26, uniform).
  // Two lanes with 16 KiB chunks took 67.1 / 50.0 (H100 2^24). docs/tuning.md, "Ragged lane
  // groups: two lanes and light tails".
  if (nvec < 32 && !few)
    bytes = std::max(bytes, std::min(kChunkMaxBytes, pow2_floor(std::max<std::uint64_t>(1, p.n * eb / resident_chunk))));
  // Short segments many times the GPU's warps over (at least kSpanBatchesPerWarp batches of 32
  // for each warp of half the GPU's threads; 2^20 and more on the H100): spans, 16 KiB windows, a
  // lane per segment of up to 1 KiB, the warp folding longer ones within a chunk from the windows.
  // `tally bench segmented --sweep-only`, H100 2026-11-27 05:02 UTC, as a candidate (f32 sums,
  // graph us, Pareto / uniform lengths): 2^28 in 2^22 510.4 / 444.1 (8 KiB windows and a lane up
  // to 4 KiB without `m`, the earlier rule, 543.6 / 456.8; the lane groups' best 526.3 / 623.5);
  // 2^26 in 2^20 153.9 / 124.7 (167.5 / 129.8). As the rule, 05:14 UTC on another H100
  // (docs/data/segmented-sweep-h100-ragged-mid.md): 506.9 / 443.0 and 153.5 / 124.1, the best of
  // the 40 candidates at all four. At 2^24 in 2^18 the lane groups' rule stays (62.8 / 43.8;
  // spans 62.1 / 44.9 at best; tiles 53.7 on Pareto lengths). Not run on an H200.
  const std::uint64_t half_warps = half_gpu_warps(sms, d);
  if (nvec < 32 && !few && segments >= kSpanBatchesPerWarp * 32 * half_warps) {
    fill_span(r, p, g, bytes, kSpanRuleWindow, kSpanRuleLaneBytes, true, elem_bytes, acc_bytes, sms, d);
    return r;
  }
  fill_ragged(r, p, g, bytes, few && acc_bytes <= kRowTileEightMaxAcc ? 8 : 4, false, elem_bytes, acc_bytes, sms, d);
  return r;
}

const char* to_string(strategy s) {
  switch (s) {
    case strategy::group: return "group";
    case strategy::rowtile: return "rowtile";
    case strategy::split: return "split";
    case strategy::columns: return "columns";
    case strategy::thin: return "thin";
    case strategy::ragged: return "ragged";
    case strategy::pieces: return "pieces";
    case strategy::exact_block: return "exact_block";
    case strategy::exact_launches: return "exact_launches";
    case strategy::once: return "once";
  }
  return "?";
}

std::uint64_t scratch_bytes(const problem& p, const plan& pl, int elem_bytes, int acc_bytes) {
  const std::uint64_t acc = static_cast<std::uint64_t>(acc_bytes);
  switch (pl.how) {
    case strategy::ragged:
    case strategy::once: return (pl.chunks + pl.tiles) * ragged_chunk_bytes(acc_bytes);
    case strategy::pieces: return pl.chunks * acc;
    case strategy::split: return pl.per_seg > 1 ? p.outer * pl.per_seg * acc : 0;
    case strategy::columns: {
      if (pl.per_seg <= 1) return 0;
      const std::uint64_t per_vec = pl.vec ? static_cast<std::uint64_t>(vector_results(std::max(1, elem_bytes), acc_bytes)) : 1;
      const std::uint64_t cols_per_tile = std::uint64_t(pl.col_vecs) * per_vec;
      const std::uint64_t tiles = p.outer * ceil_div(p.inner, cols_per_tile);
      return tiles * pl.per_seg * cols_per_tile * acc;
    }
    default: return 0;
  }
}

plan make_plan(const problem& p, int elem_bytes, int acc_bytes, bool exact, const device_limits& d) {
  plan r;
  if (p.results() == 0) {  // nothing to compute (and no division by a zero count below)
    r.blocks = 0;
    r.why = "no results";
    return r;
  }
  const std::uint64_t vn = 16 / static_cast<std::uint64_t>(elem_bytes);
  const std::uint64_t sms = static_cast<std::uint64_t>(std::max(1, d.sm_count));
  const std::uint64_t segments = p.outer;
  const std::uint64_t length = p.ragged() ? (segments ? p.n / segments : 0) : p.length;  // mean for ragged
  const std::uint64_t resident_split = sms * std::max(1, d.max_threads_per_sm / kSplitBlock);
  const std::uint64_t slots = d.partial_bytes / static_cast<std::uint64_t>(std::max(acc_bytes, 1));

  if (!p.contiguous()) {
    const bool vec = columns_vec(p, elem_bytes);
    // Results per vector: 16 bytes of elements, fewer where their accumulators are large.
    const std::uint64_t per_vec = vec ? static_cast<std::uint64_t>(vector_results(elem_bytes, acc_bytes)) : 1;
    const std::uint64_t vecs = ceil_div(p.inner, per_vec);
    const std::uint64_t items = p.outer * vecs;  // vectors (or elements) of adjacent results
    const std::uint64_t resident_threads = sms * static_cast<std::uint64_t>(std::max(1, d.max_threads_per_sm));
    // The lean kernel may take these tiles (its counts are checked again on the final tiles).
    const bool lean_may = column_lean_fits(p, vec, elem_bytes, acc_bytes, 1, 1, d);
    const bool thin_many = lean_may ? items >= kThinLeanItemsPerThread * resident_threads : 2 * items >= resident_threads;
    if (p.length <= kThinLength || thin_many) {
      // A thread per vector of results down the whole axis: every SM has enough of them.
      const bool wide = p.length < static_cast<std::uint64_t>(kThinLoads) &&
                        thin_wide_ok(static_cast<int>(per_vec), acc_bytes) && items >= kThinWide * resident_threads;
      fill_thin(r, p, vec, per_vec, wide ? kThinWide : 1, items, elem_bytes);
      return r;
    }
    // Columns: a tile of adjacent results, lanes along the axis.
    const std::uint64_t resident = columns_resident(d);
    // The widest tile (fewest lanes along the axis, the longest run of loads per lane) while the
    // tiles fill the GPU; with fewer tiles than resident blocks, blocks share a tile's axis, and
    // the tile narrows (down to 8 vectors, whole 128-byte lines) until its last block has at
    // most kTilePartials partials to combine. Blocks per tile: see per_of.
    std::uint64_t cv = std::min<std::uint64_t>(kColumnsBlock, pow2_ceil(vecs));
    auto tiles_of = [&](std::uint64_t c) { return p.outer * ceil_div(p.inner, c * per_vec); };
    auto per_of = [&](std::uint64_t c) {
      const std::uint64_t t = tiles_of(c), lanes_c = kColumnsBlock / c;
      if (t >= resident) return std::uint64_t(1);
      // One full wave of shares where that fills the GPU (90%), else about kColumnWaves waves of
      // smaller shares (a second wave of long shares, a third full, leaves most SMs idle).
      const std::uint64_t one_wave = resident / t;
      std::uint64_t q = one_wave >= 1 && 10 * one_wave * t >= 9 * resident ? one_wave : ceil_div(kColumnWaves * resident, t);
      q = std::min<std::uint64_t>(q, std::max<std::uint64_t>(1, p.length / (lanes_c * kColumnRowsPerLane)));
      q = std::min<std::uint64_t>(q, slots / std::max<std::uint64_t>(1, t * c * per_vec));
      if (t > d.max_tiles) q = 1;
      return std::max<std::uint64_t>(q, 1);
    };
    const std::uint64_t cv_min = std::min<std::uint64_t>(cv, 8);
    const std::uint64_t tile_partials = lean_may ? kLeanTilePartials : kTilePartials;
    while (cv > cv_min && per_of(cv) > 1 && (per_of(cv) * cv * per_vec > tile_partials || cv > 32)) cv /= 2;
    // Blocks sharing a tile pay a fixed combine (the partials' fence, the tile's counter, its last
    // block reading them: about kCombineRounds rounds of loads in latency). Where the narrowest
    // tiles, a block each in one wave, need at most that many more rounds per lane, they win.
    std::uint64_t per = per_of(cv);
    if (per > 1 && tiles_of(cv_min) <= resident) {
      const std::uint64_t rounds_solo = ceil_div(p.length, (kColumnsBlock / cv_min) * kColumnLoads);
      const std::uint64_t rounds_shared = ceil_div(ceil_div(p.length, per), (kColumnsBlock / cv) * kColumnLoads);
      if (rounds_solo <= rounds_shared + kCombineRounds) cv = cv_min, per = 1;
    }
    // Two rounds of loads in flight a lane (16-byte loads of 4-byte elements and accumulators):
    // where the tiles run a block each, tiles twice as wide with two rounds in flight, half as
    // many blocks, while those still cover 90% of the SMs and each lane has two whole rounds.
    // H100 column sweep (2026-11-27 06:59 UTC, docs/data/segmented-sweep-h100-columns-ring.md,
    // f32 sum, graph us): 256 x 65536 c64 26.02, c128 r 25.52 (c64 r 25.84); 4096 x 65536 c64
    // 352.21, c128 r 345.19; 256 x 4096 (128 tiles of c8, 64 of c16) keeps c8, 3.79 (c16 r 4.04).
    // Plain ops with 16-byte loads: the same tiles and shares in the lean kernel, four blocks an SM
    // instead of two, and never the ring (a two-blocks-an-SM kernel's way to more loads in
    // flight). H200, tally_columns_probe (2026-11-29): the rule's tiles at four blocks an SM read
    // 4096 x 4096 in 17.9 us (c32 x8; the columns kernel 20.1, its ring twin 20.9), 2^16 x 16 in
    // 3.5 (c4 x128; 5.0) and 4096 x 65536 in 236 (c64; c128 r 242).
    // Lean tiles a block each, at least a wave of them: narrower while under kLeanTileWaves
    // waves (shorter blocks, a smaller last wave).
    const std::uint64_t lean_wave = sms * static_cast<std::uint64_t>(kColumnsLeanBlocksPerSm);
    if (lean_may && per == 1 && tiles_of(cv) >= lean_wave)
      while (cv > cv_min && tiles_of(cv) < kLeanTileWaves * lean_wave) cv /= 2;
    const bool lean = column_lean_fits(p, vec, elem_bytes, acc_bytes, cv, per, d);
    bool ring = false;
    if (!lean && per == 1 && column_ring_fits(vec, elem_bytes, acc_bytes) && 2 * cv <= std::min<std::uint64_t>(kColumnsBlock, pow2_ceil(vecs))) {
      const std::uint64_t lanes2 = kColumnsBlock / (2 * cv);
      if (10 * tiles_of(2 * cv) >= 9 * sms && ceil_div(p.length, lanes2) >= 2 * static_cast<std::uint64_t>(kColumnLoads))
        cv *= 2, ring = true;
    }
    fill_columns(r, p, vec, per_vec, cv, per, resident);
    r.col_ring = ring;
    if (ring) r.why += ", two rounds of loads in flight a lane";
    if (lean) make_column_lean(r, p, elem_bytes, acc_bytes);
    r.why += " (" + std::to_string(resident / sms) + " blocks per SM)";
    return r;
  }

  if (exact) {
    if (!p.ragged() && segments <= kExactLaunchesMax && length >= kExactLaunchMinElems) {
      r.how = strategy::exact_launches;
      r.why = std::to_string(segments) + " long segments: the 1-D exact reduce on each";
    } else {
      r.how = strategy::exact_block;
      r.blocks = static_cast<unsigned>(std::min<std::uint64_t>(std::max<std::uint64_t>(segments, 1), resident_split * 8));
      r.why = "exact: a block per segment, the block's exact accumulator";
    }
    return r;
  }

  const std::uint64_t nvec = length / vn;
  if (p.ragged()) {
    // Few segments of a small or middle input: pieces, one launch (the lane groups' path is a
    // memset and four launches: the offset check, the groups, the chunks, their fix-up).
    if (pieces_fit(p, acc_bytes, d) && p.n * static_cast<std::uint64_t>(elem_bytes) <= kPiecesMaxInputBytes) {
      fill_pieces(r, p, pieces_bytes(p, elem_bytes, sms), elem_bytes, acc_bytes, sms, d);
      return r;
    }
    const plan groups = ragged_groups_plan(p, elem_bytes, acc_bytes, d);
    // Inputs of at most kOnceRuleMaxInputBytes: one launch (the check, the tiles, their fix-up),
    // where the tiles hold at most kOnceRuleMaxSegmentsPerTile segments each on average (the
    // grid is a block a tile at most, and a tile's block reads its segments' offsets 256 at a
    // time: 2^24 empty segments over 4096 elements would be one block's work).
    if (p.n * static_cast<std::uint64_t>(elem_bytes) <= kOnceRuleMaxInputBytes &&
        segments <= kOnceRuleMaxSegmentsPerTile * ceil_div(p.n, static_cast<std::uint64_t>(kTileElems))) {
      plan once;
      if (fill_once(once, p, groups.group, elem_bytes, acc_bytes, sms, d)) return once;
    }
    // Stripes (a warp a stripe, four stripes a resident warp: segments of any length in one pass)
    // where segments are short on average (a mean of at most kStripeRuleMaxMean elements) and the
    // input gives at least half the stripe kernel's resident warps a tile; 4-byte elements with
    // accumulators of at most 8 bytes (the kernel's 64 registers; the only ones measured).
    // `tally bench segmented --sweep-only`, H100 2026-11-27 10:13 UTC, f32 sums, graph us, Pareto
    // lengths (docs/data/segmented-sweep-h100-ragged-stripes.md), stripes against this rule:
    // 2^24 in 2^12 34.70 / 45.03, in 2^18 43.63 / 62.68, in 2^10 (pieces) 34.46 / 34.84; 2^28 in
    // 2^16 395.01 / 402.79, in 2^22 454.84 / 509.81; in 2^10 (a mean of 2^18: lane groups stay)
    // 384.69 / 365.92. Uniform lengths of mean 64: 2^24 42.63 / 43.84, 2^28 449.01 / 443.43.
    // With the branch-free fold (2026-11-27 12:1x UTC, segmented-sweep-h{100,200}-ragged-stripes-staged.md,
    // stripes s32 against the best other candidate): 2^28 in 2^22 H100 449.08 / 509.48 (spans),
    // uniform 446.18 / 443.00 (spans); H200 338.76 / 412.86 (eager lane groups), uniform 336.51 /
    // 391.09 (lane groups).
    // Four stripes a resident warp against two (2026-11-27 14:00 H200, 14:11 H100 UTC,
    // segmented-sweep-h{200,100}-ragged-per4.md; 2^28: stripes of 4 tiles against 8): in 2^16
    // H200 269.94 / 279.65, H100 381.61 / 384.34; in 2^22 H200 324.90 / 339.40, H100 445.50 /
    // 449.57; uniform 2^22 x 2^6 H200 324.21 / 336.20, H100 446.62 / 445.89. Up to 2^25 elements
    // both are stripes of one tile (the same plan).
    if (elem_bytes == 4 && acc_bytes <= 8 && segments > 0 && p.n <= kStripeRuleMaxMean * segments &&
        p.n >= sms * static_cast<std::uint64_t>(kStripeWarpsPerSm) * static_cast<std::uint64_t>(kTileElems) / 2) {
      plan st;
      if (fill_stripes(st, p, groups.group, 4, elem_bytes, acc_bytes, sms, d)) return st;
    }
    return groups;
  }
  // Rows whose lane groups of four vectors a lane would hold less than half the GPU's threads:
  // latency, not bandwidth, decides (the input mostly sits in L2), so each lane issues all its
  // loads at once.
  const std::uint64_t resident_threads = sms * static_cast<std::uint64_t>(std::max(1, d.max_threads_per_sm));
  const std::uint64_t g4 = std::min<std::uint64_t>(32, pow2_floor(std::max<std::uint64_t>(1, nvec / 4)));
  const bool few_rows = 2 * segments * g4 < resident_threads;
  // Short rows of whole aligned vectors: a row tile (but few rows of 16 vectors: lane groups).
  const bool whole_vectors = p.aligned16 && length % vn == 0 && (p.outer_stride * elem_bytes) % 16 == 0 &&
                             (!p.binary() || (p.aligned16_2 && (p.outer_stride2 * elem_bytes) % 16 == 0));
  // Rows of 16 vectors whose lane groups of four take a flat grid run as those groups instead (f32
  // sums, H200, 2026-11-29 22:30 UTC, docs/data/segmented-sweep-h200-rows-flat-rule-1129.md: 2^22 x
  // 64 at 2^28 261.5 us against the row tiles' 294.9 resident and 300.1 flat; 2^18 x 64 at 2^24
  // 18.68 against 19.26 and 19.29; resident, the groups were slower there: 19.59). Not for the dot
  // of matching rows (its lane groups read a second row: not measured).
  const bool groups_flat = !p.binary() && flat_waves(strategy::group, static_cast<int>(g4), 4, segments, sms, d, kRowFlatWaves);
  if (whole_vectors && nvec >= 1 && nvec <= kRowTileVectors && pow2_floor(nvec) == nvec &&
      !((few_rows || groups_flat) && nvec >= kFewRowsGroupVectors)) {
    fill_rowtile(r, segments, length, nvec, sms, d);
    const std::uint64_t warps = sms * static_cast<std::uint64_t>(std::max(1, d.max_threads_per_sm / 32));
    const std::uint64_t rows_per_round = 4 * (32 / nvec);
    if (!p.binary() && !d.commutes && acc_bytes <= kRowTileEightMaxAcc &&
        segments >= kRowTileEightRounds * rows_per_round * warps) {
      r.unroll = 8;
      r.why += ", eight rows' loads in flight per lane";
    }
    // (Row tiles of 16 vectors, which only the dot of matching rows keeps where the grid would be
    // flat, were not faster flat: kRowFlatWaves.)
    if (nvec < kFewRowsGroupVectors && flat_waves(r, segments, sms, d, kRowFlatWaves)) flat_grid(r, segments);
    return r;
  }
  // The 256-thread split kernel runs four blocks per SM (its launch bounds; 62 registers a thread
  // for the f32 sum, ptxas for sm_90): the rows that one wave of them holds.
  const std::uint64_t resident_small = sms * static_cast<std::uint64_t>(kSplitThreadsPerSm / kSplitBlockSmall);
  if (nvec < kSmallBlockVectors && !(nvec >= kFewRowsBlockVectors && segments < resident_small)) {
    // Short and middle segments: about four vectors per lane, at most a warp per segment. (With
    // the group kernel's grid at one real wave, H100 sweep 2026-11-26 14:0x UTC, rows of 256 f32
    // take 16 lanes at every count: 2^20 rows 358.5 us against 365.2 with 8, 2^16 rows 24.58
    // against 25.16; eight loads in flight per lane were slower at 2^24 and 2^28 elements.)
    // Few rows of 32 vectors or more: eight vectors a lane, all eight loads in flight (same
    // sweep, 2^20 elements, graph us against four a lane: 2^13 rows of 128 f32 2.06 / 2.09, 2^12
    // of 256 2.03 / 2.12, 2^11 of 512 2.08 / 2.16, 2^10 of 1024 2.12 / 2.28; 2^14 rows of 64, four
    // lanes, 2.07 against row tiles' 2.35).
    if (few_rows && nvec >= 2 * kFewRowsGroupVectors) {
      fill_group(r, segments, length, static_cast<int>(std::min<std::uint64_t>(32, pow2_floor(nvec / 8))), sms, d);
      r.unroll = 8;
      r.why += ", eight loads in flight per lane (few rows)";
      return r;
    }
    fill_group(r, segments, length, static_cast<int>(g4), sms, d);
    if (flat_waves(r, segments, sms, d, kRowFlatWaves)) flat_grid(r, segments);
    return r;
  }
  if (nvec < kBlockSegmentVectors) {
    // One or two rounds of a 256-thread block: a block each (plain ops on whole aligned vectors:
    // the lean kernel, eight blocks an SM, up to four rounds).
    fill_split(r, segments, length, 1, kSplitBlockSmall, sms, d);
    if (lean_split_fits(p, elem_bytes, 1, kSplitBlockSmall, d)) make_lean(r);
    return r;
  }
  // Long segments: blocks, several per segment when there are too few segments to fill the GPU.
  std::uint64_t per = 1;
  if (segments < resident_split) {
    per = ceil_div(resident_split, segments);
    per = std::min<std::uint64_t>(per, std::max<std::uint64_t>(1, nvec / (kSplitBlock * 4 * kMinRoundsPerBlock)));
    per = std::min<std::uint64_t>(per, slots / std::max<std::uint64_t>(1, segments));
    if (segments > d.max_tiles) per = 1;
    per = std::max<std::uint64_t>(per, 1);
  }
  fill_split(r, segments, length, per, kSplitBlock, sms, d);
  return r;
}

bool make_flat(plan& r, std::uint64_t segments) { return flat_grid(r, segments); }

std::vector<plan> row_candidates(const problem& p, int elem_bytes, int acc_bytes, const device_limits& d) {
  std::vector<plan> out;
  if (!p.contiguous() || p.ragged() || p.results() == 0 || p.binary()) return out;
  const std::uint64_t vn = 16 / static_cast<std::uint64_t>(elem_bytes);
  const std::uint64_t nvec = std::max<std::uint64_t>(1, p.length / vn);
  const std::uint64_t sms = static_cast<std::uint64_t>(std::max(1, d.sm_count));
  const std::uint64_t segments = p.outer;
  const std::uint64_t slots = d.partial_bytes / static_cast<std::uint64_t>(std::max(acc_bytes, 1));
  // Row tiles (rows of 1-16 whole vectors, a power of two), four or eight steps in flight.
  const bool whole_vectors = p.aligned16 && p.length % vn == 0 && (p.outer_stride * elem_bytes) % 16 == 0;
  if (whole_vectors && p.length >= vn && nvec <= kRowTileVectors && pow2_floor(nvec) == nvec)
    for (int u : {4, 8}) {
      plan r;
      fill_rowtile(r, segments, p.length, nvec, sms, d);
      r.unroll = u;
      out.push_back(r);
      if (flat_waves(r, segments, sms, d, kRowFlatWaves) && flat_grid(r, segments)) out.push_back(r);
    }
  // Lane groups of 4 to 32 lanes, each lane at least one round of 4 vectors; with eight loads in
  // flight where each lane has at least eight vectors.
  for (int g = 4; g <= 32; g *= 2) {
    if (static_cast<std::uint64_t>(g) * 4 > std::max<std::uint64_t>(4, nvec)) break;
    plan r;
    fill_group(r, segments, p.length, g, sms, d);
    out.push_back(r);
    plan f = r;
    if (flat_waves(f, segments, sms, d, kRowFlatWaves) && flat_grid(f, segments)) out.push_back(f);
    if (static_cast<std::uint64_t>(g) * 8 <= nvec) {
      r.unroll = 8;
      out.push_back(r);
    }
  }
  // Split blocks of 256 and of 512 threads: one per segment, and 2 to 16 where each block still
  // has a vector per thread, within the workspace's partials and per-segment counters.
  if (nvec < kSplitMinCandidateVectors) return out;  // a block per row of a few vectors: never close
  for (int block : {kSplitBlockSmall, kSplitBlock})
    for (std::uint64_t per = 1; per <= 16; per *= 2) {
      if (per > 1 && (per * static_cast<std::uint64_t>(block) > nvec || segments > d.max_tiles || segments * per > slots))
        break;
      plan r;
      fill_split(r, segments, p.length, per, block, sms, d);
      out.push_back(r);
      if (lean_split_fits(p, elem_bytes, per, block, d)) {
        make_lean(r);
        out.push_back(r);
      }
    }
  return out;
}

std::string forced_plan_refusal(const problem& p, const plan& pl, int elem_bytes, int acc_bytes,
                                const device_limits& d) {
  // Eager loads exist for the ragged lane groups with four in flight, of 4- or 8-byte elements.
  if (pl.eager && (pl.how != strategy::ragged || pl.tiles > 0 || pl.unroll != 4 || (elem_bytes != 4 && elem_bytes != 8)))
    return "a forced eager plan that is not ragged lane groups of four loads in flight over 4- or 8-byte elements";
  if (pl.span_mid && pl.span == 0) return "a forced plan folding middle segments from windows without spans";
  if (pl.stripe > 0 && (pl.how != strategy::ragged || pl.tiles == 0 || pl.span > 0 || pl.eager ||
                        pl.stripe % static_cast<std::uint64_t>(kTileElems) != 0 || p.n == 0))
    return "a forced stripe plan that is not ragged with tiles (their entries hold the stripes' partials), or with "
           "spans or eager loads, or whose stripe is not a multiple of a tile, or for an empty input";
  if (pl.split_lean && (pl.how != strategy::split || !lean_split_fits(p, elem_bytes, pl.per_seg, pl.split_block, d)))
    return "a forced lean split plan for other than a plain op's rows of whole aligned vectors, a 256-thread block "
           "a row";
  // Column tiles of 1-256 vectors (a power of two: lanes along the axis divide the block), 16-byte
  // loads only where the problem allows them (the rule's columns_vec).
  if (pl.how == strategy::columns &&
      (pl.col_vecs < 1 || pl.col_vecs > kColumnsBlock || (pl.col_vecs & (pl.col_vecs - 1)) != 0 ||
       (pl.vec && !columns_vec(p, elem_bytes))))
    return "a forced column plan whose tiles are not 1-256 vectors (a power of two), or with 16-byte loads the "
           "problem's alignment, row stride or width does not allow";
  if (pl.col_lean &&
      (pl.how != strategy::columns || pl.col_ring ||
       !column_lean_fits(p, pl.vec, elem_bytes, acc_bytes, static_cast<std::uint64_t>(pl.col_vecs), pl.per_seg, d) ||
       pl.blocks != column_lean_work(p, elem_bytes, acc_bytes, static_cast<std::uint64_t>(pl.col_vecs), pl.per_seg)))
    return "a forced lean column plan for other than a plain op's 16-byte loads (its kernel fitting its registers), "
           "counts under 2^31, without the ring, a block a tile's share";
  if (pl.col_ring && (pl.how != strategy::columns || !column_ring_fits(pl.vec, elem_bytes, acc_bytes)))
    return "a forced column plan with two rounds of loads in flight other than 16-byte loads of 4-byte elements "
           "and accumulators";
  if (pl.span > 0 && (pl.how != strategy::ragged || pl.tiles > 0 || pl.eager || pl.span < kSpanMinBytes ||
                      pl.span > kSpanMaxBytes || (pl.span & (pl.span - 1)) != 0 || pl.short_max == 0 ||
                      pl.span_segs < 1 || pl.span_segs > 32 || (pl.span_segs & (pl.span_segs - 1)) != 0))
    return "a forced span plan that is not ragged, or whose window is not a power of two of 512 B to 16 KiB, or whose "
           "warps take other than 1-32 segments (a power of two)";
  if (!p.ragged()) return "";
  const std::uint64_t n = p.n;
  if (pl.how == strategy::pieces) {
    const std::uint64_t chunk = pl.chunk;
    const bool sane = chunk >= 1 && chunk <= (std::uint64_t(1) << 48);  // the kernel's ceil(len / chunk) adds chunk - 1
    const std::uint64_t want = sane ? n / chunk + (n % chunk != 0) + p.outer : 0;
    const std::uint64_t slots = d.partial_bytes / static_cast<std::uint64_t>(std::max(acc_bytes, 1));
    if (!sane || pl.chunks != want || p.outer > kPiecesMaxSegments || p.outer > d.max_tiles || pl.chunks > slots)
      return "a forced pieces plan made for another input size, segment count or op";
    return "";
  }
  if (pl.how == strategy::once &&
      (pl.tiles == 0 || pl.blocks == 0 || n == 0 || n > pl.chunk || pl.stripe > 0 || pl.span > 0 || pl.eager))
    return "a forced one-launch plan without tiles or blocks, for an empty input or one longer than its chunk, or "
           "with stripes, spans or eager loads";
  const std::uint64_t tile = static_cast<std::uint64_t>(kTileElems);
  const std::uint64_t want_tiles = pl.tiles > 0 ? std::max<std::uint64_t>(1, ceil_div(n, tile)) : 0;
  const std::uint64_t want_chunks = pl.chunk > 0 ? std::max<std::uint64_t>(1, ceil_div(n, pl.chunk)) : 0;
  if (pl.tiles != want_tiles || pl.chunks != want_chunks)
    return "a forced ragged plan made for another input size";
  // The lane groups' body (also the tile and span kernels' for offsets out of order) takes 1-32
  // lanes a segment, a power of two; a segment a lane or group folds must not be one the chunk
  // kernel reads (it marks only segments longer than a chunk).
  if (pl.group < 1 || pl.group > 32 || (pl.group & (pl.group - 1)) != 0 || pl.short_max > pl.chunk ||
      (pl.unroll != 4 && pl.unroll != 8))
    return "a forced ragged plan with other than 1-32 lanes a segment (a power of two), four or eight loads in "
           "flight, or a longest short segment past its chunk";
  if ((pl.chunks + pl.tiles) * ragged_chunk_bytes(acc_bytes) > d.partial_bytes || (pl.tiles > 0 && !tiles_fit(p, pl.chunk)))
    return "a forced ragged plan whose partials this op's accumulators or this segment count cannot fit";
  return "";
}

std::vector<plan> ragged_candidates(const problem& p, int elem_bytes, int acc_bytes, const device_limits& d) {
  std::vector<plan> out;
  if (!p.ragged() || p.results() == 0 || p.binary()) return out;
  const std::uint64_t sms = static_cast<std::uint64_t>(std::max(1, d.sm_count));
  const plan rule = ragged_groups_plan(p, elem_bytes, acc_bytes, d);  // the lane groups' rule
  const std::uint64_t rule_bytes = rule.chunk * static_cast<std::uint64_t>(elem_bytes);
  // Tiles (where the workspace holds them) and every lane group (1-32 lanes) with four and eight
  // loads in flight and, for elements of 4 or 8 bytes, eager with four, at the rule's chunk; the
  // rule's pick with chunks of a quarter to four times the rule's (4 KiB to 256 KiB).
  plan t;
  fill_ragged(t, p, rule.group, rule_bytes, 4, true, elem_bytes, acc_bytes, sms, d);
  if (t.tiles > 0) out.push_back(t);
  if (t.tiles > 0)
    for (std::uint64_t bytes = std::uint64_t(4) << 10; bytes <= (std::uint64_t(256) << 10); bytes *= 2) {
      if (bytes == rule_bytes || bytes * 4 < rule_bytes || bytes > rule_bytes * 4) continue;
      plan r;
      fill_ragged(r, p, rule.group, bytes, 4, true, elem_bytes, acc_bytes, sms, d);
      if (r.tiles > 0) out.push_back(r);
    }
  for (int g = 1; g <= 32; g *= 2)
    for (int u : {4, 8}) {
      plan r;
      fill_ragged(r, p, g, rule_bytes, u, false, elem_bytes, acc_bytes, sms, d);
      out.push_back(r);
    }
  // Spans: windows of 4-16 KiB, a lane per segment of up to 1-4 KiB of input.
  for (std::uint64_t win = 4096; win <= kSpanMaxBytes; win *= 2)
    for (std::uint64_t lane_bytes = 1024; lane_bytes <= 4096; lane_bytes *= 2) {
      plan r;
      fill_span(r, p, rule.group, rule_bytes, win, lane_bytes, false, elem_bytes, acc_bytes, sms, d);
      out.push_back(r);
    }
  // Spans whose warps fold their middle segments from the windows: 8 and 16 KiB, a lane per
  // segment of up to 1 or 4 KiB.
  for (std::uint64_t win = 8192; win <= kSpanMaxBytes; win *= 2)
    for (std::uint64_t lane_bytes = 1024; lane_bytes <= 4096; lane_bytes *= 4) {
      plan r;
      fill_span(r, p, rule.group, rule_bytes, win, lane_bytes, true, elem_bytes, acc_bytes, sms, d);
      out.push_back(r);
    }
  // Every lane group with its loads issued eagerly (four in flight; elements of 4 or 8 bytes).
  if (elem_bytes == 4 || elem_bytes == 8)
    for (int g = 1; g <= 32; g *= 2) {
      plan r;
      fill_ragged(r, p, g, rule_bytes, 4, false, elem_bytes, acc_bytes, sms, d);
      r.eager = true;
      r.why += "; each lane's head, tail and first round of loads issued together, and its last round";
      out.push_back(r);
    }
  for (std::uint64_t bytes = std::uint64_t(4) << 10; bytes <= (std::uint64_t(256) << 10); bytes *= 2) {
    if (bytes == rule_bytes || bytes * 4 < rule_bytes || bytes > rule_bytes * 4) continue;
    plan r;
    fill_ragged(r, p, rule.group, bytes, rule.unroll, false, elem_bytes, acc_bytes, sms, d);
    out.push_back(r);
  }
  // Stripes: a warp's share of the input for one wave of the stripe kernel, for two, four, eight
  // and sixteen (shorter stripes were faster on both GPUs down to four, 2026-11-27: docs/tuning.md;
  // eight and sixteen not yet measured: each stripe also pays a search of the begins for its
  // first segment). Stripes of one tile (small inputs) come out alike: one of each length.
  for (std::uint64_t per : {1, 2, 4, 8, 16}) {
    plan r;
    if (!fill_stripes(r, p, rule.group, per, elem_bytes, acc_bytes, sms, d)) continue;
    bool seen = false;
    for (const plan& q : out) seen = seen || (q.stripe == r.stripe && q.group == r.group);
    if (!seen) out.push_back(r);
  }
  // Few segments: pieces of 4 KiB to 256 KiB.
  if (pieces_fit(p, acc_bytes, d))
    for (std::uint64_t bytes = std::uint64_t(4) << 10; bytes <= (std::uint64_t(256) << 10); bytes *= 2) {
      plan r;
      fill_pieces(r, p, bytes, elem_bytes, acc_bytes, sms, d);
      bool seen = false;
      for (const plan& q : out) seen = seen || (q.how == strategy::pieces && q.chunk == r.chunk);
      if (!seen) out.push_back(r);
    }
  // One launch (inputs of at most kTileMaxChunk elements).
  plan once;
  if (fill_once(once, p, rule.group, elem_bytes, acc_bytes, sms, d)) out.push_back(once);
  return out;
}

std::vector<plan> column_candidates(const problem& p, int elem_bytes, int acc_bytes, const device_limits& d) {
  std::vector<plan> out;
  if (p.contiguous() || p.results() == 0) return out;
  const bool vec = columns_vec(p, elem_bytes);
  const std::uint64_t per_vec = vec ? static_cast<std::uint64_t>(vector_results(elem_bytes, acc_bytes)) : 1;
  const std::uint64_t vecs = ceil_div(p.inner, per_vec), items = p.outer * vecs;
  const std::uint64_t resident = columns_resident(d);
  const std::uint64_t slots = d.partial_bytes / static_cast<std::uint64_t>(std::max(acc_bytes, 1));
  plan t;
  fill_thin(t, p, vec, per_vec, 1, items, elem_bytes);
  out.push_back(t);
  if (thin_wide_ok(static_cast<int>(per_vec), acc_bytes)) {
    fill_thin(t, p, vec, per_vec, kThinWide, items, elem_bytes);
    out.push_back(t);
  }
  for (std::uint64_t cv = std::min<std::uint64_t>(8, pow2_ceil(vecs)); cv <= std::min<std::uint64_t>(kColumnsBlock, pow2_ceil(vecs)); cv *= 2) {
    const std::uint64_t cpt = cv * per_vec, tiles = p.outer * ceil_div(p.inner, cpt), lanes = kColumnsBlock / cv;
    std::vector<std::uint64_t> pers{1};
    for (std::uint64_t quarter_waves : {1, 2, 4, 8, 16})  // a quarter of a wave .. four waves
      pers.push_back(std::max<std::uint64_t>(1, quarter_waves * resident / (4 * tiles)));
    for (std::uint64_t per : pers) {
      per = std::min<std::uint64_t>(per, std::max<std::uint64_t>(1, p.length / lanes));
      if (per > 1 && (tiles > d.max_tiles || tiles * per * cpt > slots || per * cpt > 4 * kTilePartials)) continue;
      bool seen = false;
      for (const plan& q : out) seen = seen || (q.how == strategy::columns && q.col_vecs == int(cv) && q.per_seg == per);
      if (seen) continue;
      plan c;
      fill_columns(c, p, vec, per_vec, cv, per, resident);
      out.push_back(c);
      // Its twin in the lean kernel (plain ops: the same bits at four blocks an SM).
      if (column_lean_fits(p, vec, elem_bytes, acc_bytes, cv, per, d)) {
        plan l = c;
        make_column_lean(l, p, elem_bytes, acc_bytes);
        out.push_back(l);
      }
      // Its twin with two rounds of loads in flight a lane, where a lane has two whole rounds
      // of its share of the axis (16-byte loads of 4-byte elements and accumulators).
      if (column_ring_fits(vec, elem_bytes, acc_bytes) &&
          ceil_div(ceil_div(p.length, per), lanes) >= 2 * static_cast<std::uint64_t>(kColumnLoads)) {
        c.col_ring = true;
        c.why += ", two rounds of loads in flight a lane";
        out.push_back(c);
      }
    }
  }
  return out;
}

}  // namespace tally::seg
