// Passes of the optimizer stage: the AdamW update of every parameter, with
// the states it keeps, made explicit in the per-rank program.
#ifndef LOOM_PLANNER_TRANSFORMS_OPTIMIZER_PASSES_TD_
#define LOOM_PLANNER_TRANSFORMS_OPTIMIZER_PASSES_TD_

include "mlir/Pass/PassBase.td"

def PlanOptimizerStep : Pass<"plan-optimizer-step", "::mlir::ModuleOp"> {
  let summary = "adds the AdamW states of every parameter with a gradient "
                "as arguments and one dist.optimizer_step that updates them";
  let description = [{
    Input: per-rank functions (`plan-insert-collectives` output, usually
    bucketed and scheduled) that return the gradient of parameter argument
    N with `nn.grad_of = N`.

    For each `nn.param` argument with a gradient, in argument order, the
    pass appends the states AdamW keeps for its local shard as new
    arguments of the parameter's shape in f32: `exp_avg` and `exp_avg_sq`
    (`nn.init` zeros) and, for a parameter that is not f32, its f32
    `master` copy (the parameter's `nn.init`: it starts from the same
    values). Each carries `dist.optimizer_state` (its kind) and the
    parameter's `dist.placement` and `dist.global_shape`. Then, before the
    return, one `dist.optimizer_step` per parameter takes the parameter,
    its gradient and the states with the pass's hyperparameters. The
    runtime updates the parameter and states in place; the step count is
    the runtime's own (see `dist.optimizer_step`). Gradients stay returned.

    ```mlir
    func.func @step(%w: tensor<4x16xbf16> {nn.param, nn.name = "w", ...})
        -> (tensor<f32>, tensor<4x16xbf16> {nn.grad_of = 0 : i64}) {
      ...
      return %loss, %g : tensor<f32>, tensor<4x16xbf16>
    }
    // --plan-optimizer-step gives
    func.func @step(%w: tensor<4x16xbf16> {nn.param, nn.name = "w", ...},
        %m: tensor<4x16xf32> {dist.optimizer_state = "exp_avg", nn.init = {kind = "zeros"}, ...},
        %v: tensor<4x16xf32> {dist.optimizer_state = "exp_avg_sq", ...},
        %p: tensor<4x16xf32> {dist.optimizer_state = "master", ...}) -> (...) {
      ...
      %w1, %m1, %v1, %p1 = dist.optimizer_step %w, %g, %m, %v master %p
          lr = 1.0e-03 betas = (0.9, 0.999) eps = 1.0e-08 weight_decay = 0.01
          : tensor<4x16xbf16>, tensor<4x16xbf16>, tensor<4x16xf32>,
            tensor<4x16xf32>, tensor<4x16xf32>
      return %loss, %g : tensor<f32>, tensor<4x16xbf16>
    }
    ```

    Refused: a function that already has `dist.optimizer_step` ops (run
    the pass once) and hyperparameters the op's verifier rejects (lr and
    eps must be positive, betas in [0, 1), weight-decay non-negative).
    See docs/planner_dist.md.
  }];
  let options = [
    Option<"lr", "lr", "double", /*default=*/"1e-3", "AdamW learning rate">,
    Option<"beta1", "beta1", "double", /*default=*/"0.9",
           "decay of the first moment (exp_avg)">,
    Option<"beta2", "beta2", "double", /*default=*/"0.999",
           "decay of the second moment (exp_avg_sq)">,
    Option<"eps", "eps", "double", /*default=*/"1e-8",
           "added to the denominator for stability">,
    Option<"weightDecay", "weight-decay", "double", /*default=*/"0.01",
           "decoupled weight decay">,
  ];
  let dependentDialects = ["::loom::planner::dist::DistDialect"];
}

#endif  // LOOM_PLANNER_TRANSFORMS_OPTIMIZER_PASSES_TD_
