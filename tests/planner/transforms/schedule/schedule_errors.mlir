// RUN: plan-opt %s -split-input-file -verify-diagnostics --plan-autodiff --plan-placement="mesh=fsdp=4 axes=fsdp" --plan-insert-collectives --plan-bucketing --plan-schedule="memory-budget-gb=2.559e-06"
// RUN: not plan-opt %s --plan-schedule="prefetch=-1" 2>&1 | FileCheck %s --check-prefix=PREFETCH
// RUN: not plan-opt %s --plan-schedule="memory-budget-gb=-1" 2>&1 | FileCheck %s --check-prefix=BUDGET

// PREFETCH: error: invalid prefetch=-1; use 0 (no prefetch) or the number of steps to run ahead
// BUDGET: error: invalid memory-budget-gb=-1; use a budget in GB, or 0 to take k from prefetch

// Tests a budget below the peak without prefetch (512 + 2048 bytes).
// expected-error @below {{memory-budget-gb=2.559e-06 is below the peak without prefetch: 512 bytes of parameter shards + 2048 bytes of gathered parameters = 2560 bytes; raise memory-budget-gb to at least 2.56e-06}}
func.func @mlp(%x: tensor<8x16xf32>, %labels: tensor<8xi32>,
    %w0a: tensor<16x16xf32> {nn.param, nn.name = "layers.0.fc1.weight"},
    %w0b: tensor<16x16xf32> {nn.param, nn.name = "layers.0.fc2.weight"}) -> tensor<f32> {
  %h0 = nn.linear %x, %w0a : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
  %y = nn.linear %h0, %w0b : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
  %l = nn.cross_entropy %y, %labels : (tensor<8x16xf32>, tensor<8xi32>) -> tensor<f32>
  return %l : tensor<f32>
}
