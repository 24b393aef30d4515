// A batch of reductions as tally's segmented layer sees it, and the plan that says how to run it.
//
// Every axis reduction is an (outer, length, inner) problem over a strided view: result
// (o, i) = reduce over k < length of x[o * outer_stride + k * length_stride + i], written at
// d_out[o * inner + i]. Rows of a rows x cols matrix with leading dimension ld are
// (rows, cols, 1) with outer_stride = ld; its columns are (1, rows, cols) with length_stride = ld;
// axis a of a contiguous array of dims d is (prod d[<a], d[a], prod d[>a]). Ragged segments
// (begin/end offsets on the device) are (segments, -, 1) with per-segment ranges.
//
//   rows 3 x 4, ld 4: {1 2 3 4 | 5 6 7 8 | 9 10 11 12}, sum -> {10, 26, 42}
//   columns of the same:                               sum -> {15, 18, 21, 24}
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/host_device.hpp"  // TALLY_HD: vector_results is used by the kernels too

namespace tally::seg {

struct problem {
  std::uint64_t outer = 0, length = 0, inner = 1;
  std::uint64_t outer_stride = 0, length_stride = 1;  // in elements
  const std::int64_t* d_begin = nullptr;              // ragged segments (device), else null
  const std::int64_t* d_end = nullptr;
  std::uint64_t n = 0;  // ragged: elements at d_in; every offset must lie in [0, n]
  const void* d_in2 = nullptr;       // binary ops (dot of matching rows): the second matrix, else null
  std::uint64_t outer_stride2 = 0;   // and its row stride (elements)
  std::uint64_t span = 0;  // elements from d_in that the problem may read (the memory check)
  bool aligned16 = false;  // d_in is 16-byte aligned (vector loads of columns and row tiles need it)
  bool aligned16_2 = false;  // and d_in2 (binary ops' row tiles)
  bool ragged() const { return d_begin != nullptr; }
  bool binary() const { return d_in2 != nullptr; }
  // Every result reads one contiguous range (rows, ragged segments, trailing axes).
  bool contiguous() const { return ragged() || (inner == 1 && (length_stride == 1 || length <= 1)); }
  std::uint64_t results() const { return outer * inner; }
};

// How a problem runs (one launch each; exact adds one launch per segment for few long ones).
//   rowtile:  inner == 1, short rows of `group` (1..32) whole 16-byte vectors, rows 16-byte
//             aligned: lane l of a warp reads vector l % group of row l / group, so each load
//             instruction of the warp reads 512 contiguous bytes; four (or, `unroll`, eight)
//             rows' loads in flight per lane and a shuffle tree inside the group.
//   group:    inner == 1, short and middle segments: `group` lanes (1..32) of a warp per
//             segment, 16-byte loads, a shuffle tree inside the group.
//   split:    inner == 1, long segments: `per_seg` blocks per segment (1: a block per
//             segment), each reducing a grid-stride share with the core's block code; the last
//             block of a segment combines the partials in block order.
//   thin:     inner > 1 or a strided axis, with a short axis or enough results for every resident
//             thread: a thread per vector of adjacent results (`group` = 1 or 4 vectors at once),
//             down the whole axis in order with eight loads in flight; no shared memory, no partials.
//   columns:  inner > 1 or a strided axis otherwise: a block covers col_vecs vectors of adjacent
//             results (16-byte loads when `vec`) and BLOCK / col_vecs lanes along the axis, combined
//             in a fixed tree (shuffles inside a warp, then shared memory); `per_seg` blocks share a
//             tile's axis, combined like split.
//   ragged:   ragged segments (any lengths, a heavy tail included): the group kernel with
//             `group` lanes per segment of at most `short_max` elements; a whole warp per segment
//             up to `chunk` elements; longer ones (offsets in order) are cut at fixed
//             `chunk`-element boundaries of the input, a block per chunk, and a fix-up warp per
//             long segment combines its chunks' partials in order. Three launches, each balanced
//             by elements, not by segments. With `span` > 0 (offsets in order) the span kernel
//             replaces the group kernel: a warp per span_segs segments copies the elements they
//             cover into a window of `span` bytes of shared memory and a lane folds each segment
//             of at most `short_max` elements from it; the warp and the chunks as above.
//   pieces:   ragged segments, at most kPiecesMaxSegments of them: one launch. Every block reads
//             all the offsets (a bad one stops every block before it writes), cuts each segment
//             into pieces of `chunk` elements from its start (an empty segment is one empty
//             piece) and numbers them in segment order; a block per piece (blocks take every
//             grid-th piece), and the block finishing a segment's last piece combines its
//             partials in order. `chunks` bounds the pieces: ceil(n / chunk) + segments.
//   once:     ragged segments of an input of at most kTileMaxChunk elements, any number of them:
//             one cooperative launch (every block resident) in three phases joined by grid
//             barriers: the offset check and the tiles' partition (every thread a share of the
//             segments), the tiles of kTileElems (the tile kernel's body, `tiles` of them; offsets
//             out of order: a warp a segment), and a warp a tile
//             joining the partials of the segments that cross tiles. `chunk` is the input's length
//             or more (no segment is long), `chunks` 1; `blocks` at most the resident grid.
// Binary problems (dot of matching rows) run as rowtile, group, split, exact_block or exact_launches.
//   exact_block / exact_launches: exact sums (inner == 1): a block per segment with the block's
//             exact accumulator, or, for a few long segments, the 1-D exact reduce per segment.
enum class strategy : int { group, rowtile, split, columns, thin, ragged, pieces, exact_block, exact_launches, once };
const char* to_string(strategy s);

inline constexpr int kSplitBlock = 512;       // threads per block of the split and exact kernels
inline constexpr int kSplitBlockSmall = 256;  // and of the split kernel for rows of one such block's round
inline constexpr int kSplitThreadsPerSm = 1024;  // the split kernel's launch bounds: 1024 / block blocks per SM
// The lean split kernel (plain ops, rows of whole aligned vectors, a 256-thread block a row) is
// held to a whole SM's threads, 32 registers a thread: eight blocks an SM, whose loads cover
// each other's block trees (tally_rows_probe on the H200: 4096 rows of 4096 f32 16.6 us at eight
// blocks an SM, 17.1 at four or six; docs/tuning.md, "Rows of one block's round at 2^24").
inline constexpr int kSplitLeanThreadsPerSm = 2048;
// The lean columns kernel (plain ops, 16-byte loads, 32-bit counts: kernels/columns.cuh) is held
// to four 256-thread blocks an SM, 64 registers a thread: eight loads in flight a lane and the
// tile's accumulators fit, and four blocks an SM keep twice the loads in flight of the columns
// kernel's two (tally_columns_probe on the H200, 2026-11-29: a plain tile kernel at four blocks an
// SM read 4096 x 4096 f32 columns in 17.9 us where the columns kernel took 20.1, 2^16 x 16 in
// 3.5 where it took 5.0; docs/tuning.md, "Columns: a lean tile kernel at four blocks an SM").
inline constexpr int kColumnsLeanBlocksPerSm = 4;

struct plan {
  strategy how = strategy::group;
  int group = 32;
  unsigned blocks = 0;   // grid of the main launch (group / rowtile: at most one wave of the
                         // kernel's real occupancy, which the launcher applies: resident_grid;
                         // unless `flat`)
  unsigned per_seg = 1;  // split / columns: blocks sharing one segment or tile
  int split_block = kSplitBlock;  // split: threads per block (kSplitBlock or kSplitBlockSmall)
  bool split_lean = false;        // split: the lean kernel (one kSplitBlockSmall block a row of whole aligned
                                  // vectors, plain ops, fewer than 2^31 rows and vectors a row)
  int unroll = 4;        // group / rowtile: loads (row steps) in flight per lane, 4 or 8 (same bits)
  bool flat = false;     // group / rowtile: a block for each share of rows its warps take in one pass
                         // (`blocks` covers the rows once), not a resident grid striding over them
  int col_vecs = 1;      // columns: vectors (of 16 bytes, or single elements) across a tile
  bool vec = true;       // columns / thin: 16-byte loads
  bool col_ring = false; // columns: two rounds of kColumnLoads loads in flight a lane (16-byte loads of
                         // 4-byte elements and accumulators; a sweep candidate)
  bool col_lean = false; // columns: the lean kernel (plain ops, 16-byte loads, counts under 2^31; the same
                         // bits as the columns kernel's plan of the same tiles and shares)
  std::uint64_t short_max = ~std::uint64_t(0);  // group / ragged: longest segment for `group` lanes
  std::uint64_t chunk = ~std::uint64_t(0);      // ragged: chunk of the input (elements); longer segments go to blocks
  std::uint64_t chunks = 0;                     // ragged: ceil(n / chunk); pieces: ceil(n / chunk) + segments
  std::uint64_t tiles = 0;  // ragged: tiles of kTileElems (offsets in order: the tile kernel), 0: lane groups
  std::uint64_t span = 0;   // ragged spans: a warp's window in bytes (0: lane groups or tiles);
                            // short_max is then the longest segment a lane folds alone
  int span_segs = 32;       // ragged spans: segments a warp takes at a time, a lane each
  bool span_mid = false;    // ragged spans: segments past short_max (within a chunk) folded by the
                            // whole warp from the windows, not read by it again (a sweep candidate)
  std::uint64_t stripe = 0;  // ragged stripes: elements of a warp's stripe of the input (a multiple of
                             // kTileElems; the stripe kernel, offsets in order), 0: none; tiles is
                             // then the partition's size (each tile's first segment) and the
                             // stripes' partials are its per-tile entries
  bool eager = false;       // ragged lane groups (four in flight): each lane's head, tail and first round of
                            // loads together, and its last partial round together (range_share_eager)
  unsigned resident = 0; // columns: the resident blocks of the columns kernel the rule counted
  std::string why;       // the rule's reasons, for `tally bench segmented` and --debug
};

// What the rule reads about the device and the workspace.
struct device_limits {
  int sm_count = 0;
  int max_threads_per_sm = 2048;
  std::uint64_t partial_bytes = 4u << 20;  // the segmented partials buffer of a workspace
  unsigned max_tiles = 2048;     // per-segment counters in the workspace
  int columns_blocks_per_sm = 0;  // resident blocks of the op's columns kernel (0: max_threads_per_sm / kColumnsBlock)
  bool split_lean = false;  // the op's lean split kernel keeps everything in registers here (launch.cuh,
                            // lean_split_ok): rows of whole aligned vectors may take it
  bool columns_lean = false;  // the op's lean columns kernel keeps everything in registers here (launch.cuh,
                              // lean_columns_ok): 16-byte column tiles may take it
  bool commutes = false;  // the op's combine gives the same bits in either order: row tiles reduce-scatter
                          // their steps (four in flight, never eight: kernels/rowtile.cuh, rowtile_scatter)
};

inline constexpr int kGroupBlock = 256;    // threads per block of the group kernel
inline constexpr int kColumnsBlock = 256;  // and of the columns kernel
inline constexpr int kChunkBlock = 512;    // and of the ragged chunk kernel
inline constexpr int kFixupBlock = 256;    // and of the ragged fix-up kernel (a warp per chunk)
inline constexpr int kPiecesBlock = 256;   // and of the ragged pieces kernel (a block per piece)
// Ragged problems of at most this many segments may run as pieces (every block of the pieces
// kernel reads all their offsets: 16 KiB; each segment's counter is a workspace counter).
inline constexpr std::uint64_t kPiecesMaxSegments = 1024;
// The ragged tile kernel: blocks of kTileBlock threads, kTileElemsPerThread elements a thread
// (whole 16-byte vectors: 4 of f32, 8 of f64, 1 of u8), so a tile is 4096 elements whatever the
// element type: its marks (two bits an element) and the segment of each run (4 bytes an element)
// fit in 17 KiB of shared memory.
inline constexpr int kTileBlock = 256;
inline constexpr int kTileElemsPerThread = 16;
inline constexpr std::int64_t kTileElems = std::int64_t(kTileBlock) * kTileElemsPerThread;
// A tile's runs name their segments relative to the one before the tile, in 32 bits,
inline constexpr std::uint64_t kTileMaxSegments = (std::uint64_t(1) << 31) - 1;
// and their positions relative to the tile, in 32 bits: a short segment (at most a chunk) enters
// a tile from at most this far before it.
inline constexpr std::uint64_t kTileMaxChunk = std::uint64_t(1) << 30;
// The one-launch ragged kernel (once.cuh): the tile kernel's blocks, at most this many an SM (its
// launch bounds for accumulators of at most 8 bytes), all resident at once (a cooperative launch).
inline constexpr std::uint64_t kOnceBlocksPerSm = 4;
// Ragged spans (the span kernel, offsets in order): blocks of kSpanBlock threads; a warp's window of
// shared memory is 512 bytes (a 16-byte vector a lane) to kSpanMaxBytes, a power of two; a warp
// takes 1 to 32 segments at a time (a power of two: span_segs).
inline constexpr int kSpanBlock = 128;
inline constexpr std::uint64_t kSpanMinBytes = 512, kSpanMaxBytes = std::uint64_t(16) << 10;
// Ragged stripes (the stripe kernel, offsets in order): blocks of kStripeBlock threads; a warp
// reads its stripe as warp tiles of kStripeTileElems elements, kStripeLaneElems in a row a lane
// (whole 16-byte vectors: 4 of f32, 2 of f64, 1 of u8... in a row), staged in shared memory.
inline constexpr int kStripeBlock = 128;
inline constexpr int kStripeLaneElems = 16;
inline constexpr std::int64_t kStripeTileElems = 32 * kStripeLaneElems;
inline constexpr int kStripeWarpsPerSm = 32;  // the stripe kernel's warps an SM (launch bounds)
// Whether the tile kernel can run segments of this problem with chunks of `chunk` elements.
inline bool tiles_fit(const problem& p, std::uint64_t chunk) {
  return !p.binary() && p.outer <= kTileMaxSegments && chunk <= kTileMaxChunk;
}

// The thin kernel takes four vectors of results per thread (for axes shorter than its eight loads
// in flight) only where their accumulators are small: at most 32 bytes per vector of results.
inline constexpr int kThinWide = 4;
inline constexpr int kThinLoads = 8;  // loads in flight per thread of the thin kernel
inline constexpr int kColumnLoads = 8;  // and of a lane of the column tiles kernel
constexpr bool thin_wide_ok(int results_per_vector, int acc_bytes) { return results_per_vector * acc_bytes <= 32; }
// Results per vector of the thin and columns kernels with aligned rows: the 16 bytes' worth,
// halved while their accumulators would take more than kThinAccBytes of registers (ptxas for
// sm_90: the statistics of 1-byte elements, 16 accumulators of 40 bytes, spilled 2 KB per thread
// at 255 registers in the thin kernel and 576 B in the columns kernel; at 4 results, 4-byte
// loads, none). Only the statistics of 1- and 2-byte elements are cut (to 4 results: 4- and
// 8-byte loads); every other op keeps 16-byte loads.
inline constexpr int kThinAccBytes = 256;
TALLY_HD constexpr int vector_results(int elem_bytes, int acc_bytes) {
  int r = 16 / elem_bytes;
  while (r > 1 && r * acc_bytes > kThinAccBytes) r /= 2;
  return r;
}

// The ragged plan's workspace: per chunk, the segment covering its start (A) and the one starting
// in it (B), and their partials; per tile, the first segment beginning in it and the one leaving
// it, and the partials of the one entering and the one leaving: the same bytes.
inline std::uint64_t ragged_chunk_bytes(int acc_bytes) { return 16 + 2 * static_cast<std::uint64_t>(acc_bytes); }

// Bytes of the segmented partials buffer that plan pl uses (0: none): split and column tiles
// shared by several blocks keep a partial per block (per result of the tile), ragged chunks their
// entries.
std::uint64_t scratch_bytes(const problem& p, const plan& pl, int elem_bytes, int acc_bytes);

// acc_bytes: the op's accumulator (partials of split and columns plans are that large).
plan make_plan(const problem& p, int elem_bytes, int acc_bytes, bool exact, const device_limits& d);

// The ragged rule without stripes or pieces: lane groups, or spans where short segments are many
// (what make_plan takes for ragged segments where neither applies; the sweep's candidates are made
// around it).
plan ragged_groups_plan(const problem& p, int elem_bytes, int acc_bytes, const device_limits& d);
// Every plan a strided-axis problem could run with (thin with one and, where allowed, four vectors
// per thread; column tiles of 8-256 vectors with 1 block per tile or about 1/4 to 4 waves), all
// within the workspace: what `tally bench segmented --sweep` times against the rule's pick.
std::vector<plan> column_candidates(const problem& p, int elem_bytes, int acc_bytes, const device_limits& d);
// Every plan contiguous rows could run with (row tiles with 4 or 8 steps in flight where rows are
// 1-16 whole vectors; lane groups of 4-32 lanes, with 4 loads in flight and 8 where each lane
// has eight vectors; each row tile, and each lane group of four loads in flight, also on a flat
// grid where that grid holds two waves or more; split blocks 1-16 per row of 32 vectors or more,
// within the workspace):
// what `tally bench segmented --sweep` times against the rule's pick.
std::vector<plan> row_candidates(const problem& p, int elem_bytes, int acc_bytes, const device_limits& d);
// A row-tile or lane-group plan as a flat grid (plan::flat: a block for each share of rows its warps
// take in one pass; the rule's for row tiles of 1-8 vectors and lane groups whose rows fill two waves
// of blocks or more). False, the plan unchanged, where that grid would pass 2^31 - 1 blocks.
bool make_flat(plan& r, std::uint64_t segments);
// Why a plan forced by the sweep or a test cannot run problem p with these element and
// accumulator sizes ("": it can). Ragged plans' chunks and tiles size the workspace and the
// partition, which the kernels trust: they must have been made for this n (chunks and tiles are
// counted in elements: any element size fits) with partials this op's accumulators fit in the
// workspace; tiles for at most kTileMaxSegments segments and chunks of at most kTileMaxChunk;
// pieces also for this many segments (at most kPiecesMaxSegments and the workspace's counters),
// with a piece of 1 to 2^48 elements and a partial per piece in the workspace. Eager plans only
// as ragged lane groups with four loads in flight and elements of 4 or 8 bytes (any problem).
std::string forced_plan_refusal(const problem& p, const plan& pl, int elem_bytes, int acc_bytes, const device_limits& d);
// Ragged plans for `tally bench segmented --sweep` and the tests: tiles (where the workspace
// holds them) at the rule's chunk and at a quarter to four times it, lane groups of 1-32 lanes
// with four and eight loads in flight, spans (windows of 4-16 KiB, a lane per segment of up to
// 1-4 KiB of input), eager lane groups (4- and 8-byte elements), and the rule's groups with those
// chunks (the lane groups' rule, whether or not the rule picks spans or pieces); for at most
// kPiecesMaxSegments segments, pieces of 4 KiB to 256 KiB.
std::vector<plan> ragged_candidates(const problem& p, int elem_bytes, int acc_bytes, const device_limits& d);

}  // namespace tally::seg
