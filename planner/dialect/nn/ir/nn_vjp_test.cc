// Checks the vector-Jacobian product of every differentiable nn op against
// central finite differences of the float64 reference evaluator: for a
// random cotangent c, the VJP of op f must equal the gradient of sum(c * f).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <ostream>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "planner/dialect/nn/eval/evaluator.h"
#include "planner/dialect/nn/ir/nn_interfaces.h"
#include "planner/dialect/nn/ir/nn_ops.h"
#include "planner/dialect/nn/ir/test_util.h"

namespace loom::planner::nn {
namespace {

using eval::Tensor;

// A function @f whose body is one differentiable nn op on distinct
// arguments, returned.
struct VjpCase {
  std::string name;
  std::string source;
};

void PrintTo(const VjpCase& vjpCase, std::ostream* os) { *os << vjpCase.name; }

std::vector<int64_t> shapeOf(mlir::Type type) {
  auto shape = llvm::cast<mlir::RankedTensorType>(type).getShape();
  return {shape.begin(), shape.end()};
}

bool isInteger(mlir::Type type) {
  return llvm::isa<mlir::IntegerType>(llvm::cast<mlir::RankedTensorType>(type).getElementType());
}

// Random test data: floats in [-1, 1], ids and labels in [0, 3) (every
// vocab in the cases has at least 3 entries).
Tensor randomTensor(mlir::Type type, std::mt19937& rng) {
  Tensor tensor(shapeOf(type));
  if (isInteger(type)) {
    std::uniform_int_distribution<int> id(0, 2);
    for (double& v : tensor.values) v = id(rng);
  } else {
    std::uniform_real_distribution<double> value(-1.0, 1.0);
    for (double& v : tensor.values) v = value(rng);
  }
  return tensor;
}

class NnVjpTest : public ::testing::TestWithParam<VjpCase> {
 protected:
  void SetUp() override { loadNnDialects(context_); }

  mlir::MLIRContext context_;
};

TEST_P(NnVjpTest, MatchesFiniteDifferences) {
  auto module = parseNnModule(context_, GetParam().source);
  ASSERT_TRUE(module);
  auto f = module->lookupSymbol<mlir::func::FuncOp>("f");
  auto op = firstOp<VjpOpInterface>(*module);
  ASSERT_TRUE(f && op);
  const unsigned numArgs = f.getNumArguments();

  // @vjp(f's arguments..., cotangents...) returns the non-null operand
  // cotangents built by the op's VJP.
  mlir::OpBuilder builder(&context_);
  builder.setInsertionPointToEnd(module->getBody());
  llvm::SmallVector<mlir::Type> argTypes(f.getArgumentTypes());
  argTypes.append(op->getResultTypes().begin(), op->getResultTypes().end());
  auto vjp =
      mlir::func::FuncOp::create(builder, f.getLoc(), "vjp", builder.getFunctionType(argTypes, {}));
  mlir::Block* block = vjp.addEntryBlock();
  builder.setInsertionPointToEnd(block);
  mlir::IRMapping mapping;
  mapping.map(f.getArguments(), block->getArguments().take_front(numArgs));
  auto clone = llvm::cast<VjpOpInterface>(builder.clone(*op, mapping));
  auto grads = clone.buildVjp(builder, block->getArguments().drop_front(numArgs));
  ASSERT_TRUE(mlir::succeeded(grads));
  ASSERT_EQ(grads->size(), op->getNumOperands());
  llvm::SmallVector<mlir::Value> returned;
  std::vector<unsigned> gradArgs;  // the @f argument each returned grad is for
  for (auto [operand, grad] : llvm::zip_equal(op->getOperands(), *grads)) {
    auto arg = llvm::dyn_cast<mlir::BlockArgument>(operand);
    ASSERT_TRUE(arg) << "operands must be function arguments";
    EXPECT_EQ(grad == nullptr, isInteger(operand.getType()))
        << "exactly the integer operands have no cotangent";
    if (!grad) continue;
    EXPECT_EQ(grad.getType(), operand.getType());
    returned.push_back(grad);
    gradArgs.push_back(arg.getArgNumber());
  }
  ASSERT_EQ(std::set<unsigned>(gradArgs.begin(), gradArgs.end()).size(), gradArgs.size())
      << "each argument may feed one operand only";
  mlir::func::ReturnOp::create(builder, f.getLoc(), returned);
  vjp.setType(builder.getFunctionType(argTypes, mlir::ValueRange(returned).getTypes()));
  ASSERT_TRUE(mlir::succeeded(mlir::verify(*module)));

  std::mt19937 rng(1234);
  std::vector<Tensor> inputs;
  for (mlir::Type type : f.getArgumentTypes()) {
    inputs.push_back(randomTensor(type, rng));
  }
  std::vector<Tensor> cotangents;
  for (mlir::Type type : op->getResultTypes()) {
    cotangents.push_back(randomTensor(type, rng));
  }
  std::vector<Tensor> vjpInputs = inputs;
  vjpInputs.insert(vjpInputs.end(), cotangents.begin(), cotangents.end());
  auto analytic = eval::evaluate(vjp, vjpInputs);
  ASSERT_TRUE(analytic.ok()) << analytic.status();

  // L(inputs) = sum over results of cotangent * result.
  auto loss = [&](const std::vector<Tensor>& at) {
    auto results = eval::evaluate(f, at);
    EXPECT_TRUE(results.ok()) << results.status();
    double sum = 0.0;
    for (size_t r = 0; r < cotangents.size(); ++r) {
      for (int64_t e = 0; e < cotangents[r].numElements(); ++e) {
        sum += cotangents[r].values[e] * (*results)[r].values[e];
      }
    }
    return sum;
  };
  constexpr double kStep = 1e-5;
  constexpr double kTolerance = 1e-6;
  for (size_t g = 0; g < gradArgs.size(); ++g) {
    const unsigned arg = gradArgs[g];
    const Tensor& grad = (*analytic)[g];
    double scale = 1.0;
    for (double v : grad.values) scale = std::max(scale, std::abs(v));
    for (int64_t e = 0; e < inputs[arg].numElements(); ++e) {
      std::vector<Tensor> plus = inputs;
      std::vector<Tensor> minus = inputs;
      plus[arg].values[e] += kStep;
      minus[arg].values[e] -= kStep;
      const double numeric = (loss(plus) - loss(minus)) / (2 * kStep);
      EXPECT_NEAR(grad.values[e], numeric, kTolerance * scale)
          << "argument #" << arg << " element " << e;
    }
  }
}

const VjpCase kCases[] = {
    {"embedding", R"mlir(
func.func @f(%ids: tensor<2x3xi32>, %table: tensor<5x4xf32>) -> tensor<2x3x4xf32> {
  %0 = nn.embedding %ids, %table : (tensor<2x3xi32>, tensor<5x4xf32>) -> tensor<2x3x4xf32>
  return %0 : tensor<2x3x4xf32>
})mlir"},
    {"linear_with_bias", R"mlir(
func.func @f(%x: tensor<2x3x4xf32>, %w: tensor<4x5xf32>, %b: tensor<5xf32>) -> tensor<2x3x5xf32> {
  %0 = nn.linear %x, %w, %b : (tensor<2x3x4xf32>, tensor<4x5xf32>, tensor<5xf32>) -> tensor<2x3x5xf32>
  return %0 : tensor<2x3x5xf32>
})mlir"},
    {"bias_add", R"mlir(
func.func @f(%x: tensor<2x3x5xf32>, %b: tensor<5xf32>) -> tensor<2x3x5xf32> {
  %0 = nn.bias_add %x, %b : (tensor<2x3x5xf32>, tensor<5xf32>) -> tensor<2x3x5xf32>
  return %0 : tensor<2x3x5xf32>
})mlir"},
    {"linear", R"mlir(
func.func @f(%x: tensor<3x4xf32>, %w: tensor<4x2xf32>) -> tensor<3x2xf32> {
  %0 = nn.linear %x, %w : (tensor<3x4xf32>, tensor<4x2xf32>) -> tensor<3x2xf32>
  return %0 : tensor<3x2xf32>
})mlir"},
    {"matmul", R"mlir(
func.func @f(%a: tensor<2x3x4xf32>, %b: tensor<4x5xf32>) -> tensor<2x3x5xf32> {
  %0 = nn.matmul %a, %b : (tensor<2x3x4xf32>, tensor<4x5xf32>) -> tensor<2x3x5xf32>
  return %0 : tensor<2x3x5xf32>
})mlir"},
    {"matmul_transpose_rhs", R"mlir(
func.func @f(%a: tensor<2x3x4xf32>, %b: tensor<5x4xf32>) -> tensor<2x3x5xf32> {
  %0 = nn.matmul %a, %b transpose_rhs : (tensor<2x3x4xf32>, tensor<5x4xf32>) -> tensor<2x3x5xf32>
  return %0 : tensor<2x3x5xf32>
})mlir"},
    {"matmul_transpose_lhs", R"mlir(
func.func @f(%a: tensor<2x3x4xf32>, %b: tensor<2x3x5xf32>) -> tensor<4x5xf32> {
  %0 = nn.matmul %a, %b transpose_lhs : (tensor<2x3x4xf32>, tensor<2x3x5xf32>) -> tensor<4x5xf32>
  return %0 : tensor<4x5xf32>
})mlir"},
    {"rms_norm", R"mlir(
func.func @f(%x: tensor<2x3x6xf32>, %g: tensor<6xf32>) -> tensor<2x3x6xf32> {
  %0 = nn.rms_norm %x, %g epsilon 1.0e-05 : (tensor<2x3x6xf32>, tensor<6xf32>) -> tensor<2x3x6xf32>
  return %0 : tensor<2x3x6xf32>
})mlir"},
    {"layer_norm", R"mlir(
func.func @f(%x: tensor<2x3x6xf32>, %g: tensor<6xf32>, %b: tensor<6xf32>) -> tensor<2x3x6xf32> {
  %0 = nn.layer_norm %x, %g, %b epsilon 1.0e-05 : (tensor<2x3x6xf32>, tensor<6xf32>, tensor<6xf32>) -> tensor<2x3x6xf32>
  return %0 : tensor<2x3x6xf32>
})mlir"},
    {"rope", R"mlir(
func.func @f(%x: tensor<2x3x2x4xf32>) -> tensor<2x3x2x4xf32> {
  %0 = nn.rope %x theta 1.0e+01 : (tensor<2x3x2x4xf32>) -> tensor<2x3x2x4xf32>
  return %0 : tensor<2x3x2x4xf32>
})mlir"},
    {"rope_inverse", R"mlir(
func.func @f(%x: tensor<1x3x1x6xf32>) -> tensor<1x3x1x6xf32> {
  %0 = nn.rope %x theta 1.0e+04 inverse : (tensor<1x3x1x6xf32>) -> tensor<1x3x1x6xf32>
  return %0 : tensor<1x3x1x6xf32>
})mlir"},
    {"rope_llama3_scaling", R"mlir(
func.func @f(%x: tensor<1x5x1x8xf32>) -> tensor<1x5x1x8xf32> {
  %0 = nn.rope %x theta 1.0e+02 scaling_factor 4.0 low_freq_factor 1.0 high_freq_factor 8.0 original_max_positions 32 : (tensor<1x5x1x8xf32>) -> tensor<1x5x1x8xf32>
  return %0 : tensor<1x5x1x8xf32>
})mlir"},
    {"attention", R"mlir(
func.func @f(%q: tensor<2x3x2x4xf32>, %k: tensor<2x3x2x4xf32>, %v: tensor<2x3x2x4xf32>) -> tensor<2x3x2x4xf32> {
  %0 = nn.attention %q, %k, %v : (tensor<2x3x2x4xf32>, tensor<2x3x2x4xf32>, tensor<2x3x2x4xf32>) -> tensor<2x3x2x4xf32>
  return %0 : tensor<2x3x2x4xf32>
})mlir"},
    {"grouped_query_attention", R"mlir(
func.func @f(%q: tensor<1x4x4x2xf32>, %k: tensor<1x4x2x2xf32>, %v: tensor<1x4x2x2xf32>) -> tensor<1x4x4x2xf32> {
  %0 = nn.attention %q, %k, %v : (tensor<1x4x4x2xf32>, tensor<1x4x2x2xf32>, tensor<1x4x2x2xf32>) -> tensor<1x4x4x2xf32>
  return %0 : tensor<1x4x4x2xf32>
})mlir"},
    {"silu", R"mlir(
func.func @f(%x: tensor<2x5xf32>) -> tensor<2x5xf32> {
  %0 = nn.silu %x : (tensor<2x5xf32>) -> tensor<2x5xf32>
  return %0 : tensor<2x5xf32>
})mlir"},
    {"gelu", R"mlir(
func.func @f(%x: tensor<2x5xf32>) -> tensor<2x5xf32> {
  %0 = nn.gelu %x : (tensor<2x5xf32>) -> tensor<2x5xf32>
  return %0 : tensor<2x5xf32>
})mlir"},
    {"add", R"mlir(
func.func @f(%a: tensor<2x5xf32>, %b: tensor<2x5xf32>) -> tensor<2x5xf32> {
  %0 = nn.add %a, %b : (tensor<2x5xf32>, tensor<2x5xf32>) -> tensor<2x5xf32>
  return %0 : tensor<2x5xf32>
})mlir"},
    {"mul", R"mlir(
func.func @f(%a: tensor<2x5xf32>, %b: tensor<2x5xf32>) -> tensor<2x5xf32> {
  %0 = nn.mul %a, %b : (tensor<2x5xf32>, tensor<2x5xf32>) -> tensor<2x5xf32>
  return %0 : tensor<2x5xf32>
})mlir"},
    {"softmax", R"mlir(
func.func @f(%x: tensor<3x5xf32>) -> tensor<3x5xf32> {
  %0 = nn.softmax %x : (tensor<3x5xf32>) -> tensor<3x5xf32>
  return %0 : tensor<3x5xf32>
})mlir"},
    {"reshape", R"mlir(
func.func @f(%x: tensor<2x6xf32>) -> tensor<2x2x3xf32> {
  %0 = nn.reshape %x : (tensor<2x6xf32>) -> tensor<2x2x3xf32>
  return %0 : tensor<2x2x3xf32>
})mlir"},
    {"transpose", R"mlir(
func.func @f(%x: tensor<2x3x4xf32>) -> tensor<4x2x3xf32> {
  %0 = nn.transpose %x permutation [2, 0, 1] : (tensor<2x3x4xf32>) -> tensor<4x2x3xf32>
  return %0 : tensor<4x2x3xf32>
})mlir"},
    {"cross_entropy", R"mlir(
func.func @f(%logits: tensor<2x3x5xf32>, %labels: tensor<2x3xi64>) -> tensor<f32> {
  %0 = nn.cross_entropy %logits, %labels : (tensor<2x3x5xf32>, tensor<2x3xi64>) -> tensor<f32>
  return %0 : tensor<f32>
})mlir"},
};

INSTANTIATE_TEST_SUITE_P(EveryDifferentiableOp, NnVjpTest, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<VjpCase>& info) {
                           return info.param.name;
                         });

TEST(NnVjpErrorsTest, RejectsACotangentOfTheWrongType) {
  mlir::MLIRContext context;
  loadNnDialects(context);
  auto module = parseNnModule(context, R"mlir(
func.func @f(%x: tensor<2x5xf32>, %dy: tensor<2x4xf32>) -> tensor<2x5xf32> {
  %0 = nn.silu %x : (tensor<2x5xf32>) -> tensor<2x5xf32>
  return %0 : tensor<2x5xf32>
})mlir");
  ASSERT_TRUE(module);
  auto op = firstOp<SiluOp>(*module);
  auto f = module->lookupSymbol<mlir::func::FuncOp>("f");
  std::string message;
  mlir::ScopedDiagnosticHandler handler(&context, [&](mlir::Diagnostic& diagnostic) {
    message = diagnostic.str();
    return mlir::success();
  });
  mlir::OpBuilder builder(op);
  EXPECT_TRUE(mlir::failed(op.buildVjp(builder, f.getArgument(1))));
  EXPECT_EQ(message,
            "'nn.silu' op vjp cotangent #0 must have type "
            "'tensor<2x5xf32>', got: 'tensor<2x4xf32>'; pass a cotangent of "
            "the result's type");
  EXPECT_TRUE(mlir::failed(op.buildVjp(builder, {})));
  EXPECT_EQ(message,
            "'nn.silu' op vjp needs one cotangent per result, got: 0 != 1; "
            "pass a cotangent for every result");
}

}  // namespace
}  // namespace loom::planner::nn
