// RUN: plan-opt %s --split-input-file --verify-diagnostics --plan-accumulate="micro-steps=2"
// RUN: not plan-opt %s --split-input-file --plan-accumulate="micro-steps=0" 2>&1 | FileCheck %s --check-prefix=ZERO
// RUN: not plan-opt %s --split-input-file --plan-accumulate="micro-steps=1 keep-gathered=true" 2>&1 | FileCheck %s --check-prefix=ONE

// ZERO: plan-accumulate micro-steps=0 must be >= 1
// ONE: keep-gathered and defer-grad-sync act between micro-steps; set micro-steps > 1 or drop them

// A function without gradients is no training step.
// expected-error @below {{returns no gradients (nn.grad_of); accumulation needs a training step from --plan-autodiff}}
func.func @forward(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}

// -----

// The pass runs once: a second run would sum the sums.
// expected-error @below {{already accumulates gradients; run --plan-accumulate once}}
func.func @twice(%l: tensor<f32>, %g: tensor<4xf32>) -> (tensor<f32>, tensor<4xf32> {nn.grad_of = 0 : i64}) {
  %s = dist.accumulate %g : tensor<4xf32>
  return %l, %s : tensor<f32>, tensor<4xf32>
}
