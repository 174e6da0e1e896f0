// Tests of the predicted timeline on a scheduled plan (tiny Llama, fsdp=2 x
// tp=2 on one CPU host): the phases of a plan that returns the wait of the
// loss all-reduce, how ops are classed for the cost model, streams per
// mesh axes, and re-pricing an exported plan with a machine profile.
#include "planner/export/timeline.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "mesh/topology.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "nlohmann/json.hpp"
#include "planner/cost/machine_profile.h"
#include "planner/dialect/dist/ir/dist_dialect.h"
#include "planner/dialect/nn/ir/nn_interfaces.h"
#include "planner/export/plan_json.h"
#include "planner/models/model_config.h"
#include "planner/models/zoo_builder.h"
#include "planner/transforms/autodiff/passes.h"
#include "planner/transforms/bucketing/passes.h"
#include "planner/transforms/collectives/passes.h"
#include "planner/transforms/placement/passes.h"
#include "planner/transforms/schedule/passes.h"

namespace loom::planner::exporter {
namespace {

class TimelineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    context_.loadDialect<dist::DistDialect>();
    auto config = models::tinyConfig({});
    ASSERT_TRUE(config.ok()) << config.status();
    auto built = models::buildModel(context_, *config, {4, 16}, mlir::Float32Type::get(&context_));
    ASSERT_TRUE(built.ok()) << built.status();
    module_ = std::move(*built);
    mlir::PassManager pm(&context_);
    pm.addNestedPass<mlir::func::FuncOp>(autodiff::createPlanAutodiff());
    pm.addPass(placement::createPlanPlacement(
        placement::PlanPlacementOptions{"fsdp=2,tp=2", "fsdp,tp", 0}));
    pm.addPass(collectives::createPlanInsertCollectives());
    pm.addPass(bucketing::createPlanBucketing());
    pm.addPass(schedule::createPlanSchedule());
    ASSERT_TRUE(succeeded(pm.run(*module_)));
    func_ = *module_->getOps<mlir::func::FuncOp>().begin();
  }

  mlir::MLIRContext context_;
  mlir::OwningOpRef<mlir::ModuleOp> module_;
  mlir::func::FuncOp func_;
};

TEST_F(TimelineTest, TheForwardEndsAtTheLossAllReduceOfAScheduledPlan) {
  const std::vector<Phase> phases = assignPhases(func_);
  int64_t forward = 0, backward = 0;
  mlir::Operation* lastForward = nullptr;
  int64_t index = 0;
  for (mlir::Operation& op : func_.getBody().front()) {
    if (phases[index] == Phase::kForward) {
      ++forward;
      lastForward = &op;
    } else {
      ++backward;
    }
    ++index;
  }
  EXPECT_GT(forward, 0);
  EXPECT_GT(backward, forward);  // the backward has about twice the ops
  ASSERT_NE(lastForward, nullptr);
  EXPECT_EQ(lastForward->getName().getStringRef(), "dist.all_reduce_start");
}

TEST_F(TimelineTest, OpsAreClassedForTheCostModel) {
  int64_t gemms = 0, attention = 0, views = 0;
  for (mlir::Operation& op : func_.getBody().front()) {
    const cost::ComputeCost c = nn::computeCostOf(&op);
    const llvm::StringRef name = op.getName().getStringRef();
    if (name == "nn.linear" || name == "nn.matmul") {
      ++gemms;
      EXPECT_EQ(c.op_class, cost::OpClass::kGemm);
      EXPECT_DOUBLE_EQ(c.flops, 2.0 * c.m * c.n * c.k) << name.str();
    } else if (name == "nn.attention" || name == "nn.attention_grad") {
      ++attention;
      EXPECT_EQ(c.op_class, cost::OpClass::kAttention);
    } else if (name == "nn.reshape") {
      ++views;
      EXPECT_EQ(c.op_class, cost::OpClass::kFree);
    }
  }
  EXPECT_GT(gemms, 0);
  EXPECT_EQ(attention, 2 * 2);  // two layers, forward and backward
  EXPECT_GT(views, 0);
}

TEST_F(TimelineTest, CollectivesOfOtherAxesDoNotQueueBehindEachOther) {
  auto topology = mesh::Topology::cpuHost(4);
  auto plan = exportPlan(*module_, *topology, {});
  ASSERT_TRUE(plan.ok()) << plan.status();
  // A tp collective may start while an fsdp one runs: streams are per axes.
  double fsdpStart = -1, fsdpEnd = -1;
  bool overlapped = false;
  for (const plan::Instruction* in : plan->programs[0].instructions()) {
    if (!in->commStream() || !in->start_s) continue;
    const std::string axes = absl::StrJoin(in->attrs.mesh_axes, ",");
    if (axes == "fsdp") {
      fsdpStart = *in->start_s;
      fsdpEnd = *in->start_s + *in->duration_s;
    } else if (axes == "tp" && *in->start_s > fsdpStart && *in->start_s < fsdpEnd) {
      overlapped = true;
    }
  }
  EXPECT_TRUE(overlapped);
  EXPECT_GT(plan->predicted.step_time_s, 0);
  EXPECT_LE(plan->predicted.exposed_comm_s, plan->predicted.comm_s);
}

TEST_F(TimelineTest, AProfileRepricesAnExportedPlan) {
  auto topology = mesh::Topology::cpuHost(4);
  PlanExportOptions options;
  options.model = "tiny";
  auto plan = exportPlan(*module_, *topology, options);
  ASSERT_TRUE(plan.ok()) << plan.status();
  const double datasheet = plan->predicted.step_time_s;
  // A machine ten times slower in memory bandwidth and collectives.
  cost::MachineProfile profile;
  profile.name = "slow";
  profile.device_name = "cpu";
  profile.memory_bytes = 16LL << 30;
  profile.memory_bandwidth_bytes_per_s = topology->device().memory_bandwidth_bytes_per_s / 10;
  for (const char* kind : {"all_gather", "reduce_scatter", "all_reduce"}) {
    profile.collectives.push_back({.backend = "gloo",
                                   .kind = kind,
                                   .group_size = 2,
                                   .link_class = cost::LinkScope::kIntraHost,
                                   .latency_s = 3e-4,
                                   .bus_bandwidth_bytes_per_s = 2.5e8,
                                   .points = {}});
  }
  plan::Plan repriced = *plan;
  ASSERT_TRUE(repricePlan(*topology, {.profile = &profile}, repriced).ok());
  EXPECT_EQ(repriced.predicted.machine_profile, "slow");
  EXPECT_GT(repriced.predicted.step_time_s, 5 * datasheet);
  // Every timed instruction got the new times; the last ends at the step.
  double end = 0;
  for (const plan::Instruction* in : repriced.programs[0].instructions()) {
    if (in->start_s) end = std::max(end, *in->start_s + *in->duration_s);
  }
  EXPECT_NEAR(end, repriced.predicted.step_time_s, 1e-12);
}

}  // namespace
}  // namespace loom::planner::exporter
