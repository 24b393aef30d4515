// The tuning policy's rule on device properties alone (no GPU needed): the GPUs measured here,
// GPUs nobody here has measured, and the rule's invariants.
#include <gtest/gtest.h>

#include <cstring>

#include "core/policy.hpp"

namespace tally::test {
namespace {

using core::depth;
using core::device_facts;
using core::family;
using core::make_policy;

constexpr std::uint64_t MiB = std::uint64_t(1) << 20;

device_facts facts(const char* name, int sms, std::uint64_t l2, double gbps) {
  device_facts f;
  f.name = name;
  f.sm_count = sms;
  f.cc_major = 9;
  f.l2_bytes = l2;
  f.bandwidth_gbps = gbps;
  return f;
}

// Bytes in flight per SM of a compiled shape at `per_sm` resident blocks.
double inflight(int elem_bytes, family f, depth d, int per_sm, bool binary = false) {
  return core::inflight_bytes(core::compiled_shape(elem_bytes, f, d), per_sm, binary);
}

TEST(PolicyCpu, NeedFollowsBandwidthPerSm) {
  const auto h100 = make_policy(facts("NVIDIA H100 80GB HBM3", 132, 50 * MiB, 3352.32));
  const auto h200 = make_policy(facts("NVIDIA H200", 132, 60 * MiB, 4814.0));
  EXPECT_NEAR(h100.need_bytes_per_sm, 3352.32 / 132 * 1e3 * h100.inflight_us, 1.0);
  EXPECT_NEAR(h200.need_bytes_per_sm / h100.need_bytes_per_sm, 4814.0 / 3352.32, 1e-9);
  // Same bandwidth on fewer SMs asks more of each SM.
  const auto fewer = make_policy(facts("smaller part", 66, 50 * MiB, 3352.32));
  EXPECT_NEAR(fewer.need_bytes_per_sm, 2 * h100.need_bytes_per_sm, 1.0);
}

TEST(PolicyCpu, GridThresholdScalesWithL2) {
  const auto h100 = make_policy(facts("NVIDIA H100 80GB HBM3", 132, 50 * MiB, 3352.32));
  const auto h200 = make_policy(facts("NVIDIA H200", 132, 60 * MiB, 4814.0));
  EXPECT_EQ(h100.grid.full_grid_min_bytes, 96 * MiB);  // the threshold measured on the H100
  EXPECT_NEAR(double(h200.grid.full_grid_min_bytes) / h100.grid.full_grid_min_bytes, 60.0 / 50.0, 1e-6);
  EXPECT_LT(h200.grid.full_grid_min_bytes_binary, h200.grid.full_grid_min_bytes);
}

// The measured GPUs: the rule keeps the shapes that read at the ceiling there (64 KiB in flight
// per SM: the plain f32 sum at two 512 x 4 blocks per SM) and sends the statistics, which fit one
// such block per SM, to their deep shape.
TEST(PolicyCpu, MeasuredGpusGetTheMeasuredShapes) {
  for (const auto& f : {facts("NVIDIA H100 80GB HBM3", 132, 50 * MiB, 3352.32), facts("NVIDIA H200", 132, 60 * MiB, 4814.0)}) {
    SCOPED_TRACE(f.name);
    const auto p = make_policy(f);
    EXPECT_EQ(core::choose_depth(p, family::plain, inflight(4, family::plain, depth::base, 2),
                                 inflight(4, family::plain, depth::deep, 2)),
              depth::base);
    EXPECT_EQ(core::choose_depth(p, family::folding, inflight(4, family::folding, depth::base, 1),
                                 inflight(4, family::folding, depth::deep, 1)),
              depth::deep);
  }
}

// The deep shape is for inputs read from memory: one that fits in the L2 takes base (launch.cuh,
// launch_choice::at), one byte past it deep.
TEST(PolicyCpu, DeepOnlyPastTheL2) {
  EXPECT_FALSE(core::deep_reads_memory(0, 60 * MiB));
  EXPECT_FALSE(core::deep_reads_memory(60 * MiB, 60 * MiB));
  EXPECT_TRUE(core::deep_reads_memory(60 * MiB + 1, 60 * MiB));
  EXPECT_TRUE(core::deep_reads_memory(std::uint64_t(4) << 30, 50 * MiB));
}

// The exact sums' one-round window: one deep round holds the input, more than a third full (f32
// in the compiled shapes: 5462-16384 elements, the launcher's window; the predicate for f64's
// shapes: 2731-8192).
TEST(PolicyCpu, ExactSumsTakeOneDeepRound) {
  using core::compiled_shape;
  const auto b4 = compiled_shape(4, family::exact, depth::base), d4 = compiled_shape(4, family::exact, depth::deep);
  EXPECT_EQ(core::round_elements(b4, 4), 8192u);
  EXPECT_EQ(core::round_elements(d4, 4), 16384u);
  EXPECT_FALSE(core::one_deep_round(4 * 4097, b4, d4));
  EXPECT_FALSE(core::one_deep_round(4 * 5461, b4, d4));
  EXPECT_TRUE(core::one_deep_round(4 * 5462, b4, d4));
  EXPECT_TRUE(core::one_deep_round(4 * 8192, b4, d4));
  EXPECT_TRUE(core::one_deep_round(4 * 16384, b4, d4));
  EXPECT_FALSE(core::one_deep_round(4 * 16385, b4, d4));
  const auto b8 = compiled_shape(8, family::exact, depth::base), d8 = compiled_shape(8, family::exact, depth::deep);
  EXPECT_FALSE(core::one_deep_round(8 * 2730, b8, d8));
  EXPECT_TRUE(core::one_deep_round(8 * 2731, b8, d8));
  EXPECT_TRUE(core::one_deep_round(8 * 8192, b8, d8));
  EXPECT_FALSE(core::one_deep_round(8 * 8193, b8, d8));
  EXPECT_FALSE(core::one_deep_round(4 * 8192, d4, b4));  // a "deep" no larger than base: never
}

// The exact sums' 256-thread blocks: where base's grid holds more than one block and a block in at
// most every second SM (132 SMs: 2 to 66 blocks; a GPU of 16 SMs: 2 to 8).
TEST(PolicyCpu, ExactSumsTakeHalfBlocksWhereTheGridIsSparse) {
  EXPECT_FALSE(core::exact_half_blocks(1, 132));
  EXPECT_TRUE(core::exact_half_blocks(2, 132));
  EXPECT_TRUE(core::exact_half_blocks(66, 132));
  EXPECT_FALSE(core::exact_half_blocks(67, 132));
  EXPECT_TRUE(core::exact_half_blocks(8, 16));
  EXPECT_FALSE(core::exact_half_blocks(9, 16));
  EXPECT_FALSE(core::exact_half_blocks(2, 3));
  EXPECT_EQ(core::exact_half_shape().block, 256);
}

// f32 exact sums and means of up to one round of one 256-thread block (4096 elements) take that
// block; f64 does not (it measured no faster there).
TEST(PolicyCpu, ExactF32SumsOfOneHalfBlockRound) {
  EXPECT_FALSE(core::exact_half_single(4, 0));
  EXPECT_TRUE(core::exact_half_single(4, 1));
  EXPECT_TRUE(core::exact_half_single(4, 4096));
  EXPECT_FALSE(core::exact_half_single(4, 4097));
  EXPECT_FALSE(core::exact_half_single(8, 1000));
}

// The statistics' narrow blocks: where base's grid holds a block in at most every second SM (132
// SMs: 1 to 66 blocks; 16 SMs: 1 to 8), and where it is one block, only if the narrow grid is one
// block or at least 32; 256 threads (f64 256 x 4, f32 256 x 8).
TEST(PolicyCpu, StatsTakeNarrowBlocksWhereTheGridIsSparse) {
  EXPECT_FALSE(core::stats_narrow_blocks(0, 0, 132));
  EXPECT_TRUE(core::stats_narrow_blocks(1, 1, 132));
  EXPECT_FALSE(core::stats_narrow_blocks(1, 12, 132));
  EXPECT_FALSE(core::stats_narrow_blocks(1, 31, 132));
  EXPECT_TRUE(core::stats_narrow_blocks(1, 32, 132));
  EXPECT_TRUE(core::stats_narrow_blocks(2, 4, 132));
  EXPECT_TRUE(core::stats_narrow_blocks(66, 132, 132));
  EXPECT_FALSE(core::stats_narrow_blocks(67, 132, 132));
  EXPECT_TRUE(core::stats_narrow_blocks(8, 16, 16));
  EXPECT_FALSE(core::stats_narrow_blocks(9, 16, 16));
  EXPECT_FALSE(core::stats_narrow_blocks(1, 16, 16));  // a small GPU: no split of a one-block input
  EXPECT_EQ(core::stats_narrow_shape(4).block, 256);
  EXPECT_EQ(core::stats_narrow_shape(8).block, 256);
  EXPECT_EQ(core::stats_narrow_shape(8).unroll, 4);
  EXPECT_EQ(core::stats_narrow_shape(4).unroll, 8);
}

// A GPU nobody here measured with twice the bandwidth per SM takes the deep shape for the plain
// sum; a slower one keeps the base shape even where the H200 would not.
TEST(PolicyCpu, UnmeasuredGpusGetASensibleShape) {
  const auto fast = make_policy(facts("a future part", 148, 126 * MiB, 8000.0));
  EXPECT_EQ(fast.entry, nullptr);
  EXPECT_GT(fast.need_bytes_per_sm, inflight(4, family::plain, depth::base, 2));
  EXPECT_EQ(core::choose_depth(fast, family::plain, inflight(4, family::plain, depth::base, 2),
                               inflight(4, family::plain, depth::deep, 2)),
            depth::deep);
  const auto slow = make_policy(facts("a smaller Hopper", 114, 50 * MiB, 2039.0));
  EXPECT_EQ(core::choose_depth(slow, family::plain, inflight(4, family::plain, depth::base, 2),
                               inflight(4, family::plain, depth::deep, 2)),
            depth::base);
  // Where neither shape covers the need, the one with more in flight; never a shape with less.
  EXPECT_EQ(core::choose_depth(fast, family::plain, 1000.0, 500.0), depth::base);
  EXPECT_EQ(core::choose_depth(fast, family::plain, 1000.0, 2000.0), depth::deep);
  EXPECT_FALSE(core::why_depth(fast, family::plain, 1000.0, 2000.0).empty());
}

TEST(PolicyCpu, ForcedDepthWinsAndIsUndone) {
  const auto p = make_policy(facts("NVIDIA H200", 132, 60 * MiB, 4814.0));
  core::force_depth(1);
  EXPECT_EQ(core::choose_depth(p, family::plain, 1e9, 1.0), depth::deep);
  core::force_depth(0);
  EXPECT_EQ(core::choose_depth(p, family::plain, 1.0, 1e9), depth::base);
  core::force_depth(-1);
  EXPECT_EQ(core::forced_depth(), -1);
  EXPECT_EQ(core::choose_depth(p, family::plain, 1.0, 1e9), depth::deep);
}

// The exact sums' dynamic chunks: the policy's (at least two rounds, an eighth of the input in
// one-round chunks at the end) on any GPU; forcing wins, out-of-range values are held to the
// kernel's range, and -1 gives the policy's back.
TEST(PolicyCpu, ExactChunksByPolicyUnlessForced) {
  const auto p = make_policy(facts("NVIDIA H200", 132, 60 * MiB, 4814.0));
  const auto other = make_policy(facts("A GPU nobody measured", 20, 16 * MiB, 800.0));
  EXPECT_EQ(core::exact_chunk_rounds(p), 2);
  EXPECT_EQ(core::exact_chunk_tail(p), 3);
  EXPECT_EQ(core::exact_chunk_rounds(other), core::exact_chunk_rounds(p));
  EXPECT_FALSE(core::forced_exact_chunks());
  core::force_exact_chunks(5, 1);
  EXPECT_TRUE(core::forced_exact_chunks());
  EXPECT_EQ(core::exact_chunk_rounds(p), 5);
  EXPECT_EQ(core::exact_chunk_tail(p), 1);
  core::force_exact_chunks(0, 99);  // zero rounds: one; a shift past 63: 63
  EXPECT_EQ(core::exact_chunk_rounds(p), 1);
  EXPECT_EQ(core::exact_chunk_tail(p), 63);
  core::force_exact_chunks(-1, -1);
  EXPECT_FALSE(core::forced_exact_chunks());
  EXPECT_EQ(core::exact_chunk_rounds(p), 2);
  EXPECT_EQ(core::exact_chunk_tail(p), 3);
}

// The dynamic schedule's shape: the H100's entry says base (one block an SM), the H200's deep (two
// an SM); the heavy ops and dot have no deep shape. A GPU nobody measured: base where one block
// keeps kDynamicMergeMargin x its need in flight, else deep; force_depth wins.
TEST(PolicyCpu, DynamicDepthByEntryAndRule) {
  const auto h100 = make_policy(facts("NVIDIA H100 80GB HBM3", 132, 50 * MiB, 3352.3));
  const auto h200 = make_policy(facts("NVIDIA H200", 132, 60 * MiB, 4814.3));
  EXPECT_EQ(core::dynamic_depth(h100, family::plain, false), depth::base);
  EXPECT_EQ(core::dynamic_depth(h100, family::folding, false), depth::base);
  EXPECT_EQ(core::dynamic_depth(h200, family::plain, false), depth::deep);
  EXPECT_EQ(core::dynamic_depth(h200, family::folding, false), depth::deep);
  EXPECT_EQ(core::dynamic_depth(h200, family::folding, true), depth::base);  // compensated
  EXPECT_EQ(core::dynamic_depth(h200, family::binary, false), depth::base);
  // Unmeasured: need = bandwidth per SM x 1.75 us. The plain base shape keeps 128 KiB, the
  // folding one 64 KiB.
  const auto slow = make_policy(facts("Slow GPU", 100, 40 * MiB, 1000.0));    // 17 KiB an SM
  const auto fast = make_policy(facts("Fast GPU", 100, 40 * MiB, 8000.0));    // 137 KiB an SM
  const auto mid = make_policy(facts("Middle GPU", 132, 60 * MiB, 4814.3));  // the H200's 62 KiB
  EXPECT_EQ(core::dynamic_depth(slow, family::folding, false), depth::base);
  EXPECT_EQ(core::dynamic_depth(fast, family::plain, false), depth::deep);
  EXPECT_EQ(core::dynamic_depth(mid, family::plain, false), depth::base);
  EXPECT_EQ(core::dynamic_depth(mid, family::folding, false), depth::deep);
  core::force_depth(0);
  EXPECT_EQ(core::dynamic_depth(h200, family::plain, false), depth::base);
  core::force_depth(1);
  EXPECT_EQ(core::dynamic_depth(h100, family::plain, false), depth::deep);
  EXPECT_EQ(core::dynamic_depth(h100, family::binary, false), depth::base);
  core::force_depth(-1);
  bool said = false;
  for (const auto& [k, v] : core::explain(h200))
    said = said || (k == "dynamic schedule" && v.find("plain (deep), folding (deep)") != std::string::npos);
  EXPECT_TRUE(said);
}

TEST(PolicyCpu, MeasuredEntriesNameTheirRun) {
  for (const auto& e : core::measured_entries()) {
    SCOPED_TRACE(e.name);
    EXPECT_GT(e.sm_count, 0);
    EXPECT_GT(std::strlen(e.run), 10u);
    EXPECT_GT(std::strlen(e.measured), 10u);
    EXPECT_GT(std::strlen(e.dynamic_measured), 10u);
    const auto p = make_policy(facts(e.name, e.sm_count, 50 * MiB, 3000.0));
    EXPECT_EQ(p.entry, &e);
  }
  const auto other = make_policy(facts("NVIDIA H200", 100, 60 * MiB, 4814.0));  // same name, other SM count
  EXPECT_EQ(other.entry, nullptr);
}

TEST(PolicyCpu, ExplainSaysWhatItRead) {
  const auto p = make_policy(facts("NVIDIA H200", 132, 60 * MiB, 4814.0));
  bool saw_need = false;
  for (const auto& [k, v] : core::explain(p)) saw_need = saw_need || (k == "bytes in flight needed" && !v.empty());
  EXPECT_TRUE(saw_need);
}

}  // namespace
}  // namespace tally::test

// The exact sum's schedule: dynamic from eight times the L2 up (tuning.hpp, exact_dynamic); the
// H100's L2 (50 MiB) and the H200's (60 MiB).
// The fast ops' dynamic schedule: from eight L2s of bytes read up; chunks of one round while their
// partials fit kChunkPartialBytes, never more chunks than that, every vector in some chunk.
TEST(PolicyCpu, DynamicScheduleFromEightL2s) {
  using namespace tally::core;
  const std::uint64_t h100 = std::uint64_t(50) << 20, h200 = std::uint64_t(60) << 20;
  EXPECT_FALSE(dynamic_schedule(std::uint64_t(256) << 20, h100));
  EXPECT_TRUE(dynamic_schedule(std::uint64_t(400) << 20, h100));
  EXPECT_FALSE(dynamic_schedule(std::uint64_t(400) << 20, h200));
  EXPECT_TRUE(dynamic_schedule(std::uint64_t(1) << 30, h200));
  EXPECT_FALSE(dynamic_schedule(0, h100));
  EXPECT_EQ(dynamic_shape(4, family::plain).unroll, 16);
  EXPECT_EQ(dynamic_shape(4, family::folding, depth::deep).min_blocks, 2);
  EXPECT_EQ(dynamic_shape(8, family::plain, depth::deep).accs, 2);
  // On where a measured entry says so, per family: the H100 every one-pass family, the H200 the
  // plain and folding ones (dot keeps the strided grid); off on GPUs nobody measured;
  // force_dynamic overrides both ways.
  const device_policy p100 = make_policy(device_facts{"NVIDIA H100 80GB HBM3", 132, 9, 0, h100, 3352.3});
  const device_policy p200 = make_policy(device_facts{"NVIDIA H200", 132, 9, 0, h200, 4814.3});
  const device_policy other = make_policy(device_facts{"Some GPU", 148, 10, 0, std::uint64_t(126) << 20, 8000});
  const family plain = family::plain, folding = family::folding, binary = family::binary;
  EXPECT_TRUE(uses_dynamic(p100, plain, std::uint64_t(1) << 30));
  EXPECT_TRUE(uses_dynamic(p100, binary, std::uint64_t(1) << 30));
  EXPECT_FALSE(uses_dynamic(p100, plain, std::uint64_t(256) << 20));
  EXPECT_TRUE(uses_dynamic(p200, plain, std::uint64_t(1) << 30));
  EXPECT_TRUE(uses_dynamic(p200, folding, std::uint64_t(1) << 30));
  EXPECT_FALSE(uses_dynamic(p200, binary, std::uint64_t(1) << 30));
  EXPECT_FALSE(uses_dynamic(p200, plain, std::uint64_t(256) << 20));
  EXPECT_FALSE(uses_dynamic(other, plain, std::uint64_t(4) << 30));
  // Heavy ops (compensated) keep the strided grid where their family takes the deep shape.
  EXPECT_TRUE(uses_dynamic(p100, folding, std::uint64_t(1) << 30, true));
  EXPECT_FALSE(uses_dynamic(p200, folding, std::uint64_t(1) << 30, true));
  force_dynamic(1);  // at every size
  EXPECT_TRUE(uses_dynamic(p200, binary, std::uint64_t(1) << 30));
  EXPECT_TRUE(uses_dynamic(p200, plain, 4096));
  force_dynamic(0);
  EXPECT_FALSE(uses_dynamic(p100, plain, std::uint64_t(1) << 30));
  force_dynamic(2);  // past the size rule, whatever the entry says
  EXPECT_TRUE(uses_dynamic(p200, binary, std::uint64_t(1) << 30));
  EXPECT_TRUE(uses_dynamic(p200, folding, std::uint64_t(1) << 30, true));
  EXPECT_FALSE(uses_dynamic(p200, plain, std::uint64_t(256) << 20));
  EXPECT_TRUE(uses_dynamic(other, plain, std::uint64_t(4) << 30));
  EXPECT_EQ(forced_dynamic(), 2);
  force_dynamic(-1);
  EXPECT_EQ(forced_dynamic(), -1);
  EXPECT_TRUE(uses_dynamic(p100, plain, std::uint64_t(1) << 30));
  const std::uint64_t round = 512 * 16;
  EXPECT_EQ(dynamic_chunks(1, round, 4), 1u);
  EXPECT_EQ(dynamic_chunks(round, round, 4), 1u);
  EXPECT_EQ(dynamic_chunks(round + 1, round, 4), 2u);
  EXPECT_EQ(dynamic_chunks(std::uint64_t(1) << 26, round, 4), 8192u);  // f32 2^28: 128 KiB chunks
  EXPECT_EQ(dynamic_chunks(std::uint64_t(1) << 26, round, 8, kHeavyChunkRounds), 8192u / kHeavyChunkRounds);
  EXPECT_EQ(dynamic_chunks(round + 1, round, 8, kHeavyChunkRounds), 1u);
  for (std::uint64_t acc : {4, 8, 16, 24, 32, 64})
    for (std::uint64_t nvec : {std::uint64_t(1) << 20, (std::uint64_t(1) << 28) + 5, (std::uint64_t(1) << 33) + 77}) {
      const std::uint64_t chunks = dynamic_chunks(nvec, round, acc);
      SCOPED_TRACE(testing::Message() << "acc " << acc << " nvec " << nvec);
      EXPECT_LE(chunks * acc, kChunkPartialBytes);
      // The kernel's range per chunk: ceil(nvec / chunks) rounded up to whole rounds.
      const std::uint64_t per = ((nvec + chunks - 1) / chunks + round - 1) / round * round;
      EXPECT_GE(per * chunks, nvec);
      EXPECT_LT(per * (chunks - 1), nvec) << "the last chunk holds something";
    }
}

TEST(PolicyCpu, ExactSumIsDynamicFromEightL2s) {
  using namespace tally::core;
  const std::uint64_t h100 = std::uint64_t(50) << 20, h200 = std::uint64_t(60) << 20;
  EXPECT_FALSE(exact_dynamic(4, std::uint64_t(1) << 24, h100));  // 64 MiB
  EXPECT_FALSE(exact_dynamic(4, std::uint64_t(1) << 26, h100));  // 256 MiB
  EXPECT_TRUE(exact_dynamic(4, std::uint64_t(1) << 27, h100));   // 512 MiB
  EXPECT_TRUE(exact_dynamic(4, std::uint64_t(1) << 28, h200));
  EXPECT_FALSE(exact_dynamic(4, std::uint64_t(1) << 26, h200));   // 256 MiB < 480
  EXPECT_TRUE(exact_dynamic(4, (std::uint64_t(120) << 20) + 1, h200));  // just past 480 MiB
  EXPECT_TRUE(exact_dynamic(8, std::uint64_t(1) << 26, h100));   // 512 MiB of f64
  EXPECT_TRUE(exact_dynamic(2, std::uint64_t(1) << 28, h100));   // 512 MiB of f16
  EXPECT_FALSE(exact_dynamic(4, 0, h100));
  // The dynamic schedule's shape: one block per SM of 512 x 8 for narrow elements, f64's base.
  EXPECT_EQ(exact_stream_shape(4).unroll, 8);
  EXPECT_EQ(exact_stream_shape(8).block, compiled_shape(8, family::exact, depth::base).block);
}
