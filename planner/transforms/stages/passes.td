// Passes of the stage stage: cutting a training step into pipeline stages.
#ifndef LOOM_PLANNER_TRANSFORMS_STAGES_PASSES_TD_
#define LOOM_PLANNER_TRANSFORMS_STAGES_PASSES_TD_

include "mlir/Pass/PassBase.td"

def PlanStages : Pass<"plan-stages", "::mlir::ModuleOp"> {
  let summary = "assigns each op of a training step to a pipeline stage, "
                "whole layers at a time, balanced by the ops' FLOPs";
  let description = [{
    Input: a training step from `plan-autodiff` (placed and recomputed or
    not), before `plan-insert-collectives`. The layers are the blocks of
    its repeated stack (`layers.3.*`, `transformer.h.3.*`; see
    `layers/layer_stack.h`).

    The step is cut into `stages` x `virtual` model chunks of whole,
    consecutive layers; chunk `c` runs on pipeline stage `c mod stages`
    (Megatron-LM's interleaved assignment: with `virtual` = 2 and 4
    stages, stage 0 holds chunks 0 and 4). The ops before the stack
    (the embedding) go to the first chunk with their backward, the ops
    after it (final norm, head, loss) to the last. The chunks' layer
    counts are chosen so that the largest chunk's FLOPs (forward, backward
    and recomputed ops, the embedding and head counted in their chunks)
    are as small as they can be; `layers` gives the counts by hand
    instead (`layers=3,5,5,3`).

    Output: every op gets `dist.stage` (its chunk, an i64), every function
    argument its chunks' list `dist.stages` (a parameter shared by two
    chunks, such as tied embeddings, lists both), and the function
    `dist.pipeline_stages` (the stage count) and `dist.stage_layers` (the
    layer count of each chunk). Ops made by no layer and located nowhere
    take their first operand's chunk, or their first user's.

    `stages=1` changes nothing. Refused, with the reason: a function
    without repeated layers, fewer layers than chunks, `layers` that do
    not list one count >= 1 per chunk summing to the layer count, a step
    that already has stages or dist collectives.
  }];
  let options = [
    Option<"stages", "stages", "int64_t", /*default=*/"1",
           "pipeline stages (the pp mesh axis's size)">,
    Option<"virtualStages", "virtual", "int64_t", /*default=*/"1",
           "model chunks per stage (interleaved schedules)">,
    Option<"layers", "layers", "std::string", /*default=*/"\"\"",
           "layers per chunk in model order, e.g. 3,5,5,3; empty: balanced "
           "by FLOPs">,
  ];
}

#endif  // LOOM_PLANNER_TRANSFORMS_STAGES_PASSES_TD_
