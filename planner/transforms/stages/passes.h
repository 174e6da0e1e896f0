// The stage stage's passes: plan-stages cuts a training step into pipeline
// chunks of whole layers, plan-split-stages makes one function of each
// (docs/planner_stages.md).
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

// The attributes plan-split-stages writes on each chunk's function: its
// chunk, its stage (chunk mod stages), the schedule the stages run and
// the function it was split from.
inline constexpr char kPipelineChunkAttrName[] = "dist.pipeline_chunk";
inline constexpr char kPipelineStageAttrName[] = "dist.pipeline_stage";
inline constexpr char kPipelineScheduleAttrName[] = "dist.pipeline_schedule";
inline constexpr char kPipelineFunctionAttrName[] = "dist.pipeline_function";
// On each chunk argument: its argument number in the split function (what
// a parameter's init stream follows, so every stage count draws the same
// initial weights).
inline constexpr char kPipelineArgAttrName[] = "dist.pipeline_arg";
// On each chunk argument that is a tied parameter (read by chunks on
// several stages, each holding a replica): those stages, ascending.
// plan-sum-tied-grads sums its gradient across them.
inline constexpr char kTiedStagesAttrName[] = "dist.tied_stages";

#define GEN_PASS_DECL
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#include "planner/transforms/stages/passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "planner/transforms/stages/passes.h.inc"
#pragma GCC diagnostic pop

}  // namespace loom::planner::stages

#endif  // LOOM_PLANNER_TRANSFORMS_STAGES_PASSES_H_
