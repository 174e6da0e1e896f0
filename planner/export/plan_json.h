// The exporter: turns a per-rank module (the plan pipeline's output) into
// the typed plan of plan/plan.h, which plan/ writes as plan.json, the
// runtime's only input from the planner. It reads what the passes decided
// and prices it; it decides nothing itself: init specs come from nn.init,
// argument global shapes from dist.global_shape, result placements from
// PlacementTransferOpInterface, the optimizer phase from the
// dist.optimizer_step ops of plan-optimizer-step (docs/plan_json.md).
#ifndef LOOM_PLANNER_EXPORT_PLAN_JSON_H_
#define LOOM_PLANNER_EXPORT_PLAN_JSON_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "mesh/topology.h"
#include "mlir/IR/BuiltinOps.h"
#include "plan/plan.h"

namespace loom::planner::exporter {

struct PlanExportOptions {
  std::string model;
  // The seed of every parameter's init spec.
  uint64_t seed = 0;
  double compute_efficiency = 0.5;
  // A mesh-search template: only what the search reads. No predicted
  // figures (the search prices the template repeated to the model's
  // depth), no plan::checkPlan, and no per-instruction placement
  // attributes (documentation for readers of plan.json; nothing runs or
  // prices them). The winner's plan, made by the same passes, is exported
  // whole and checked.
  bool search_template = false;
};

// Exports the first function of a per-rank module. Fails when the module
// has no dist.mesh or function, the mesh does not fit `topology`, an op has
// no row in the plan op table (plan/op_table.cc) or an attribute the table
// does not list, a parameter or optimizer state has no nn.init, or the
// result fails plan::checkPlan (an exporter bug; not for a search template).
absl::StatusOr<plan::Plan> exportPlan(mlir::ModuleOp module, const mesh::Topology& topology,
                                      const PlanExportOptions& options);

}  // namespace loom::planner::exporter

#endif  // LOOM_PLANNER_EXPORT_PLAN_JSON_H_
