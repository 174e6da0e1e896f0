// Tests shape inference of the nn ops as used by builders (result types
// inferred from operands), the builder-side guard against invalid operand
// types, and the reshape refinement behind nn.reshape's verifier and rule.
#include "planner/dialect/nn/ir/nn_ops.h"

#include <cstdint>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "planner/dialect/nn/ir/test_util.h"

namespace loom::planner::nn {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// Builds ops into a function whose arguments have the given types.
class NnOpsTest : public ::testing::Test {
 protected:
  NnOpsTest() : builder_(&context_) { loadNnDialects(context_); }

  mlir::Type tensor(llvm::ArrayRef<int64_t> shape, mlir::Type element) {
    return mlir::RankedTensorType::get(shape, element);
  }
  mlir::Type f32(llvm::ArrayRef<int64_t> shape) { return tensor(shape, builder_.getF32Type()); }

  // Starts a function with arguments of `types` and returns them.
  llvm::SmallVector<mlir::Value> arguments(llvm::ArrayRef<mlir::Type> types) {
    module_ = mlir::ModuleOp::create(builder_.getUnknownLoc());
    builder_.setInsertionPointToEnd(module_->getBody());
    auto func = mlir::func::FuncOp::create(builder_, builder_.getUnknownLoc(), "f",
                                           builder_.getFunctionType(types, {}));
    builder_.setInsertionPointToEnd(func.addEntryBlock());
    return llvm::SmallVector<mlir::Value>(func.getArguments());
  }

  mlir::Location loc() { return builder_.getUnknownLoc(); }

  mlir::MLIRContext context_;
  mlir::OpBuilder builder_;
  mlir::OwningOpRef<mlir::ModuleOp> module_;
};

TEST_F(NnOpsTest, InfersEmbeddingFromIdsAndTable) {
  auto args =
      arguments({tensor({2, 3}, builder_.getI64Type()), tensor({10, 8}, builder_.getBF16Type())});
  auto op = EmbeddingOp::create(builder_, loc(), args[0], args[1]);
  EXPECT_EQ(op.getType(), tensor({2, 3, 8}, builder_.getBF16Type()));
}

TEST_F(NnOpsTest, InfersLinearWithAndWithoutBias) {
  auto args = arguments({f32({2, 4, 8}), f32({8, 6}), f32({6})});
  EXPECT_EQ(LinearOp::create(builder_, loc(), args[0], args[1], args[2]).getType(), f32({2, 4, 6}));
  EXPECT_EQ(LinearOp::create(builder_, loc(), args[0], args[1], mlir::Value()).getType(),
            f32({2, 4, 6}));
}

TEST_F(NnOpsTest, InfersMatmulInEachLayout) {
  auto args = arguments({f32({2, 4, 8}), f32({8, 6}), f32({6, 8}), f32({2, 4, 6})});
  EXPECT_EQ(MatmulOp::create(builder_, loc(), args[0], args[1]).getType(), f32({2, 4, 6}));
  EXPECT_EQ(MatmulOp::create(builder_, loc(), args[0], args[2], false, true).getType(),
            f32({2, 4, 6}));
  EXPECT_EQ(MatmulOp::create(builder_, loc(), args[0], args[3], true, false).getType(),
            f32({8, 6}));
}

TEST_F(NnOpsTest, InfersShapePreservingOps) {
  auto args = arguments({f32({2, 4, 2, 8}), f32({8}), f32({2, 4, 1, 8})});
  const mlir::Type type = f32({2, 4, 2, 8});
  EXPECT_EQ(RmsNormOp::create(builder_, loc(), args[0], args[1], builder_.getF64FloatAttr(1e-5))
                .getType(),
            type);
  EXPECT_EQ(RopeOp::create(builder_, loc(), args[0], builder_.getF64FloatAttr(1e4)).getType(),
            type);
  EXPECT_EQ(AttentionOp::create(builder_, loc(), args[0], args[2], args[2]).getType(), type);
  EXPECT_EQ(SoftmaxOp::create(builder_, loc(), args[0]).getType(), type);
}

TEST_F(NnOpsTest, InfersTransposeAndReduceSum) {
  auto args = arguments({f32({2, 4, 8})});
  EXPECT_EQ(
      TransposeOp::create(builder_, loc(), args[0], llvm::ArrayRef<int64_t>{2, 0, 1}).getType(),
      f32({8, 2, 4}));
  EXPECT_EQ(ReduceSumOp::create(builder_, loc(), args[0], llvm::ArrayRef<int64_t>{0, 2}).getType(),
            f32({4}));
}

TEST_F(NnOpsTest, CrossEntropyReturnsAnF32ScalarForAnyLogitsType) {
  auto args = arguments(
      {tensor({2, 4, 10}, builder_.getBF16Type()), tensor({2, 4}, builder_.getI32Type())});
  auto op = CrossEntropyOp::create(builder_, loc(), args[0], args[1]);
  EXPECT_EQ(op.getType(), f32({}));
}

TEST_F(NnOpsTest, InfersEveryResultOfTheGradOps) {
  auto args = arguments({f32({2, 4, 4, 8}), f32({2, 4, 2, 8}), f32({8})});
  auto norm = LayerNormGradOp::create(builder_, loc(), args[0], args[2], args[0],
                                      builder_.getF64FloatAttr(1e-5));
  EXPECT_EQ(norm.getInputGrad().getType(), f32({2, 4, 4, 8}));
  EXPECT_EQ(norm.getGammaGrad().getType(), f32({8}));
  EXPECT_EQ(norm.getBetaGrad().getType(), f32({8}));
  auto attention = AttentionGradOp::create(builder_, loc(), args[0], args[1], args[1], args[0]);
  EXPECT_EQ(attention.getQueryGrad().getType(), f32({2, 4, 4, 8}));
  EXPECT_EQ(attention.getKeyGrad().getType(), f32({2, 4, 2, 8}));
  EXPECT_EQ(attention.getValueGrad().getType(), f32({2, 4, 2, 8}));
}

// ODS rejects dynamic shapes before inference runs on parsed IR; a builder
// can still hand inference such an operand, and gets a diagnostic.
TEST_F(NnOpsTest, InferenceRejectsDynamicOperandsFromBuilders) {
  auto args = arguments({f32({mlir::ShapedType::kDynamic, 8}), f32({8, 6})});
  auto op = LinearOp::create(builder_, loc(), f32({2, 6}), args[0], args[1], mlir::Value());
  std::string message;
  mlir::ScopedDiagnosticHandler handler(&context_, [&](mlir::Diagnostic& diagnostic) {
    message = diagnostic.str();
    return mlir::success();
  });
  EXPECT_TRUE(mlir::failed(verifyInferredTypes(op)));
  EXPECT_EQ(message,
            "'nn.linear' op input must be a statically shaped tensor, got: "
            "'tensor<?x8xf32>'; give every dimension a size");
}

TEST(RefineReshapeTest, SplitsAndMergesIntoCommonFactors) {
  const ReshapeRefinement r = refineReshape({4, 6}, {2, 12});
  EXPECT_FALSE(r.mismatch.has_value());
  EXPECT_THAT(r.factorSizes, ElementsAre(2, 2, 6));
  EXPECT_THAT(r.input, ElementsAre(ElementsAre(0, 1), ElementsAre(2)));
  EXPECT_THAT(r.result, ElementsAre(ElementsAre(0), ElementsAre(1, 2)));
}

TEST(RefineReshapeTest, HeadSplitKeepsLeadingDims) {
  const ReshapeRefinement r = refineReshape({2, 4, 16}, {2, 4, 2, 8});
  EXPECT_THAT(r.factorSizes, ElementsAre(2, 4, 2, 8));
  EXPECT_THAT(r.input, ElementsAre(ElementsAre(0), ElementsAre(1), ElementsAre(2, 3)));
  EXPECT_THAT(r.result,
              ElementsAre(ElementsAre(0), ElementsAre(1), ElementsAre(2), ElementsAre(3)));
}

TEST(RefineReshapeTest, SizeOneDimsGetNoFactor) {
  const ReshapeRefinement r = refineReshape({2, 1, 3}, {6, 1});
  EXPECT_THAT(r.factorSizes, ElementsAre(2, 3));
  EXPECT_THAT(r.input, ElementsAre(ElementsAre(0), IsEmpty(), ElementsAre(1)));
  EXPECT_THAT(r.result, ElementsAre(ElementsAre(0, 1), IsEmpty()));
}

TEST(RefineReshapeTest, ReportsTheSmallestGroupThatDoesNotRefine) {
  const ReshapeRefinement r = refineReshape({4, 2, 3, 5}, {4, 3, 2, 5});
  ASSERT_TRUE(r.mismatch.has_value());
  EXPECT_EQ(r.mismatch->inputBegin, 1u);
  EXPECT_EQ(r.mismatch->inputEnd, 3u);
  EXPECT_EQ(r.mismatch->resultBegin, 1u);
  EXPECT_EQ(r.mismatch->resultEnd, 3u);
  EXPECT_EQ(r.mismatch->product, 6);
}

}  // namespace
}  // namespace loom::planner::nn
