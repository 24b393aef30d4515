// The lab: the catalogue's metadata (CPU, runs in CI) and every variant verified at small sizes
// on the GPU (correct variants right, deliberately wrong ones caught).
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "lab/runner.hpp"
#include "support.hpp"

namespace tally::test {
namespace {

const std::set<std::string> kDeliberatelyWrong = {"hip-3", "hip-4", "numba-1", "numba-3"};

TEST(LabCpu, CatalogueIsComplete) {
  const auto& reg = lab::registry();
  ASSERT_GE(reg.size(), 25u) << "the design lists about 25 variants";
  std::set<std::string> ids;
  std::set<std::pair<std::string, int>> orders;
  const auto groups = lab::group_order();
  std::set<std::string> with_baseline, wrong;
  for (const auto& r : reg) {
    const auto& m = r.meta;
    EXPECT_TRUE(ids.insert(m.id).second) << "duplicate id " << m.id;
    EXPECT_TRUE(orders.insert({m.group, m.order}).second) << "duplicate order in " << m.group << ": " << m.id;
    EXPECT_NE(std::find(groups.begin(), groups.end(), m.group), groups.end()) << m.id << " has group " << m.group;
    for (const std::string* f : {&m.title, &m.origin, &m.change, &m.flaw, &m.requirements})
      EXPECT_FALSE(f->empty()) << m.id << " is missing metadata";
    if (m.order == 1) with_baseline.insert(m.group);
    if (!m.expected_correct) wrong.insert(m.id);
    for (const auto& p : m.params) EXPECT_FALSE(p.help.empty()) << m.id << " param " << p.name;
    ASSERT_NE(r.make, nullptr);
  }
  for (const auto& g : groups) EXPECT_TRUE(with_baseline.count(g)) << "group " << g << " has no order-1 baseline";
  EXPECT_EQ(wrong, kDeliberatelyWrong);
  for (const std::string id : {"hip-3", "numba-1"}) EXPECT_TRUE(lab::find(id)->meta.racy) << id;
  EXPECT_TRUE(lab::find("hip-4")->meta.constant_demo);
  for (const auto& r : reg) EXPECT_EQ(r.meta.dot, r.meta.group == "numba") << r.meta.id;
}

TEST(LabCpu, ListShowsEveryVariantByGroup) {
  const std::string text = lab::list_text();
  for (const auto& g : lab::group_order()) EXPECT_NE(text.find(lab::group_title(g)), std::string::npos) << g;
  for (const auto& r : lab::registry()) EXPECT_NE(text.find(r.meta.id), std::string::npos) << r.meta.id;
  EXPECT_NE(text.find("[deliberately WRONG]"), std::string::npos);
  // Grouped: every cuda variant is listed before the first hip one.
  EXPECT_LT(text.find("cuda-7"), text.find("hip-1"));
}

TEST(LabCpu, SizesAndParams) {
  EXPECT_EQ(lab::parse_size("2^24"), 16777216u);
  EXPECT_EQ(lab::parse_size("1000003"), 1000003u);
  EXPECT_EQ(lab::parse_size("1e6"), 1000000u);
  EXPECT_THROW(lab::parse_size("3^4"), error);
  EXPECT_THROW(lab::parse_size("lots"), error);
  const auto* r = lab::find("cuda-1");
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(lab::resolve_params(r->meta, {}).at("block"), 256);
  const auto p = lab::resolve_params(r->meta, {{"block", 512}, {"unroll", 4}});
  EXPECT_EQ(p.at("block"), 512);
  EXPECT_EQ(p.count("unroll"), 0u);  // overrides apply only where the variant has the param
}

// Every variant x dtype at small sizes.
class LabGpu : public ::testing::TestWithParam<std::string> {};

TEST_P(LabGpu, VerifiesAtSmallSizes) {
  TALLY_REQUIRE_GPU();
  const std::string id = GetParam();
  const auto* r = lab::find(id);
  ASSERT_NE(r, nullptr);
  const bool wrong = !r->meta.expected_correct;
  std::uint64_t seed = test_seed();
  for (dtype t : {dtype::f32, dtype::f64, dtype::i32})
    for (std::uint64_t n : {std::uint64_t(1), std::uint64_t(1000), std::uint64_t(4099), std::uint64_t(65537),
                            std::uint64_t(1) << 18}) {
      if (wrong && n < 1000) continue;  // one element can come out right by luck
      if (small_only() && n > 70000) continue;
      const lab::verdict v = lab::verify_variant(id, t, n, {}, ++seed);
      EXPECT_EQ(v.ok, !wrong) << id << " " << to_string(t) << " n=" << n << " seed=" << seed << ": " << v.text;
    }
}

// A block (or tpb) of 96 is not a power of two: a variant must either refuse it with a
// config_error naming the parameter or, where it generalises, still reduce correctly.
TEST_P(LabGpu, NonPowerOfTwoBlockIsRefusedOrCorrect) {
  TALLY_REQUIRE_GPU();
  const auto* r = lab::find(GetParam());
  for (const auto& p : r->meta.params) {
    if (p.name != "block" && p.name != "tpb") continue;
    const bool says_enforced = r->meta.requirements.find("power") != std::string::npos &&
                               r->meta.requirements.find("(enforced)") != std::string::npos &&
                               r->meta.requirements.find("any block") == std::string::npos;
    try {
      const lab::verdict v = lab::verify_variant(r->meta.id, dtype::f32, 5000, {{p.name, 96}}, 1);
      EXPECT_FALSE(says_enforced) << r->meta.id << " says it enforces a power of two but ran " << p.name << "=96";
      EXPECT_EQ(v.ok, r->meta.expected_correct) << r->meta.id << " with " << p.name << "=96: " << v.text;
    } catch (const lab::config_error& e) {
      EXPECT_NE(std::string(e.what()).find(p.name), std::string::npos) << e.what();
    }
  }
}

std::vector<std::string> all_ids() {
  std::vector<std::string> ids;
  for (const auto& r : lab::registry()) ids.push_back(r.meta.id);
  return ids;
}
INSTANTIATE_TEST_SUITE_P(Variants, LabGpu, ::testing::ValuesIn(all_ids()),
                         [](const ::testing::TestParamInfo<std::string>& i) {
                           std::string s = i.param;
                           std::replace(s.begin(), s.end(), '-', '_');
                           return s;
                         });

TEST(LabGpuDemo, BlockSizePatchIsRightOnlyOnConstantInput) {
  TALLY_REQUIRE_GPU();
  const std::uint64_t n = 1024 * 256 * 3;  // whole multiples of grid x block
  EXPECT_TRUE(lab::verify_variant("hip-4", dtype::f32, n, {}, 3, true).ok);
  EXPECT_FALSE(lab::verify_variant("hip-4", dtype::f32, n, {}, 3, false).ok);
}

}  // namespace
}  // namespace tally::test
