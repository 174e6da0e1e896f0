// Checks every op's FLOPs and a sample of bytes moved against values
// computed by hand from the conventions in docs/planner_nn.md.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "planner/dialect/nn/ir/nn_interfaces.h"
#include "planner/dialect/nn/ir/nn_ops.h"
#include "planner/dialect/nn/ir/test_util.h"

namespace loom::planner::nn {
namespace {

// Shapes: tokens [B=2, S=4], hidden 8, out 6, vocab 10; attention with 4
// query heads, 2 kv heads, head_dim 8 (so 4 * 5 / 2 = 10 causal pairs).
constexpr char kOps[] = R"mlir(
func.func @ops(%ids: tensor<2x4xi32>, %x: tensor<2x4x8xf32>,
               %xb: tensor<2x4x8xbf16>, %w: tensor<8x6xf32>,
               %wt: tensor<6x8xf32>, %y: tensor<2x4x6xf32>,
               %b: tensor<6xf32>, %g: tensor<8xf32>,
               %table: tensor<10x8xf32>, %q: tensor<2x4x4x8xf32>,
               %k: tensor<2x4x2x8xf32>, %logits: tensor<2x4x10xf32>,
               %dloss: tensor<f32>) {
  %0 = nn.embedding %ids, %table : (tensor<2x4xi32>, tensor<10x8xf32>) -> tensor<2x4x8xf32>
  %1 = nn.linear %x, %w, %b : (tensor<2x4x8xf32>, tensor<8x6xf32>, tensor<6xf32>) -> tensor<2x4x6xf32>
  %2 = nn.linear %x, %w : (tensor<2x4x8xf32>, tensor<8x6xf32>) -> tensor<2x4x6xf32>
  %3 = nn.matmul %x, %w : (tensor<2x4x8xf32>, tensor<8x6xf32>) -> tensor<2x4x6xf32>
  %4 = nn.matmul %x, %wt transpose_rhs : (tensor<2x4x8xf32>, tensor<6x8xf32>) -> tensor<2x4x6xf32>
  %5 = nn.matmul %x, %y transpose_lhs : (tensor<2x4x8xf32>, tensor<2x4x6xf32>) -> tensor<8x6xf32>
  %6 = nn.rms_norm %x, %g epsilon 1.0e-05 : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %7 = nn.layer_norm %x, %g, %g epsilon 1.0e-05 : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %8 = nn.rope %k theta 1.0e+04 : (tensor<2x4x2x8xf32>) -> tensor<2x4x2x8xf32>
  %9 = nn.attention %q, %k, %k : (tensor<2x4x4x8xf32>, tensor<2x4x2x8xf32>, tensor<2x4x2x8xf32>) -> tensor<2x4x4x8xf32>
  %10 = nn.silu %xb : (tensor<2x4x8xbf16>) -> tensor<2x4x8xbf16>
  %11 = nn.gelu %x : (tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %12 = nn.add %x, %x : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %13 = nn.mul %x, %x : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %14 = nn.softmax %x : (tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %15 = nn.reshape %x : (tensor<2x4x8xf32>) -> tensor<8x8xf32>
  %16 = nn.transpose %x permutation [1, 0, 2] : (tensor<2x4x8xf32>) -> tensor<4x2x8xf32>
  %17 = nn.cross_entropy %logits, %ids : (tensor<2x4x10xf32>, tensor<2x4xi32>) -> tensor<f32>
  %18 = nn.embedding_grad %ids, %x : (tensor<2x4xi32>, tensor<2x4x8xf32>) -> tensor<10x8xf32>
  %19 = nn.reduce_sum %x dims [0, 1] : (tensor<2x4x8xf32>) -> tensor<8xf32>
  %20:2 = nn.rms_norm_grad %x, %g, %x epsilon 1.0e-05 : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<2x4x8xf32>) -> (tensor<2x4x8xf32>, tensor<8xf32>)
  %21:3 = nn.layer_norm_grad %x, %g, %x epsilon 1.0e-05 : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<2x4x8xf32>) -> (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>)
  %22:3 = nn.attention_grad %q, %k, %k, %q : (tensor<2x4x4x8xf32>, tensor<2x4x2x8xf32>, tensor<2x4x2x8xf32>, tensor<2x4x4x8xf32>) -> (tensor<2x4x4x8xf32>, tensor<2x4x2x8xf32>, tensor<2x4x2x8xf32>)
  %23 = nn.softmax_grad %x, %x : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %24 = nn.silu_grad %x, %x : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %25 = nn.gelu_grad %x, %x : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %26 = nn.cross_entropy_grad %logits, %ids, %dloss scale 0.125 : (tensor<2x4x10xf32>, tensor<2x4xi32>, tensor<f32>) -> tensor<2x4x10xf32>
  %27 = nn.bias_add %y, %b : (tensor<2x4x6xf32>, tensor<6xf32>) -> tensor<2x4x6xf32>
  %28 = nn.vocab_max %logits vocab 10 : (tensor<2x4x10xf32>) -> tensor<2x4xf32>
  %29 = nn.vocab_stats %logits, %ids, %28 vocab 10 : (tensor<2x4x10xf32>, tensor<2x4xi32>, tensor<2x4xf32>) -> tensor<2x4x2xf32>
  %30 = nn.vocab_cross_entropy %29 : (tensor<2x4x2xf32>) -> tensor<f32>
  %31 = nn.vocab_cross_entropy_grad %logits, %ids, %28, %29, %dloss scale 0.125 vocab 10 : (tensor<2x4x10xf32>, tensor<2x4xi32>, tensor<2x4xf32>, tensor<2x4x2xf32>, tensor<f32>) -> tensor<2x4x10xf32>
  return
}
)mlir";

// The ops of @ops, in order.
std::vector<CostOpInterface> costOps(mlir::ModuleOp module) {
  std::vector<CostOpInterface> ops;
  module.walk([&](CostOpInterface op) { ops.push_back(op); });
  return ops;
}

TEST(NnCostTest, FlopsOfEveryOp) {
  mlir::MLIRContext context;
  loadNnDialects(context);
  auto module = parseNnModule(context, kOps);
  ASSERT_TRUE(module);
  const int64_t tokens = 2 * 4;
  const int64_t x = tokens * 8;               // elements of [2, 4, 8]
  const int64_t matmul = 2 * tokens * 8 * 6;  // 2 m n k
  const int64_t causalMacs = 2 * 4 * 8 * 10;  // batch heads head_dim pairs
  const int64_t logits = tokens * 10;
  const std::vector<std::pair<std::string, int64_t>> expected = {
      {"nn.embedding", 0},
      {"nn.linear", matmul + tokens * 6},
      {"nn.linear", matmul},
      {"nn.matmul", matmul},
      {"nn.matmul", matmul},
      {"nn.matmul", matmul},
      {"nn.rms_norm", 4 * x},
      {"nn.layer_norm", 7 * x},
      {"nn.rope", 3 * 2 * 4 * 2 * 8},
      {"nn.attention", 2 * 2 * causalMacs},
      {"nn.silu", 4 * x},
      {"nn.gelu", 9 * x},
      {"nn.add", x},
      {"nn.mul", x},
      {"nn.softmax", 5 * x},
      {"nn.reshape", 0},
      {"nn.transpose", 0},
      {"nn.cross_entropy", 4 * logits},
      {"nn.embedding_grad", x},
      {"nn.reduce_sum", x},
      {"nn.rms_norm_grad", 11 * x},
      {"nn.layer_norm_grad", 17 * x},
      {"nn.attention_grad", 5 * 2 * causalMacs},
      {"nn.softmax_grad", 4 * x},
      {"nn.silu_grad", 10 * x},
      {"nn.gelu_grad", 18 * x},
      {"nn.cross_entropy_grad", 6 * logits},
      {"nn.bias_add", tokens * 6},
      {"nn.vocab_max", logits},
      {"nn.vocab_stats", 3 * logits},
      {"nn.vocab_cross_entropy", 2 * tokens},
      {"nn.vocab_cross_entropy_grad", 6 * logits},
  };
  std::vector<CostOpInterface> ops = costOps(*module);
  ASSERT_EQ(ops.size(), expected.size());
  for (size_t i = 0; i < ops.size(); ++i) {
    EXPECT_EQ(ops[i]->getName().getStringRef(), expected[i].first);
    EXPECT_EQ(ops[i].getFlops(), expected[i].second) << "op #" << i << " " << expected[i].first;
  }
}

TEST(NnCostTest, BytesMoved) {
  mlir::MLIRContext context;
  loadNnDialects(context);
  auto module = parseNnModule(context, kOps);
  ASSERT_TRUE(module);
  std::vector<CostOpInterface> ops = costOps(*module);
  const int64_t ids = 8 * 4;  // [2, 4] i32
  const int64_t x = 64 * 4;   // [2, 4, 8] f32
  // Embedding reads the ids and the gathered rows, and writes the result.
  EXPECT_EQ(ops[0].getBytesMoved(), ids + 2 * x);
  // Linear reads input, weight and bias and writes the result.
  EXPECT_EQ(ops[1].getBytesMoved(), x + 48 * 4 + 6 * 4 + 48 * 4);
  // bf16 elements are two bytes.
  EXPECT_EQ(ops[10].getBytesMoved(), 2 * 64 * 2);
  // The loss reads logits and labels and writes one f32.
  EXPECT_EQ(ops[17].getBytesMoved(), 80 * 4 + ids + 4);
  // The table gradient reads ids and result_grad, reads and writes the
  // touched rows, and zero-fills the [10, 8] table.
  EXPECT_EQ(ops[18].getBytesMoved(), ids + 3 * x + 80 * 4);
}

}  // namespace
}  // namespace loom::planner::nn
