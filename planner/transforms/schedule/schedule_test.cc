// Tests of plan-schedule's choice of the prefetch depth k under a memory
// budget: the peak it compares is plan-memory-plan's (parameters, optimizer
// states, activations, gathered buffers in flight, gradients), hand-checked
// on a 2-unit MLP, and the chosen k is the largest that fits, checked
// against every k on a tiny Llama.
#include <cstdint>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "planner/dialect/dist/ir/dist_dialect.h"
#include "planner/dialect/nn/ir/nn_dialect.h"
#include "planner/models/model_config.h"
#include "planner/models/zoo_builder.h"
#include "planner/transforms/autodiff/passes.h"
#include "planner/transforms/bucketing/passes.h"
#include "planner/transforms/collectives/passes.h"
#include "planner/transforms/memory/memory_plan.h"
#include "planner/transforms/optimizer/passes.h"
#include "planner/transforms/placement/passes.h"
#include "planner/transforms/schedule/passes.h"

namespace loom::planner::schedule {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// The MLP of tests/planner/transforms/schedule/schedule_options.mlir.
constexpr char kMlp[] = R"mlir(
func.func @mlp(%x: tensor<8x16xf32>, %labels: tensor<8xi32>,
    %w0a: tensor<16x16xf32> {nn.param, nn.name = "layers.0.fc1.weight"},
    %w0b: tensor<16x16xf32> {nn.param, nn.name = "layers.0.fc2.weight"},
    %w1a: tensor<16x16xf32> {nn.param, nn.name = "layers.1.fc1.weight"},
    %w1b: tensor<16x12xf32> {nn.param, nn.name = "layers.1.fc2.weight"}) -> tensor<f32> {
  %h0 = nn.linear %x, %w0a : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
  %a0 = nn.silu %h0 : (tensor<8x16xf32>) -> tensor<8x16xf32>
  %h1 = nn.linear %a0, %w0b : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
  %a1 = nn.silu %h1 : (tensor<8x16xf32>) -> tensor<8x16xf32>
  %h2 = nn.linear %a1, %w1a : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
  %a2 = nn.silu %h2 : (tensor<8x16xf32>) -> tensor<8x16xf32>
  %y = nn.linear %a2, %w1b : (tensor<8x16xf32>, tensor<16x12xf32>) -> tensor<8x12xf32>
  %l = nn.cross_entropy %y, %labels : (tensor<8x12xf32>, tensor<8xi32>) -> tensor<f32>
  return %l : tensor<f32>
}
)mlir";

class ScheduleBudgetTest : public ::testing::Test {
 protected:
  ScheduleBudgetTest() {
    context_.loadDialect<nn::NnDialect, dist::DistDialect, mlir::func::FuncDialect>();
  }

  mlir::OwningOpRef<mlir::ModuleOp> mlp() {
    return mlir::parseSourceString<mlir::ModuleOp>(kMlp, &context_);
  }

  mlir::OwningOpRef<mlir::ModuleOp> tinyLlama() {
    auto config = models::configFromSpec(
        "tiny:family=llama,layers=4,hidden=16,heads=4,kv_heads=2,ffn=32,"
        "vocab=32,seq=8");
    EXPECT_TRUE(config.ok()) << config.status();
    auto built = models::buildModel(context_, *config, {4, 8}, mlir::Float32Type::get(&context_));
    EXPECT_TRUE(built.ok()) << built.status();
    return std::move(*built);
  }

  // Runs the pipeline up to plan-schedule with `options` on `module`
  // (fsdp over `mesh`), then plan-optimizer-step, and returns the scheduled
  // function's k and peak.
  std::pair<int64_t, int64_t> schedule(mlir::ModuleOp module, const std::string& mesh,
                                       const PlanScheduleOptions& options) {
    mlir::PassManager pm(&context_);
    pm.addNestedPass<mlir::func::FuncOp>(autodiff::createPlanAutodiff());
    pm.addPass(placement::createPlanPlacement(placement::PlanPlacementOptions{mesh, "fsdp", 0}));
    pm.addPass(collectives::createPlanInsertCollectives());
    pm.addPass(bucketing::createPlanBucketing());
    pm.addPass(createPlanSchedule(options));
    pm.addPass(optimizer::createPlanOptimizerStep());
    EXPECT_TRUE(succeeded(pm.run(module)));
    auto func = *module.getOps<mlir::func::FuncOp>().begin();
    auto k = func->getAttrOfType<mlir::IntegerAttr>(kPrefetchAttrName);
    return {k ? k.getInt() : -1, memory::computeMemoryPlan(func).peak_bytes};
  }

  mlir::MLIRContext context_;
};

// fsdp=4: 960 bytes of shards and 1920 of AdamW states; the peak grows with
// k as more gathered buckets are in flight at once.
TEST_F(ScheduleBudgetTest, PeakOfEachDepthIsTheMemoryPlans) {
  const int64_t expected[] = {7912, 9484, 11724, 12748};
  for (int64_t k = 0; k < 4; ++k) {
    auto module = mlp();
    ASSERT_TRUE(module);
    PlanScheduleOptions options;
    options.prefetch = k;
    EXPECT_EQ(schedule(*module, "fsdp=4", options), std::make_pair(k, expected[k])) << "k = " << k;
  }
}

TEST_F(ScheduleBudgetTest, BudgetPicksTheLargestDepthThatFits) {
  const std::pair<double, int64_t> cases[] = {{7912, 0},  {9483, 0},  {9484, 1},  {11723, 1},
                                              {11724, 2}, {12747, 2}, {12748, 3}, {1e9, 3}};
  for (const auto& [bytes, k] : cases) {
    auto module = mlp();
    ASSERT_TRUE(module);
    PlanScheduleOptions options;
    options.memoryBudgetGb = bytes / kGiB;
    const auto [chosen, peak] = schedule(*module, "fsdp=4", options);
    EXPECT_EQ(chosen, k) << "budget " << bytes << " bytes";
    EXPECT_LE(peak, bytes);
  }
}

// The binary search over k agrees with trying every k: on a 4-layer Llama
// under fsdp=2 (10 gather steps), for a budget at every peak and one byte
// below it.
TEST_F(ScheduleBudgetTest, BinarySearchAgreesWithEveryDepth) {
  std::vector<int64_t> peaks;
  for (int64_t k = 0;; ++k) {
    auto module = tinyLlama();
    PlanScheduleOptions options;
    options.prefetch = k;
    const int64_t peak = schedule(*module, "fsdp=2", options).second;
    if (!peaks.empty()) {
      EXPECT_GE(peak, peaks.back()) << "k = " << k;
    }
    if (!peaks.empty() && peak == peaks.back() && k > 12) break;
    peaks.push_back(peak);
  }
  for (int64_t budget : peaks) {
    for (int64_t bytes : {budget - 1, budget}) {
      int64_t largest = -1;
      for (size_t k = 0; k < peaks.size(); ++k) {
        if (peaks[k] <= bytes) largest = static_cast<int64_t>(k);
      }
      if (largest < 0) continue;
      auto module = tinyLlama();
      PlanScheduleOptions options;
      options.memoryBudgetGb = static_cast<double>(bytes) / kGiB;
      const int64_t chosen = schedule(*module, "fsdp=2", options).first;
      // Depths beyond the last step move nothing: they all have the peak of
      // the largest useful k, which the pass returns.
      EXPECT_EQ(peaks[chosen], peaks[largest]) << "budget " << bytes;
      EXPECT_LE(peaks[chosen], bytes);
    }
  }
}

}  // namespace
}  // namespace loom::planner::schedule
