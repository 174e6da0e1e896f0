// Checks the sharding rule of every nn op and, for the factors the planner's
// strategies use (data, tensor, head and vocab parallelism), the placements
// they imply.
#include <ostream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "planner/dialect/nn/ir/nn_interfaces.h"
#include "planner/dialect/nn/ir/nn_ops.h"
#include "planner/dialect/nn/ir/test_util.h"

namespace loom::planner::nn {

// Lets gMock print placements in failure messages.
void PrintTo(const Placement& placement, std::ostream* os) { *os << placement.str(); }

namespace {

using ::testing::ElementsAre;

const Placement kR = Placement::replicate();
const Placement kSum = Placement::partial(ReductionKind::kSum);
const Placement kMean = Placement::partial(ReductionKind::kMean);
Placement S(int64_t dim) { return Placement::shard(dim); }

constexpr char kOps[] = R"mlir(
func.func @ops(%ids: tensor<2x4xi32>, %x: tensor<2x4x8xf32>,
               %w: tensor<8x6xf32>, %wt: tensor<6x8xf32>,
               %y: tensor<2x4x6xf32>, %b: tensor<6xf32>, %g: tensor<8xf32>,
               %table: tensor<10x8xf32>, %q: tensor<2x4x4x8xf32>,
               %k: tensor<2x4x2x8xf32>, %k1: tensor<2x4x1x8xf32>,
               %logits: tensor<2x4x10xf32>, %dloss: tensor<f32>,
               %h: tensor<2x4x16xf32>) {
  %0 = nn.embedding %ids, %table : (tensor<2x4xi32>, tensor<10x8xf32>) -> tensor<2x4x8xf32>
  %1 = nn.linear %x, %w, %b : (tensor<2x4x8xf32>, tensor<8x6xf32>, tensor<6xf32>) -> tensor<2x4x6xf32>
  %2 = nn.matmul %x, %w : (tensor<2x4x8xf32>, tensor<8x6xf32>) -> tensor<2x4x6xf32>
  %3 = nn.matmul %x, %wt transpose_rhs : (tensor<2x4x8xf32>, tensor<6x8xf32>) -> tensor<2x4x6xf32>
  %4 = nn.matmul %x, %y transpose_lhs : (tensor<2x4x8xf32>, tensor<2x4x6xf32>) -> tensor<8x6xf32>
  %5 = nn.rms_norm %x, %g epsilon 1.0e-05 : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %6 = nn.layer_norm %x, %g, %g epsilon 1.0e-05 : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %7 = nn.rope %k theta 1.0e+04 : (tensor<2x4x2x8xf32>) -> tensor<2x4x2x8xf32>
  %8 = nn.attention %q, %k, %k : (tensor<2x4x4x8xf32>, tensor<2x4x2x8xf32>, tensor<2x4x2x8xf32>) -> tensor<2x4x4x8xf32>
  %9 = nn.attention %k, %k, %k : (tensor<2x4x2x8xf32>, tensor<2x4x2x8xf32>, tensor<2x4x2x8xf32>) -> tensor<2x4x2x8xf32>
  %10 = nn.silu %x : (tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %11 = nn.add %x, %x : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %12 = nn.softmax %x : (tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %13 = nn.reshape %h : (tensor<2x4x16xf32>) -> tensor<2x4x2x8xf32>
  %14 = nn.transpose %x permutation [2, 0, 1] : (tensor<2x4x8xf32>) -> tensor<8x2x4xf32>
  %15 = nn.cross_entropy %logits, %ids : (tensor<2x4x10xf32>, tensor<2x4xi32>) -> tensor<f32>
  %16 = nn.embedding_grad %ids, %x : (tensor<2x4xi32>, tensor<2x4x8xf32>) -> tensor<10x8xf32>
  %17 = nn.reduce_sum %y dims [0, 1] : (tensor<2x4x6xf32>) -> tensor<6xf32>
  %18:2 = nn.rms_norm_grad %x, %g, %x epsilon 1.0e-05 : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<2x4x8xf32>) -> (tensor<2x4x8xf32>, tensor<8xf32>)
  %19:3 = nn.layer_norm_grad %x, %g, %x epsilon 1.0e-05 : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<2x4x8xf32>) -> (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>)
  %20:3 = nn.attention_grad %q, %k1, %k1, %q : (tensor<2x4x4x8xf32>, tensor<2x4x1x8xf32>, tensor<2x4x1x8xf32>, tensor<2x4x4x8xf32>) -> (tensor<2x4x4x8xf32>, tensor<2x4x1x8xf32>, tensor<2x4x1x8xf32>)
  %21 = nn.softmax_grad %x, %x : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %22 = nn.gelu_grad %x, %x : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %23 = nn.cross_entropy_grad %logits, %ids, %dloss scale 0.125 : (tensor<2x4x10xf32>, tensor<2x4xi32>, tensor<f32>) -> tensor<2x4x10xf32>
  %24 = nn.bias_add %y, %b : (tensor<2x4x6xf32>, tensor<6xf32>) -> tensor<2x4x6xf32>
  %25 = nn.vocab_max %logits vocab 10 : (tensor<2x4x10xf32>) -> tensor<2x4xf32>
  %26 = nn.vocab_stats %logits, %ids, %25 vocab 10 : (tensor<2x4x10xf32>, tensor<2x4xi32>, tensor<2x4xf32>) -> tensor<2x4x2xf32>
  %27 = nn.vocab_cross_entropy %26 : (tensor<2x4x2xf32>) -> tensor<f32>
  %28 = nn.vocab_cross_entropy_grad %logits, %ids, %25, %26, %dloss scale 0.125 vocab 10 : (tensor<2x4x10xf32>, tensor<2x4xi32>, tensor<2x4xf32>, tensor<2x4x2xf32>, tensor<f32>) -> tensor<2x4x10xf32>
  return
}
)mlir";

class NnShardingRulesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    loadNnDialects(context_);
    module_ = parseNnModule(context_, kOps);
    ASSERT_TRUE(module_);
    module_->walk([&](ShardingRuleOpInterface op) { rules_.push_back(op.getShardingRule()); });
  }

  // The placements of `factor` (by name) in the rule of op #index.
  FactorPlacements placements(size_t index, llvm::StringRef factor) {
    const OpShardingRule& rule = rules_.at(index);
    std::optional<int64_t> id = rule.findFactor(factor);
    EXPECT_TRUE(id.has_value()) << factor.str() << " in " << rule.str();
    auto result = rule.placementsFor(*id);
    EXPECT_TRUE(mlir::succeeded(result)) << factor.str() << " in " << rule.str();
    return mlir::succeeded(result) ? *result : FactorPlacements();
  }

  bool refuses(size_t index, llvm::StringRef factor) {
    const OpShardingRule& rule = rules_.at(index);
    return mlir::failed(rule.placementsFor(*rule.findFactor(factor)));
  }

  mlir::MLIRContext context_;
  mlir::OwningOpRef<mlir::ModuleOp> module_;
  std::vector<OpShardingRule> rules_;
};

TEST_F(NnShardingRulesTest, RuleOfEveryOp) {
  const std::vector<std::string> expected = {
      "([b0, b1], [v, h]) -> ([b0, b1, h]) {b0=2 batch, b1=4 batch, v=10 "
      "vocab, h=8 other}",
      "([b0, b1, i], [i, o], +[o]) -> ([b0, b1, o]) {b0=2 batch, b1=4 batch, "
      "i=8 contracting, o=6 other}",
      "([b0, b1, k], [k, n]) -> ([b0, b1, n]) {b0=2 batch, b1=4 batch, k=8 "
      "contracting, n=6 other}",
      "([b0, b1, k], [n, k]) -> ([b0, b1, n]) {b0=2 batch, b1=4 batch, k=8 "
      "contracting, n=6 other}",
      "([b0, b1, m], [b0, b1, n]) -> ([m, n]) {b0=2 batch, b1=4 batch, m=8 "
      "other, n=6 other}",
      "([b0, b1, h], [h]) -> ([b0, b1, h]) {b0=2 batch, b1=4 batch, h=8 "
      "other:replicated}",
      "([b0, b1, h], [h], [h]) -> ([b0, b1, h]) {b0=2 batch, b1=4 batch, h=8 "
      "other:replicated}",
      "([b, s, h, d]) -> ([b, s, h, d]) {b=2 batch, s=4 other:replicated, "
      "h=2 head, d=8 other:replicated}",
      "([b, s, {h, g}, d], [b, t, h, d], [b, t, h, e]) -> ([b, s, {h, g}, e]) "
      "{b=2 batch, s=4 other:replicated, t=4 contracting:replicated, h=2 "
      "head, g=2 head, d=8 contracting:replicated, e=8 other}",
      "([b, s, h, d], [b, t, h, d], [b, t, h, e]) -> ([b, s, h, e]) {b=2 "
      "batch, s=4 other:replicated, t=4 contracting:replicated, h=2 head, "
      "d=8 contracting:replicated, e=8 other}",
      "([d0, d1, d2]) -> ([d0, d1, d2]) {d0=2 other, d1=4 other, d2=8 other}",
      "([d0, d1, d2], [d0, d1, d2]) -> ([d0, d1, d2]) {d0=2 other, d1=4 "
      "other, d2=8 other}",
      "([d0, d1, d2]) -> ([d0, d1, d2]) {d0=2 other, d1=4 other, d2=8 "
      "other:replicated}",
      "([r0, r1, {r2, r3}]) -> ([r0, r1, r2, r3]) {r0=2 other, r1=4 other, "
      "r2=2 other, r3=8 other}",
      "([d0, d1, d2]) -> ([d2, d0, d1]) {d0=2 other, d1=4 other, d2=8 other}",
      "([b0, b1, v], [b0, b1]) -> ([]) {b0=2 batch:mean, b1=4 batch:mean, "
      "v=10 vocab:replicated}",
      "([b0, b1], [b0, b1, h]) -> ([v, h]) {b0=2 batch, b1=4 batch, v=10 "
      "vocab, h=8 other}",
      "([d0, d1, d2]) -> ([d2]) {d0=2 other, d1=4 other, d2=6 other}",
      "([b0, b1, h], [h], [b0, b1, h]) -> ([b0, b1, h], [h]) {b0=2 batch, "
      "b1=4 batch, h=8 other:replicated}",
      "([b0, b1, h], [h], [b0, b1, h]) -> ([b0, b1, h], [h], [h]) {b0=2 "
      "batch, b1=4 batch, h=8 other:replicated}",
      "([b, s, {h, g}, d], [b, t, h, d], [b, t, h, e], [b, s, {h, g}, e]) -> "
      "([b, s, {h, g}, d], [b, t, h, d], [b, t, h, e]) {b=2 batch, s=4 "
      "other:replicated, t=4 contracting:replicated, h=1 head, g=4 head, d=8 "
      "contracting:replicated, e=8 other:replicated}",
      "([d0, d1, d2], [d0, d1, d2]) -> ([d0, d1, d2]) {d0=2 other, d1=4 "
      "other, d2=8 other:replicated}",
      "([d0, d1, d2], [d0, d1, d2]) -> ([d0, d1, d2]) {d0=2 other, d1=4 "
      "other, d2=8 other}",
      "([b0, b1, v], [b0, b1], []) -> ([b0, b1, v]) {b0=2 batch, b1=4 batch, "
      "v=10 vocab:replicated}",
      "([b0, b1, o], [o]) -> ([b0, b1, o]) {b0=2 batch, b1=4 batch, o=6 "
      "other}",
      "([b0, b1, v]) -> ([b0, b1]) {b0=2 batch, b1=4 batch, v=10 vocab:max}",
      "([b0, b1, v], [b0, b1], [b0, b1]) -> ([b0, b1, k]) {b0=2 batch, b1=4 "
      "batch, v=10 vocab, k=2 other:replicated}",
      "([b0, b1, k]) -> ([]) {b0=2 batch:mean, b1=4 batch:mean, k=2 "
      "other:replicated}",
      "([b0, b1, v], [b0, b1], [b0, b1], [b0, b1, k], []) -> ([b0, b1, v]) "
      "{b0=2 batch, b1=4 batch, v=10 vocab, k=2 other:replicated}",
  };
  ASSERT_EQ(rules_.size(), expected.size());
  for (size_t i = 0; i < rules_.size(); ++i) {
    EXPECT_EQ(rules_[i].str(), expected[i]) << "op #" << i;
  }
}

// A row-parallel linear's bias, added after the all-reduce: nn.bias_add
// shards with its features or tokens and never makes a partial value.
TEST_F(NnShardingRulesTest, BiasAddFollowsItsFeaturesAndTokens) {
  const FactorPlacements o = placements(24, "o");
  EXPECT_THAT(o.operands, ElementsAre(S(2), S(0)));
  EXPECT_THAT(o.results, ElementsAre(S(2)));
  const FactorPlacements b = placements(24, "b0");
  EXPECT_THAT(b.operands, ElementsAre(S(0), kR));
  EXPECT_THAT(b.results, ElementsAre(S(0)));
}

// Vocab-parallel cross-entropy: sharding the vocab makes the max partial
// (max) and the statistics partial (sum); the loss reads the reduced
// statistics and the gradient stays vocab-sharded; tokens average into the
// loss as nn.cross_entropy's do.
TEST_F(NnShardingRulesTest, VocabParallelLossReducesMaxAndStatistics) {
  const Placement kMax = Placement::partial(ReductionKind::kMax);
  const FactorPlacements max = placements(25, "v");
  EXPECT_THAT(max.operands, ElementsAre(S(2)));
  EXPECT_THAT(max.results, ElementsAre(kMax));
  const FactorPlacements stats = placements(26, "v");
  EXPECT_THAT(stats.operands, ElementsAre(S(2), kR, kR));
  EXPECT_THAT(stats.results, ElementsAre(kSum));
  EXPECT_TRUE(refuses(27, "k"));
  EXPECT_THAT(placements(27, "b0").results, ElementsAre(kMean));
  const FactorPlacements grad = placements(28, "v");
  EXPECT_THAT(grad.operands, ElementsAre(S(2), kR, kR, kR, kR));
  EXPECT_THAT(grad.results, ElementsAre(S(2)));
}

TEST_F(NnShardingRulesTest, VocabParallelEmbeddingSumsPartialLookups) {
  const FactorPlacements p = placements(0, "v");
  EXPECT_THAT(p.operands, ElementsAre(kR, S(0)));
  EXPECT_THAT(p.results, ElementsAre(kSum));
}

TEST_F(NnShardingRulesTest, ColumnAndRowParallelLinear) {
  const FactorPlacements column = placements(1, "o");
  EXPECT_THAT(column.operands, ElementsAre(kR, S(1), S(0)));
  EXPECT_THAT(column.results, ElementsAre(S(2)));
  const FactorPlacements row = placements(1, "i");
  EXPECT_THAT(row.operands, ElementsAre(S(2), S(0), kSum));
  EXPECT_THAT(row.results, ElementsAre(kSum));
}

TEST_F(NnShardingRulesTest, DataParallelWeightGradientIsPartial) {
  const FactorPlacements p = placements(4, "b0");
  EXPECT_THAT(p.operands, ElementsAre(S(0), S(0)));
  EXPECT_THAT(p.results, ElementsAre(kSum));
}

TEST_F(NnShardingRulesTest, NormsShardTokensButNotHidden) {
  const FactorPlacements p = placements(5, "b1");
  EXPECT_THAT(p.operands, ElementsAre(S(1), kR));
  EXPECT_THAT(p.results, ElementsAre(S(1)));
  EXPECT_TRUE(refuses(5, "h"));
  const FactorPlacements grad = placements(18, "b0");
  EXPECT_THAT(grad.operands, ElementsAre(S(0), kR, S(0)));
  EXPECT_THAT(grad.results, ElementsAre(S(0), kSum));
}

TEST_F(NnShardingRulesTest, HeadParallelAttention) {
  const FactorPlacements p = placements(8, "h");
  EXPECT_THAT(p.operands, ElementsAre(S(2), S(2), S(2)));
  EXPECT_THAT(p.results, ElementsAre(S(2)));
  // Query heads within a kv group are the minor part of the heads dim.
  EXPECT_TRUE(refuses(8, "g"));
  EXPECT_TRUE(refuses(8, "s"));
  EXPECT_TRUE(refuses(8, "t"));
  EXPECT_TRUE(refuses(8, "d"));
  const FactorPlacements values = placements(8, "e");
  EXPECT_THAT(values.operands, ElementsAre(kR, kR, S(3)));
  EXPECT_THAT(values.results, ElementsAre(S(3)));
}

TEST_F(NnShardingRulesTest, MultiQueryAttentionGradSumsKvGradsOverHeads) {
  const FactorPlacements p = placements(20, "g");
  EXPECT_THAT(p.operands, ElementsAre(S(2), kR, kR, S(2)));
  EXPECT_THAT(p.results, ElementsAre(S(2), kSum, kSum));
  EXPECT_TRUE(refuses(20, "e"));
}

TEST_F(NnShardingRulesTest, ReshapeShardsTheMajorFactorOfAMergedDim) {
  const FactorPlacements p = placements(13, "r2");
  EXPECT_THAT(p.operands, ElementsAre(S(2)));
  EXPECT_THAT(p.results, ElementsAre(S(2)));
  EXPECT_TRUE(refuses(13, "r3"));
}

TEST_F(NnShardingRulesTest, TransposeMovesTheShardedDim) {
  const FactorPlacements p = placements(14, "d2");
  EXPECT_THAT(p.operands, ElementsAre(S(2)));
  EXPECT_THAT(p.results, ElementsAre(S(0)));
}

TEST_F(NnShardingRulesTest, DataParallelLossAveragesAndItsGradIsExact) {
  const FactorPlacements loss = placements(15, "b0");
  EXPECT_THAT(loss.operands, ElementsAre(S(0), S(0)));
  EXPECT_THAT(loss.results, ElementsAre(kMean));
  EXPECT_TRUE(refuses(15, "v"));
  const FactorPlacements grad = placements(23, "b0");
  EXPECT_THAT(grad.operands, ElementsAre(S(0), S(0), kR));
  EXPECT_THAT(grad.results, ElementsAre(S(0)));
}

TEST_F(NnShardingRulesTest, EmbeddingGradShardsVocabRowsAndSumsTokens) {
  const FactorPlacements vocab = placements(16, "v");
  EXPECT_THAT(vocab.operands, ElementsAre(kR, kR));
  EXPECT_THAT(vocab.results, ElementsAre(S(0)));
  const FactorPlacements tokens = placements(16, "b1");
  EXPECT_THAT(tokens.operands, ElementsAre(S(1), S(1)));
  EXPECT_THAT(tokens.results, ElementsAre(kSum));
}

TEST_F(NnShardingRulesTest, BiasGradientSumsOverTokens) {
  const FactorPlacements p = placements(17, "d0");
  EXPECT_THAT(p.operands, ElementsAre(S(0)));
  EXPECT_THAT(p.results, ElementsAre(kSum));
}

}  // namespace
}  // namespace loom::planner::nn
