// What the exporter reads off a planned function to lay out its timeline:
// the phase of each op and what each collective moves; and the re-pricing
// of an exported plan with other figures. The plan itself is priced by
// cost::pricePlan (planner/cost/plan_price.h, docs/plan_json.md "Predicted
// time"): compute ops by FLOPs and bytes against the device's peak with a
// per-op-kind efficiency (or a machine profile's measured GEMM rates),
// collectives by alpha-beta on the links their group spans, simulated with
// one compute stream and one comm stream per group of mesh axes.
#ifndef LOOM_PLANNER_EXPORT_TIMELINE_H_
#define LOOM_PLANNER_EXPORT_TIMELINE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "mesh/device_mesh.h"
#include "mesh/topology.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "plan/plan.h"
#include "planner/cost/cost_model.h"
#include "planner/cost/machine_profile.h"

namespace loom::planner::exporter {

// A step's phases are the plan format's (plan/plan.h).
using Phase = plan::Phase;

// The phase of each op of `func`'s body, by index. The ops from the first
// dist.optimizer_step on are the optimizer phase (the steps and offload's
// copies of their results); of the others, the ops up to the one that defines
// the returned loss (the result without nn.grad_of; when that is a
// dist.wait, the collective it waits for) are the forward phase and the rest
// the backward phase. A function without gradients is all forward.
std::vector<Phase> assignPhases(mlir::func::FuncOp func);

// The dist.mesh of `module` as a DeviceMesh (the first one; plans have one).
absl::StatusOr<mesh::DeviceMesh> meshOf(mlir::ModuleOp module);

// A collective op (blocking or `*_start`) as the timeline and plan.json see
// it. `bytes` follows comm_volume.h's per-rank formulas, so the bytes of a
// function's collectives sum to computeCommVolume(func).totalBytes().
struct CollectiveInfo {
  // "all_gather", "reduce_scatter", "all_reduce", "all_to_all".
  std::string kind;
  std::vector<std::string> axes;
  bool async = false;
  int64_t group_size = 1;
  int64_t bytes = 0;
  // Latency steps of the ring algorithm: g - 1, twice for all_reduce.
  int64_t steps = 0;
};

// Null for ops that are not collectives.
std::optional<CollectiveInfo> describeCollective(mlir::Operation* op, const mesh::DeviceMesh& mesh);

struct TimelineOptions {
  // Fraction of the device's peak FLOP/s a large GEMM reaches
  // (cost::Efficiency::gemm); the other op kinds keep their default ratios.
  double compute_efficiency = 0.5;
  // Measured figures that replace the datasheet's; borrowed, may be null.
  const cost::MachineProfile* profile = nullptr;
};

// Re-prices an exported plan on `topology` with `options`, e.g. a machine
// profile (cost::recordPrice): rewrites the predicted figures and every
// instruction's start_s and duration_s, and records the profile's name in
// predicted.machine_profile.
absl::Status repricePlan(const mesh::Topology& topology, const TimelineOptions& options,
                         plan::Plan& plan);

}  // namespace loom::planner::exporter

#endif  // LOOM_PLANNER_EXPORT_TIMELINE_H_
