// The predicted timeline of one training step on one rank (docs/plan_json.md,
// "Predicted time") that plan.json, the report and trace.json share. Each op
// is priced by the cost model (planner/cost/cost_model.h): compute ops by
// FLOPs and bytes against the device's peak with a per-op-kind efficiency
// (or a machine profile's measured GEMM rates), collectives by alpha-beta on
// the links their group spans. The step is simulated by cost::simulate: one
// compute stream, one comm stream per group of mesh axes, async collectives
// overlapping compute until their dist.wait.
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

// The phase of each op of `func`'s body, by index. dist.optimizer_step ops
// are the optimizer phase; of the others, the ops up to the one that defines
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

struct TimelineEvent {
  std::string name;
  bool comm = false;
  Phase phase = Phase::kForward;
  // The op's index in the body.
  int64_t index = 0;
  double start_s = 0;
  double duration_s = 0;
  // Collectives: bytes per rank and the mesh axes, joined with ",".
  int64_t bytes = 0;
  std::string axes;
};

struct Timeline {
  std::vector<TimelineEvent> events;
  // Busy time of the compute stream (optimizer included) and of the comm
  // stream; the time compute waited for communication; the optimizer step;
  // the end of the step.
  double compute_s = 0;
  double comm_s = 0;
  double exposed_comm_s = 0;
  double optimizer_s = 0;
  double step_time_s = 0;
};

struct TimelineOptions {
  // Fraction of the device's peak FLOP/s a large GEMM reaches
  // (cost::Efficiency::gemm); the other op kinds keep their default ratios.
  double compute_efficiency = 0.5;
  // Measured figures that replace the datasheet's; borrowed, may be null.
  const cost::MachineProfile* profile = nullptr;
};

// How the cost model prices an nn op that has a CostOpInterface: its class
// (nn.linear and nn.matmul are GEMMs, nn.attention and its gradient are
// attention, nn.reshape is a view, the rest is memory-bound), the dtype of
// its first result, its FLOPs and bytes, and the GEMM's m, n, k.
cost::ComputeCost computeCostOf(mlir::Operation* op);

// Predicts `func`'s step on `topology` (whose world must be `mesh`'s size).
// The optimizer phase is the body's dist.optimizer_step ops (plan-optimizer-
// step), run one after another at the end of the step, each priced by the
// bytes it streams (param, grad, both moments and the master copy read,
// all but the grad written) at the device's memory bandwidth.
absl::StatusOr<Timeline> predictTimeline(mlir::func::FuncOp func, const mesh::DeviceMesh& mesh,
                                         const mesh::Topology& topology,
                                         const TimelineOptions& options = {});

// Re-prices an exported plan of `module` (exportPlan's output for the same
// module and topology) with `options`, e.g. a machine profile: rewrites
// predicted.step_time_s, compute_s, comm_s, exposed_comm_s, optimizer_s and
// every instruction's start_s and duration_s, and records the profile's
// name in predicted.machine_profile.
absl::Status repricePlan(mlir::ModuleOp module, const mesh::Topology& topology,
                         const TimelineOptions& options, plan::Plan& plan);

}  // namespace loom::planner::exporter

#endif  // LOOM_PLANNER_EXPORT_TIMELINE_H_
