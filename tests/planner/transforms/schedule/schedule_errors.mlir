// RUN: plan-opt %s -split-input-file -verify-diagnostics --plan-autodiff --plan-placement="mesh=fsdp=4 axes=fsdp" --plan-insert-collectives --plan-bucketing --plan-schedule="memory-budget-gb=5e-06"
// RUN: not plan-opt %s --plan-schedule="prefetch=-1" 2>&1 | FileCheck %s --check-prefix=PREFETCH
// RUN: not plan-opt %s --plan-schedule="memory-budget-gb=-1" 2>&1 | FileCheck %s --check-prefix=BUDGET

// PREFETCH: error: invalid prefetch=-1; use 0 (no prefetch) or the number of steps to run ahead
// BUDGET: error: invalid memory-budget-gb=-1; use a budget in GiB, or 0 to take k from prefetch

// Tests a budget below the peak without prefetch: 6284 bytes as
// plan-memory-plan counts them (params 512, AdamW states 1024, activations
// 140, gathered 4608: the shard bucket and, at the wait, the future and the
// gathered bucket), 5.85243e-06 GiB.
// expected-error @below {{memory-budget-gb=5e-06 is below the peak without prefetch: 6284 bytes (params 512 B, grads 0 B, optimizer states 1.0 KiB, activations 140 B, gathered 4.5 KiB); raise memory-budget-gb to at least 5.85243e-06 or lower the batch or sequence length per rank, or add tensor parallelism (a tp axis) to split the activations}}
func.func @mlp(%x: tensor<8x16xf32>, %labels: tensor<8xi32>,
    %w0a: tensor<16x16xf32> {nn.param, nn.name = "layers.0.fc1.weight"},
    %w0b: tensor<16x16xf32> {nn.param, nn.name = "layers.0.fc2.weight"}) -> tensor<f32> {
  %h0 = nn.linear %x, %w0a : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
  %y = nn.linear %h0, %w0b : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
  %l = nn.cross_entropy %y, %labels : (tensor<8x16xf32>, tensor<8xi32>) -> tensor<f32>
  return %l : tensor<f32>
}
