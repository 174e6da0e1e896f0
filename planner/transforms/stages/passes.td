// Passes of the stage stage: cutting a training step into pipeline stages
// and making one function of each chunk.
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
           "pipeline stages; 0: the size of the mesh's pp axis (1 without one)">,
    Option<"virtualStages", "virtual", "int64_t", /*default=*/"1",
           "model chunks per stage (interleaved schedules)">,
    Option<"layers", "layers", "std::string", /*default=*/"\"\"",
           "layers per chunk in model order, e.g. 3,5,5,3; empty: balanced "
           "by FLOPs">,
  ];
}

def PlanSplitStages : Pass<"plan-split-stages", "::mlir::ModuleOp"> {
  let summary = "makes one function of each pipeline chunk, with a send and a "
                "receive for every value that crosses a cut";
  let description = [{
    Input: a placed training step cut by `plan-stages` (recomputed or
    not), before `plan-insert-collectives`; the mesh has a `pp` axis
    (`dist.strategies`) whose size is the stage count.

    Each chunk `c` becomes `@<function>.chunk<c>`, holding the chunk's ops
    (without their `dist.stage`) in their original order and the arguments they read (attributes and
    locations kept, and the argument's number in the step as
    `dist.pipeline_arg`; unread arguments go to the last chunk). It returns
    the values it defines that the step returned: the last chunk the loss
    and its gradients, every chunk its own parameters' gradients
    (`nn.grad_of` renumbered). The function attributes say what it is:
    `dist.pipeline_chunk`, `dist.pipeline_stage` (chunk mod stages),
    `dist.pipeline_schedule`, `dist.pipeline_function` (the name it was
    split from); the loss cotangent `nn.loss_grad_arg` stays with the
    chunk that reads it.

    Each value defined in chunk `a` and read in chunk `b` gets a
    `dist.send` to stage `b mod stages` right after its definition and a
    `dist.recv` from stage `a mod stages` before its first use in `b`,
    paired by a tag unique in the module, both in the value's given
    placement. A received gradient (defined by a backward op) is marked
    `nn.backward_root`: it starts its chunk's backward pass.
    `plan-schedule` later starts the sends asynchronously and waits for
    them at the end of the chunk, so that no schedule blocks on a send.

    A function without pipeline stages is left alone. Refused, with the
    reason: a parameter read by two chunks (tied weights), a gradient
    computed outside its parameter's chunk, a returned argument, a value
    passed between two chunks of the same stage, a forward value a chunk
    reads only in its backward pass, a mesh without a matching pp axis, a
    schedule that does not match the chunks per stage (gpipe and 1f1b take
    one, interleaved-1f1b two or more).
  }];
  let options = [
    Option<"schedule", "schedule", "std::string", /*default=*/"\"\"",
           "the pipeline schedule: gpipe, 1f1b or interleaved-1f1b; empty: "
           "1f1b, interleaved-1f1b with several chunks per stage">,
  ];
}

#endif  // LOOM_PLANNER_TRANSFORMS_STAGES_PASSES_TD_
