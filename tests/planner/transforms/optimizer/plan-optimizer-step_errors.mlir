// RUN: plan-opt %s -verify-diagnostics --plan-optimizer-step --plan-optimizer-step -o /dev/null
// RUN: not plan-opt %s --plan-optimizer-step="lr=0" 2>&1 | FileCheck %s --check-prefix=LR

// Tests that a second run is refused, and (LR) that hyperparameters the
// op's verifier rejects are refused at the parameter.
// LR: error: 'dist.optimizer_step' op lr must be positive, got: 0; use a learning rate such as 0.001
// expected-error @+1 {{already has dist.optimizer_step ops; run --plan-optimizer-step once}}
func.func @twice(%g: tensor<4xf32>, %w: tensor<4xf32> {nn.param}) -> (tensor<4xf32> {nn.grad_of = 1 : i64}) {
  return %g : tensor<4xf32>
}
