// The segmented layer's plan rule and argument checks, without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <tuple>
#include <utility>

#include "segmented/problem.hpp"
#include "support.hpp"
#include "tally/tally.hpp"

namespace tally::test {
namespace {

seg::device_limits h100() {
  seg::device_limits d;
  d.sm_count = 132;
  d.max_threads_per_sm = 2048;
  d.partial_bytes = 4u << 20;
  d.max_tiles = 2048;
  return d;
}
seg::problem rows(std::uint64_t r, std::uint64_t c) {
  seg::problem p;
  p.outer = r, p.length = c, p.inner = 1, p.outer_stride = c, p.length_stride = 1;
  p.aligned16 = true;
  return p;
}
seg::problem columns(std::uint64_t r, std::uint64_t c) {
  seg::problem p;
  p.outer = 1, p.length = r, p.inner = c, p.length_stride = c;
  p.aligned16 = true;
  return p;
}

TEST(SegmentedPlanCpu, StrategyFollowsTheShape) {
  // 16-element f32 rows: row tiles, four lanes per row (one 16-byte vector each); not 16-byte
  // aligned (the pointer, or rows of 15): one lane per row, four vectors each.
  auto pl = seg::make_plan(rows(1u << 24, 16), 4, 4, false, h100());
  EXPECT_EQ(pl.how, seg::strategy::rowtile);
  EXPECT_EQ(pl.group, 4);
  seg::problem unaligned = rows(1u << 24, 16);
  unaligned.aligned16 = false;
  pl = seg::make_plan(unaligned, 4, 4, false, h100());
  EXPECT_EQ(pl.how, seg::strategy::group);
  EXPECT_EQ(pl.group, 1);
  EXPECT_EQ(seg::make_plan(rows(1u << 20, 12), 4, 4, false, h100()).how, seg::strategy::group);  // 3 vectors
  EXPECT_TRUE(seg::make_plan(columns(1000, 16), 4, 4, false, h100()).vec);
  seg::problem uc = columns(1000, 16);
  uc.aligned16 = false;
  EXPECT_FALSE(seg::make_plan(uc, 4, 4, false, h100()).vec);
  // f32 rows of 256: 16 lanes; of 1024: a warp at any count; of 2048: a warp, or a 256-thread
  // block each while fewer than one wave of 256-thread blocks (132 SMs x 4); of 4096 and 8192: a
  // 256-thread block each, at any count; of 16384 and longer: 512-thread blocks. f64 rows of 2048
  // are 1024 vectors, as f32 rows of 4096.
  for (std::uint64_t r : {1u << 20, 1u << 16}) {
    pl = seg::make_plan(rows(r, 256), 4, 4, false, h100());
    EXPECT_EQ(pl.group, 16) << r;
    EXPECT_EQ(pl.unroll, 4) << r;
  }
  // Few rows (their 4-vector lane groups under half of 132 x 2048 threads): eight vectors a lane,
  // eight loads in flight; rows of 16 vectors: lane groups of four, not row tiles.
  pl = seg::make_plan(rows(1u << 12, 256), 4, 4, false, h100());
  EXPECT_EQ(pl.how, seg::strategy::group);
  EXPECT_EQ(pl.group, 8);
  EXPECT_EQ(pl.unroll, 8);
  pl = seg::make_plan(rows(1u << 10, 1024), 4, 4, false, h100());
  EXPECT_EQ(pl.group, 32);
  EXPECT_EQ(pl.unroll, 8);
  pl = seg::make_plan(rows(1u << 13, 128), 4, 4, false, h100());
  EXPECT_EQ(pl.group, 4);
  EXPECT_EQ(pl.unroll, 8);
  EXPECT_EQ(seg::make_plan(rows(1u << 17, 128), 4, 4, false, h100()).unroll, 4);  // 2^17 x 8 x 2 > 132 x 2048
  EXPECT_EQ(seg::make_plan(rows(1u << 13, 2048), 4, 4, false, h100()).unroll, 4);  // 2^13 x 32 x 2 > 132 x 2048
  pl = seg::make_plan(rows(1u << 14, 64), 4, 4, false, h100());
  EXPECT_EQ(pl.how, seg::strategy::group);
  EXPECT_EQ(pl.group, 4);
  EXPECT_EQ(pl.unroll, 4);
  EXPECT_EQ(seg::make_plan(rows(1u << 16, 64), 4, 4, false, h100()).how, seg::strategy::rowtile);
  // Rows of 16 vectors whose lane groups of four make at least two waves of flat blocks (2 x 132 x 8
  // blocks of 64 rows: from 135,105 rows) take those groups on a flat grid; 2111 blocks' rows do
  // not. The dot of matching rows keeps its row tiles there, on the resident grid (16-vector row
  // tiles were not faster flat).
  pl = seg::make_plan(rows(1u << 20, 64), 4, 4, false, h100());
  EXPECT_EQ(pl.how, seg::strategy::group);
  EXPECT_TRUE(pl.flat);
  seg::problem dot64 = rows(1u << 20, 64);
  dot64.d_in2 = reinterpret_cast<const void*>(std::uintptr_t(4096));
  dot64.outer_stride2 = 64;
  dot64.aligned16_2 = true;
  pl = seg::make_plan(dot64, 4, 4, false, h100());
  EXPECT_EQ(pl.how, seg::strategy::rowtile);
  EXPECT_FALSE(pl.flat);
  seg::problem dot16 = dot64;  // rows of 16 f32: row tiles, flat
  dot16.length = dot16.outer_stride = dot16.outer_stride2 = 16;
  EXPECT_TRUE(seg::make_plan(dot16, 4, 4, false, h100()).flat);
  pl = seg::make_plan(rows(135168, 64), 4, 4, false, h100());
  EXPECT_EQ(pl.how, seg::strategy::group);
  EXPECT_EQ(pl.group, 4);
  EXPECT_TRUE(pl.flat);
  EXPECT_EQ(pl.blocks, 2112u);
  EXPECT_EQ(seg::make_plan(rows(135104, 64), 4, 4, false, h100()).how, seg::strategy::rowtile);
  EXPECT_EQ(seg::make_plan(rows(1u << 12, 16), 4, 4, false, h100()).how, seg::strategy::rowtile);
  EXPECT_EQ(seg::make_plan(rows(1u << 20, 512), 4, 4, false, h100()).group, 32);
  EXPECT_EQ(seg::make_plan(rows(1u << 20, 128), 4, 4, false, h100()).group, 8);
  // Row tiles: eight steps in flight from 16 rounds of four per warp of the GPU (132 x 64 warps;
  // rows of 16 f32: 32 rows a round), for sums (4-byte accumulators), not for argmax or dot.
  EXPECT_EQ(seg::make_plan(rows(1u << 24, 16), 4, 4, false, h100()).unroll, 8);
  EXPECT_EQ(seg::make_plan(rows(16u * 32 * 132 * 64, 16), 4, 4, false, h100()).unroll, 8);
  EXPECT_EQ(seg::make_plan(rows(16u * 32 * 132 * 64 - 1, 16), 4, 4, false, h100()).unroll, 4);
  EXPECT_EQ(seg::make_plan(rows(1u << 20, 16), 4, 4, false, h100()).unroll, 4);
  EXPECT_EQ(seg::make_plan(rows(1u << 22, 32), 4, 4, false, h100()).unroll, 8);
  EXPECT_EQ(seg::make_plan(rows(1u << 24, 16), 4, 16, false, h100()).unroll, 4);
  // Ops that commute exactly (sums, means) reduce-scatter their row tiles' steps: four in flight.
  seg::device_limits commuting = h100();
  commuting.commutes = true;
  EXPECT_EQ(seg::make_plan(rows(1u << 24, 16), 4, 4, false, commuting).how, seg::strategy::rowtile);
  EXPECT_EQ(seg::make_plan(rows(1u << 24, 16), 4, 4, false, commuting).unroll, 4);
  EXPECT_EQ(seg::make_plan(rows(1u << 22, 32), 4, 4, false, commuting).unroll, 4);
  // Row tiles and lane groups of many rows take a flat grid (a block for each 8 warps' share of
  // rows) from two waves of the rule's resident grid (132 SMs x 8 blocks of 256 threads): rows of
  // 16 f32 (four lanes a row, four steps of eight rows a warp: 256 rows a block) from 540,417 rows
  // (2112 blocks); eight steps (the f32 sum under a non-commuting rule) 512 rows a block; rows of
  // 256 (lane groups of 16: 16 rows a block) from 33,777.
  pl = seg::make_plan(rows(1u << 22, 16), 4, 4, false, commuting);
  EXPECT_TRUE(pl.flat);
  EXPECT_EQ(pl.blocks, 16384u);
  pl = seg::make_plan(rows(2 * 1056 * 256, 16), 4, 4, false, commuting);
  EXPECT_TRUE(pl.flat);
  EXPECT_EQ(pl.blocks, 2u * 1056);
  pl = seg::make_plan(rows(2 * 1056 * 256 - 256, 16), 4, 4, false, commuting);
  EXPECT_FALSE(pl.flat);
  EXPECT_LE(pl.blocks, 1056u);
  pl = seg::make_plan(rows(1u << 24, 16), 4, 4, false, h100());
  EXPECT_TRUE(pl.flat);
  EXPECT_EQ(pl.unroll, 8);
  EXPECT_EQ(pl.blocks, (1u << 24) / 512);
  pl = seg::make_plan(rows(33792, 256), 4, 4, false, commuting);
  EXPECT_EQ(pl.how, seg::strategy::group);
  EXPECT_EQ(pl.group, 16);
  EXPECT_TRUE(pl.flat);
  EXPECT_EQ(pl.blocks, 2112u);
  pl = seg::make_plan(rows(33776, 256), 4, 4, false, commuting);
  EXPECT_FALSE(pl.flat);
  EXPECT_LE(pl.blocks, 1056u);
  EXPECT_EQ(seg::make_plan(rows(1u << 8, 1024), 4, 4, false, h100()).how, seg::strategy::group);
  pl = seg::make_plan(rows(1u << 17, 2048), 4, 4, false, h100());
  EXPECT_EQ(pl.how, seg::strategy::group);
  EXPECT_EQ(pl.group, 32);
  EXPECT_EQ(seg::make_plan(rows(528, 2048), 4, 4, false, h100()).how, seg::strategy::group);
  pl = seg::make_plan(rows(527, 2048), 4, 4, false, h100());
  EXPECT_EQ(pl.how, seg::strategy::split);
  EXPECT_EQ(pl.split_block, seg::kSplitBlockSmall);
  for (std::uint64_t r : {std::uint64_t(1) << 8, std::uint64_t(1) << 12, std::uint64_t(1) << 16}) {
    for (std::uint64_t c : {4096, 8192}) {
      pl = seg::make_plan(rows(r, c), 4, 4, false, h100());
      EXPECT_EQ(pl.how, seg::strategy::split) << r << " x " << c;
      EXPECT_EQ(pl.split_block, seg::kSplitBlockSmall) << r << " x " << c;
      EXPECT_EQ(pl.per_seg, 1u) << r << " x " << c;
      EXPECT_EQ(pl.blocks, static_cast<unsigned>(std::min<std::uint64_t>(r, 132 * 8 * 8))) << r << " x " << c;
    }
  }
  pl = seg::make_plan(rows(1u << 17, 2048), 8, 8, false, h100());
  EXPECT_EQ(pl.how, seg::strategy::split);
  EXPECT_EQ(pl.split_block, seg::kSplitBlockSmall);
  pl = seg::make_plan(rows(1u << 14, 16384), 4, 4, false, h100());
  EXPECT_EQ(pl.how, seg::strategy::split);
  EXPECT_EQ(pl.split_block, seg::kSplitBlock);
  pl = seg::make_plan(rows(1u << 6, 16384), 4, 4, false, h100());
  EXPECT_EQ(pl.how, seg::strategy::split);
  EXPECT_EQ(pl.split_block, seg::kSplitBlock);
  EXPECT_EQ(pl.per_seg, 1u);
  // 16 rows of 2^24: blocks, several per row to fill 132 SMs; 4096 rows of 2^16: a block each.
  pl = seg::make_plan(rows(16, 1u << 24), 4, 4, false, h100());
  EXPECT_EQ(pl.how, seg::strategy::split);
  EXPECT_GE(pl.per_seg * 16u, 264u);
  pl = seg::make_plan(rows(4096, 1u << 16), 4, 4, false, h100());
  EXPECT_EQ(pl.how, seg::strategy::split);
  EXPECT_EQ(pl.per_seg, 1u);
  // Columns: tiles with lanes along the axis; 16 columns of 2^24 rows split the axis over blocks.
  pl = seg::make_plan(columns(1u << 24, 16), 4, 4, false, h100());
  EXPECT_EQ(pl.how, seg::strategy::columns);
  EXPECT_TRUE(pl.vec);
  EXPECT_EQ(pl.col_vecs, 4);
  EXPECT_GT(pl.per_seg, 1u);
  EXPECT_LE(pl.per_seg * 16u * 4u, 4u << 20);  // partials fit the buffer
  // Short axes, or enough results for every resident thread: thin (a thread per vector of
  // results); four vectors per thread only for axes shorter than its eight loads and small
  // accumulators (f32 sum, not argmax's 16 bytes).
  pl = seg::make_plan(columns(16, 1u << 20), 4, 4, false, h100());
  EXPECT_EQ(pl.how, seg::strategy::thin);
  EXPECT_EQ(pl.group, 1);
  pl = seg::make_plan(columns(1, 1u << 24), 4, 4, false, h100());
  EXPECT_EQ(pl.how, seg::strategy::thin);
  EXPECT_EQ(pl.group, seg::kThinWide);
  EXPECT_EQ(seg::make_plan(columns(1, 1u << 24), 4, 16, false, h100()).group, 1);
  EXPECT_EQ(seg::make_plan(columns(256, 1u << 20), 4, 4, false, h100()).how, seg::strategy::thin);
  EXPECT_EQ(seg::make_plan(columns(4096, 1u << 16), 4, 4, false, h100()).how, seg::strategy::columns);
  // Blocks per tile: one full wave of the columns kernel's resident blocks where that fills the
  // GPU (132 SMs x 8 by default; with the kernel's real residency, 5 per SM, the rule follows
  // it), else about two waves of smaller shares (4096 rows x 2^16: 512 tiles).
  seg::device_limits five = h100();
  five.columns_blocks_per_sm = 5;
  pl = seg::make_plan(columns(1u << 16, 4096), 4, 4, false, five);
  EXPECT_EQ(pl.how, seg::strategy::columns);
  EXPECT_LE(pl.blocks, 132u * 5);
  EXPECT_GE(pl.blocks * 10, 132u * 5 * 9);
  seg::device_limits six = h100();
  six.columns_blocks_per_sm = 6;
  pl = seg::make_plan(columns(4096, 1u << 16), 4, 4, false, six);
  EXPECT_EQ(pl.how, seg::strategy::columns);
  EXPECT_GE(pl.blocks, 2u * 132 * 6);
  EXPECT_LE(pl.per_seg * pl.col_vecs * 4u, 16u << 10);
  // Unaligned rows (ld * 4 not a multiple of 16): element loads.
  seg::problem c = columns(1000, 7);
  EXPECT_FALSE(seg::make_plan(c, 4, 4, false, h100()).vec);
  // Exact: blocks per segment, or 1-D launches for a few long rows.
  EXPECT_EQ(seg::make_plan(rows(1000, 1000), 4, 4, true, h100()).how, seg::strategy::exact_block);
  EXPECT_EQ(seg::make_plan(rows(16, 1u << 24), 4, 4, true, h100()).how, seg::strategy::exact_launches);
  // A strided single column is not contiguous.
  seg::problem one = columns(1000, 1);
  one.length_stride = 5;
  EXPECT_EQ(seg::make_plan(one, 4, 4, false, h100()).how, seg::strategy::columns);
}

// A ragged problem of `segments` segments over n elements (the rule reads only the counts).
seg::problem ragged(std::uint64_t segments, std::uint64_t n) {
  static const std::int64_t fake = 0;
  seg::problem p;
  p.outer = segments, p.n = n, p.d_begin = p.d_end = &fake;
  return p;
}

// Few ragged segments (at most kPiecesMaxSegments) of at most 64 MiB: pieces, one launch. Pieces
// of about one a SM (8 KiB to 32 KiB of input), a bound of ceil(n / chunk) + segments pieces, a
// partial each in the workspace (the piece grows where it would not hold them); 1025 segments:
// lane groups.
TEST(SegmentedPlanCpu, RaggedPieces) {
  auto pl = seg::make_plan(ragged(256, 1u << 20), 4, 4, false, h100());
  EXPECT_EQ(pl.how, seg::strategy::pieces);
  EXPECT_EQ(pl.chunk * 4, 16u << 10);  // 4 MiB / 132 = 31.8 KiB: the power of two below
  EXPECT_EQ(pl.chunks, (1u << 20) / pl.chunk + 256);
  EXPECT_EQ(pl.blocks, 256u + 256u);  // under one wave of 256-thread blocks (132 x 8)
  EXPECT_EQ(seg::scratch_bytes(ragged(256, 1u << 20), pl, 4, 4), pl.chunks * 4);
  EXPECT_EQ(seg::make_plan(ragged(1, 1u << 24), 4, 4, false, h100()).chunk * 4, 32u << 10);
  EXPECT_EQ(seg::make_plan(ragged(1024, 1000), 4, 4, false, h100()).how, seg::strategy::pieces);
  EXPECT_EQ(seg::make_plan(ragged(1025, 1u << 20), 4, 4, false, h100()).how, seg::strategy::once);
  EXPECT_EQ(seg::make_plan(ragged(256, 1u << 20), 4, 4, true, h100()).how, seg::strategy::exact_block);
  // Past 64 MiB of input, lane groups and chunks (their blocks read better there).
  EXPECT_EQ(seg::make_plan(ragged(16, 1u << 24), 4, 4, false, h100()).how, seg::strategy::pieces);
  EXPECT_EQ(seg::make_plan(ragged(16, (1u << 24) + 1), 4, 4, false, h100()).how, seg::strategy::ragged);
  EXPECT_EQ(seg::make_plan(ragged(16, 1u << 23), 8, 8, false, h100()).how, seg::strategy::pieces);
  // The workspace bounds the pieces of a candidate: the piece grows (every size to the same one).
  int grown = 0;
  for (const auto& c : seg::ragged_candidates(ragged(1000, std::uint64_t(1) << 40), 4, 16, h100())) {
    if (c.how != seg::strategy::pieces) continue;
    ++grown;
    EXPECT_LE(c.chunks * 16, 4u << 20);
    EXPECT_GE(c.chunk * (c.chunks - 1000), std::uint64_t(1) << 40);
    EXPECT_EQ(c.chunk % 4, 0u);
  }
  EXPECT_EQ(grown, 1);
  // Forced plans: each candidate fits the problem it was made for, not another n, segment count
  // (pieces; tiles past 2^31 - 1 segments) or a piece of 0 or 2^63 elements; an accumulator whose partials the
  // workspace cannot hold is refused.
  const auto p256 = ragged(256, 1u << 20);
  for (const auto& c : seg::ragged_candidates(p256, 4, 4, h100())) {
    EXPECT_EQ(seg::forced_plan_refusal(p256, c, 4, 4, h100()), "") << seg::to_string(c.how) << " " << c.chunk;
    EXPECT_NE(seg::forced_plan_refusal(ragged(256, 1u << 21), c, 4, 4, h100()), "") << c.chunk;
    if (c.how == seg::strategy::pieces) {
      EXPECT_NE(seg::forced_plan_refusal(ragged(255, 1u << 20), c, 4, 4, h100()), "");
      seg::plan bad = c;
      bad.chunk = 0, bad.chunks = 0;
      EXPECT_NE(seg::forced_plan_refusal(p256, bad, 4, 4, h100()), "");
      bad.chunk = std::uint64_t(1) << 63, bad.chunks = 1 + 256;
      EXPECT_NE(seg::forced_plan_refusal(p256, bad, 4, 4, h100()), "");
    }
    if (c.tiles > 0) {  // tiles of 4096 elements of any type; at most 2^31 - 1 segments
      EXPECT_EQ(seg::forced_plan_refusal(p256, c, 8, 4, h100()), "");
      EXPECT_NE(seg::forced_plan_refusal(ragged(seg::kTileMaxSegments + 1, 1u << 20), c, 4, 4, h100()), "");
      seg::device_limits tight = h100();
      tight.partial_bytes = (c.chunks + c.tiles) * seg::ragged_chunk_bytes(4);
      EXPECT_EQ(seg::forced_plan_refusal(p256, c, 4, 4, tight), "");
      EXPECT_NE(seg::forced_plan_refusal(p256, c, 4, 8, tight), "");
    }
  }
  seg::plan tiny;
  for (const auto& c : seg::ragged_candidates(p256, 4, 4, h100()))
    if (c.how == seg::strategy::pieces && tiny.chunks == 0) tiny = c;  // 4 KiB: 1024 + 256 partials
  ASSERT_EQ(tiny.chunks, 1280u);
  seg::device_limits small = h100();
  small.partial_bytes = 1279 * 64;
  EXPECT_NE(seg::forced_plan_refusal(p256, tiny, 4, 64, small), "");
  EXPECT_EQ(seg::forced_plan_refusal(p256, tiny, 4, 64, h100()), "");
  EXPECT_EQ(seg::forced_plan_refusal(rows(4, 4), tiny, 4, 4, h100()), "");  // not ragged: nothing to check here
  // The sweep: the lane groups' candidates, spans and stripes (41, as for more segments), then
  // pieces of 4 KiB to 256 KiB, then one launch.
  auto rc = seg::ragged_candidates(ragged(256, 1u << 20), 4, 4, h100());
  ASSERT_EQ(rc.size(), 41u + 7u + 1u);
  EXPECT_EQ(rc.back().how, seg::strategy::once);
  rc.pop_back();
  for (std::size_t i = 0; i < rc.size(); ++i) {
    EXPECT_EQ(rc[i].how, i < 41 ? seg::strategy::ragged : seg::strategy::pieces) << i;
    if (i >= 41) {
      EXPECT_EQ(rc[i].chunk * 4, std::uint64_t(4) << (10 + i - 41)) << i;
      EXPECT_EQ(rc[i].chunks, ((1u << 20) + rc[i].chunk - 1) / rc[i].chunk + 256) << i;
    }
  }
}

// Ragged inputs of at most 8 MiB (and at most kTileMaxChunk elements) with at most 256 segments a
// tile on average, past pieces: one
// cooperative launch over tiles of 4096 elements, a block a tile up to four blocks an SM, no
// chunks (the chunk is 2^30 elements: no segment is long), a warp a segment for offsets out of
// order (the plan keeps the lane groups' rule's lanes, which forced plans are checked against).
// Larger inputs keep the rule of stripes and lane groups; empty inputs, binary problems
// and inputs past 2^30 elements never run in one launch.
TEST(SegmentedPlanCpu, RaggedOneLaunch) {
  const auto p = ragged(1u << 14, 1u << 20);
  const seg::plan pl = seg::make_plan(p, 4, 4, false, h100());
  EXPECT_EQ(pl.how, seg::strategy::once) << pl.why;
  EXPECT_EQ(pl.tiles, (1u << 20) / static_cast<std::uint64_t>(seg::kTileElems));
  EXPECT_EQ(pl.chunk, seg::kTileMaxChunk);
  EXPECT_EQ(pl.chunks, 1u);
  EXPECT_EQ(pl.blocks, 256u);  // a block a tile: under 132 x 4
  EXPECT_EQ(pl.stripe, 0u);
  EXPECT_EQ(pl.group, seg::ragged_groups_plan(p, 4, 4, h100()).group);
  EXPECT_EQ(seg::scratch_bytes(p, pl, 4, 4), (1u + pl.tiles) * seg::ragged_chunk_bytes(4));
  EXPECT_EQ(seg::forced_plan_refusal(p, pl, 4, 4, h100()), "");
  EXPECT_NE(seg::forced_plan_refusal(ragged(1u << 14, 1u << 21), pl, 4, 4, h100()), "");  // another n
  EXPECT_EQ(seg::make_plan(ragged(1u << 19, 1u << 23), 1, 8, false, h100()).blocks, 132u * 4u);  // u8: 2048 tiles
  // At most 256 segments a tile on average: 2^16 segments in 2^20 elements (256 tiles) run in one
  // launch, 2^16 + 1 do not, nor 2^24 empty ones over one tile.
  EXPECT_EQ(seg::make_plan(ragged(1u << 16, 1u << 20), 4, 4, false, h100()).how, seg::strategy::once);
  EXPECT_NE(seg::make_plan(ragged((1u << 16) + 1, 1u << 20), 4, 4, false, h100()).how, seg::strategy::once);
  EXPECT_NE(seg::make_plan(ragged(1u << 24, 4096), 4, 4, false, h100()).how, seg::strategy::once);
  EXPECT_EQ(seg::make_plan(p, 4, 16, false, h100()).how, seg::strategy::once);            // argmax
  EXPECT_EQ(seg::make_plan(ragged(1u << 14, 1u << 20), 8, 8, false, h100()).how, seg::strategy::once);  // 8 MiB
  EXPECT_NE(seg::make_plan(ragged(1u << 14, 1u << 21), 8, 8, false, h100()).how, seg::strategy::once);
  EXPECT_NE(seg::make_plan(ragged(1u << 14, (1u << 21) + 1), 4, 4, false, h100()).how, seg::strategy::once);
  EXPECT_EQ(seg::make_plan(ragged(256, 1u << 20), 4, 4, false, h100()).how, seg::strategy::pieces);  // few: pieces
  EXPECT_EQ(seg::make_plan(ragged(2000, 0), 4, 4, false, h100()).how, seg::strategy::ragged);  // nothing to tile
  EXPECT_EQ(seg::make_plan(p, 4, 4, true, h100()).how, seg::strategy::exact_block);
  // Refused when forced: without tiles or blocks, with stripes, spans or eager loads, or for an
  // input longer than the chunk.
  for (auto spoil : {+[](seg::plan& q) { q.tiles = 0; }, +[](seg::plan& q) { q.blocks = 0; },
                     +[](seg::plan& q) { q.stripe = seg::kTileElems; },
                     +[](seg::plan& q) { q.span = 4096; }, +[](seg::plan& q) { q.eager = true; },
                     +[](seg::plan& q) { q.chunk = (1u << 20) - 1; }}) {
    seg::plan bad = pl;
    spoil(bad);
    EXPECT_NE(seg::forced_plan_refusal(p, bad, 4, 4, h100()), "");
  }
  // Candidates: one launch last, where the input allows it.
  const auto rc = seg::ragged_candidates(ragged(1u << 12, 1u << 24), 4, 4, h100());
  EXPECT_EQ(rc.back().how, seg::strategy::once);
  EXPECT_EQ(rc.back().tiles, (1u << 24) / static_cast<std::uint64_t>(seg::kTileElems));
  seg::device_limits roomy = h100();
  roomy.partial_bytes = std::uint64_t(64) << 20;  // tiles of 2^30 + 1 elements fit: the length refuses
  const auto past = seg::ragged_candidates(ragged(1u << 12, (std::uint64_t(1) << 30) + 1), 4, 4, roomy);
  EXPECT_TRUE(std::any_of(past.begin(), past.end(), [](const seg::plan& c) { return c.tiles > 0; }));
  for (const auto& c : past) EXPECT_NE(c.how, seg::strategy::once);
}

// Ragged segments: groups from the mean length, warps past short_max, chunks of 16-64 KiB of
// input for long ones, within the workspace; columns narrow their tiles so that a tile's last
// block combines at most 16 Ki partials.
TEST(SegmentedPlanCpu, RaggedChunksAndColumnTiles) {
  // The rule: stripes, four a resident warp of the stripe kernel (132 x 32 on the H100), for 4-byte
  // elements with accumulators of at most 8 bytes where segments have a mean of at most 4096
  // elements and the input gives half those warps a tile (2^24: a tile a stripe, 4096 stripes;
  // 2^28: 4 tiles, 16384 stripes); otherwise the lane groups' and spans' rule (below, asked
  // directly: ragged_groups_plan). Offsets out of order: the lane groups' lanes.
  for (const auto& [segs, n, stripe] : {std::tuple<std::uint64_t, std::uint64_t, std::uint64_t>{1u << 22, 1u << 28, 4},
                                        {1u << 16, 1u << 28, 4}, {1u << 18, 1u << 24, 1}, {1u << 12, 1u << 24, 1}}) {
    const seg::plan st = seg::make_plan(ragged(segs, n), 4, 4, false, h100());
    EXPECT_EQ(st.how, seg::strategy::ragged) << segs;
    EXPECT_EQ(st.stripe, stripe * seg::kTileElems) << segs;
    EXPECT_EQ(st.group, seg::ragged_groups_plan(ragged(segs, n), 4, 4, h100()).group) << segs;
    EXPECT_EQ(seg::forced_plan_refusal(ragged(segs, n), st, 4, 4, h100()), "") << segs;
    EXPECT_EQ(seg::make_plan(ragged(segs, n), 4, 8, false, h100()).stripe, st.stripe) << segs;  // sum_sq of f32
    EXPECT_EQ(seg::make_plan(ragged(segs, n), 4, 16, false, h100()).stripe, 0u) << segs;       // argmax
    EXPECT_EQ(seg::make_plan(ragged(segs, n), 8, 8, false, h100()).stripe, 0u) << segs;        // f64
  }
  EXPECT_EQ(seg::make_plan(ragged(1u << 10, 1u << 28), 4, 4, false, h100()).stripe, 0u);      // a mean of 2^18
  EXPECT_EQ(seg::make_plan(ragged(1u << 12, (1u << 24) + 4096), 4, 4, false, h100()).stripe, 0u);  // past 4096
  EXPECT_EQ(seg::make_plan(ragged(1u << 17, 1u << 23), 4, 4, false, h100()).stripe, 0u);      // under half the warps a tile
  EXPECT_EQ(seg::make_plan(ragged(1u << 17, 1u << 23), 4, 4, true, h100()).how, seg::strategy::exact_block);
  // 2^22 segments of a mean of 64 f32: 2^17 batches of 32, 31 for each of the 132 x 32 warps of
  // half the H100: spans, 16 KiB windows, a lane per segment of up to 256 f32 (1 KiB), the warp
  // folding longer ones within a chunk from the windows; offsets out of order: two lanes a
  // segment (the lane groups' rule).
  auto pl = seg::ragged_groups_plan(ragged(1u << 22, 1u << 28), 4, 4, h100());
  EXPECT_EQ(pl.how, seg::strategy::ragged);
  EXPECT_EQ(pl.span, 16384u);
  EXPECT_EQ(pl.span_segs, 32);
  EXPECT_TRUE(pl.span_mid);
  EXPECT_EQ(pl.group, 2);  // mean 64 elements: 16 vectors; about eight vectors a lane
  EXPECT_EQ(pl.short_max, 256u);
  EXPECT_EQ(pl.chunk * 4, 64u << 10);
  EXPECT_EQ(pl.chunks, (1u << 28) / pl.chunk);
  EXPECT_EQ(pl.tiles, 0u);  // spans (tiles: a sweep candidate)
  EXPECT_EQ(seg::scratch_bytes(ragged(1u << 22, 1u << 28), pl, 4, 4), pl.chunks * seg::ragged_chunk_bytes(4));
  EXPECT_EQ(pl.unroll, 4);
  EXPECT_EQ(seg::forced_plan_refusal(ragged(1u << 22, 1u << 28), pl, 4, 4, h100()), "");
  EXPECT_EQ(seg::ragged_groups_plan(ragged(1u << 22, 1u << 27), 8, 8, h100()).short_max, 128u);  // 1 KiB of f64
  // 2^19 segments: 16384 batches, 3.9 a warp: lane groups; 2^20: 7.8, spans.
  EXPECT_EQ(seg::ragged_groups_plan(ragged(1u << 19, 1u << 25), 4, 4, h100()).span, 0u);
  EXPECT_EQ(seg::ragged_groups_plan(ragged(1u << 20, 1u << 26), 4, 4, h100()).span, 16384u);
  EXPECT_EQ(seg::ragged_groups_plan(ragged(1u << 20, 1u << 28), 4, 4, h100()).span, 0u);  // a mean of 64 vectors
  // Segments whose groups would hold under half the GPU's threads (132 x 2048 / 2 on the H100):
  // wider groups up to that half, eight loads in flight (four for large accumulators).
  pl = seg::ragged_groups_plan(ragged(1u << 14, 1u << 20), 4, 4, h100());
  EXPECT_EQ(pl.group, 8);  // 2^14 x 8 = 131072 <= 135168 < 2^14 x 16
  EXPECT_EQ(pl.unroll, 8);
  EXPECT_EQ(seg::ragged_groups_plan(ragged(1u << 14, 1u << 20), 4, 16, h100()).unroll, 4);
  // Short segments (a mean under 32 vectors) filling the GPU: chunks of at least the input over
  // the 132 x 4 resident chunk blocks, up to 64 KiB; lane groups, not tiles (a sweep candidate).
  pl = seg::ragged_groups_plan(ragged(1u << 18, 1u << 24), 4, 4, h100());
  EXPECT_EQ(pl.how, seg::strategy::ragged);
  EXPECT_EQ(pl.group, 2);
  EXPECT_EQ(pl.unroll, 4);
  EXPECT_EQ(pl.chunk * 4, 64u << 10);
  EXPECT_EQ(pl.tiles, 0u);
  // Lanes and chunk bytes by shape: f64 of a mean of 32 (16 vectors): two lanes, 64 KiB; a mean
  // of 128 f32 elements (32 vectors): four lanes and the chunk from the size (2^24 x 4 bytes over
  // 8 chunks of each of 132 x 4 resident chunk blocks: under 16 KiB, so 16); few segments of a
  // mean of 64 (2^14 x 2 lanes under half the GPU): widened, the size's chunk; smaller inputs of
  // short segments: 2^23 f32 over 528 chunk blocks is 63550 bytes, so 32 KiB; 2^20 elements in
  // 2^18 segments (a mean of 4): 7943 bytes, so the size's 16 KiB.
  struct lanes_case {
    std::uint64_t segments, n;
    int elem, group;
    std::uint64_t chunk_bytes;
  };
  for (const lanes_case& lc : {lanes_case{1u << 19, 1u << 24, 8, 2, 64u << 10}, lanes_case{1u << 17, 1u << 24, 4, 4, 16u << 10},
                               lanes_case{1u << 14, 1u << 20, 4, 8, 16u << 10}, lanes_case{1u << 17, 1u << 23, 4, 2, 32u << 10},
                               lanes_case{1u << 18, 1u << 20, 4, 1, 16u << 10}}) {
    pl = seg::ragged_groups_plan(ragged(lc.segments, lc.n), lc.elem, lc.elem, h100());
    EXPECT_EQ(pl.group, lc.group) << lc.segments << " in " << lc.n;
    EXPECT_EQ(pl.chunk * static_cast<std::uint64_t>(lc.elem), lc.chunk_bytes) << lc.segments << " in " << lc.n;
  }
  pl = seg::ragged_groups_plan(ragged(2048, 1u << 20), 4, 4, h100());  // (the rule: one launch, below)
  EXPECT_EQ(pl.how, seg::strategy::ragged);
  EXPECT_EQ(pl.group, 32);  // mean 512: sixteen lanes, widened (2048 x 32 <= 135168)
  EXPECT_EQ(pl.unroll, 8);
  EXPECT_EQ(pl.chunk * 4, 16u << 10);  // small inputs: the smallest chunk, many blocks
  EXPECT_LE(pl.short_max, pl.chunk);
  // The sweep's ragged candidates: every lane group with four and eight in flight at the rule's
  // chunk, the rule's group with other chunks; each within the workspace, short_max <= chunk.
  // Tiles at the rule's chunk and at 4, 8, 32 and 64 KiB (tiles of 4096 elements, a block each, their
  // entries in the workspace beside the chunks'), the lane groups with four and eight loads in
  // flight, spans (windows of 4, 8 and 16 KiB, a lane per segment of up to 256, 512 and 1024 f32;
  // then 8 and 16 KiB, 256 and 1024 f32, the warp folding middle segments from the windows),
  // then eager with four, the rule's with those chunks, then stripes for one wave of the stripe
  // kernel, for two, four, eight and sixteen (whole tiles, a warp each; one of each length: here
  // all are one tile). Eager lane groups only for elements of 4 or 8
  // bytes. Last, one launch (RaggedOneLaunch).
  auto rc = seg::ragged_candidates(ragged(2048, 1u << 20), 4, 4, h100());
  ASSERT_EQ(rc.size(), 5u + 12u + 9u + 4u + 6u + 4u + 1u + 1u);
  EXPECT_EQ(rc.back().how, seg::strategy::once);
  rc.pop_back();
  for (std::size_t i = 0; i < rc.size(); ++i) {
    EXPECT_EQ(rc[i].tiles, i < 5 || i >= 40 ? (1u << 20) / static_cast<std::uint64_t>(seg::kTileElems) : 0u) << i;
    const bool span = i >= 17 && i < 26, mid = i >= 26 && i < 30;
    EXPECT_EQ(rc[i].span_mid, mid) << i;
    if (mid) {
      EXPECT_EQ(rc[i].span, std::uint64_t(8192) << ((i - 26) / 2)) << i;
      EXPECT_EQ(rc[i].short_max, std::uint64_t(256) << (2 * ((i - 26) % 2))) << i;
      EXPECT_EQ(seg::forced_plan_refusal(ragged(2048, 1u << 20), rc[i], 4, 4, h100()), "") << i;
    }
    if (!mid && i < 40) {
      EXPECT_EQ(rc[i].span, span ? std::uint64_t(4096) << ((i - 17) / 3) : 0u) << i;
    }
    if (span) {
      EXPECT_EQ(rc[i].short_max, std::uint64_t(256) << ((i - 17) % 3)) << i;
      EXPECT_EQ(rc[i].span_segs, 4);  // 2048 segments: four a warp (at least 4, at most 32)
      EXPECT_EQ(seg::forced_plan_refusal(ragged(2048, 1u << 20), rc[i], 4, 4, h100()), "") << i;
      EXPECT_EQ(rc[i].group, rc[0].group) << i;  // offsets out of order: the rule's lanes
    }
    EXPECT_EQ(rc[i].eager, i >= 30 && i < 36) << i;
    EXPECT_EQ(rc[i].stripe > 0, i >= 40) << i;
    if (rc[i].stripe > 0) {
      // 2^20 elements over 132 x 32 warps (and two to sixteen times that): 249 to 16
      // elements, a tile each (one candidate).
      EXPECT_EQ(rc[i].stripe, static_cast<std::uint64_t>(seg::kTileElems)) << i;
      EXPECT_EQ(rc[i].blocks, (1u << 20) / seg::kTileElems / 4) << i;  // four warps a block
      EXPECT_EQ(rc[i].span, 0u) << i;
      EXPECT_EQ(seg::forced_plan_refusal(ragged(2048, 1u << 20), rc[i], 4, 4, h100()), "") << i;
      EXPECT_EQ(seg::forced_plan_refusal(ragged(2048, 1u << 20), rc[i], 8, 8, h100()), "") << i;
      seg::plan odd = rc[i];
      odd.stripe += 512;
      EXPECT_NE(seg::forced_plan_refusal(ragged(2048, 1u << 20), odd, 4, 4, h100()), "") << i;
      seg::plan no_tiles = rc[i];
      no_tiles.tiles = 0;
      EXPECT_NE(seg::forced_plan_refusal(ragged(2048, 1u << 20), no_tiles, 4, 4, h100()), "") << i;
    }
    if (rc[i].eager) {
      EXPECT_EQ(rc[i].group, 1 << (i - 30)) << i;
      EXPECT_EQ(rc[i].unroll, 4) << i;
    }
    EXPECT_EQ(seg::scratch_bytes(ragged(2048, 1u << 20), rc[i], 4, 4),
              (rc[i].chunks + rc[i].tiles) * seg::ragged_chunk_bytes(4));
  }
  for (const auto& c : rc) {
    EXPECT_EQ(c.how, seg::strategy::ragged);
    EXPECT_LE(c.short_max, c.chunk);
    EXPECT_EQ(c.chunks, ((1u << 20) + c.chunk - 1) / c.chunk);
    EXPECT_LE(c.chunks * seg::ragged_chunk_bytes(4), 4u << 20);
  }
  EXPECT_TRUE(seg::ragged_candidates(columns(64, 64), 4, 4, h100()).empty());
  for (int eb : {1, 2}) {
    const auto small_elems = seg::ragged_candidates(ragged(2048, 1u << 20), eb, 4, h100());
    EXPECT_TRUE(std::none_of(small_elems.begin(), small_elems.end(), [](const seg::plan& c) { return c.eager; })) << eb;
  }
  EXPECT_FALSE(seg::make_plan(ragged(1u << 22, 1u << 28), 4, 4, false, h100()).eager);  // a candidate, not the rule
  // Forced eager plans: ragged lane groups, four in flight, 4- or 8-byte elements only.
  const seg::plan eager = rc[30];
  ASSERT_TRUE(eager.eager);
  EXPECT_EQ(seg::forced_plan_refusal(ragged(2048, 1u << 20), eager, 4, 4, h100()), "");
  EXPECT_EQ(seg::forced_plan_refusal(ragged(2048, 1u << 20), eager, 8, 8, h100()), "");
  EXPECT_NE(seg::forced_plan_refusal(ragged(2048, 1u << 20), eager, 2, 4, h100()), "");
  EXPECT_NE(seg::forced_plan_refusal(ragged(2048, 1u << 20), eager, 1, 4, h100()), "");
  seg::plan eager8 = eager;
  eager8.unroll = 8;
  EXPECT_NE(seg::forced_plan_refusal(ragged(2048, 1u << 20), eager8, 4, 4, h100()), "");
  // Forced span plans: ragged, no tiles, no eager loads, a window of 512 B to 4 KiB in 512s.
  for (std::uint64_t bad : {std::uint64_t(256), std::uint64_t(768), std::uint64_t(3072), std::uint64_t(32768)}) {
    seg::plan sp = rc[17];
    sp.span = bad;
    EXPECT_NE(seg::forced_plan_refusal(ragged(2048, 1u << 20), sp, 4, 4, h100()), "") << bad;
  }
  for (int bad : {0, 3, 64}) {
    seg::plan sp = rc[17];
    sp.span_segs = bad;
    EXPECT_NE(seg::forced_plan_refusal(ragged(2048, 1u << 20), sp, 4, 4, h100()), "") << bad;
  }
  // 32 segments a warp where that leaves half the GPU's threads a batch each (2^22 segments).
  for (const auto& c : seg::ragged_candidates(ragged(1u << 22, 1u << 28), 4, 4, h100()))
    if (c.span > 0) {
      EXPECT_EQ(c.span_segs, 32);
    }
  // Any forced ragged plan: 1-32 lanes a segment (a power of two), four or eight loads in
  // flight, no short segment past the chunk (the chunk kernel marks only longer ones).
  for (int bad : {0, 3, 64}) {
    seg::plan g = rc[5];
    g.group = bad;
    EXPECT_NE(seg::forced_plan_refusal(ragged(2048, 1u << 20), g, 4, 4, h100()), "") << bad;
  }
  {
    seg::plan g = rc[17];
    g.short_max = g.chunk + 1;
    EXPECT_NE(seg::forced_plan_refusal(ragged(2048, 1u << 20), g, 4, 4, h100()), "");
    g = rc[5];
    g.unroll = 2;
    EXPECT_NE(seg::forced_plan_refusal(ragged(2048, 1u << 20), g, 4, 4, h100()), "");
  }
  seg::plan mid_groups = rc[5];
  mid_groups.span_mid = true;
  EXPECT_NE(seg::forced_plan_refusal(ragged(2048, 1u << 20), mid_groups, 4, 4, h100()), "");
  seg::plan stripe_spans = rc[17];
  stripe_spans.stripe = static_cast<std::uint64_t>(seg::kTileElems);
  EXPECT_NE(seg::forced_plan_refusal(ragged(2048, 1u << 20), stripe_spans, 4, 4, h100()), "");
  // 2^28 elements: 4224 warps on the H100 (32 an SM) take 16 tiles each (4096 stripes, 1024 blocks of
  // four warps), 8448 take 8 (2048 blocks), 16896 take 4 (4096 blocks), 33792 take 2 (8192 blocks),
  // 67584 take 1 (16384 blocks).
  int stripe_plans = 0;
  for (const auto& c : seg::ragged_candidates(ragged(1u << 22, 1u << 28), 4, 4, h100()))
    if (c.stripe > 0) {
      ++stripe_plans;
      ASSERT_TRUE(c.blocks == 1024 || c.blocks == 2048 || c.blocks == 4096 || c.blocks == 8192 || c.blocks == 16384)
          << c.blocks;
      EXPECT_EQ(c.stripe, std::uint64_t(16384 / c.blocks) * seg::kTileElems) << c.blocks;
    }
  EXPECT_EQ(stripe_plans, 5);
  seg::plan span_tiles = rc[0];
  span_tiles.span = 1024;
  EXPECT_NE(seg::forced_plan_refusal(ragged(2048, 1u << 20), span_tiles, 4, 4, h100()), "");
  seg::plan eager_tiles = rc[0];
  eager_tiles.eager = true;
  EXPECT_NE(seg::forced_plan_refusal(ragged(2048, 1u << 20), eager_tiles, 4, 4, h100()), "");
  seg::plan eager_rows = seg::make_plan(rows(1024, 64), 4, 4, false, h100());
  eager_rows.eager = true;
  EXPECT_NE(seg::forced_plan_refusal(rows(1024, 64), eager_rows, 4, 4, h100()), "");
  // Past what the workspace holds per chunk, the chunk grows (and there are no tiles).
  pl = seg::make_plan(ragged(2000, std::uint64_t(1) << 40), 4, 16, false, h100());
  EXPECT_EQ(pl.how, seg::strategy::ragged);
  EXPECT_EQ(pl.tiles, 0u);
  EXPECT_LE(pl.chunks * seg::ragged_chunk_bytes(16), 4u << 20);
  EXPECT_GE(pl.chunk * pl.chunks, std::uint64_t(1) << 40);
  for (std::uint64_t inner : {16u, 256u, 4096u, 65536u}) {
    const auto c = seg::make_plan(columns((1u << 28) / inner, inner), 4, 4, false, h100());
    const std::uint64_t cpt = std::uint64_t(c.col_vecs) * 4;
    if (inner > 16) {
      EXPECT_LE(c.per_seg * cpt, 16u << 10) << inner;
    }
    EXPECT_GE(c.col_vecs, inner >= 32 ? 8 : 4) << inner;
    EXPECT_GE(std::uint64_t(c.per_seg) * ((inner + cpt - 1) / cpt), 1000u) << inner;  // the GPU is filled
  }
}

// Blocks sharing a tile pay a fixed combine: where the narrowest tiles, a block each, fit one wave
// and need at most kCombineRounds more rounds of loads per lane than the shared plan, they run
// alone (256 x 4096: 128 tiles of 32 columns, 8 rows per lane); longer axes still share
// (4096 x 256: 16 rounds alone; 4096 x 4096: 16 rounds alone against 8 shared).
TEST(SegmentedPlanCpu, ShortAxesRunTilesAlone) {
  seg::device_limits two = h100();
  two.columns_blocks_per_sm = 2;
  auto pl = seg::make_plan(columns(256, 4096), 4, 4, false, two);
  EXPECT_EQ(pl.how, seg::strategy::columns);
  EXPECT_EQ(pl.per_seg, 1u);
  EXPECT_EQ(pl.col_vecs, 8);
  EXPECT_EQ(pl.blocks, 128u);
  pl = seg::make_plan(columns(4096, 256), 4, 4, false, two);
  EXPECT_EQ(pl.how, seg::strategy::columns);
  EXPECT_GT(pl.per_seg, 1u);
  pl = seg::make_plan(columns(4096, 4096), 4, 4, false, two);
  EXPECT_GT(pl.per_seg, 1u);
  // More tiles than resident blocks at the narrowest width: the wide-tile rule as before.
  pl = seg::make_plan(columns(256, 1u << 16), 4, 4, false, two);
  EXPECT_EQ(pl.per_seg, 1u);
  EXPECT_GE(pl.col_vecs, 16);
}

// The sweep's candidates (`tally bench segmented --sweep`): thin plans and column tiles, each
// within the workspace (partials and tile counters), none twice.
TEST(SegmentedPlanCpu, ColumnCandidatesFitTheWorkspace) {
  for (const auto& shape : {std::pair<std::uint64_t, std::uint64_t>{1u << 20, 16}, {4096, 1u << 16}, {3000, 301}, {16, 1u << 20}}) {
    seg::problem p = columns(shape.first, shape.second);
    const auto cands = seg::column_candidates(p, 4, 4, h100());
    ASSERT_GE(cands.size(), 2u) << shape.first << " x " << shape.second;
    EXPECT_EQ(cands[0].how, seg::strategy::thin);
    for (std::size_t i = 0; i < cands.size(); ++i) {
      const seg::plan& c = cands[i];
      EXPECT_GE(c.blocks, 1u);
      EXPECT_LE(seg::scratch_bytes(p, c, 4, 4), h100().partial_bytes);
      if (c.how == seg::strategy::columns && c.per_seg > 1) {
        const std::uint64_t cpt = std::uint64_t(c.col_vecs) * (c.vec ? 4 : 1);
        EXPECT_LE((shape.second + cpt - 1) / cpt, h100().max_tiles);
      }
      for (std::size_t j = 0; j < i; ++j)
        EXPECT_FALSE(cands[j].how == c.how && cands[j].col_vecs == c.col_vecs && cands[j].per_seg == c.per_seg &&
                     cands[j].group == c.group && cands[j].col_ring == c.col_ring && cands[j].col_lean == c.col_lean);
      // Two rounds in flight: the twin right after its one-round plan, where each lane has two
      // whole rounds of eight rows (f32, 16-byte loads).
      if (c.col_ring) {
        ASSERT_GT(i, 0u);
        EXPECT_EQ(cands[i - 1].col_vecs, c.col_vecs);
        EXPECT_EQ(cands[i - 1].per_seg, c.per_seg);
        EXPECT_FALSE(cands[i - 1].col_ring);
        EXPECT_EQ(c.how, seg::strategy::columns);
        EXPECT_TRUE(c.vec);
        const std::uint64_t lanes = 256 / static_cast<std::uint64_t>(c.col_vecs);
        EXPECT_GE(((shape.first + c.per_seg - 1) / c.per_seg + lanes - 1) / lanes, 16u);
        EXPECT_EQ(seg::forced_plan_refusal(p, c, 4, 4, h100()), "");
        EXPECT_NE(seg::forced_plan_refusal(p, c, 4, 16, h100()), "");  // argmax's accumulators
        EXPECT_NE(seg::forced_plan_refusal(p, c, 8, 8, h100()), "");
      }
    }
  }
  // 4096 rows of 65536 f32: c64 one-round plans each with a twin; none for argmax (16-byte
  // accumulators), f64, or rows not a multiple of four elements (element loads).
  const auto twins = [](const std::vector<seg::plan>& cs) {
    return std::count_if(cs.begin(), cs.end(), [](const seg::plan& c) { return c.col_ring; });
  };
  EXPECT_GT(twins(seg::column_candidates(columns(4096, 1u << 16), 4, 4, h100())), 0);
  EXPECT_EQ(twins(seg::column_candidates(columns(4096, 1u << 16), 4, 16, h100())), 0);
  EXPECT_EQ(twins(seg::column_candidates(columns(4096, 1u << 16), 8, 8, h100())), 0);
  EXPECT_EQ(twins(seg::column_candidates(columns(3000, 301), 4, 4, h100())), 0);
  // The rule takes a twin where its tiles run a block each and twice as wide still cover 90% of
  // the SMs: 256 x 65536 f32 with two blocks an SM (the columns kernel's real residency) is 128
  // tiles of c128, two rounds in flight; not for argmax's or f64's accumulators, element loads,
  // shared tiles (8 blocks an SM: 256 tiles x 2), or too few tiles (256 x 4096: 64 of c16).
  seg::device_limits two = h100();
  two.columns_blocks_per_sm = 2;
  seg::plan rule = seg::make_plan(columns(256, 1u << 16), 4, 4, false, two);
  EXPECT_TRUE(rule.col_ring);
  EXPECT_EQ(rule.col_vecs, 128);
  EXPECT_EQ(rule.per_seg, 1u);
  EXPECT_EQ(rule.blocks, 128u);
  EXPECT_EQ(seg::forced_plan_refusal(columns(256, 1u << 16), rule, 4, 4, two), "");
  EXPECT_NE(rule.why.find("two rounds"), std::string::npos) << rule.why;
  EXPECT_TRUE(seg::make_plan(columns(4096, 1u << 16), 4, 4, false, two).col_ring);
  EXPECT_FALSE(seg::make_plan(columns(256, 1u << 16), 4, 16, false, two).col_ring);
  EXPECT_FALSE(seg::make_plan(columns(256, 1u << 16), 8, 8, false, two).col_ring);
  EXPECT_FALSE(seg::make_plan(columns(256, (1u << 16) + 1), 4, 4, false, two).col_ring);
  EXPECT_FALSE(seg::make_plan(columns(256, 1u << 16), 4, 4, false, h100()).col_ring);
  EXPECT_FALSE(seg::make_plan(columns(256, 4096), 4, 4, false, two).col_ring);
  EXPECT_FALSE(seg::make_plan(columns(16, 1u << 16), 4, 4, false, two).col_ring);  // thin
  seg::plan ring_rows = seg::make_plan(rows(100, 100), 4, 4, false, h100());
  ring_rows.col_ring = true;
  EXPECT_NE(seg::forced_plan_refusal(rows(100, 100), ring_rows, 4, 4, h100()), "");
  EXPECT_TRUE(seg::column_candidates(rows(100, 100), 4, 4, h100()).empty());
}

TEST(SegmentedPlanCpu, SameShapeSamePlan) {
  const auto a = seg::make_plan(rows(12345, 777), 8, 4, false, h100());
  const auto b = seg::make_plan(rows(12345, 777), 8, 4, false, h100());
  EXPECT_EQ(a.how, b.how);
  EXPECT_EQ(a.group, b.group);
  EXPECT_EQ(a.blocks, b.blocks);
  EXPECT_EQ(a.per_seg, b.per_seg);
}

// Argument errors are found before anything touches a GPU.
TEST(SegmentedArgsCpu, ClearErrors) {
  alignas(16) static float fake[64];
  float* d = fake;
  EXPECT_NE(error_of([&] { reduce_rows(d, 4, 10, 8, dtype::f32, op::sum, d); }).find("ld 8 is smaller than a row"),
            std::string::npos);
  const std::uint64_t dims[3] = {2, 3, 4};
  EXPECT_NE(error_of([&] { reduce_axis(d, dims, 3, 2, 2, dtype::f32, op::sum, d); }).find("out of range"),
            std::string::npos);
  EXPECT_NE(error_of([&] { reduce_axis(d, dims, 3, -1, 1, dtype::f32, op::sum, d); }).find("out of range"),
            std::string::npos);
  EXPECT_NE(error_of([&] { reduce_rows(nullptr, 4, 10, 10, dtype::f32, op::sum, d); }).find("d_in is null"),
            std::string::npos);
  EXPECT_NE(error_of([&] { reduce_rows(d, 4, 10, 10, dtype::f32, op::bit_and, d); }).find("bitwise"),
            std::string::npos);
  options ex;
  ex.mode = accuracy::exact;
  EXPECT_NE(error_of([&] { reduce_columns(d, 4, 10, 10, dtype::f32, op::sum, d, nullptr, ex); }).find("exact mode runs along the last axis"),
            std::string::npos);
  EXPECT_NE(error_of([&] { reduce_segments(d, 10, nullptr, nullptr, 3, dtype::f32, op::sum, d); }).find("d_begin is null"),
            std::string::npos);
  EXPECT_NE(error_of([&] { reduce_rows(d, 4, 10, 10, dtype::f32, op::argmax, reinterpret_cast<char*>(d) + 4); })
                .find("not aligned to 8 bytes"),
            std::string::npos);
  EXPECT_NE(error_of([&] { stats_rows(d, 4, 10, 10, dtype::b8, d); }).find("b8"), std::string::npos);
  // A stride near 2^64 (a negative one made unsigned) and spans that wrap: refused by name, not
  // wrapped to a few elements that the memory check would pass (or to none, past a null check).
  const std::uint64_t huge = ~std::uint64_t(0);
  EXPECT_NE(error_of([&] { reduce_rows(d, 2, 5, huge, dtype::f32, op::sum, d); }).find("rows x ld + cols overflows"),
            std::string::npos);
  EXPECT_NE(error_of([&] { reduce_rows(nullptr, 3, 2, (huge >> 1), dtype::f32, op::sum, d); })
                .find("rows x ld + cols overflows"),
            std::string::npos);
  EXPECT_NE(error_of([&] { reduce_columns(d, 2, 5, huge, dtype::f32, op::sum, d); }).find("overflows"),
            std::string::npos);
  EXPECT_NE(error_of([&] { stats_rows(d, 2, 5, huge, dtype::f64, d); }).find("overflows"), std::string::npos);
  // A zero dimension hides the others' product from the size's check, not from the results'.
  const std::uint64_t wide[3] = {1ull << 32, 0, 1ull << 32};
  EXPECT_NE(error_of([&] { reduce_axis(d, wide, 3, 1, 1, dtype::f32, op::sum, d); }).find("number of results overflows"),
            std::string::npos);
}

}  // namespace
// Plain ops' rows of one or two rounds of 256 x 4 whole aligned vectors take the lean split
// kernel (the same blocks as the split kernel, so the same bits); rows that are not whole aligned
// vectors, longer rows (512-thread blocks, several a row) and other ops keep the split kernel; the
// sweep has the lean kernel beside the plan it replaces; a forced lean plan that does not fit is
// refused.
TEST(SegmentedPlanCpu, PlainOpsTakeTheLeanSplitKernelOnWholeVectors) {
  seg::device_limits plain = h100();
  plain.split_lean = true;
  for (const std::uint64_t cols : {std::uint64_t(4096), std::uint64_t(6144)}) {
    const seg::plan a = seg::make_plan(rows(4096, cols), 4, 4, false, plain);
    const seg::plan b = seg::make_plan(rows(4096, cols), 4, 4, false, h100());
    ASSERT_EQ(a.how, seg::strategy::split) << cols;
    ASSERT_EQ(b.how, seg::strategy::split) << cols;
    EXPECT_TRUE(a.split_lean) << a.why;
    EXPECT_FALSE(b.split_lean);
    EXPECT_EQ(a.split_block, seg::kSplitBlockSmall);
    EXPECT_EQ(a.split_block, b.split_block);
    EXPECT_EQ(a.blocks, b.blocks);
    EXPECT_EQ(a.per_seg, 1u);
    EXPECT_NE(a.why.find("lean"), std::string::npos) << a.why;
    EXPECT_EQ(seg::forced_plan_refusal(rows(4096, cols), a, 4, 4, plain), "");
    EXPECT_NE(seg::forced_plan_refusal(rows(4096, cols), a, 4, 16, h100()), "");
  }
  seg::problem ragged_end = rows(4096, 4095);  // not whole vectors
  seg::problem unaligned = rows(4096, 4096);
  unaligned.aligned16 = false;
  seg::problem odd_stride = rows(4096, 4096);
  odd_stride.outer_stride = 4097;
  const seg::plan lean_plan = seg::make_plan(rows(4096, 4096), 4, 4, false, plain);
  for (const seg::problem& p : {ragged_end, unaligned, odd_stride}) {
    const seg::plan r = seg::make_plan(p, 4, 4, false, plain);  // lane groups or split blocks
    EXPECT_FALSE(r.split_lean) << r.why;
    EXPECT_NE(seg::forced_plan_refusal(p, lean_plan, 4, 4, plain), "");
  }
  EXPECT_FALSE(seg::make_plan(rows(16, 1u << 20), 4, 4, false, plain).split_lean);  // 512-thread blocks
  int lean = 0;
  for (const seg::plan& p : seg::row_candidates(rows(1u << 8, 4096), 4, 4, plain)) {
    if (!p.split_lean) continue;
    ++lean;
    EXPECT_EQ(p.split_block, seg::kSplitBlockSmall);
    EXPECT_EQ(p.per_seg, 1u);
  }
  EXPECT_EQ(lean, 1);
  for (const seg::plan& p : seg::row_candidates(rows(1u << 8, 4096), 4, 4, h100())) EXPECT_FALSE(p.split_lean);
}

// Plain ops' column tiles of 16-byte loads take the lean columns kernel where it fits its
// registers (columns_lean): the tiles and shares of the columns kernel's plan (so its bits),
// never the ring; element loads, thin plans and counts past 32 bits keep the columns kernel; the
// sweep has the lean kernel beside each one-round plan; a forced lean plan that does not fit is
// refused.
TEST(SegmentedPlanCpu, PlainOpsTakeTheLeanColumnKernelOnVectorLoads) {
  seg::device_limits two = h100(), lean = h100();
  two.columns_blocks_per_sm = 2;  // the f32 sum's columns kernel
  lean.columns_blocks_per_sm = 2;
  lean.columns_lean = true;
  for (const auto& shape : {std::pair<std::uint64_t, std::uint64_t>{4096, 4096}, {1u << 16, 16}, {4096, 256},
                            {256, 1u << 16}, {4096, 1u << 16}, {300, 40}}) {
    const seg::problem p = columns(shape.first, shape.second);
    const std::string what = std::to_string(shape.first) + " x " + std::to_string(shape.second);
    const seg::plan a = seg::make_plan(p, 4, 4, false, lean), b = seg::make_plan(p, 4, 4, false, two);
    ASSERT_EQ(a.how, seg::strategy::columns) << what;
    ASSERT_EQ(b.how, seg::strategy::columns) << what;
    EXPECT_TRUE(a.col_lean) << what << ": " << a.why;
    EXPECT_FALSE(b.col_lean) << what;
    EXPECT_FALSE(a.col_ring) << what;
    EXPECT_LE(a.per_seg, b.per_seg) << what;    // as many shares or fewer,
    EXPECT_LE(a.col_vecs, b.col_vecs) << what;  // the same tiles or narrower (fewer partials a tile)
    // A block a tile's share (the columns kernel's grid stops at four waves and loops).
    const std::uint64_t cpt = std::uint64_t(a.col_vecs) * 4;
    EXPECT_EQ(a.blocks, (shape.second + cpt - 1) / cpt * a.per_seg) << what;
    seg::plan seven = a;
    seven.blocks = 7;
    EXPECT_NE(seg::forced_plan_refusal(p, seven, 4, 4, lean), "") << what;
    EXPECT_NE(a.why.find("lean"), std::string::npos) << a.why;
    EXPECT_EQ(seg::forced_plan_refusal(p, a, 4, 4, lean), "") << what;
    EXPECT_NE(seg::forced_plan_refusal(p, a, 4, 4, two), "") << what;  // the op's lean kernel spills
    seg::plan ring = a;
    ring.col_ring = true;
    EXPECT_NE(seg::forced_plan_refusal(p, ring, 4, 4, lean), "") << what;
    // f64 and f16 sums take it too where their kernels fit (the flag is per op and type).
    EXPECT_TRUE(seg::make_plan(p, 8, 8, false, lean).col_lean) << what;
  }
  // The lean rule's tiles (the H200's column sweep, plan.cpp): 4096 x 4096 c32 x8 as the columns
  // kernel's; 2^16 x 16 c4 x128; shared tiles with at most kLeanTilePartials partials (4096 x
  // 256: c16 x32 where the columns kernel takes c32 x64; 2^16 x 256 c8 x33 for c16 x66); 256 x
  // 65536 c64 where the columns kernel takes the ring (c128 r); 256 x 2^20 tiles where the columns
  // kernel's rule takes the thin kernel, narrowed to eight waves of four blocks an SM (c32: 8192).
  const auto pick = [&](std::uint64_t r, std::uint64_t c) {
    const seg::plan q = seg::make_plan(columns(r, c), 4, 4, false, lean);
    EXPECT_EQ(q.how, seg::strategy::columns) << r << " x " << c;
    return std::to_string(q.col_vecs) + " x" + std::to_string(q.per_seg) + (q.col_lean ? " lean" : "");
  };
  EXPECT_EQ(pick(4096, 4096), "32 x8 lean");
  EXPECT_EQ(pick(1u << 16, 16), "4 x128 lean");
  EXPECT_EQ(pick(4096, 256), "16 x32 lean");
  EXPECT_EQ(pick(1u << 16, 256), "8 x33 lean");
  EXPECT_EQ(pick(256, 1u << 16), "64 x1 lean");
  EXPECT_EQ(pick(256, 1u << 20), "32 x1 lean");
  EXPECT_TRUE(seg::make_plan(columns(256, 1u << 16), 4, 4, false, two).col_ring);
  EXPECT_EQ(seg::make_plan(columns(256, 1u << 20), 4, 4, false, two).how, seg::strategy::thin);
  EXPECT_EQ(seg::make_plan(columns(16, 1u << 24), 4, 4, false, lean).how, seg::strategy::thin);  // a short axis
  // Element loads (rows of 4097 f32), thin plans, rows and an axis past 2^31 rows: no lean kernel.
  const seg::plan four = seg::make_plan(columns(4096, 4096), 4, 4, false, lean);
  seg::problem long_axis = columns(std::uint64_t(1) << 31, 16);
  for (const seg::problem& p : {columns(4096, 4097), long_axis}) {
    const seg::plan r = seg::make_plan(p, 4, 4, false, lean);
    EXPECT_FALSE(r.col_lean) << r.why;
    EXPECT_NE(seg::forced_plan_refusal(p, four, 4, 4, lean), "");
  }
  EXPECT_EQ(seg::make_plan(columns(16, 1u << 16), 4, 4, false, lean).how, seg::strategy::thin);
  EXPECT_NE(seg::forced_plan_refusal(rows(4096, 4096), four, 4, 4, lean), "");
  // The same tiles and blocks where 16-byte loads do not fit: a row stride of 4097 elements, a
  // pointer not 16-byte aligned; and tiles wider than the block or not a power of two.
  seg::problem odd_ld = columns(4096, 4096), unaligned = columns(4096, 4096);
  odd_ld.length_stride = 4097;
  unaligned.aligned16 = false;
  for (const seg::problem& p : {odd_ld, unaligned}) {
    EXPECT_NE(seg::forced_plan_refusal(p, four, 4, 4, lean), "");
    seg::plan plain_tiles = four;
    plain_tiles.col_lean = false;
    plain_tiles.blocks = 256;
    EXPECT_NE(seg::forced_plan_refusal(p, plain_tiles, 4, 4, lean), "");  // the columns kernel's 16-byte loads too
  }
  for (const int cv : {0, 3, 512}) {
    seg::plan bad = four;
    bad.col_vecs = cv;
    EXPECT_NE(seg::forced_plan_refusal(columns(4096, 4096), bad, 4, 4, lean), "") << cv;
  }
  // The sweep: a lean twin right after each one-round plan of 16-byte loads, none without the flag
  // or for element loads.
  int twins = 0;
  const auto cands = seg::column_candidates(columns(4096, 4096), 4, 4, lean);
  for (std::size_t i = 0; i < cands.size(); ++i) {
    if (!cands[i].col_lean) continue;
    ++twins;
    ASSERT_GT(i, 0u);
    EXPECT_FALSE(cands[i - 1].col_lean);
    EXPECT_FALSE(cands[i - 1].col_ring);
    EXPECT_FALSE(cands[i].col_ring);
    EXPECT_EQ(cands[i - 1].col_vecs, cands[i].col_vecs);
    EXPECT_EQ(cands[i - 1].per_seg, cands[i].per_seg);
    EXPECT_GE(cands[i].blocks, cands[i - 1].blocks);
    EXPECT_EQ(seg::forced_plan_refusal(columns(4096, 4096), cands[i], 4, 4, lean), "");
  }
  EXPECT_GT(twins, 10);
  for (const seg::plan& c : seg::column_candidates(columns(4096, 4096), 4, 4, two)) EXPECT_FALSE(c.col_lean);
  for (const seg::plan& c : seg::column_candidates(columns(4096, 4097), 4, 4, lean)) EXPECT_FALSE(c.col_lean);
}

TEST(SegmentedPlanCpu, RowCandidatesAreTheRowPlansWithinTheWorkspace) {
  // 2^8 rows of 4096 f32 (1024 vectors): lane groups of 4-32, each with four and with eight
  // loads in flight, 256-thread blocks 1, 2 and 4 per row, 512-thread blocks 1 and 2 (more would
  // leave some threads without a vector); the rule's pick among them.
  const auto c = seg::row_candidates(rows(1u << 8, 4096), 4, 4, h100());
  int groups = 0, groups8 = 0, small = 0, large = 0;
  for (const seg::plan& p : c) {
    if (p.how == seg::strategy::group) {
      ++(p.unroll == 8 ? groups8 : groups);
      EXPECT_TRUE(p.unroll == 4 || p.unroll == 8);
      EXPECT_GE(p.group, 4);
      EXPECT_LE(p.group, 32);
    } else {
      ASSERT_EQ(p.how, seg::strategy::split);
      ++(p.split_block == seg::kSplitBlockSmall ? small : large);
      EXPECT_LE(p.per_seg * static_cast<unsigned>(p.split_block), 1024u);
    }
    EXPECT_GT(p.blocks, 0u);
  }
  EXPECT_EQ(groups, 4);
  EXPECT_EQ(groups8, 4);
  EXPECT_EQ(small, 3);
  EXPECT_EQ(large, 2);
  const seg::plan rule = seg::make_plan(rows(1u << 8, 4096), 4, 4, false, h100());
  bool found = false;
  for (const seg::plan& p : c)
    found = found || (p.how == rule.how && p.per_seg == rule.per_seg && p.split_block == rule.split_block);
  EXPECT_TRUE(found);
  // Rows of 64 elements (16 vectors): row tiles with four and eight steps in flight, groups of 4
  // (four vectors a lane: no eight-load form), no split blocks (rows under 32 vectors); rows of
  // 16 elements: the two row tiles alone; rows of 4096 are no row tile. No candidates for
  // columns, ragged or dot.
  const auto c64 = seg::row_candidates(rows(1u << 10, 64), 4, 4, h100());
  ASSERT_EQ(c64.size(), 3u);
  EXPECT_EQ(c64[0].how, seg::strategy::rowtile);
  EXPECT_EQ(c64[0].unroll, 4);
  EXPECT_EQ(c64[1].how, seg::strategy::rowtile);
  EXPECT_EQ(c64[1].unroll, 8);
  EXPECT_EQ(c64[2].how, seg::strategy::group);
  EXPECT_EQ(c64[2].group, 4);
  EXPECT_EQ(seg::row_candidates(rows(1u << 10, 16), 4, 4, h100()).size(), 2u);
  // Rows enough for two waves of flat blocks add each row tile and lane group as a flat grid: 2^24
  // rows of 16 f32 the row tiles u4, u4 flat, u8, u8 flat; 2^18 rows of 256 the lane groups (g4,
  // g8 and g16 with four loads in flight, g4 and g8 with eight) and those of four as flat grids.
  const auto c24 = seg::row_candidates(rows(1u << 24, 16), 4, 4, h100());
  ASSERT_EQ(c24.size(), 4u);
  for (std::size_t k = 0; k < c24.size(); ++k) {
    EXPECT_EQ(c24[k].flat, k % 2 == 1) << k;
    if (k % 2 == 1) {
      EXPECT_EQ(c24[k].how, c24[k - 1].how);
      EXPECT_EQ(c24[k].unroll, c24[k - 1].unroll);
      EXPECT_GT(c24[k].blocks, c24[k - 1].blocks);
    }
  }
  int groups16 = 0, flat16 = 0;
  for (const seg::plan& p : seg::row_candidates(rows(1u << 18, 256), 4, 4, h100())) {
    if (p.how != seg::strategy::group) continue;
    ++(p.flat ? flat16 : groups16);
    if (p.flat) {
      EXPECT_EQ(p.unroll, 4);
      EXPECT_EQ(p.blocks, (1u << 18) * static_cast<unsigned>(p.group) / 256u) << p.group;
    }
  }
  EXPECT_EQ(groups16, 5);
  EXPECT_EQ(flat16, 3);
  for (const seg::plan& p : c) EXPECT_NE(p.how, seg::strategy::rowtile);
  // The workspace's limits: 4096 rows are more than its 2048 per-segment counters (one block
  // each); 2^20 rows of 2^14 f32 at 4 bytes a partial fill its 4 MiB with one block each.
  for (const seg::plan& p : seg::row_candidates(rows(4096, 1u << 14), 4, 4, h100())) EXPECT_EQ(p.per_seg, 1u);
  seg::device_limits tight = h100();
  tight.partial_bytes = 4096u * 4u * 2u;  // two partials per row of 4096 rows
  tight.max_tiles = 1u << 20;
  unsigned most = 0;
  for (const seg::plan& p : seg::row_candidates(rows(4096, 1u << 14), 4, 4, tight)) most = std::max(most, p.per_seg);
  EXPECT_EQ(most, 2u);
  EXPECT_TRUE(seg::row_candidates(columns(1000, 16), 4, 4, h100()).empty());
}

}  // namespace tally::test
