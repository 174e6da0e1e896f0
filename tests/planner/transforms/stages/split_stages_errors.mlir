// RUN: plan-opt %s --split-input-file --verify-diagnostics --plan-split-stages="schedule=1f1b"
// RUN: not plan-opt %s --split-input-file --plan-split-stages="schedule=interleaved-1f1b" 2>&1 | FileCheck %s --check-prefix=SCHEDULE
// RUN: not plan-opt %s --split-input-file --plan-split-stages="schedule=zb" 2>&1 | FileCheck %s --check-prefix=UNKNOWN

// Each diagnostic of plan-split-stages, on hand-staged steps: a layer per
// chunk, the residual crossing forward (%h0) and its gradient backward
// (%dh0).

// The schedule must match the chunks per stage.
// SCHEDULE: @step has 1 model chunk per stage, but the interleaved-1f1b schedule runs two or more; give plan-stages virtual >= 2
// SCHEDULE: in pipeline chunk 2 reads a value of chunk 0, which runs on the same stage (0); only values crossing between stages are sent
// UNKNOWN: plan-split-stages: unknown pipeline schedule 'zb'

// An op without a chunk.
dist.mesh @mesh shape = [2] axes = ["pp"] {dist.strategies = ["pp"]}
func.func @step(%x: tensor<4x8xf32> {dist.stages = array<i64: 0>},
    %labels: tensor<4xi32> {dist.stages = array<i64: 1>},
    %w0: tensor<8x8xf32> {nn.param, nn.name = "layers.0.fc.weight", dist.stages = array<i64: 0>},
    %w1: tensor<8x8xf32> {nn.param, nn.name = "layers.1.fc.weight", dist.stages = array<i64: 1>},
    %seed: tensor<f32> {dist.stages = array<i64: 1>})
    -> (tensor<f32>, tensor<8x8xf32> {nn.grad_of = 2 : i64}, tensor<8x8xf32> {nn.grad_of = 3 : i64})
    attributes {dist.pipeline_stages = 2 : i64, dist.stage_layers = array<i64: 1, 1>, nn.loss_grad_arg = 4 : i64} {
  %h0 = nn.linear %x, %w0 {dist.stage = 0 : i64, dist.result_placements = [#dist.placement<@mesh, [replicate]>]} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  // expected-error @below {{'nn.linear' op has no dist.stage; every op of a staged step needs one (run --plan-stages)}}
  %h1 = nn.linear %h0, %w1 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %loss = nn.cross_entropy %h1, %labels {dist.stage = 1 : i64} : (tensor<4x8xf32>, tensor<4xi32>) -> tensor<f32>
  %dh1 = nn.cross_entropy_grad %h1, %labels, %seed scale 0.25 {dist.stage = 1 : i64} : (tensor<4x8xf32>, tensor<4xi32>, tensor<f32>) -> tensor<4x8xf32>
  %dw1 = nn.matmul %h0, %dh1 transpose_lhs {dist.stage = 1 : i64} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<8x8xf32>
  %dh0 = nn.matmul %dh1, %w1 transpose_rhs {dist.stage = 1 : i64, dist.result_placements = [#dist.placement<@mesh, [replicate]>]} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %dw0 = nn.matmul %x, %dh0 transpose_lhs {dist.stage = 0 : i64} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<8x8xf32>
  return %loss, %dw0, %dw1 : tensor<f32>, tensor<8x8xf32>, tensor<8x8xf32>
}

// -----

// A returned argument.
dist.mesh @mesh shape = [2] axes = ["pp"] {dist.strategies = ["pp"]}
func.func @step(%x: tensor<4x8xf32> {dist.stages = array<i64: 0>},
    %labels: tensor<4xi32> {dist.stages = array<i64: 1>},
    %w0: tensor<8x8xf32> {nn.param, nn.name = "layers.0.fc.weight", dist.stages = array<i64: 0>},
    %w1: tensor<8x8xf32> {nn.param, nn.name = "layers.1.fc.weight", dist.stages = array<i64: 1>},
    %seed: tensor<f32> {dist.stages = array<i64: 1>})
    -> (tensor<f32>, tensor<8x8xf32> {nn.grad_of = 2 : i64}, tensor<8x8xf32> {nn.grad_of = 3 : i64}, tensor<4x8xf32>)
    attributes {dist.pipeline_stages = 2 : i64, dist.stage_layers = array<i64: 1, 1>, nn.loss_grad_arg = 4 : i64} {
  %h0 = nn.linear %x, %w0 {dist.stage = 0 : i64, dist.result_placements = [#dist.placement<@mesh, [replicate]>]} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %h1 = nn.linear %h0, %w1 {dist.stage = 1 : i64} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %loss = nn.cross_entropy %h1, %labels {dist.stage = 1 : i64} : (tensor<4x8xf32>, tensor<4xi32>) -> tensor<f32>
  %dh1 = nn.cross_entropy_grad %h1, %labels, %seed scale 0.25 {dist.stage = 1 : i64} : (tensor<4x8xf32>, tensor<4xi32>, tensor<f32>) -> tensor<4x8xf32>
  %dw1 = nn.matmul %h0, %dh1 transpose_lhs {dist.stage = 1 : i64} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<8x8xf32>
  %dh0 = nn.matmul %dh1, %w1 transpose_rhs {dist.stage = 1 : i64, dist.result_placements = [#dist.placement<@mesh, [replicate]>]} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %dw0 = nn.matmul %x, %dh0 transpose_lhs {dist.stage = 0 : i64} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<8x8xf32>
  // expected-error @below {{returns argument 0 as result 3; a staged step returns only values its chunks compute}}
  return %loss, %dw0, %dw1, %x : tensor<f32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<4x8xf32>
}

// -----

// A gradient computed away from its parameter.
dist.mesh @mesh shape = [2] axes = ["pp"] {dist.strategies = ["pp"]}
func.func @step(%x: tensor<4x8xf32> {dist.stages = array<i64: 0, 1>},
    %labels: tensor<4xi32> {dist.stages = array<i64: 1>},
    %w0: tensor<8x8xf32> {nn.param, nn.name = "layers.0.fc.weight", dist.stages = array<i64: 0>},
    %w1: tensor<8x8xf32> {nn.param, nn.name = "layers.1.fc.weight", dist.stages = array<i64: 1>},
    %seed: tensor<f32> {dist.stages = array<i64: 1>})
    -> (tensor<f32>, tensor<8x8xf32> {nn.grad_of = 2 : i64}, tensor<8x8xf32> {nn.grad_of = 3 : i64})
    attributes {dist.pipeline_stages = 2 : i64, dist.stage_layers = array<i64: 1, 1>, nn.loss_grad_arg = 4 : i64} {
  %h0 = nn.linear %x, %w0 {dist.stage = 0 : i64, dist.result_placements = [#dist.placement<@mesh, [replicate]>]} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %h1 = nn.linear %h0, %w1 {dist.stage = 1 : i64} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %loss = nn.cross_entropy %h1, %labels {dist.stage = 1 : i64} : (tensor<4x8xf32>, tensor<4xi32>) -> tensor<f32>
  %dh1 = nn.cross_entropy_grad %h1, %labels, %seed scale 0.25 {dist.stage = 1 : i64} : (tensor<4x8xf32>, tensor<4xi32>, tensor<f32>) -> tensor<4x8xf32>
  %dw1 = nn.matmul %h0, %dh1 transpose_lhs {dist.stage = 1 : i64} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<8x8xf32>
  %dh0 = nn.matmul %dh1, %w1 transpose_rhs {dist.stage = 1 : i64, dist.result_placements = [#dist.placement<@mesh, [replicate]>]} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  // expected-error @below {{computes the gradient of argument 2 in pipeline chunk 1, which does not read that parameter; a gradient must be computed in its parameter's chunk}}
  %dw0 = nn.matmul %x, %dh0 transpose_lhs {dist.stage = 1 : i64} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<8x8xf32>
  return %loss, %dw0, %dw1 : tensor<f32>, tensor<8x8xf32>, tensor<8x8xf32>
}

// -----

// An argument read by a chunk its dist.stages does not list.
dist.mesh @mesh shape = [2] axes = ["pp"] {dist.strategies = ["pp"]}
func.func @step(%x: tensor<4x8xf32> {dist.stages = array<i64: 0>},
    %labels: tensor<4xi32> {dist.stages = array<i64: 0>},
    %w0: tensor<8x8xf32> {nn.param, nn.name = "layers.0.fc.weight", dist.stages = array<i64: 0>},
    %w1: tensor<8x8xf32> {nn.param, nn.name = "layers.1.fc.weight", dist.stages = array<i64: 1>},
    %seed: tensor<f32> {dist.stages = array<i64: 1>})
    -> (tensor<f32>, tensor<8x8xf32> {nn.grad_of = 2 : i64}, tensor<8x8xf32> {nn.grad_of = 3 : i64})
    attributes {dist.pipeline_stages = 2 : i64, dist.stage_layers = array<i64: 1, 1>, nn.loss_grad_arg = 4 : i64} {
  %h0 = nn.linear %x, %w0 {dist.stage = 0 : i64, dist.result_placements = [#dist.placement<@mesh, [replicate]>]} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %h1 = nn.linear %h0, %w1 {dist.stage = 1 : i64} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  // expected-error @below {{in pipeline chunk 1 reads argument 1, which plan-stages did not list for it in dist.stages; run --plan-stages again}}
  %loss = nn.cross_entropy %h1, %labels {dist.stage = 1 : i64} : (tensor<4x8xf32>, tensor<4xi32>) -> tensor<f32>
  %dh1 = nn.cross_entropy_grad %h1, %labels, %seed scale 0.25 {dist.stage = 1 : i64} : (tensor<4x8xf32>, tensor<4xi32>, tensor<f32>) -> tensor<4x8xf32>
  %dw1 = nn.matmul %h0, %dh1 transpose_lhs {dist.stage = 1 : i64} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<8x8xf32>
  %dh0 = nn.matmul %dh1, %w1 transpose_rhs {dist.stage = 1 : i64, dist.result_placements = [#dist.placement<@mesh, [replicate]>]} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %dw0 = nn.matmul %x, %dh0 transpose_lhs {dist.stage = 0 : i64} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<8x8xf32>
  return %loss, %dw0, %dw1 : tensor<f32>, tensor<8x8xf32>, tensor<8x8xf32>
}

// -----

// Two chunks per stage: a 1f1b schedule is refused, and under
// interleaved-1f1b a value passed between two chunks of one stage.
dist.mesh @mesh shape = [2] axes = ["pp"] {dist.strategies = ["pp"]}
// expected-error @below {{@step has 2 model chunks per stage, but the 1f1b schedule runs one; use schedule=interleaved-1f1b or virtual=1}}
func.func @step(%x: tensor<4x8xf32> {dist.stages = array<i64: 0>},
    %labels: tensor<4xi32> {dist.stages = array<i64: 2>},
    %w0: tensor<8x8xf32> {nn.param, nn.name = "layers.0.fc.weight", dist.stages = array<i64: 0>},
    %w1: tensor<8x8xf32> {nn.param, nn.name = "layers.1.fc.weight", dist.stages = array<i64: 2>},
    %seed: tensor<f32> {dist.stages = array<i64: 2>})
    -> (tensor<f32>, tensor<8x8xf32> {nn.grad_of = 2 : i64}, tensor<8x8xf32> {nn.grad_of = 3 : i64})
    attributes {dist.pipeline_stages = 2 : i64, dist.stage_layers = array<i64: 1, 1, 1, 1>, nn.loss_grad_arg = 4 : i64} {
  %h0 = nn.linear %x, %w0 {dist.stage = 0 : i64, dist.result_placements = [#dist.placement<@mesh, [replicate]>]} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  // Under interleaved-1f1b (SCHEDULE): chunk 2 reads chunk 0's %h0.
  %h1 = nn.linear %h0, %w1 {dist.stage = 2 : i64} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %loss = nn.cross_entropy %h1, %labels {dist.stage = 2 : i64} : (tensor<4x8xf32>, tensor<4xi32>) -> tensor<f32>
  %dh1 = nn.cross_entropy_grad %h1, %labels, %seed scale 0.25 {dist.stage = 2 : i64} : (tensor<4x8xf32>, tensor<4xi32>, tensor<f32>) -> tensor<4x8xf32>
  %dw1 = nn.matmul %h0, %dh1 transpose_lhs {dist.stage = 2 : i64} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<8x8xf32>
  %dh0 = nn.matmul %dh1, %w1 transpose_rhs {dist.stage = 2 : i64, dist.result_placements = [#dist.placement<@mesh, [replicate]>]} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %dw0 = nn.matmul %x, %dh0 transpose_lhs {dist.stage = 0 : i64} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<8x8xf32>
  return %loss, %dw0, %dw1 : tensor<f32>, tensor<8x8xf32>, tensor<8x8xf32>
}

// -----

// A forward value a chunk reads only in its backward pass.
dist.mesh @mesh shape = [2] axes = ["pp"] {dist.strategies = ["pp"]}
func.func @step(%x: tensor<4x8xf32> {dist.stages = array<i64: 0>},
    %labels: tensor<4xi32> {dist.stages = array<i64: 1>},
    %w0: tensor<8x8xf32> {nn.param, nn.name = "layers.0.fc.weight", dist.stages = array<i64: 0>},
    %w1: tensor<8x8xf32> {nn.param, nn.name = "layers.1.fc.weight", dist.stages = array<i64: 1>},
    %seed: tensor<f32> {dist.stages = array<i64: 1>},
    %x1: tensor<4x8xf32> {dist.stages = array<i64: 1>})
    -> (tensor<f32>, tensor<8x8xf32> {nn.grad_of = 2 : i64}, tensor<8x8xf32> {nn.grad_of = 3 : i64})
    attributes {dist.pipeline_stages = 2 : i64, dist.stage_layers = array<i64: 1, 1>, nn.loss_grad_arg = 4 : i64} {
  %h0 = nn.linear %x, %w0 {dist.stage = 0 : i64, dist.result_placements = [#dist.placement<@mesh, [replicate]>]} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %h1 = nn.linear %x1, %w1 {dist.stage = 1 : i64} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %loss = nn.cross_entropy %h1, %labels {dist.stage = 1 : i64} : (tensor<4x8xf32>, tensor<4xi32>) -> tensor<f32>
  %dh1 = nn.cross_entropy_grad %h1, %labels, %seed scale 0.25 {dist.stage = 1 : i64} : (tensor<4x8xf32>, tensor<4xi32>, tensor<f32>) -> tensor<4x8xf32>
  // expected-error @below {{in pipeline chunk 1 reads forward value of chunk 0 only in its backward pass; a stage receives a forward value for its own forward (cut the layers elsewhere)}}
  %dw1 = nn.matmul %h0, %dh1 transpose_lhs {dist.stage = 1 : i64} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<8x8xf32>
  %dh0 = nn.matmul %dh1, %w1 transpose_rhs {dist.stage = 1 : i64, dist.result_placements = [#dist.placement<@mesh, [replicate]>]} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %dw0 = nn.matmul %x, %dh0 transpose_lhs {dist.stage = 0 : i64} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<8x8xf32>
  return %loss, %dw0, %dw1 : tensor<f32>, tensor<8x8xf32>, tensor<8x8xf32>
}

// -----

// A mesh without a pp axis.
dist.mesh @mesh shape = [2] axes = ["pp"] {dist.strategies = ["fsdp"]}
// expected-error @below {{@step has pipeline stages, but the module's dist.mesh has no pp axis (dist.strategies); plan with a pp axis, e.g. mesh=pp=2 axes=pp}}
func.func @step(%x: tensor<4x8xf32> {dist.stages = array<i64: 0>},
    %labels: tensor<4xi32> {dist.stages = array<i64: 1>},
    %w0: tensor<8x8xf32> {nn.param, nn.name = "layers.0.fc.weight", dist.stages = array<i64: 0>},
    %w1: tensor<8x8xf32> {nn.param, nn.name = "layers.1.fc.weight", dist.stages = array<i64: 1>},
    %seed: tensor<f32> {dist.stages = array<i64: 1>})
    -> (tensor<f32>, tensor<8x8xf32> {nn.grad_of = 2 : i64}, tensor<8x8xf32> {nn.grad_of = 3 : i64})
    attributes {dist.pipeline_stages = 2 : i64, dist.stage_layers = array<i64: 1, 1>, nn.loss_grad_arg = 4 : i64} {
  %h0 = nn.linear %x, %w0 {dist.stage = 0 : i64, dist.result_placements = [#dist.placement<@mesh, [replicate]>]} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %h1 = nn.linear %h0, %w1 {dist.stage = 1 : i64} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %loss = nn.cross_entropy %h1, %labels {dist.stage = 1 : i64} : (tensor<4x8xf32>, tensor<4xi32>) -> tensor<f32>
  %dh1 = nn.cross_entropy_grad %h1, %labels, %seed scale 0.25 {dist.stage = 1 : i64} : (tensor<4x8xf32>, tensor<4xi32>, tensor<f32>) -> tensor<4x8xf32>
  %dw1 = nn.matmul %h0, %dh1 transpose_lhs {dist.stage = 1 : i64} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<8x8xf32>
  %dh0 = nn.matmul %dh1, %w1 transpose_rhs {dist.stage = 1 : i64, dist.result_placements = [#dist.placement<@mesh, [replicate]>]} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %dw0 = nn.matmul %x, %dh0 transpose_lhs {dist.stage = 0 : i64} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<8x8xf32>
  return %loss, %dw0, %dw1 : tensor<f32>, tensor<8x8xf32>, tensor<8x8xf32>
}

// -----

// A pp axis of another size.
dist.mesh @mesh shape = [4] axes = ["pp"] {dist.strategies = ["pp"]}
// expected-error @below {{@step is cut into 2 pipeline stages, but the mesh's pp axis 'pp' has 4 ranks; run plan-stages with stages=4}}
func.func @step(%x: tensor<4x8xf32> {dist.stages = array<i64: 0>},
    %labels: tensor<4xi32> {dist.stages = array<i64: 1>},
    %w0: tensor<8x8xf32> {nn.param, nn.name = "layers.0.fc.weight", dist.stages = array<i64: 0>},
    %w1: tensor<8x8xf32> {nn.param, nn.name = "layers.1.fc.weight", dist.stages = array<i64: 1>},
    %seed: tensor<f32> {dist.stages = array<i64: 1>})
    -> (tensor<f32>, tensor<8x8xf32> {nn.grad_of = 2 : i64}, tensor<8x8xf32> {nn.grad_of = 3 : i64})
    attributes {dist.pipeline_stages = 2 : i64, dist.stage_layers = array<i64: 1, 1>, nn.loss_grad_arg = 4 : i64} {
  %h0 = nn.linear %x, %w0 {dist.stage = 0 : i64, dist.result_placements = [#dist.placement<@mesh, [replicate]>]} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %h1 = nn.linear %h0, %w1 {dist.stage = 1 : i64} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %loss = nn.cross_entropy %h1, %labels {dist.stage = 1 : i64} : (tensor<4x8xf32>, tensor<4xi32>) -> tensor<f32>
  %dh1 = nn.cross_entropy_grad %h1, %labels, %seed scale 0.25 {dist.stage = 1 : i64} : (tensor<4x8xf32>, tensor<4xi32>, tensor<f32>) -> tensor<4x8xf32>
  %dw1 = nn.matmul %h0, %dh1 transpose_lhs {dist.stage = 1 : i64} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<8x8xf32>
  %dh0 = nn.matmul %dh1, %w1 transpose_rhs {dist.stage = 1 : i64, dist.result_placements = [#dist.placement<@mesh, [replicate]>]} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %dw0 = nn.matmul %x, %dh0 transpose_lhs {dist.stage = 0 : i64} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<8x8xf32>
  return %loss, %dw0, %dw1 : tensor<f32>, tensor<8x8xf32>, tensor<8x8xf32>
}
