// RUN: not plan-opt %s --split-input-file --plan-autodiff --plan-stages="stages=3" 2>&1 | FileCheck %s --check-prefix=MANY
// MANY: plan-stages cannot cut the 2 'layers' layers of @step into 3 chunks (stages x virtual) of at least one layer each; use fewer stages or virtual stages
// RUN: not plan-opt %s --split-input-file --plan-autodiff --plan-stages="stages=2 layers=1,2" 2>&1 | FileCheck %s --check-prefix=SUM
// SUM: plan-stages layers lists 2 chunks of 3 layers in all, but @step is cut into 2 chunks (stages x virtual) of its 2 'layers' layers; give 2 counts that sum to 2
// RUN: not plan-opt %s --split-input-file --plan-autodiff --plan-stages="stages=2 layers=1,x" 2>&1 | FileCheck %s --check-prefix=PARSE
// PARSE: plan-stages layers: 'x' is not a layer count >= 1; give one count per chunk in model order, e.g. layers=3,5,5,3
// RUN: not plan-opt %s --split-input-file --plan-autodiff --plan-stages="stages=1 virtual=2" 2>&1 | FileCheck %s --check-prefix=VIRTUAL
// VIRTUAL: plan-stages virtual=2 interleaves chunks over stages, but there is one stage; give stages >= 2 (a pp mesh axis) or drop virtual
// RUN: not plan-opt %s --split-input-file --plan-autodiff --plan-stages="stages=-1" 2>&1 | FileCheck %s --check-prefix=NEGATIVE
// NEGATIVE: plan-stages stages=-1 virtual=1: both must be >= 1 (stages=0: the pp axis's size)
// RUN: not plan-opt %s --split-input-file --plan-stages="stages=2" 2>&1 | FileCheck %s --check-prefix=STEP
// STEP: plan-stages needs a training step, but @step has no nn.loss_grad_arg; run --plan-autodiff first
// RUN: not plan-opt %s --split-input-file --plan-autodiff --plan-stages="stages=2" --plan-stages="stages=2" 2>&1 | FileCheck %s --check-prefix=TWICE
// TWICE: @step already has pipeline stages; run plan-stages once
// RUN: not plan-opt %s --split-input-file --plan-autodiff --plan-stages="stages=2" 2>&1 | FileCheck %s --check-prefix=FLAT
// FLAT: plan-stages found no repeated layers in @flat

func.func @step(%x: tensor<4x8xf32>, %labels: tensor<4xi32>,
    %w0: tensor<8x8xf32> {nn.param, nn.name = "layers.0.fc.weight"},
    %w1: tensor<8x8xf32> {nn.param, nn.name = "layers.1.fc.weight"}) -> tensor<f32> {
  %h0 = nn.linear %x, %w0 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32> loc("layers.0.fc")
  %h1 = nn.linear %h0, %w1 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32> loc("layers.1.fc")
  %loss = nn.cross_entropy %h1, %labels : (tensor<4x8xf32>, tensor<4xi32>) -> tensor<f32> loc("loss")
  return %loss : tensor<f32>
}

// -----

func.func @flat(%x: tensor<4x8xf32>, %labels: tensor<4xi32>,
    %w: tensor<8x8xf32> {nn.param, nn.name = "fc.weight"}) -> tensor<f32> {
  %h = nn.linear %x, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32> loc("fc")
  %loss = nn.cross_entropy %h, %labels : (tensor<4x8xf32>, tensor<4xi32>) -> tensor<f32> loc("loss")
  return %loss : tensor<f32>
}
