// Test plans (see test_plans.h).
#include "tools/plan/test_plans.h"

#include "mlir/IR/MLIRContext.h"
#include "tools/plan/model_loader.h"

namespace loom::tools::plan {

absl::StatusOr<loom::plan::Plan> planThroughPipeline(const std::string& model, int64_t batch,
                                                     const std::string& dtype,
                                                     const PlanRequest& request) {
  mlir::MLIRContext context;
  auto module = loadModel(context, {.model = model, .batch = batch, .dtype = dtype});
  if (!module.ok()) return module.status();
  absl::StatusOr<PlanResult> planned = planModule(**module, request);
  if (!planned.ok()) return planned.status();
  return std::move(planned->plan);
}

absl::StatusOr<planner::cost::CostModel> costModelOf(const loom::plan::Plan& plan) {
  absl::StatusOr<mesh::Topology> topology = topologyFor(PlanRequest{}, plan.mesh.size());
  if (!topology.ok()) return topology.status();
  return planner::cost::CostModel::create(*topology);
}

}  // namespace loom::tools::plan
