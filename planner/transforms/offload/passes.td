// Passes of the offload stage: optimizer states in host memory, the AdamW
// step where they live, and the copies between device and host memory.
#ifndef LOOM_PLANNER_TRANSFORMS_OFFLOAD_PASSES_TD_
#define LOOM_PLANNER_TRANSFORMS_OFFLOAD_PASSES_TD_

include "mlir/Pass/PassBase.td"

def PlanOffload : Pass<"plan-offload", "::mlir::ModuleOp"> {
  let summary = "keeps the optimizer states in host memory and runs their "
                "AdamW steps there, with the copies of gradients to the host "
                "and of updated parameters back on the copy stream";
  let description = [{
    Input: per-rank training steps with their `dist.optimizer_step` ops
    (`plan-optimizer-step` output). With `mode=optimizer` (DeepSpeed's
    ZeRO-Offload, FSDP2's `CPUOffloadPolicy` for the optimizer), for every
    parameter with a step:

    * its `exp_avg`, `exp_avg_sq` and f32 master copy live in host memory
      (`dist.memory = "host"` on their arguments). An f32 parameter gets a
      master copy too (`master`, the parameter's `nn.init`, so it starts
      from the same values): the host updates it, and the parameter on
      the device is its copy.
    * Its gradient shard is copied to the host as soon as the backward
      pass has it: a `dist.copy_to_host_start` right after the op that
      defines it (several, in order, when one op defines several
      gradients). One group of copies is in flight at a time: the waits of
      a group sit before the next group's first start, the last group's
      before the optimizer steps, so the device shards are freed as the
      backward pass goes on. The function returns the host copies. With
      several micro-steps the copies run in the last one only
      (`dist.micro_step = "last"`).
    * The step runs on the host, on the master copy: `dist.optimizer_step
      %master, %host_grad, %exp_avg, %exp_avg_sq` (the grad is converted
      to f32 element by element, as on the device), and a
      `dist.copy_into_device_start %master into %param` writes the result
      back, rounded to the parameter's type: the bits the device step
      gives. Each copy overlaps the next parameter's step; its wait sits
      before the next copy starts, the last one at the end.

    ```mlir
    func.func @step(%w: tensor<4x16xbf16> {nn.param}, %x: ...,
        %m: tensor<4x16xf32> {dist.optimizer_state = "exp_avg"},
        %v: tensor<4x16xf32> {dist.optimizer_state = "exp_avg_sq"},
        %p: tensor<4x16xf32> {dist.optimizer_state = "master"}) -> (...) {
      ...
      %g = dist.unbucket %b ...
      ...
      %w1, %m1, %v1, %p1 = dist.optimizer_step %w, %g, %m, %v master %p ...
      return %loss, %g : ...
    }
    // --plan-offload="mode=optimizer" gives
    func.func @step(..., %m: tensor<4x16xf32> {..., dist.memory = "host"},
        %v: ... {..., dist.memory = "host"}, %p: ... {..., dist.memory = "host"}) {
      ...
      %g = dist.unbucket %b ...
      %f = dist.copy_to_host_start %g : tensor<4x16xbf16> -> !dist.future<tensor<4x16xbf16>>
      ...
      %hg = dist.wait %f : !dist.future<tensor<4x16xbf16>>
      %p1, %m1, %v1 = dist.optimizer_step %p, %hg, %m, %v ...
      %u = dist.copy_into_device_start %p1 into %w
          : tensor<4x16xf32> into tensor<4x16xbf16> -> !dist.future<tensor<4x16xbf16>>
      %w1 = dist.wait %u : !dist.future<tensor<4x16xbf16>>
      return %loss, %hg : ...
    }
    ```

    `mode=none` (the default) changes nothing. Refused: another mode, a
    module without optimizer steps, steps already on the host (run the
    pass once), and a step whose parameter or states are not arguments.
    `plan-memory-plan` then counts the host bytes apart from the device's.
    See docs/planner_offload.md.
  }];
  let options = [
    Option<"mode", "mode", "std::string", /*default=*/"\"none\"",
           "what lives in host memory: none, or optimizer (the AdamW states, "
           "with the step on the host)">,
  ];
  let dependentDialects = ["::loom::planner::dist::DistDialect"];
}

#endif  // LOOM_PLANNER_TRANSFORMS_OFFLOAD_PASSES_TD_
