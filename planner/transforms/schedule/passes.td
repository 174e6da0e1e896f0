// Passes of the schedule stage: asynchronous collectives with prefetch and
// overlap, and the SPMD verifier of the result.
#ifndef LOOM_PLANNER_TRANSFORMS_SCHEDULE_PASSES_TD_
#define LOOM_PLANNER_TRANSFORMS_SCHEDULE_PASSES_TD_

include "mlir/Pass/PassBase.td"

def PlanSchedule : Pass<"plan-schedule", "::mlir::ModuleOp"> {
  let summary = "turns every collective into a `*_start` / `dist.wait` pair "
                "and prefetches parameter gathers k units ahead";
  let description = [{
    Input: the output of `plan-insert-collectives`, usually after
    `plan-bucketing` (blocking collectives in the function body).

    Every `dist.all_gather`, `dist.reduce_scatter`, `dist.all_reduce` and
    `dist.all_to_all` becomes its `*_start` and a `dist.wait`. A
    `dist.free` of the collective's operand always follows its wait (the
    runtime reads the operand until the collective is done).

    * **Parameter gathers** (operand an `nn.param` argument or a
      `dist.bucket` of them) form steps: maximal runs of gathers of one
      unit (see plan-bucketing) and one pass (forward: before the first op
      that depends on `nn.loss_grad_arg`; backward: after it), in program
      order. The wait stays where the gather was; the starts of step j
      (with their `dist.bucket`) move to just after the last wait of step
      j-k, those of steps 0..k-1 to the function entry. Forward and
      backward steps form one sequence, so the last forward units prefetch
      the first backward ones, and backward gathers prefetch in reverse
      unit order. With k = 0 each start sits just before its wait.
    * **Gradient reductions** (a `dist.reduce_scatter` whose result, or
      the result of the one `dist.all_reduce` it feeds under HSDP, is only
      unbucketed and returned): the start stays; its wait and the
      bucket's free move to just before the next gradient reduction
      (before its `dist.bucket`), so unit i's reduce-scatter overlaps unit
      i+1's backward compute and at most one gradient bucket is in flight.
      Without HSDP the unbucket follows the wait. Under HSDP the
      all-reduce starts right after that wait, and its wait and the
      unbucket move to just before the reduction after next (or the
      return), so the all-reduce overlaps unit i+2's backward compute.
      Under sequence parallelism only some shards go on to a tp
      all-reduce: the unbucket follows the wait, then those shards'
      `dist.bucket` and all-reduce start, whose wait and unbucket move the
      same way.
    * **Every other collective** (the loss, tp, activations): the start
      stays, the wait moves to just before the first user of its result.
    * **Pipeline transfers** (a chunk's `dist.send` and `dist.recv`, from
      `plan-split-stages`): every receive becomes a `dist.recv_start` at
      the top of the function and a `dist.wait` where it was (the wait
      takes `nn.backward_root`); every send a `dist.send_start` where it
      was and a `dist.wait` just before the return. A send then always
      finds its receive posted, whatever the pipeline schedule's order,
      so no stage waits on a peer that waits on it.

    ```mlir
    %b1 = dist.bucket %w1, %w2 offsets = [0, 64] : ...
    %f1 = dist.all_gather_start %b1 on @mesh axes = ["fsdp"] gather_dim = 0
        wire = f32 : tensor<128xf32> -> !dist.future<tensor<512xf32>>
    %g1 = dist.wait %f1 : !dist.future<tensor<512xf32>>
    dist.free %b1 : tensor<128xf32>
    %b2 = dist.bucket ...            // unit i+1, prefetched
    %f2 = dist.all_gather_start %b2 ...
    ...                              // unit i's compute
    %g2 = dist.wait %f2 ...
    ```

    k is `prefetch`, or with `memory-budget-gb` the largest k whose peak
    per rank, as plan-memory-plan computes it on the scheduled function
    (parameters, optimizer states, activations, gathered buffers in
    flight, gradients and their buckets), fits the budget. Each function
    gets `plan.prefetch = k`. Ops only move within the one block, so every
    rank still issues the same collectives in the same order. See
    docs/planner_schedule.md.
  }];
  let options = [
    Option<"prefetch", "prefetch", "int64_t", /*default=*/"1",
           "k: how many parameter-gather steps run ahead of the one in use "
           "(0: no prefetch)">,
    Option<"memoryBudgetGb", "memory-budget-gb", "double", /*default=*/"0",
           "when > 0, per-rank budget in GiB (2^30 bytes, as "
           "plan-memory-plan's) for the whole peak of the memory plan; k is "
           "then the largest that fits and `prefetch` is not used">,
  ];
  let dependentDialects = ["::loom::planner::dist::DistDialect"];
}

def PlanVerifySpmd : Pass<"plan-verify-spmd", "::mlir::ModuleOp"> {
  let summary = "checks that every rank issues the same collectives in the "
                "same order";
  let description = [{
    A plan is one SPMD program: collectives match across ranks by issue
    order. This pass refuses what could make ranks diverge or hang:

    * a `dist` collective, `*_start`, `dist.wait` or `dist.free` nested in
      a region of another op (a branch or a loop whose condition could
      differ across ranks); they belong in the function body;
    * a gradient reduction chain whose collectives disagree on dtypes: a
      reduction whose operand is the result of another reduction (HSDP:
      reduce-scatter over fsdp, then all-reduce over dp) must use the same
      wire and accumulation types, so the gradient is reduced the same way
      on every mesh axis.

    The future rules (one `dist.wait` per `*_start`, in its block) and the
    explicit wire / accumulation types of each collective are enforced by
    the `dist` op verifiers, which run before any pass.
  }];
}

#endif  // LOOM_PLANNER_TRANSFORMS_SCHEDULE_PASSES_TD_
