// What one export turns into plan programs: a training step as one
// function, or the chunk functions plan-split-stages made of it, grouped
// into one program per pipeline stage with the schedule's order of blocks
// (docs/plan_json.md, "Pipeline stages").
#ifndef LOOM_PLANNER_EXPORT_STAGE_FUNCTIONS_H_
#define LOOM_PLANNER_EXPORT_STAGE_FUNCTIONS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "plan/plan.h"
#include "planner/transforms/stages/schedule_order.h"

namespace loom::planner::exporter {

struct ExportedFunction {
  mlir::func::FuncOp func;
  int64_t chunk = 0;
  int64_t stage = 0;
};

struct ExportedStep {
  // The step's name: the function's, or the one its chunks were split from.
  std::string name;
  // In chunk order; one function (chunk 0, stage 0) without stages.
  std::vector<ExportedFunction> functions;
  int64_t stages = 1;
  int64_t virtual_stages = 1;
  stages::PipelineSchedule schedule = stages::PipelineSchedule::kGpipe;
  bool pipelined() const { return stages > 1; }
};

// The module's step: its first function, or every chunk function of one
// split step. InvalidArgument, naming what is wrong, for chunk functions
// that do not number chunks 0..n-1 of one step with stage = chunk mod
// stages and one schedule, or a function beside them.
absl::StatusOr<ExportedStep> exportedStep(mlir::ModuleOp module);

// A model block's name: its phase's ("forward"), with the chunk when a
// stage runs several ("forward.4").
std::string blockName(const ExportedStep& step, plan::Phase phase, int64_t chunk);

// What stage `stage` runs, in order: the forward and backward of each
// micro-batch through each of its chunks in the schedule's order, then the
// optimizer once. Without stages, each micro-batch's forward and backward.
absl::StatusOr<std::vector<plan::ScheduleEntry>> stageSchedule(const ExportedStep& step,
                                                               int64_t stage,
                                                               int64_t micro_batches);

}  // namespace loom::planner::exporter

#endif  // LOOM_PLANNER_EXPORT_STAGE_FUNCTIONS_H_
