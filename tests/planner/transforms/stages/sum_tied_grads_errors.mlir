// RUN: plan-opt %s --split-input-file --verify-diagnostics --plan-sum-tied-grads

// Each diagnostic of plan-sum-tied-grads, on chunk functions made by hand:
// a parameter %w tied between stages 0 and 1, whose gradient each stage
// returns.

// Tests that a module already in its optimizer phase (the pass ran, or
// plan-optimizer-step did) is refused.
dist.mesh @mesh shape = [2] axes = ["pp"] {dist.strategies = ["pp"]}
func.func @step.chunk0(%w: tensor<4xf32> {nn.param, nn.name = "w", dist.pipeline_arg = 0 : i64, dist.tied_stages = array<i64: 0, 1>})
    -> (tensor<4xf32> {nn.grad_of = 0 : i64, dist.placement = #dist.placement<@mesh, [replicate]>})
    attributes {dist.pipeline_stage = 0 : i64} {
  // expected-error @below {{'nn.add' op is already in the optimizer phase; run --plan-sum-tied-grads once, before --plan-optimizer-step (whose steps read the summed gradient)}}
  %g = nn.add %w, %w {dist.optimizer_phase} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %g : tensor<4xf32>
}
func.func @step.chunk1(%w: tensor<4xf32> {nn.param, nn.name = "w", dist.pipeline_arg = 0 : i64, dist.tied_stages = array<i64: 0, 1>})
    -> (tensor<4xf32> {nn.grad_of = 0 : i64, dist.placement = #dist.placement<@mesh, [replicate]>})
    attributes {dist.pipeline_stage = 1 : i64} {
  %g = nn.add %w, %w : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %g : tensor<4xf32>
}

// -----

// Tests that a tied argument outside a pipeline chunk is refused.
dist.mesh @mesh shape = [2] axes = ["pp"] {dist.strategies = ["pp"]}
// expected-error @below {{argument 0 has dist.tied_stages but @step is not a pipeline chunk (no dist.pipeline_stage or dist.pipeline_arg); make chunks with --plan-split-stages}}
func.func @step(%w: tensor<4xf32> {nn.param, nn.name = "w", dist.tied_stages = array<i64: 0, 1>})
    -> (tensor<4xf32> {nn.grad_of = 0 : i64}) {
  %g = nn.add %w, %w : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %g : tensor<4xf32>
}

// -----

// Tests that a holder without the parameter's gradient is refused.
dist.mesh @mesh shape = [2] axes = ["pp"] {dist.strategies = ["pp"]}
// expected-error @below {{tied parameter w (argument 0) has no gradient among @step.chunk0's results; run --plan-split-stages on a training step}}
func.func @step.chunk0(%w: tensor<4xf32> {nn.param, nn.name = "w", dist.pipeline_arg = 0 : i64, dist.tied_stages = array<i64: 0, 1>})
    -> tensor<4xf32> attributes {dist.pipeline_stage = 0 : i64} {
  %g = nn.add %w, %w : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %g : tensor<4xf32>
}

// -----

// Tests that holders on other stages than the tie lists are refused.
dist.mesh @mesh shape = [2] axes = ["pp"] {dist.strategies = ["pp"]}
// expected-error @below {{tied parameter w lists stages [0, 1] in dist.tied_stages, but chunk functions on stages [0] hold it; run --plan-split-stages again}}
func.func @step.chunk0(%w: tensor<4xf32> {nn.param, nn.name = "w", dist.pipeline_arg = 0 : i64, dist.tied_stages = array<i64: 0, 1>})
    -> (tensor<4xf32> {nn.grad_of = 0 : i64, dist.placement = #dist.placement<@mesh, [replicate]>})
    attributes {dist.pipeline_stage = 0 : i64} {
  %g = nn.add %w, %w : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %g : tensor<4xf32>
}

// -----

// Tests that a gradient without its placement (plan-insert-collectives
// records it) is refused.
dist.mesh @mesh shape = [2] axes = ["pp"] {dist.strategies = ["pp"]}
func.func @step.chunk0(%w: tensor<4xf32> {nn.param, nn.name = "w", dist.pipeline_arg = 0 : i64, dist.tied_stages = array<i64: 0, 1>})
    -> (tensor<4xf32> {nn.grad_of = 0 : i64, dist.placement = #dist.placement<@mesh, [replicate]>})
    attributes {dist.pipeline_stage = 0 : i64} {
  %g = nn.add %w, %w : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %g : tensor<4xf32>
}
// expected-error @below {{the gradient of tied parameter w (result 0) has no dist.placement; run --plan-insert-collectives before --plan-sum-tied-grads}}
func.func @step.chunk1(%w: tensor<4xf32> {nn.param, nn.name = "w", dist.pipeline_arg = 0 : i64, dist.tied_stages = array<i64: 0, 1>})
    -> (tensor<4xf32> {nn.grad_of = 0 : i64}) attributes {dist.pipeline_stage = 1 : i64} {
  %g = nn.add %w, %w : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %g : tensor<4xf32>
}

// -----

// Tests that a mesh without a pp axis is refused.
// expected-error @below {{the module has tied parameters but its dist.mesh has no pp axis; plan with a pp axis and --plan-split-stages}}
module {
  dist.mesh @mesh shape = [2] axes = ["fsdp"] {dist.strategies = ["fsdp"]}
  func.func @step.chunk0(%w: tensor<4xf32> {nn.param, nn.name = "w", dist.pipeline_arg = 0 : i64, dist.tied_stages = array<i64: 0, 1>})
      -> (tensor<4xf32> {nn.grad_of = 0 : i64, dist.placement = #dist.placement<@mesh, [replicate]>})
      attributes {dist.pipeline_stage = 0 : i64} {
    %g = nn.add %w, %w : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    return %g : tensor<4xf32>
  }
  func.func @step.chunk1(%w: tensor<4xf32> {nn.param, nn.name = "w", dist.pipeline_arg = 0 : i64, dist.tied_stages = array<i64: 0, 1>})
      -> (tensor<4xf32> {nn.grad_of = 0 : i64, dist.placement = #dist.placement<@mesh, [replicate]>})
      attributes {dist.pipeline_stage = 1 : i64} {
    %g = nn.add %w, %w : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    return %g : tensor<4xf32>
  }
}
