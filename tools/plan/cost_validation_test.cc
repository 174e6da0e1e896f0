// Checks the mesh search's analytic step model (planner/cost/
// transformer_model.h) against the real pipeline: for each configuration
// the zoo graph is planned by planModule and its plan.json's predicted peak
// memory, bytes moved per rank and step time are compared with what
// estimateStep says for the same strategy. The table it prints is in
// docs/planner_cost.md.
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "mesh/topology.h"
#include "mlir/IR/MLIRContext.h"
#include "planner/cost/cost_model.h"
#include "planner/cost/transformer_model.h"
#include "planner/models/model_config.h"
#include "tools/plan/model_loader.h"
#include "tools/plan/plan_pipeline.h"

namespace loom::tools::plan {
namespace {

namespace cost = ::loom::planner::cost;

struct Case {
  const char* model;
  int64_t seq;
  const char* dtype;
  cost::Strategy strategy;
};

// Relative tolerances (see docs/planner_cost.md, "Validation").
constexpr double kPeakTolerance = 0.01;
constexpr double kCommTolerance = 0.001;
constexpr double kTimeTolerance = 0.01;

double relative(double analytic, double pipeline) {
  return std::abs(analytic - pipeline) / std::max(std::abs(pipeline), 1e-30);
}

TEST(CostValidationTest, AnalyticModelMatchesThePipeline) {
  const char* kTiny = "tiny:layers=3,hidden=512,heads=8,kv_heads=4,ffn=1536,vocab=4096,seq=256";
  const std::vector<Case> cases = {
      {kTiny, 256, "bf16", {.fsdp = 8}},
      {kTiny, 256, "bf16", {.fsdp = 8, .micro_batch = 2}},
      {kTiny, 256, "f32", {.fsdp = 4, .prefetch = 2}},
      {kTiny, 256, "bf16", {.fsdp = 8, .prefetch = 0}},
      {kTiny, 256, "bf16", {.fsdp = 8, .reshard_after_forward = false}},
      {kTiny, 256, "bf16", {.fsdp = 8, .bucket_mb = 1}},
      {kTiny, 256, "bf16", {.dp = 8}},
      {kTiny, 256, "bf16", {.dp = 2, .fsdp = 8}},
      {kTiny, 256, "bf16", {.fsdp = 4, .tp = 4}},
      {kTiny, 256, "bf16", {.dp = 2, .fsdp = 2, .tp = 4}},
      {kTiny, 256, "bf16", {.dp = 4, .tp = 4}},
      {kTiny, 256, "bf16", {.tp = 4}},
      {kTiny, 256, "f32", {.fsdp = 2, .tp = 4, .prefetch = 2}},
      {kTiny, 256, "bf16", {.dp = 2, .fsdp = 2, .tp = 2, .reshard_after_forward = false}},
      {kTiny, 256, "bf16", {.fsdp = 2, .tp = 4, .bucket_mb = 1, .micro_batch = 2}},
      {"llama3-8b", 512, "bf16", {.fsdp = 16}},
      {"llama3-8b", 512, "bf16", {.fsdp = 8, .tp = 2}},
      {"llama3-70b", 256, "bf16", {.dp = 2, .fsdp = 4, .tp = 8, .prefetch = 2}},
  };
  std::printf("%-10s %-26s %-34s %14s %14s %7s %14s %14s %7s %10s %10s %7s\n", "model", "mesh",
              "knobs", "peak_pipe", "peak_model", "d_peak", "comm_pipe", "comm_model", "d_comm",
              "step_pipe", "step_model", "d_step");
  for (const Case& c : cases) {
    const cost::Strategy& s = c.strategy;
    SCOPED_TRACE(std::string(c.model) + " " + s.meshSpec() + " " + s.knobs());
    mlir::MLIRContext context;
    auto module = loadModel(context, {.model = c.model,
                                      .batch = s.micro_batch * s.dp * s.fsdp,
                                      .seq = c.seq,
                                      .dtype = std::string(c.dtype)});
    ASSERT_TRUE(module.ok()) << module.status();
    PlanRequest request{.model_name = c.model,
                        .mesh = s.meshSpec(),
                        .axes = s.axes(),
                        .memory_gb = 1e6,
                        .prefetch = s.prefetch,
                        .reshard_after_forward = s.reshard_after_forward,
                        .bucket_mb = s.bucket_mb};
    auto planned = planModule(**module, request);
    ASSERT_TRUE(planned.ok()) << planned.status();
    const loom::plan::Predicted& predicted = planned->plan.predicted;

    auto topology = topologyFor(request, s.devices());
    ASSERT_TRUE(topology.ok()) << topology.status();
    auto model = cost::CostModel::create(*topology);
    ASSERT_TRUE(model.ok()) << model.status();
    auto config = planner::models::configFromSpec(c.model);
    ASSERT_TRUE(config.ok()) << config.status();
    const cost::Workload workload{
        .config = *config,
        .seq = c.seq,
        .dtype = std::string(c.dtype) == "f32" ? cost::Dtype::kF32 : cost::Dtype::kBF16};
    auto estimate = cost::estimateStep(workload, s, *model);
    ASSERT_TRUE(estimate.ok()) << estimate.status();

    const double peakPipe = static_cast<double>(predicted.peak_bytes);
    const double commPipe = static_cast<double>(predicted.comm_bytes_per_rank);
    const double stepPipe = static_cast<double>(predicted.step_time_s);
    std::printf(
        "%-10s %-26s %-34s %14.0f %14lld %6.2f%% %14.0f %14lld %6.2f%% %10.5f %10.5f %6.2f%%\n",
        std::string(c.model).substr(0, 10).c_str(), s.meshSpec().c_str(), s.knobs().c_str(),
        peakPipe, static_cast<long long>(estimate->peak_bytes),
        100 * relative(estimate->peak_bytes, peakPipe), commPipe,
        static_cast<long long>(estimate->comm_bytes_per_rank),
        100 * relative(estimate->comm_bytes_per_rank, commPipe), stepPipe, estimate->step_time_s,
        100 * relative(estimate->step_time_s, stepPipe));
    std::printf("   compute %.6f/%.6f comm %.6f/%.6f exposed %.6f/%.6f opt %.6f/%.6f\n",
                static_cast<double>(predicted.compute_s), estimate->compute_s,
                static_cast<double>(predicted.comm_s), estimate->comm_s,
                static_cast<double>(predicted.exposed_comm_s), estimate->exposed_comm_s,
                static_cast<double>(predicted.optimizer_s), estimate->optimizer_s);
    EXPECT_LE(relative(estimate->peak_bytes, peakPipe), kPeakTolerance);
    EXPECT_LE(relative(estimate->comm_bytes_per_rank, commPipe), kCommTolerance);
    EXPECT_LE(relative(estimate->step_time_s, stepPipe), kTimeTolerance);
  }
}

}  // namespace
}  // namespace loom::tools::plan
