// Writes plan.json, the runtime's only input from the planner: the mesh and
// topology, every buffer (with its role, placement and init spec), the SPMD
// instruction list per step phase with its streams, and the predicted time
// and memory. The schema is docs/plan_json.md; output is deterministic
// (sorted keys, ids in program order) so plans can be diffed.
#ifndef LOOM_PLANNER_EXPORT_PLAN_JSON_H_
#define LOOM_PLANNER_EXPORT_PLAN_JSON_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "mesh/topology.h"
#include "mlir/IR/BuiltinOps.h"
#include "nlohmann/json.hpp"

namespace loom::planner::exporter {

inline constexpr int kPlanFormatVersion = 1;

struct PlanExportOptions {
  std::string model;
  // The seed of every parameter's init spec.
  uint64_t seed = 0;
  double compute_efficiency = 0.5;
};

// Exports the first function of a per-rank module (plan-insert-collectives
// output, optionally bucketed and scheduled; its optimizer phase is the
// dist.optimizer_step ops plan-optimizer-step added). It only reads the IR:
// init specs from nn.init, argument global shapes from dist.global_shape,
// result placements from PlacementTransferOpInterface. Fails when the module
// has no dist.mesh or function, the mesh does not fit `topology`, or a
// parameter or optimizer state has no nn.init.
absl::StatusOr<nlohmann::json> exportPlan(mlir::ModuleOp module, const mesh::Topology& topology,
                                          const PlanExportOptions& options);

// The fields docs/plan_json.md marks required, checked by structure; the
// error names the first missing or mistyped field by its JSON path.
absl::Status checkPlanSchema(const nlohmann::json& plan);

}  // namespace loom::planner::exporter

#endif  // LOOM_PLANNER_EXPORT_PLAN_JSON_H_
