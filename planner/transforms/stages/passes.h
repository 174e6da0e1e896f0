// The stage stage's pass: plan-stages cuts a training step into pipeline
// stages of whole layers (docs/planner_stages.md).
#ifndef LOOM_PLANNER_TRANSFORMS_STAGES_PASSES_H_
#define LOOM_PLANNER_TRANSFORMS_STAGES_PASSES_H_

#include <memory>

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace loom::planner::stages {

// The attributes plan-stages writes.
inline constexpr char kStageAttrName[] = "dist.stage";
inline constexpr char kArgStagesAttrName[] = "dist.stages";
inline constexpr char kPipelineStagesAttrName[] = "dist.pipeline_stages";
inline constexpr char kStageLayersAttrName[] = "dist.stage_layers";

#define GEN_PASS_DECL
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#include "planner/transforms/stages/passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "planner/transforms/stages/passes.h.inc"
#pragma GCC diagnostic pop

}  // namespace loom::planner::stages

#endif  // LOOM_PLANNER_TRANSFORMS_STAGES_PASSES_H_
