// Passes of the accumulation stage: an optimizer step of several
// micro-steps (gradient accumulation), with what it keeps between them.
#ifndef LOOM_PLANNER_TRANSFORMS_ACCUMULATE_PASSES_TD_
#define LOOM_PLANNER_TRANSFORMS_ACCUMULATE_PASSES_TD_

include "mlir/Pass/PassBase.td"

def PlanAccumulate : Pass<"plan-accumulate", "::mlir::ModuleOp"> {
  let summary = "makes the per-rank program one micro-step of an optimizer "
                "step that accumulates gradients over several";
  let description = [{
    Input: a scheduled per-rank training step (`plan-schedule`,
    `plan-verify-spmd`), before `plan-optimizer-step`. The function stays
    one micro-step's program; the runtime runs its forward and backward
    `micro-steps` times, then the optimizer once (docs/planner_accumulate.md).

    * Every gradient is summed over the micro-steps by `dist.accumulate`,
      whose result the optimizer reads. By default it sums the reduced
      gradient shards, right after their reduction: each micro-step
      reduce-scatters its own gradients (FSDP's default).
    * `defer-grad-sync`: the gradient reductions and the ops between them
      and the returned gradients (buckets, reduce-scatters, all-reduces,
      their waits and frees; the sync chain) run in the last micro-step
      only, marked `dist.micro_step = "last"`; `dist.accumulate` sums the
      local, unreduced gradients they read instead (FSDP2's
      `set_requires_gradient_sync(False)` on all but the last micro-step).
      Linear ops all of them, so the sum is the same up to rounding order.
    * `keep-gathered`: the dist ops that make values from parameters only
      (the parameter gathers, their buckets and waits) run in the first
      micro-step only, marked `dist.micro_step = "first"`; later
      micro-steps read the copies kept from it (FSDP2's
      `reshard_after_backward=False`). A `dist.free` of a kept copy runs in
      the last micro-step. Meant for plans made with
      `reshard-after-forward=false`; otherwise the backward's second copy
      is kept too.

    The values carried from one micro-step to the next (the results of
    `dist.accumulate`, and kept copies read outside the first micro-step)
    are held for the whole step: `plan-memory-plan` counts them live at
    every op. The function gets `dist.micro_steps` = `micro-steps`.
    With one micro-step the pass changes nothing, and refuses the two
    levers, which only act between micro-steps.
  }];
  let options = [
    Option<"microSteps", "micro-steps", "int64_t", /*default=*/"1",
           "micro-steps per optimizer step (gradient accumulation)">,
    Option<"keepGathered", "keep-gathered", "bool", /*default=*/"false",
           "gather parameters in the first micro-step only and keep them">,
    Option<"deferGradSync", "defer-grad-sync", "bool", /*default=*/"false",
           "accumulate local gradients and reduce them in the last micro-step only">,
  ];
}

#endif  // LOOM_PLANNER_TRANSFORMS_ACCUMULATE_PASSES_TD_
