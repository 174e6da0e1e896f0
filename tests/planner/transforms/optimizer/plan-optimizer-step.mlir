// RUN: plan-opt %s -split-input-file --plan-optimizer-step | FileCheck %s
// RUN: plan-opt %s -split-input-file --plan-optimizer-step="lr=0.0003 beta1=0.8 beta2=0.95 eps=1e-06 weight-decay=0.1" | FileCheck %s --check-prefix=OPTIONS

dist.mesh @mesh shape = [2] axes = ["fsdp"]

// Tests that an f32 parameter with a gradient gets exp_avg and exp_avg_sq
// (zeros, laid out as the parameter) and one step before the return; the
// input without a gradient and the gradient stay as they were.
// CHECK-LABEL: func.func @f32_step(
// CHECK-SAME: %[[G:[^:]*]]: tensor<4x16xf32>,
// CHECK-SAME: %[[W:[^:]*]]: tensor<4x16xf32> {dist.global_shape = array<i64: 8, 16>, dist.placement = #dist.placement<@mesh, [shard<0>]>, nn.init = {kind = "normal", mean = 0.000000e+00 : f64, std = 2.000000e-02 : f64}, nn.name = "w", nn.param},
// CHECK-SAME: %[[M:[^:]*]]: tensor<4x16xf32> {dist.global_shape = array<i64: 8, 16>, dist.optimizer_state = "exp_avg", dist.placement = #dist.placement<@mesh, [shard<0>]>, nn.init = {kind = "zeros", mean = 0.000000e+00 : f64, std = 0.000000e+00 : f64}},
// CHECK-SAME: %[[V:[^:]*]]: tensor<4x16xf32> {dist.global_shape = array<i64: 8, 16>, dist.optimizer_state = "exp_avg_sq", dist.placement = #dist.placement<@mesh, [shard<0>]>, nn.init = {kind = "zeros", mean = 0.000000e+00 : f64, std = 0.000000e+00 : f64}})
// CHECK-NEXT: dist.optimizer_step %[[W]], %[[G]], %[[M]], %[[V]] lr = 1.000000e-03 betas = (9.000000e-01, {{[0-9.e+-]+}}) eps = 1.000000e-08 weight_decay = 1.000000e-02 : tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>
// CHECK-NEXT: return %[[G]]
// OPTIONS-LABEL: func.func @f32_step(
// OPTIONS: dist.optimizer_step {{.*}} lr = 3.000000e-04 betas = (8.000000e-01, 0.94999999999999996) eps = 9.9999999999999995E-7 weight_decay = 1.000000e-01
func.func @f32_step(%g: tensor<4x16xf32>,
    %w: tensor<4x16xf32> {nn.param, nn.name = "w", nn.init = {kind = "normal", mean = 0.0, std = 0.02},
                          dist.placement = #dist.placement<@mesh, [shard<0>]>, dist.global_shape = array<i64: 8, 16>})
    -> (tensor<4x16xf32> {nn.grad_of = 1 : i64}) {
  return %g : tensor<4x16xf32>
}

// -----

dist.mesh @mesh shape = [2] axes = ["fsdp"]

// Tests that a bf16 parameter also gets its f32 master copy, which starts
// from the parameter's init, and that steps follow argument order; a
// parameter without a gradient gets neither states nor a step.
// CHECK-LABEL: func.func @bf16_steps(
// CHECK-SAME: %[[A:[^:]*]]: tensor<4xbf16> {nn.init = {kind = "ones", mean = 0.000000e+00 : f64, std = 0.000000e+00 : f64}, nn.name = "a", nn.param},
// CHECK-SAME: %[[FROZEN:[^:]*]]: tensor<4xbf16> {nn.init = {kind = "zeros", mean = 0.000000e+00 : f64, std = 0.000000e+00 : f64}, nn.name = "frozen", nn.param},
// CHECK-SAME: %[[B:[^:]*]]: tensor<4xbf16> {nn.init = {kind = "zeros", mean = 0.000000e+00 : f64, std = 0.000000e+00 : f64}, nn.name = "b", nn.param},
// CHECK-SAME: %[[GA:[^:]*]]: tensor<4xf32>, %[[GB:[^:]*]]: tensor<4xbf16>,
// CHECK-SAME: %[[MA:[^:]*]]: tensor<4xf32> {dist.optimizer_state = "exp_avg"
// CHECK-SAME: %[[VA:[^:]*]]: tensor<4xf32> {dist.optimizer_state = "exp_avg_sq"
// CHECK-SAME: %[[PA:[^:]*]]: tensor<4xf32> {dist.optimizer_state = "master", nn.init = {kind = "ones", mean = 0.000000e+00 : f64, std = 0.000000e+00 : f64}}
// CHECK-SAME: %[[MB:[^:]*]]: tensor<4xf32> {dist.optimizer_state = "exp_avg"
// CHECK-SAME: %[[VB:[^:]*]]: tensor<4xf32> {dist.optimizer_state = "exp_avg_sq"
// CHECK-SAME: %[[PB:[^:]*]]: tensor<4xf32> {dist.optimizer_state = "master", nn.init = {kind = "zeros", mean = 0.000000e+00 : f64, std = 0.000000e+00 : f64}})
// CHECK-NEXT: %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} = dist.optimizer_step %[[A]], %[[GA]], %[[MA]], %[[VA]] master %[[PA]] {{.*}} : tensor<4xbf16>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
// CHECK-NEXT: %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} = dist.optimizer_step %[[B]], %[[GB]], %[[MB]], %[[VB]] master %[[PB]] {{.*}} : tensor<4xbf16>, tensor<4xbf16>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
// CHECK-NEXT: return
func.func @bf16_steps(
    %a: tensor<4xbf16> {nn.param, nn.name = "a", nn.init = {kind = "ones", mean = 0.0, std = 0.0}},
    %frozen: tensor<4xbf16> {nn.param, nn.name = "frozen", nn.init = {kind = "zeros", mean = 0.0, std = 0.0}},
    %b: tensor<4xbf16> {nn.param, nn.name = "b", nn.init = {kind = "zeros", mean = 0.0, std = 0.0}},
    %ga: tensor<4xf32>, %gb: tensor<4xbf16>)
    -> (tensor<4xbf16> {nn.grad_of = 2 : i64}, tensor<4xf32> {nn.grad_of = 0 : i64}) {
  return %gb, %ga : tensor<4xbf16>, tensor<4xf32>
}
