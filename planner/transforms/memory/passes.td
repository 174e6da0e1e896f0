// Passes of the memory stage: buffer lifetimes and peak bytes per rank of
// the per-rank program.
#ifndef LOOM_PLANNER_TRANSFORMS_MEMORY_PASSES_TD_
#define LOOM_PLANNER_TRANSFORMS_MEMORY_PASSES_TD_

include "mlir/Pass/PassBase.td"

def PlanMemoryPlan : Pass<"plan-memory-plan", "::mlir::ModuleOp"> {
  let summary = "computes buffer lifetimes and the peak bytes per rank, and "
                "refuses a plan that does not fit the device memory";
  let description = [{
    Input: per-rank functions (`plan-insert-collectives` output, with or
    without bucketing and async `*_start`/`dist.wait` pairs).

    Walks each function's body in order. Every tensor value (and every
    `!dist.future`, sized by its tensor) lives from its definition to its
    last use; a returned value lives to the end, a `dist.free` is the last
    use of the buffer it frees. Parameters (`nn.param`) are resident, and so
    are optimizer states (arguments with `dist.optimizer_state`, which
    `plan-optimizer-step` adds); the results of `dist.optimizer_step` are
    its operands' buffers, updated in place, so they take no memory. Each
    buffer has one role: param, grad (a result with `nn.grad_of`),
    optimizer_state (a state argument), gathered (a
    value made from parameters by dist ops only: gathers, waits, buckets,
    slices) or activation (everything else: inputs, nn results, collective
    temporaries).

    Output: the same IR with, on each function, `plan.peak_bytes` (i64)
    and `plan.memory`, a dictionary of the bytes per role live at the peak
    and `peak_op` (the index of the op in the body where the peak is
    reached, -1 on entry).

    ```mlir
    func.func @step(...) attributes {plan.peak_bytes = 2816 : i64,
        plan.memory = {activation = 768 : i64, gathered = 512 : i64, grad = 0 : i64,
                       optimizer_state = 1024 : i64, param = 512 : i64, peak_op = 1 : i64}}
    ```

    With `memory-budget-gb` set, a peak over the budget is an error at the
    function that lists the breakdown and suggests a fix (more fsdp, tp, a
    smaller batch, offload), with a note at the peak op. See
    docs/planner_memory.md.

    Host memory (values `dist::onHost` places there: offloaded optimizer
    states, gradients copied to the host, the staging of a copy that
    converts) is counted apart, by the same rules: when a function has
    any, `plan.host_peak_bytes` and `plan.host_memory` (bytes per role at
    the host peak, and `peak_op`) record it, and `host-memory-budget-gb`
    caps it the same way (docs/planner_offload.md).
  }];
  let options = [
    Option<"memoryBudgetGb", "memory-budget-gb", "double", /*default=*/"0",
           "device memory per rank in GiB (2^30 bytes); 0: no check">,
    Option<"hostMemoryBudgetGb", "host-memory-budget-gb", "double", /*default=*/"0",
           "host memory per rank in GiB for offloaded buffers; 0: no check">,
  ];
}

#endif  // LOOM_PLANNER_TRANSFORMS_MEMORY_PASSES_TD_
