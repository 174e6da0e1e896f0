// Tests of plan-autodiff on zoo models: every parameter gradient of tiny
// GPT-2 and Llama graphs matches central finite differences of the loss
// (float64 reference evaluator), and the published Llama 3 graphs
// differentiate into functions that verify.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"
#include "planner/dialect/nn/eval/evaluator.h"
#include "planner/dialect/nn/ir/nn_dialect.h"
#include "planner/models/model_config.h"
#include "planner/models/zoo_builder.h"
#include "planner/transforms/autodiff/passes.h"

namespace loom::planner::autodiff {
namespace {

using nn::eval::Tensor;

mlir::func::FuncOp onlyFunc(mlir::ModuleOp module) {
  return *module.getOps<mlir::func::FuncOp>().begin();
}

std::vector<int64_t> shapeOf(mlir::Type type) {
  auto shape = llvm::cast<mlir::RankedTensorType>(type).getShape();
  return {shape.begin(), shape.end()};
}

class AutodiffTest : public ::testing::Test {
 protected:
  mlir::OwningOpRef<mlir::ModuleOp> build(const models::TransformerConfig& config,
                                          models::BatchShape shape) {
    absl::StatusOr<mlir::OwningOpRef<mlir::ModuleOp>> module =
        models::buildModel(context_, config, shape, mlir::Float32Type::get(&context_));
    EXPECT_TRUE(module.ok()) << module.status();
    if (!module.ok()) return nullptr;
    return std::move(*module);
  }

  mlir::LogicalResult differentiate(mlir::ModuleOp module) {
    mlir::PassManager pm(&context_);
    pm.addNestedPass<mlir::func::FuncOp>(createPlanAutodiff());
    return pm.run(module);
  }

  mlir::MLIRContext context_;
};

// Random arguments for a zoo graph: ids, labels and positions in [0, seq)
// (every tiny vocab is larger), parameters in [-0.5, 0.5].
std::vector<Tensor> randomArguments(mlir::func::FuncOp func, int64_t seq, std::mt19937& rng) {
  std::vector<Tensor> args;
  std::uniform_int_distribution<int64_t> id(0, seq - 1);
  std::uniform_real_distribution<double> value(-0.5, 0.5);
  for (mlir::Type type : func.getArgumentTypes()) {
    Tensor tensor(shapeOf(type));
    const bool integer =
        llvm::isa<mlir::IntegerType>(llvm::cast<mlir::RankedTensorType>(type).getElementType());
    for (double& v : tensor.values) v = integer ? static_cast<double>(id(rng)) : value(rng);
    args.push_back(std::move(tensor));
  }
  return args;
}

class FiniteDifferenceTest : public AutodiffTest,
                             public ::testing::WithParamInterface<models::ModelFamily> {};

TEST_P(FiniteDifferenceTest, EveryParameterGradientMatchesTheLoss) {
  models::TinyOptions options;
  options.family = GetParam();
  options.num_layers = 2;
  options.hidden = 16;
  options.num_heads = 4;
  // GPT-2 attention is multi-head; Llama's is grouped-query.
  options.num_kv_heads = GetParam() == models::ModelFamily::kGpt2 ? 4 : 2;
  options.ffn_hidden = 24;
  options.vocab = 20;
  options.max_seq = 8;
  absl::StatusOr<models::TransformerConfig> config = models::tinyConfig(options);
  ASSERT_TRUE(config.ok()) << config.status();
  const models::BatchShape shape = {.batch = 2, .seq = 6};
  auto forwardModule = build(*config, shape);
  auto trainModule = build(*config, shape);
  ASSERT_TRUE(forwardModule && trainModule);
  ASSERT_TRUE(mlir::succeeded(differentiate(*trainModule)));
  ASSERT_TRUE(mlir::succeeded(mlir::verify(*trainModule)));
  mlir::func::FuncOp forward = onlyFunc(*forwardModule);
  mlir::func::FuncOp train = onlyFunc(*trainModule);

  const unsigned numArgs = forward.getNumArguments();
  auto seedArg = train->getAttrOfType<mlir::IntegerAttr>(kLossGradArgAttrName);
  ASSERT_TRUE(seedArg);
  EXPECT_EQ(seedArg.getInt(), numArgs);
  std::vector<unsigned> params;
  for (unsigned i = 0; i < numArgs; ++i) {
    if (forward.getArgAttr(i, nn::NnDialect::kParamAttrName)) params.push_back(i);
  }
  ASSERT_EQ(train.getNumResults(), 1 + params.size());

  std::mt19937 rng(7);
  const std::vector<Tensor> args = randomArguments(forward, shape.seq, rng);
  std::vector<Tensor> trainArgs = args;
  trainArgs.push_back(Tensor({}, {1.0}));
  absl::StatusOr<std::vector<Tensor>> analytic = nn::eval::evaluate(train, trainArgs);
  ASSERT_TRUE(analytic.ok()) << analytic.status();

  auto loss = [&](const std::vector<Tensor>& at) {
    absl::StatusOr<std::vector<Tensor>> results = nn::eval::evaluate(forward, at);
    EXPECT_TRUE(results.ok()) << results.status();
    return results.ok() ? (*results)[0].values[0] : NAN;
  };
  EXPECT_DOUBLE_EQ((*analytic)[0].values[0], loss(args));

  // A handful of elements per parameter keeps the test fast; the sampled
  // rows of the embedding tables include rows the ids do not hit.
  constexpr int kSamples = 4;
  constexpr double kStep = 1e-5;
  constexpr double kTolerance = 1e-6;
  for (size_t p = 0; p < params.size(); ++p) {
    const unsigned arg = params[p];
    auto gradOf = train.getResultAttrOfType<mlir::IntegerAttr>(1 + p, kGradOfAttrName);
    ASSERT_TRUE(gradOf);
    EXPECT_EQ(gradOf.getInt(), arg);
    EXPECT_EQ(train.getResultAttr(1 + p, nn::NnDialect::kNameAttrName),
              forward.getArgAttr(arg, nn::NnDialect::kNameAttrName));
    const Tensor& grad = (*analytic)[1 + p];
    ASSERT_EQ(grad.shape, args[arg].shape);
    double scale = 1.0;
    for (double v : grad.values) scale = std::max(scale, std::abs(v));
    std::uniform_int_distribution<int64_t> element(0, grad.numElements() - 1);
    for (int s = 0; s < kSamples; ++s) {
      const int64_t e = element(rng);
      std::vector<Tensor> plus = args;
      std::vector<Tensor> minus = args;
      plus[arg].values[e] += kStep;
      minus[arg].values[e] -= kStep;
      const double numeric = (loss(plus) - loss(minus)) / (2 * kStep);
      EXPECT_NEAR(grad.values[e], numeric, kTolerance * scale)
          << "parameter #" << arg << " element " << e;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Tiny, FiniteDifferenceTest,
                         ::testing::Values(models::ModelFamily::kGpt2, models::ModelFamily::kLlama),
                         [](const auto& info) {
                           return info.param == models::ModelFamily::kGpt2 ? "Gpt2" : "Llama";
                         });

// The loss cotangent argument scales every gradient, so a loss scale or a
// 1/microbatches factor can be passed in.
TEST_F(AutodiffTest, LossCotangentScalesTheGradients) {
  models::TinyOptions options;
  options.num_layers = 1;
  options.hidden = 8;
  options.num_heads = 2;
  options.num_kv_heads = 1;
  options.ffn_hidden = 8;
  options.vocab = 10;
  options.max_seq = 4;
  absl::StatusOr<models::TransformerConfig> config = models::tinyConfig(options);
  ASSERT_TRUE(config.ok()) << config.status();
  auto module = build(*config, {.batch = 1, .seq = 4});
  ASSERT_TRUE(module && mlir::succeeded(differentiate(*module)));
  mlir::func::FuncOp train = onlyFunc(*module);
  std::mt19937 rng(3);
  std::vector<Tensor> args = randomArguments(train, 4, rng);
  args.back() = Tensor({}, {1.0});
  absl::StatusOr<std::vector<Tensor>> unit = nn::eval::evaluate(train, args);
  args.back() = Tensor({}, {2.5});
  absl::StatusOr<std::vector<Tensor>> scaled = nn::eval::evaluate(train, args);
  ASSERT_TRUE(unit.ok() && scaled.ok());
  EXPECT_EQ((*unit)[0].values, (*scaled)[0].values) << "the loss does not depend on the seed";
  for (size_t r = 1; r < unit->size(); ++r) {
    for (size_t e = 0; e < (*unit)[r].values.size(); ++e) {
      EXPECT_NEAR((*scaled)[r].values[e], 2.5 * (*unit)[r].values[e], 1e-12)
          << "result #" << r << " element " << e;
    }
  }
}

// The published Llama 3 graphs differentiate into verified training steps
// with one gradient of its parameter's type per parameter.
TEST_F(AutodiffTest, PublishedLlama3GraphsVerify) {
  for (const char* name : {"llama3-8b", "llama3-405b"}) {
    absl::StatusOr<models::TransformerConfig> config = models::publishedConfig(name);
    ASSERT_TRUE(config.ok()) << config.status();
    auto module = build(*config, {.batch = 1, .seq = 2048});
    ASSERT_TRUE(module);
    ASSERT_TRUE(mlir::succeeded(differentiate(*module))) << name;
    ASSERT_TRUE(mlir::succeeded(mlir::verify(*module))) << name;
    mlir::func::FuncOp train = onlyFunc(*module);
    int64_t params = 0;
    for (unsigned i = 0; i < train.getNumArguments(); ++i) {
      if (!train.getArgAttr(i, nn::NnDialect::kParamAttrName)) continue;
      ++params;
      ASSERT_LT(params, train.getNumResults()) << name;
      EXPECT_EQ(train.getResultTypes()[params], train.getArgumentTypes()[i]) << name;
    }
    EXPECT_EQ(train.getNumResults(), 1 + params) << name;
  }
}

}  // namespace
}  // namespace loom::planner::autodiff
