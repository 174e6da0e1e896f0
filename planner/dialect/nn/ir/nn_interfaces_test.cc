// Tests OpShardingRule on hand-built rules: how placements follow from where
// a factor appears, and the rule's text form.
#include "planner/dialect/nn/ir/nn_interfaces.h"

#include <ostream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace loom::planner::nn {

// Lets gMock print placements in failure messages.
void PrintTo(const Placement& placement, std::ostream* os) { *os << placement.str(); }

namespace {

using ::testing::ElementsAre;
using ::testing::Optional;

// y[b, o] = sum_i x[b, i] w[i, o] + bias[o].
OpShardingRule linearRule() {
  OpShardingRule rule;
  const int64_t b = rule.addFactor("b", FactorKind::kBatch, 4);
  const int64_t i = rule.addFactor("i", FactorKind::kContracting, 8);
  const int64_t o = rule.addFactor("o", FactorKind::kOther, 6);
  rule.addOperand({{b}, {i}});
  rule.addOperand({{i}, {o}});
  rule.addOperand({{o}}, /*isAddend=*/true);
  rule.addResult({{b}, {o}});
  return rule;
}

TEST(PlacementTest, Str) {
  EXPECT_EQ(Placement::replicate().str(), "R");
  EXPECT_EQ(Placement::shard(2).str(), "S(2)");
  EXPECT_EQ(Placement::partial(ReductionKind::kSum).str(), "P(sum)");
  EXPECT_EQ(Placement::partial(ReductionKind::kMean).str(), "P(mean)");
}

TEST(OpShardingRuleTest, StrListsDimsAndFactors) {
  EXPECT_EQ(linearRule().str(),
            "([b, i], [i, o], +[o]) -> ([b, o]) "
            "{b=4 batch, i=8 contracting, o=6 other}");
}

TEST(OpShardingRuleTest, FindsFactorsByName) {
  const OpShardingRule rule = linearRule();
  EXPECT_THAT(rule.findFactor("o"), Optional(2));
  EXPECT_EQ(rule.findFactor("z"), std::nullopt);
}

TEST(OpShardingRuleTest, ShardedFactorShardsEveryDimItIsIn) {
  const auto placements = linearRule().placementsFor(0);
  ASSERT_TRUE(mlir::succeeded(placements));
  EXPECT_THAT(placements->operands,
              ElementsAre(Placement::shard(0), Placement::replicate(), Placement::replicate()));
  EXPECT_THAT(placements->results, ElementsAre(Placement::shard(0)));
}

TEST(OpShardingRuleTest, ContractingFactorMakesResultAndAddendPartial) {
  const auto placements = linearRule().placementsFor(1);
  ASSERT_TRUE(mlir::succeeded(placements));
  EXPECT_THAT(placements->operands, ElementsAre(Placement::shard(1), Placement::shard(0),
                                                Placement::partial(ReductionKind::kSum)));
  EXPECT_THAT(placements->results, ElementsAre(Placement::partial(ReductionKind::kSum)));
}

TEST(OpShardingRuleTest, FactorOnlyInAResultReplicatesTheOperands) {
  OpShardingRule rule;
  const int64_t v = rule.addFactor("v", FactorKind::kVocab, 10);
  const int64_t t = rule.addFactor("t", FactorKind::kBatch, 4);
  rule.addOperand({{t}});
  rule.addResult({{v}});
  const auto placements = rule.placementsFor(v);
  ASSERT_TRUE(mlir::succeeded(placements));
  EXPECT_THAT(placements->operands, ElementsAre(Placement::replicate()));
  EXPECT_THAT(placements->results, ElementsAre(Placement::shard(0)));
}

TEST(OpShardingRuleTest, MeanFactorMakesResultsPartialMean) {
  OpShardingRule rule;
  const int64_t t = rule.addFactor("t", FactorKind::kBatch, 4, false, ReductionKind::kMean);
  rule.addOperand({{t}});
  rule.addResult({});
  const auto placements = rule.placementsFor(t);
  ASSERT_TRUE(mlir::succeeded(placements));
  EXPECT_THAT(placements->results, ElementsAre(Placement::partial(ReductionKind::kMean)));
  EXPECT_EQ(rule.str(), "([t]) -> ([]) {t=4 batch:mean}");
}

TEST(OpShardingRuleTest, RefusesFactorsThatNeedReplication) {
  OpShardingRule rule;
  const int64_t h = rule.addFactor("h", FactorKind::kOther, 8, true);
  rule.addOperand({{h}});
  rule.addResult({{h}});
  EXPECT_TRUE(mlir::failed(rule.placementsFor(h)));
  EXPECT_EQ(rule.str(), "([h]) -> ([h]) {h=8 other:replicated}");
}

TEST(OpShardingRuleTest, MinorFactorOfACompoundDimIsNotABlockSharding) {
  OpShardingRule rule;
  const int64_t major = rule.addFactor("a", FactorKind::kOther, 2);
  const int64_t minor = rule.addFactor("b", FactorKind::kOther, 3);
  rule.addOperand({{major, minor}});
  rule.addResult({{major}, {minor}});
  EXPECT_EQ(rule.str(), "([{a, b}]) -> ([a, b]) {a=2 other, b=3 other}");
  const auto placements = rule.placementsFor(major);
  ASSERT_TRUE(mlir::succeeded(placements));
  EXPECT_THAT(placements->operands, ElementsAre(Placement::shard(0)));
  EXPECT_THAT(placements->results, ElementsAre(Placement::shard(0)));
  EXPECT_TRUE(mlir::failed(rule.placementsFor(minor)));
}

TEST(OpShardingRuleTest, FactorAfterSizeOneFactorsIsMajor) {
  OpShardingRule rule;
  const int64_t one = rule.addFactor("h", FactorKind::kHead, 1);
  const int64_t group = rule.addFactor("g", FactorKind::kHead, 4);
  rule.addOperand({{one, group}});
  rule.addResult({{one, group}});
  const auto placements = rule.placementsFor(group);
  ASSERT_TRUE(mlir::succeeded(placements));
  EXPECT_THAT(placements->operands, ElementsAre(Placement::shard(0)));
}

TEST(OpShardingRuleTest, DimWithoutFactorsPrintsAsOne) {
  OpShardingRule rule;
  const int64_t a = rule.addFactor("a", FactorKind::kOther, 6);
  rule.addOperand({{a}, {}});
  rule.addResult({{a}});
  EXPECT_EQ(rule.str(), "([a, 1]) -> ([a]) {a=6 other}");
}

}  // namespace
}  // namespace loom::planner::nn
