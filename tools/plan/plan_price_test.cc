// pricePlan (planner/cost/plan_price.h) on plans the pipeline made: the
// peak it finds over the plan's lifetimes is plan-memory-plan's over the
// MLIR function (the pipeline's budget check), the plan records its figures,
// and the timeline is consistent, for every model family, mesh and dtype
// here.
#include "planner/cost/plan_price.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "mlir/IR/MLIRContext.h"
#include "plan/plan.h"
#include "plan/scope.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "planner/cost/cost_model.h"
#include "planner/transforms/memory/memory_plan.h"
#include "tools/plan/model_loader.h"
#include "tools/plan/plan_pipeline.h"

namespace loom::tools::plan {
namespace {

struct Case {
  std::string model;
  std::string mesh;
  std::string axes;
  std::string dtype;
  int64_t batch;
  int64_t bucket_mb = 0;
  int64_t prefetch = 1;
  bool reshard = true;
  std::string offload = "none";
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << c.model << " " << c.mesh << " " << c.axes << " " << c.dtype << " offload " << c.offload;
}

class PlanPriceTest : public ::testing::TestWithParam<Case> {};

TEST_P(PlanPriceTest, EqualsTheExportersFigures) {
  const Case& c = GetParam();
  mlir::MLIRContext context;
  auto module = loadModel(context, {.model = c.model, .batch = c.batch, .dtype = c.dtype});
  ASSERT_TRUE(module.ok()) << module.status();
  PlanRequest request{.model_name = c.model,
                      .mesh = c.mesh,
                      .axes = c.axes,
                      .device = "h100",
                      .offload = c.offload,
                      .prefetch = c.prefetch,
                      .reshard_after_forward = c.reshard,
                      .bucket_mb = c.bucket_mb};
  auto planned = planModule(**module, request);
  ASSERT_TRUE(planned.ok()) << planned.status();
  const loom::plan::Plan& plan = planned->plan;
  auto topology = topologyFor(request, plan.mesh.size());
  ASSERT_TRUE(topology.ok());
  auto model = planner::cost::CostModel::create(*topology);
  ASSERT_TRUE(model.ok());
  auto price = planner::cost::pricePlan(plan, *model);
  ASSERT_TRUE(price.ok()) << price.status();

  // The pass's memory plan of the same function.
  const planner::memory::MemoryPlan memory =
      planner::memory::computeMemoryPlan(*(*module)->getOps<mlir::func::FuncOp>().begin());
  EXPECT_EQ(price->peak_bytes, memory.peak_bytes);
  EXPECT_EQ(price->peak_order, memory.peak_index);
  for (int r = 0; r < loom::plan::kNumRoles; ++r) {
    EXPECT_EQ(price->breakdown[r], memory.at_peak.bytes[r]) << r;
  }
  // Host memory (offload) too, which plan-memory-plan caps.
  EXPECT_EQ(price->host_peak_bytes, memory.host.peak_bytes);
  for (int r = 0; r < loom::plan::kNumRoles; ++r) {
    EXPECT_EQ(price->host_breakdown[r], memory.host.at_peak.bytes[r]) << r;
  }
  EXPECT_EQ(plan.predicted.offload.has_value(), c.offload != "none");
  // The plan holds what pricePlan gives.
  const loom::plan::Predicted& p = plan.predicted;
  EXPECT_EQ(price->timing.step_time_s, p.step_time_s);
  EXPECT_EQ(price->peak_bytes, p.peak_bytes);
  EXPECT_EQ(price->comm_bytes_per_rank, p.comm_bytes_per_rank);
  // The comm volume table (from the MLIR function) sums to the plan's bytes.
  int64_t volume = 0;
  for (const loom::plan::CommVolume& v : p.comm_volume) volume += v.bytes;
  EXPECT_EQ(volume, p.comm_bytes_per_rank);
  // Every timed instruction ends by the end of the step; comm overlaps.
  double end = 0;
  for (const loom::plan::Instruction* in : plan.programs.front().instructions()) {
    if (in->start_s) end = std::max(end, *in->start_s + *in->duration_s);
  }
  EXPECT_NEAR(end, p.step_time_s, 1e-12);
  EXPECT_LE(p.exposed_comm_s, p.comm_s);
  EXPECT_GT(p.model_flops, 0);

  // Every model op, forward and backward, and the collectives serving them
  // name their layer: the repeated blocks the search finds.
  int compute = 0, scoped = 0, layerOne[2] = {0, 0};
  for (const loom::plan::Instruction* in : plan.programs.front().instructions()) {
    if (in->info->family == loom::plan::OpFamily::kCompute) {
      ++compute;
      if (!in->scope.empty()) ++scoped;
    }
    const std::optional<loom::plan::RepeatedBlock> block = loom::plan::repeatedBlockOf(in->scope);
    if (block && block->index == 1 && in->phase != loom::plan::Phase::kOptimizer) {
      ++layerOne[in->phase == loom::plan::Phase::kBackward ? 1 : 0];
    }
  }
  EXPECT_EQ(scoped, compute);
  EXPECT_GT(layerOne[0], 5);
  EXPECT_GT(layerOne[1], 5);
}

const char kLlama[] = "tiny:layers=3,hidden=64,heads=4,kv_heads=2,ffn=96,vocab=250,seq=16";
const char kGpt2[] =
    "tiny:family=gpt2,layers=3,hidden=64,heads=4,kv_heads=4,ffn=256,vocab=250,seq=16";

INSTANTIATE_TEST_SUITE_P(Plans, PlanPriceTest,
                         ::testing::Values(Case{kLlama, "dp=1", "dp", "f32", 2},
                                           Case{kLlama, "fsdp=8", "", "f32", 8},
                                           Case{kLlama, "fsdp=8", "", "bf16", 8, 1, 2, false},
                                           Case{kLlama, "dp=2,fsdp=2,tp=2", "", "bf16", 4},
                                           Case{kLlama, "dp=4,tp=2", "", "bf16", 4},
                                           Case{kGpt2, "fsdp=4", "", "bf16", 4},
                                           Case{kGpt2, "fsdp=2,tp=4", "", "f32", 2, 0, 2, true},
                                           Case{kGpt2, "dp=2,fsdp=4", "", "bf16", 8, 1, 0, false},
                                           Case{kLlama, "fsdp=8", "", "bf16", 8, 0, 1, true,
                                                "optimizer"},
                                           Case{kGpt2, "fsdp=2,tp=4", "", "f32", 2, 0, 2, true,
                                                "optimizer"}));

// Offload's price (docs/planner_offload.md): every copy takes the host
// link's latency plus its bytes over the link's bandwidth, every host step
// streams its bytes at 0.7 of the host's memory bandwidth, and the
// prediction adds them up; the device keeps less, the step takes longer.
TEST(OffloadPriceTest, CopiesOnTheHostLinkAndStepsOnTheHostMemory) {
  auto priced = [](const std::string& offload) {
    mlir::MLIRContext context;
    auto module = loadModel(context, {.model = kLlama, .batch = 8, .dtype = "bf16"});
    EXPECT_TRUE(module.ok()) << module.status();
    PlanRequest request{.model_name = kLlama, .mesh = "fsdp=8", .device = "h100", .offload = offload};
    auto planned = planModule(**module, request);
    EXPECT_TRUE(planned.ok()) << planned.status();
    return planned->plan;
  };
  const loom::plan::Plan plan = priced("optimizer");
  const loom::plan::Plan without = priced("none");
  auto topology = topologyFor(PlanRequest{.device = "h100"}, plan.mesh.size());
  ASSERT_TRUE(topology.ok());
  auto model = planner::cost::CostModel::create(*topology);
  ASSERT_TRUE(model.ok());
  ASSERT_TRUE(plan.predicted.offload.has_value());
  const loom::plan::OffloadPredicted& o = *plan.predicted.offload;
  int64_t toHost = 0, toDevice = 0;
  double copies = 0, hostSteps = 0;
  for (const loom::plan::Instruction* in : plan.programs.front().instructions()) {
    if (in->info->family == loom::plan::OpFamily::kCopy) {
      const int64_t bytes = *in->attrs.bytes;
      EXPECT_DOUBLE_EQ(*in->duration_s, 5e-6 + static_cast<double>(bytes) / 55e9) << in->where();
      (in->op == "dist.copy_to_host_start" ? toHost : toDevice) += bytes;
      copies += *in->duration_s;
    }
    if (in->info->family == loom::plan::OpFamily::kOptimizer) {
      int64_t bytes = plan.buffers[in->operands[1]].bytes;
      for (int64_t id : in->results) bytes += 2 * plan.buffers[id].bytes;
      EXPECT_DOUBLE_EQ(*in->duration_s, static_cast<double>(bytes) / (76.8e9 * 0.7))
          << in->where();
      hostSteps += *in->duration_s;
    }
  }
  EXPECT_EQ(o.to_host_bytes, toHost);
  EXPECT_EQ(o.to_device_bytes, toDevice);
  EXPECT_GT(toHost, 0);
  EXPECT_NEAR(o.copy_s, copies, 1e-12);
  EXPECT_NEAR(o.host_optimizer_s, hostSteps, 1e-12);
  EXPECT_LE(o.exposed_copy_s, o.copy_s);
  EXPECT_LT(plan.predicted.peak_bytes, without.predicted.peak_bytes);
  EXPECT_EQ(plan.predicted.breakdown.at("optimizer_state"), 0);
  EXPECT_GT(o.host_breakdown.at("optimizer_state"), 0);
  EXPECT_GT(plan.predicted.step_time_s, without.predicted.step_time_s + hostSteps / 2);
  EXPECT_DOUBLE_EQ(model->hostCopySeconds(55e9), 1.0 + 5e-6);
}

}  // namespace
}  // namespace loom::tools::plan
