// Tests the nn evaluator: it wires ops, multi-result ops and returns through
// the reference kernels, and rejects bad inputs with clear errors.
#include "planner/dialect/nn/eval/evaluator.h"

#include <cmath>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "planner/dialect/nn/ir/test_util.h"
#include "tests/testing/status_matchers.h"

namespace loom::planner::nn::eval {
namespace {

using ::loom::testutil::StatusIs;
using ::testing::AllOf;
using ::testing::DoubleNear;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr char kModel[] = R"mlir(
func.func @loss(%ids: tensor<1xi32>, %labels: tensor<1xi32>,
                %table: tensor<2x2xf32> {nn.param}, %w: tensor<2x2xf32> {nn.param})
    -> (tensor<f32>, tensor<1x2xf32>) {
  %h = nn.embedding %ids, %table : (tensor<1xi32>, tensor<2x2xf32>) -> tensor<1x2xf32>
  %logits = nn.linear %h, %w : (tensor<1x2xf32>, tensor<2x2xf32>) -> tensor<1x2xf32>
  %loss = nn.cross_entropy %logits, %labels : (tensor<1x2xf32>, tensor<1xi32>) -> tensor<f32>
  return %loss, %logits : tensor<f32>, tensor<1x2xf32>
}

func.func @norm_grad(%x: tensor<1x2xf32>, %g: tensor<2xf32>) -> tensor<2xf32> {
  %dx, %dg = nn.rms_norm_grad %x, %g, %x epsilon 1.0e-05 : (tensor<1x2xf32>, tensor<2xf32>, tensor<1x2xf32>) -> (tensor<1x2xf32>, tensor<2xf32>)
  return %dg : tensor<2xf32>
}

func.func @rope_llama3(%x: tensor<1x4x1x8xf32>) -> tensor<1x4x1x8xf32> {
  %y = nn.rope %x theta 1.0e+02 scaling_factor 4.0 low_freq_factor 1.0 high_freq_factor 8.0 original_max_positions 32 : (tensor<1x4x1x8xf32>) -> tensor<1x4x1x8xf32>
  return %y : tensor<1x4x1x8xf32>
}

func.func private @external(%x: tensor<2xf32>) -> tensor<2xf32>

func.func @calls(%x: tensor<2xf32>) -> tensor<2xf32> {
  %y = func.call @external(%x) : (tensor<2xf32>) -> tensor<2xf32>
  return %y : tensor<2xf32>
}
)mlir";

class EvaluatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    loadNnDialects(context_);
    module_ = parseNnModule(context_, kModel);
    ASSERT_TRUE(module_);
  }

  mlir::func::FuncOp func(llvm::StringRef name) {
    return module_->lookupSymbol<mlir::func::FuncOp>(name);
  }

  // ids = [1], labels = [1], table rows [0, 0] and [1, 2], identity weight.
  std::vector<Tensor> lossInputs(double id) {
    return {Tensor({1}, {id}), Tensor({1}, {1}), Tensor({2, 2}, {0, 0, 1, 2}),
            Tensor({2, 2}, {1, 0, 0, 1})};
  }

  mlir::MLIRContext context_;
  mlir::OwningOpRef<mlir::ModuleOp> module_;
};

TEST_F(EvaluatorTest, RunsAModelAndReturnsEveryResult) {
  auto results = evaluate(func("loss"), lossInputs(1));
  ASSERT_TRUE(results.ok()) << results.status();
  ASSERT_EQ(results->size(), 2u);
  // logits = [1, 2]; loss = logsumexp(1, 2) - 2 = log(1 + e^-1).
  EXPECT_THAT((*results)[0].values, ElementsAre(DoubleNear(0.31326168751822286, 1e-15)));
  EXPECT_THAT((*results)[1].shape, ElementsAre(1, 2));
  EXPECT_THAT((*results)[1].values, ElementsAre(1, 2));
}

TEST_F(EvaluatorTest, BindsEveryResultOfAMultiResultOp) {
  auto results = evaluate(func("norm_grad"), {Tensor({1, 2}, {3, 4}), Tensor({2}, {1, 1})});
  ASSERT_TRUE(results.ok()) << results.status();
  // gamma_grad = dy * xhat with dy = x: x^2 / rms(x), rms = sqrt(12.5 + eps).
  const double rms = std::sqrt(12.5 + 1e-5);
  EXPECT_THAT((*results)[0].values,
              ElementsAre(DoubleNear(9 / rms, 1e-12), DoubleNear(16 / rms, 1e-12)));
}

// The op's scaling attributes reach the reference kernel.
TEST_F(EvaluatorTest, RopeAppliesTheScalingAttributes) {
  std::vector<double> values(32);
  for (size_t i = 0; i < values.size(); ++i) values[i] = 0.25 * static_cast<double>(i % 7) - 0.5;
  const Tensor x({1, 4, 1, 8}, values);
  auto results = evaluate(func("rope_llama3"), {x});
  ASSERT_TRUE(results.ok()) << results.status();
  const loom::plan::RopeScaling scaling = {
      .factor = 4.0, .low_freq_factor = 1.0, .high_freq_factor = 8.0, .original_max_positions = 32};
  EXPECT_EQ((*results)[0].values, rope(x, 100.0, false, scaling).values);
  EXPECT_NE((*results)[0].values, rope(x, 100.0, false).values);
}

TEST_F(EvaluatorTest, RejectsAWrongArgumentCount) {
  EXPECT_THAT(evaluate(func("norm_grad"), {}).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("@norm_grad takes 2 arguments, got: 0")));
}

TEST_F(EvaluatorTest, RejectsAnArgumentOfTheWrongShape) {
  EXPECT_THAT(evaluate(func("norm_grad"), {Tensor({2, 1}, {3, 4}), Tensor({2}, {1, 1})}).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("@norm_grad argument #0 has shape [1, 2], got: "
                                 "[2, 1] with 2 values")));
}

TEST_F(EvaluatorTest, RejectsIdsOutsideTheVocab) {
  EXPECT_THAT(
      evaluate(func("loss"), lossInputs(2)).status(),
      StatusIs(absl::StatusCode::kInvalidArgument,
               AllOf(HasSubstr("'nn.embedding' at"), HasSubstr("ids #0 is 2, outside the vocab "
                                                               "[0, 2)"))));
}

TEST_F(EvaluatorTest, RejectsOpsOutsideNn) {
  EXPECT_THAT(evaluate(func("calls"), {Tensor({2}, {1, 2})}).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("'func.call' at"),
                             HasSubstr("is not an nn op; the reference evaluator "
                                       "runs nn ops only"))));
}

TEST_F(EvaluatorTest, RejectsADeclaration) {
  EXPECT_THAT(
      evaluate(func("external"), {Tensor({2}, {1, 2})}).status(),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("@external is a declaration")));
}

}  // namespace
}  // namespace loom::planner::nn::eval
