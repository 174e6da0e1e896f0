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

    A parameter that chunks on several stages read (tied weights, such as
    GPT-2's token embedding, also its LM head) becomes an argument of each
    of them, marked `dist.tied_stages` (those stages, ascending): every
    stage holds a replica. Its gradient in the step, autodiff's chain of
    `nn.add` over its uses' cotangents, is split by chunk: each reading
    chunk returns the sum of its own terms (in the step's order) as the
    parameter's gradient, and no partial gradient crosses a cut.
    `plan-sum-tied-grads` adds the chunks' sums once per optimizer step.

    A function without pipeline stages is left alone. Refused, with the
    reason: a tied parameter read by two chunks of one stage, or by a chunk
    that adds nothing to its gradient, a gradient (or a term of a tied
    one) computed outside its parameter's chunks, a returned argument, a value
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

def PlanSumTiedGrads : Pass<"plan-sum-tied-grads", "::mlir::ModuleOp"> {
  let summary = "sums a tied parameter's gradient across the pipeline stages "
                "that hold it, once per optimizer step";
  let description = [{
    Input: the chunk functions of `plan-split-stages`, after
    `plan-insert-collectives`, `plan-schedule` and `plan-accumulate` (so
    each chunk's gradient of a tied parameter is already reduced over the
    data axes and summed over the micro-batches), before
    `plan-optimizer-step`. A tied parameter's argument carries
    `dist.tied_stages`, the stages holding its replicas.

    At the end of each holder's function, in the optimizer phase (every op
    marked `dist.optimizer_phase`: it runs once per optimizer step, before
    the AdamW steps), the holder posts a `dist.recv_start` from every other
    holder, then starts a `dist.send_start` of its gradient to each, waits
    for the receives and adds the replicas' gradients in stage order, the
    lowest stage's first: the same operands in the same order on every
    holder, so every replica steps with the same bits and stays identical.
    The function returns the sum as the parameter's gradient, which
    `plan-optimizer-step` then reads. The transfers' tags follow every tag
    the module has, per tie (in the step's argument order) and per (from,
    to) stage pair. Every receive is posted before any send, and nothing
    in a model block waits for the optimizer phase, so no order of the
    stages' schedules can deadlock on it.

    ```mlir
    // stage 0 of 2, %g its gradient of the tied %wte:
    %r = dist.recv_start from 1 on @mesh axis = "pp" tag = 3 {dist.optimizer_phase, ...}
    %s = dist.send_start %g to 1 on @mesh axis = "pp" tag = 2 {dist.optimizer_phase, ...}
    %g1 = dist.wait %r {dist.optimizer_phase}
    %sum = nn.add %g, %g1 {dist.optimizer_phase, ...}
    %0 = dist.wait %s {dist.optimizer_phase}
    return ..., %sum
    ```

    A module without tied parameters is left alone. Refused, with the
    reason: a `dist.tied_stages` argument outside a pipeline chunk or
    without a gradient, holders on other stages than it lists, a gradient
    without `dist.placement`, a mesh without a pp axis, and a module that
    is already in its optimizer phase (run once, before
    `plan-optimizer-step`).
  }];
  let dependentDialects = ["::loom::planner::dist::DistDialect",
                           "::loom::planner::nn::NnDialect"];
}

#endif  // LOOM_PLANNER_TRANSFORMS_STAGES_PASSES_TD_
