// The op formulas without MLIR: a GEMM's m, n, k and FLOPs, the attention
// classes, the embedding's bytes, and unknown names (the nn dialect's own
// tests, nn_cost_test, check every op through CostOpInterface).
#include "planner/cost/op_work.h"

#include <cstdint>
#include <vector>

#include "gtest/gtest.h"

namespace loom::planner::cost {
namespace {

TEST(OpWorkTest, LinearIsAGemmOfItsShapes) {
  const std::vector<int64_t> x = {4, 16, 64}, w = {64, 96}, y = {4, 16, 96};
  const TensorDesc operands[] = {{.shape = x, .element_bytes = 2, .dtype = Dtype::kBF16},
                                 {.shape = w, .element_bytes = 2, .dtype = Dtype::kBF16}};
  const TensorDesc results[] = {{.shape = y, .element_bytes = 2, .dtype = Dtype::kBF16}};
  const std::optional<ComputeCost> cost =
      computeCost({.name = "nn.linear", .operands = operands, .results = results});
  ASSERT_TRUE(cost.has_value());
  EXPECT_EQ(cost->op_class, OpClass::kGemm);
  EXPECT_EQ(cost->dtype, Dtype::kBF16);
  EXPECT_EQ(cost->m, 64);
  EXPECT_EQ(cost->n, 96);
  EXPECT_EQ(cost->k, 64);
  EXPECT_EQ(cost->flops, 2.0 * 64 * 96 * 64);
  EXPECT_EQ(cost->bytes, 2.0 * (4 * 16 * 64 + 64 * 96 + 4 * 16 * 96));
}

TEST(OpWorkTest, CausalAttentionCountsUnmaskedPairs) {
  const std::vector<int64_t> q = {2, 8, 4, 16};
  const TensorDesc t{.shape = q};
  const TensorDesc operands[] = {t, t, t};
  const TensorDesc results[] = {t};
  const std::optional<ComputeCost> cost =
      computeCost({.name = "nn.attention", .operands = operands, .results = results});
  ASSERT_TRUE(cost.has_value());
  EXPECT_EQ(cost->op_class, OpClass::kAttention);
  EXPECT_EQ(cost->flops, 4.0 * 2 * 4 * 16 * (8 * 9 / 2));
}

TEST(OpWorkTest, EmbeddingTouchesOnlyTheLookedUpRows) {
  const std::vector<int64_t> ids = {2, 8}, table = {1000, 32}, out = {2, 8, 32};
  const TensorDesc operands[] = {{.shape = ids}, {.shape = table}};
  const TensorDesc results[] = {{.shape = out}};
  const OpDesc op{.name = "nn.embedding", .operands = operands, .results = results};
  EXPECT_EQ(opBytesMoved(op), 4 * (16 + 2 * 16 * 32));
  EXPECT_EQ(opFlops(op), 0);
}

TEST(OpWorkTest, UnknownOpsHaveNoFormula) {
  EXPECT_FALSE(opFlops({.name = "dist.all_gather", .operands = {}, .results = {}}).has_value());
  EXPECT_FALSE(computeCost({.name = "nn.conv2d", .operands = {}, .results = {}}).has_value());
}

}  // namespace
}  // namespace loom::planner::cost
