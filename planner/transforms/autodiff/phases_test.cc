// Tests of the backward pass as later passes read it: from the loss
// cotangent, from a pipeline chunk's received gradient (nn.backward_root),
// and with recomputed forward ops.
#include "planner/transforms/autodiff/phases.h"

#include <vector>

#include "gtest/gtest.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/Parser/Parser.h"
#include "planner/dialect/nn/ir/nn_dialect.h"

namespace loom::planner::autodiff {
namespace {

class PhasesTest : public ::testing::Test {
 protected:
  PhasesTest() { context_.loadDialect<mlir::func::FuncDialect, nn::NnDialect>(); }

  // The ops of the module's one function, in order.
  std::vector<mlir::Operation*> parse(const char* source) {
    module_ = mlir::parseSourceString<mlir::ModuleOp>(source, &context_);
    EXPECT_TRUE(module_);
    func_ = *module_->getOps<mlir::func::FuncOp>().begin();
    std::vector<mlir::Operation*> ops;
    for (mlir::Operation& op : func_.front().without_terminator()) ops.push_back(&op);
    return ops;
  }

  mlir::MLIRContext context_;
  mlir::OwningOpRef<mlir::ModuleOp> module_;
  mlir::func::FuncOp func_;
};

TEST_F(PhasesTest, BackwardStartsAtTheLossCotangent) {
  const std::vector<mlir::Operation*> ops = parse(R"mlir(
    func.func @step(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>, %seed: tensor<4x8xf32>)
        -> tensor<8x8xf32> attributes {nn.loss_grad_arg = 2 : i64} {
      %h = nn.linear %x, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
      %a = nn.silu %h : (tensor<4x8xf32>) -> tensor<4x8xf32>
      %r = nn.linear %x, %w {nn.recompute} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
      %g = nn.silu_grad %r, %seed : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
      %dw = nn.matmul %x, %g transpose_lhs : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<8x8xf32>
      return %dw : tensor<8x8xf32>
    })mlir");
  const llvm::DenseSet<mlir::Operation*> backward = backwardOps(func_);
  EXPECT_FALSE(backward.contains(ops[0]));
  EXPECT_FALSE(backward.contains(ops[1]));
  EXPECT_TRUE(backward.contains(ops[2]));  // recomputed
  EXPECT_TRUE(backward.contains(ops[3]));
  EXPECT_TRUE(backward.contains(ops[4]));
  EXPECT_EQ(firstBackwardOp(func_), ops[2]);
}

// A chunk before the last has no loss cotangent: its backward pass starts
// at the gradient it receives, and what depends on it.
TEST_F(PhasesTest, BackwardStartsAtABackwardRoot) {
  const std::vector<mlir::Operation*> ops = parse(R"mlir(
    func.func @chunk(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>, %dy: tensor<4x8xf32>)
        -> tensor<8x8xf32> {
      %h = nn.linear %x, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
      %g = nn.silu %dy {nn.backward_root} : (tensor<4x8xf32>) -> tensor<4x8xf32>
      %dh = nn.silu_grad %h, %g : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
      %dw = nn.matmul %x, %dh transpose_lhs : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<8x8xf32>
      return %dw : tensor<8x8xf32>
    })mlir");
  const llvm::DenseSet<mlir::Operation*> backward = backwardOps(func_);
  EXPECT_FALSE(backward.contains(ops[0]));
  EXPECT_TRUE(backward.contains(ops[1]));
  EXPECT_TRUE(backward.contains(ops[2]));
  EXPECT_TRUE(backward.contains(ops[3]));
  EXPECT_EQ(firstBackwardOp(func_), ops[1]);
}

TEST_F(PhasesTest, AForwardGraphHasNoBackward) {
  parse(R"mlir(
    func.func @forward(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>) -> tensor<4x8xf32> {
      %h = nn.linear %x, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
      return %h : tensor<4x8xf32>
    })mlir");
  EXPECT_TRUE(backwardOps(func_).empty());
  EXPECT_EQ(firstBackwardOp(func_), nullptr);
}

}  // namespace
}  // namespace loom::planner::autodiff
