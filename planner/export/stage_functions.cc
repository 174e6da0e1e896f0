// The functions and stage programs of an export (see stage_functions.h).
#include "planner/export/stage_functions.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "planner/transforms/stages/passes.h"

namespace loom::planner::exporter {
namespace {

int64_t intAttr(mlir::func::FuncOp func, const char* name) {
  auto attr = func->getAttrOfType<mlir::IntegerAttr>(name);
  return attr ? attr.getInt() : -1;
}

}  // namespace

absl::StatusOr<ExportedStep> exportedStep(mlir::ModuleOp module) {
  std::vector<mlir::func::FuncOp> funcs;
  for (auto func : module.getOps<mlir::func::FuncOp>()) {
    if (!func.isExternal()) funcs.push_back(func);
  }
  if (funcs.empty()) return absl::InvalidArgumentError("the module has no function to export");
  ExportedStep step;
  const bool split = funcs.front()->hasAttr(stages::kPipelineChunkAttrName);
  if (!split) {
    step.name = funcs.front().getSymName().str();
    step.functions.push_back({funcs.front(), 0, 0});
    return step;
  }
  auto name = funcs.front()->getAttrOfType<mlir::StringAttr>(stages::kPipelineFunctionAttrName);
  auto schedule = funcs.front()->getAttrOfType<mlir::StringAttr>(stages::kPipelineScheduleAttrName);
  step.stages = intAttr(funcs.front(), stages::kPipelineStagesAttrName);
  if (!name || !schedule || step.stages < 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "@", funcs.front().getSymName().str(), " is a pipeline chunk without ",
        stages::kPipelineFunctionAttrName, ", ", stages::kPipelineScheduleAttrName, " or ",
        stages::kPipelineStagesAttrName, " >= 2; make chunks with --plan-split-stages"));
  }
  absl::StatusOr<stages::PipelineSchedule> parsed = stages::parseSchedule(schedule.getValue().str());
  if (!parsed.ok()) return parsed.status();
  step.schedule = *parsed;
  step.name = name.getValue().str();
  for (mlir::func::FuncOp func : funcs) {
    auto from = func->getAttrOfType<mlir::StringAttr>(stages::kPipelineFunctionAttrName);
    auto order = func->getAttrOfType<mlir::StringAttr>(stages::kPipelineScheduleAttrName);
    const int64_t chunk = intAttr(func, stages::kPipelineChunkAttrName);
    const int64_t stage = intAttr(func, stages::kPipelineStageAttrName);
    if (!from || from.getValue() != step.name || !order || order != schedule || chunk < 0 ||
        intAttr(func, stages::kPipelineStagesAttrName) != step.stages ||
        stage != chunk % step.stages) {
      return absl::InvalidArgumentError(absl::StrCat(
          "@", func.getSymName().str(), " is not a chunk of @", step.name, " (",
          step.stages, " stages, ", schedule.getValue().str(),
          "): a module exports one step, whose chunks --plan-split-stages makes"));
    }
    step.functions.push_back({func, chunk, stage});
  }
  std::sort(step.functions.begin(), step.functions.end(),
            [](const ExportedFunction& a, const ExportedFunction& b) { return a.chunk < b.chunk; });
  const int64_t chunks = static_cast<int64_t>(step.functions.size());
  for (int64_t c = 0; c < chunks; ++c) {
    if (step.functions[c].chunk != c) {
      return absl::InvalidArgumentError(absl::StrCat("the chunks of @", step.name,
                                                     " do not number 0..", chunks - 1,
                                                     ": chunk ", c, " is missing or repeated"));
    }
  }
  if (chunks % step.stages != 0) {
    return absl::InvalidArgumentError(absl::StrCat("@", step.name, " has ", chunks,
                                                   " chunks, not a multiple of its ", step.stages,
                                                   " stages"));
  }
  step.virtual_stages = chunks / step.stages;
  return step;
}

std::string blockName(const ExportedStep& step, plan::Phase phase, int64_t chunk) {
  if (phase == plan::Phase::kOptimizer || step.virtual_stages == 1) return plan::phaseName(phase);
  return absl::StrCat(plan::phaseName(phase), ".", chunk);
}

absl::StatusOr<std::vector<plan::ScheduleEntry>> stageSchedule(const ExportedStep& step,
                                                               int64_t stage,
                                                               int64_t micro_batches) {
  std::vector<plan::ScheduleEntry> schedule;
  if (!step.pipelined()) {
    for (int64_t m = 0; m < micro_batches; ++m) {
      schedule.push_back({blockName(step, plan::Phase::kForward, 0), m});
      schedule.push_back({blockName(step, plan::Phase::kBackward, 0), m});
    }
  } else {
    absl::StatusOr<std::vector<std::vector<stages::PipelineAction>>> order = stages::scheduleOrder(
        step.schedule, {step.stages, step.virtual_stages, micro_batches});
    if (!order.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("@", step.name, ": ", order.status().message()));
    }
    for (const stages::PipelineAction& action : (*order)[stage]) {
      const plan::Phase phase = action.kind == stages::PipelineAction::Kind::kForward
                                    ? plan::Phase::kForward
                                    : plan::Phase::kBackward;
      schedule.push_back({blockName(step, phase, action.chunk), action.micro_batch});
    }
  }
  schedule.push_back({blockName(step, plan::Phase::kOptimizer, 0), -1});
  return schedule;
}

}  // namespace loom::planner::exporter
