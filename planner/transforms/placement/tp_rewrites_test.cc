// Tests that plan-placement's tensor-parallel rewrites keep the math of a
// training step: tiny GPT-2 and Llama steps from the model zoo, evaluated in
// float64 before and after plan-placement under tp (with fsdp), give the same
// loss and gradients, and the rewritten ops are where they should be.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/Pass/PassManager.h"
#include "planner/dialect/dist/ir/dist_dialect.h"
#include "planner/dialect/nn/eval/evaluator.h"
#include "planner/dialect/nn/ir/nn_dialect.h"
#include "planner/dialect/nn/ir/nn_ops.h"
#include "planner/models/model_config.h"
#include "planner/models/zoo_builder.h"
#include "planner/transforms/autodiff/passes.h"
#include "planner/transforms/placement/passes.h"

namespace loom::planner::placement {
namespace {

struct Case {
  std::string model;
  std::string mesh;
  std::string axes;
  bool vocabParallelLoss;
  // Expected op counts after placement.
  int64_t biasAdds;
  int64_t vocabLosses;
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << c.model << " on " << c.mesh << (c.vocabParallelLoss ? "" : " vocab-parallel-loss=false");
}

class TpRewritesTest : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override { context_.loadDialect<dist::DistDialect>(); }

  // The training step of GetParam().model, batch 4 x 8 tokens.
  mlir::OwningOpRef<mlir::ModuleOp> step() {
    absl::StatusOr<models::TransformerConfig> config = models::configFromSpec(GetParam().model);
    EXPECT_TRUE(config.ok()) << config.status();
    auto built = models::buildModel(context_, *config, {4, 8}, mlir::Float32Type::get(&context_));
    EXPECT_TRUE(built.ok()) << built.status();
    mlir::OwningOpRef<mlir::ModuleOp> module = std::move(*built);
    mlir::PassManager pm(&context_);
    pm.addNestedPass<mlir::func::FuncOp>(autodiff::createPlanAutodiff());
    EXPECT_TRUE(succeeded(pm.run(*module)));
    return module;
  }

  // Random arguments: integer ids, labels and positions in [0, 8), floats
  // in [-0.5, 0.5), the loss cotangent 1.
  static std::vector<nn::eval::Tensor> arguments(mlir::func::FuncOp func) {
    std::mt19937 rng(7);
    std::uniform_real_distribution<double> value(-0.5, 0.5);
    std::uniform_int_distribution<int> index(0, 7);
    std::vector<nn::eval::Tensor> args;
    for (mlir::BlockArgument arg : func.getArguments()) {
      auto type = llvm::cast<mlir::RankedTensorType>(arg.getType());
      nn::eval::Tensor tensor(std::vector<int64_t>(type.getShape().begin(), type.getShape().end()));
      for (double& v : tensor.values) {
        v = type.getElementType().isInteger() ? index(rng) : value(rng);
      }
      if (type.getRank() == 0) tensor.values[0] = 1.0;
      args.push_back(std::move(tensor));
    }
    return args;
  }

  mlir::MLIRContext context_;
};

TEST_P(TpRewritesTest, KeepTheStepExact) {
  mlir::OwningOpRef<mlir::ModuleOp> reference = step();
  mlir::OwningOpRef<mlir::ModuleOp> placed = step();
  mlir::PassManager pm(&context_);
  PlanPlacementOptions options{GetParam().mesh, GetParam().axes, 0};
  options.vocabParallelLoss = GetParam().vocabParallelLoss;
  pm.addPass(createPlanPlacement(options));
  ASSERT_TRUE(succeeded(pm.run(*placed)));

  auto before = *reference->getOps<mlir::func::FuncOp>().begin();
  auto after = *placed->getOps<mlir::func::FuncOp>().begin();
  int64_t biasAdds = 0;
  int64_t vocabLosses = 0;
  after.walk([&](mlir::Operation* op) {
    if (llvm::isa<nn::BiasAddOp>(op)) ++biasAdds;
    if (llvm::isa<nn::VocabCrossEntropyOp>(op)) ++vocabLosses;
  });
  EXPECT_EQ(biasAdds, GetParam().biasAdds);
  EXPECT_EQ(vocabLosses, GetParam().vocabLosses);

  const std::vector<nn::eval::Tensor> args = arguments(before);
  absl::StatusOr<std::vector<nn::eval::Tensor>> expected = nn::eval::evaluate(before, args);
  absl::StatusOr<std::vector<nn::eval::Tensor>> got = nn::eval::evaluate(after, args);
  ASSERT_TRUE(expected.ok()) << expected.status();
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->size(), expected->size());
  for (size_t result = 0; result < got->size(); ++result) {
    const std::vector<double>& want = (*expected)[result].values;
    const std::vector<double>& have = (*got)[result].values;
    ASSERT_EQ(have.size(), want.size()) << "result #" << result;
    // Relative to the result's scale, absolute below 1 (the key bias's
    // gradient is 0 up to rounding: softmax ignores a shift of every key).
    double scale = 1.0;
    for (double v : want) scale = std::max(scale, std::abs(v));
    for (size_t i = 0; i < want.size(); ++i) {
      ASSERT_NEAR(have[i], want[i], 1e-12 * scale) << "result #" << result << " element " << i;
    }
  }
}

// GPT-2 has two row-parallel linears with a bias per layer (attn.c_proj,
// mlp.c_proj); vocab 30 does not divide by tp=4, so the logits are padded
// there. The evaluator runs the global graph: the rewrites change which ops
// compute the step, not its values.
INSTANTIATE_TEST_SUITE_P(
    TinyModels, TpRewritesTest,
    ::testing::Values(Case{"tiny:family=gpt2,layers=2,hidden=16,heads=4,ffn=32,vocab=30,"
                           "seq=8",
                           "tp=2", "tp", true, 4, 1},
                      Case{"tiny:family=gpt2,layers=2,hidden=16,heads=4,ffn=32,vocab=30,"
                           "seq=8",
                           "fsdp=2,tp=4", "fsdp,tp", true, 4, 1},
                      Case{"tiny:family=gpt2,layers=2,hidden=16,heads=4,ffn=32,vocab=30,"
                           "seq=8",
                           "tp=2", "tp", false, 4, 0},
                      Case{"tiny:family=llama,layers=2,hidden=16,heads=4,kv_heads=2,ffn=32,"
                           "vocab=30,seq=8",
                           "fsdp=2,tp=2", "fsdp,tp", true, 0, 1},
                      Case{"tiny:family=gpt2,layers=2,hidden=16,heads=4,ffn=32,vocab=30,"
                           "seq=8",
                           "fsdp=2,dp=2", "fsdp,dp", true, 0, 0}));

}  // namespace
}  // namespace loom::planner::placement
