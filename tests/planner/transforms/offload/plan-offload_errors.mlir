// RUN: plan-opt %s -split-input-file -verify-diagnostics --plan-offload="mode=optimizer"

// Tests that offload needs optimizer steps to move.
// expected-error @+1 {{plan-offload: mode 'optimizer' but no function has dist.optimizer_step ops; run --plan-optimizer-step first}}
module {
  func.func @no_steps(%g: tensor<4xf32>) -> tensor<4xf32> {
    return %g : tensor<4xf32>
  }
}

// -----

// Tests that a step already on the host is not offloaded twice.
func.func @twice(%p: tensor<4xf32> {dist.memory = "host"}, %g: tensor<4xf32> {dist.memory = "host"},
                 %m: tensor<4xf32> {dist.memory = "host"}, %v: tensor<4xf32> {dist.memory = "host"}) {
  // expected-error @+1 {{'dist.optimizer_step' op already runs on the host; run --plan-offload once}}
  %p1, %m1, %v1 = dist.optimizer_step %p, %g, %m, %v lr = 1.0e-3 betas = (0.9, 0.999) eps = 1.0e-8 weight_decay = 0.01 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
  return
}

// -----

// Tests that the steps' parameters and states must be arguments.
func.func @not_an_argument(%x: tensor<4xf32>, %g: tensor<4xf32>, %m: tensor<4xf32>, %v: tensor<4xf32>) {
  %p = nn.silu %x : (tensor<4xf32>) -> tensor<4xf32>
  // expected-error @+1 {{'dist.optimizer_step' op updates a value that is no argument of @not_an_argument; parameters and states must be arguments, as --plan-optimizer-step makes them}}
  %p1, %m1, %v1 = dist.optimizer_step %p, %g, %m, %v lr = 1.0e-3 betas = (0.9, 0.999) eps = 1.0e-8 weight_decay = 0.01 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
  return
}

// -----

// Tests that a step whose results are used cannot be moved.
func.func @results_used(%p: tensor<4xf32>, %g: tensor<4xf32>, %m: tensor<4xf32>, %v: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'dist.optimizer_step' op result #0 is used; plan-offload moves the step, so run it right after --plan-optimizer-step}}
  %p1, %m1, %v1 = dist.optimizer_step %p, %g, %m, %v lr = 1.0e-3 betas = (0.9, 0.999) eps = 1.0e-8 weight_decay = 0.01 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
  return %p1 : tensor<4xf32>
}
