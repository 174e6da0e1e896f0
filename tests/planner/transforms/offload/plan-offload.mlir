// RUN: plan-opt %s -split-input-file --plan-optimizer-step --plan-offload="mode=optimizer" | FileCheck %s
// RUN: plan-opt %s -split-input-file --plan-optimizer-step --plan-offload | FileCheck %s --check-prefix=NONE
// RUN: plan-opt %s -split-input-file --plan-optimizer-step --plan-offload="mode=optimizer" --plan-memory-plan | FileCheck %s --check-prefix=MEMORY

dist.mesh @mesh shape = [2] axes = ["fsdp"]

// Tests that the states and master copies go to the host (an f32 parameter
// gets a master from its own init), that each gradient starts for the host
// right after the op that defines it, one op's copies in flight at a time,
// that the steps run on the masters, each written back into its parameter
// while the next one steps, and that the host gradients are returned.
// CHECK-LABEL: func.func @offload(
// CHECK-SAME: %[[W:[^:]*]]: tensor<4xbf16> {nn.init = {kind = "ones", mean = 0.000000e+00 : f64, std = 0.000000e+00 : f64}, nn.name = "w", nn.param},
// CHECK-SAME: %[[B:[^:]*]]: tensor<4xf32> {nn.init = {kind = "zeros", mean = 0.000000e+00 : f64, std = 0.000000e+00 : f64}, nn.name = "b", nn.param},
// CHECK-SAME: %[[C:[^:]*]]: tensor<4xf32> {nn.init = {kind = "normal", mean = 0.000000e+00 : f64, std = 2.000000e-02 : f64}, nn.name = "c", nn.param},
// CHECK-SAME: %[[FLAT:[^:]*]]: tensor<8xf32>, %[[Y:[^:]*]]: tensor<4xf32>,
// CHECK-SAME: %[[MW:[^:]*]]: tensor<4xf32> {dist.memory = "host", dist.optimizer_state = "exp_avg"
// CHECK-SAME: %[[VW:[^:]*]]: tensor<4xf32> {dist.memory = "host", dist.optimizer_state = "exp_avg_sq"
// CHECK-SAME: %[[PW:[^:]*]]: tensor<4xf32> {dist.memory = "host", dist.optimizer_state = "master", nn.init = {kind = "ones"
// CHECK-SAME: %[[MB:[^:]*]]: tensor<4xf32> {dist.memory = "host", dist.optimizer_state = "exp_avg"
// CHECK-SAME: %[[VB:[^:]*]]: tensor<4xf32> {dist.memory = "host", dist.optimizer_state = "exp_avg_sq"
// CHECK-SAME: %[[MC:[^:]*]]: tensor<4xf32> {dist.memory = "host", dist.optimizer_state = "exp_avg"
// CHECK-SAME: %[[VC:[^:]*]]: tensor<4xf32> {dist.memory = "host", dist.optimizer_state = "exp_avg_sq"
// CHECK-SAME: %[[PB:[^:]*]]: tensor<4xf32> {dist.memory = "host", dist.optimizer_state = "master", nn.init = {kind = "zeros"
// CHECK-SAME: %[[PC:[^:]*]]: tensor<4xf32> {dist.memory = "host", dist.optimizer_state = "master", nn.init = {kind = "normal"
// CHECK-NEXT: %[[U:.*]]:2 = dist.unbucket %[[FLAT]]
// CHECK-NEXT: %[[FW:.*]] = dist.copy_to_host_start %[[U]]#0 : tensor<4xf32> -> !dist.future<tensor<4xf32>>
// CHECK-NEXT: %[[FB:.*]] = dist.copy_to_host_start %[[U]]#1 : tensor<4xf32> -> !dist.future<tensor<4xf32>>
// CHECK-NEXT: %[[GC:.*]] = nn.silu %[[Y]]
// CHECK-NEXT: %[[HW:.*]] = dist.wait %[[FW]]
// CHECK-NEXT: %[[HB:.*]] = dist.wait %[[FB]]
// CHECK-NEXT: %[[FC:.*]] = dist.copy_to_host_start %[[GC]] : tensor<4xf32> -> !dist.future<tensor<4xf32>>
// CHECK-NEXT: %[[HC:.*]] = dist.wait %[[FC]]
// CHECK-NEXT: %[[SW:[^,]*]], %{{.*}}, %{{.*}} = dist.optimizer_step %[[PW]], %[[HW]], %[[MW]], %[[VW]] lr
// CHECK-NEXT: %[[UW:.*]] = dist.copy_into_device_start %[[SW]] into %[[W]] : tensor<4xf32> into tensor<4xbf16> -> !dist.future<tensor<4xbf16>>
// CHECK-NEXT: %[[SB:[^,]*]], %{{.*}}, %{{.*}} = dist.optimizer_step %[[PB]], %[[HB]], %[[MB]], %[[VB]] lr
// CHECK-NEXT: dist.wait %[[UW]]
// CHECK-NEXT: %[[UB:.*]] = dist.copy_into_device_start %[[SB]] into %[[B]] : tensor<4xf32> into tensor<4xf32> -> !dist.future<tensor<4xf32>>
// CHECK-NEXT: %[[SC:[^,]*]], %{{.*}}, %{{.*}} = dist.optimizer_step %[[PC]], %[[HC]], %[[MC]], %[[VC]] lr
// CHECK-NEXT: dist.wait %[[UB]]
// CHECK-NEXT: %[[UC:.*]] = dist.copy_into_device_start %[[SC]] into %[[C]]
// CHECK-NEXT: dist.wait %[[UC]]
// CHECK-NEXT: return %[[HW]], %[[HB]], %[[HC]]
// NONE-LABEL: func.func @offload(
// NONE-NOT: dist.memory
// NONE-NOT: dist.copy_to_host_start
// NONE: dist.optimizer_step %{{.*}} master
// The memory plan counts the host apart: three parameters' moments and
// masters (3 x 3 x 16 B) resident, and at the last gradient's wait (op 7)
// its future and wait plus the two host gradients already returned
// (4 x 16 B). The device keeps the parameters (8 + 16 + 16 B) and, at the
// unbucket, the flat buffer, y and the two device gradients.
// MEMORY-LABEL: func.func @offload(
// MEMORY-SAME: plan.host_memory = {activation = 0 : i64, gathered = 0 : i64, grad = 64 : i64, optimizer_state = 144 : i64, param = 0 : i64, peak_op = 7 : i64}
// MEMORY-SAME: plan.host_peak_bytes = 208 : i64
// MEMORY-SAME: plan.memory = {activation = 48 : i64, gathered = 0 : i64, grad = 32 : i64, optimizer_state = 0 : i64, param = 40 : i64, peak_op = 0 : i64}
// MEMORY-SAME: plan.peak_bytes = 120 : i64
func.func @offload(
    %w: tensor<4xbf16> {nn.param, nn.name = "w", nn.init = {kind = "ones", mean = 0.0, std = 0.0}},
    %b: tensor<4xf32> {nn.param, nn.name = "b", nn.init = {kind = "zeros", mean = 0.0, std = 0.0}},
    %c: tensor<4xf32> {nn.param, nn.name = "c", nn.init = {kind = "normal", mean = 0.0, std = 0.02}},
    %flat: tensor<8xf32>, %y: tensor<4xf32>)
    -> (tensor<4xf32> {nn.grad_of = 0 : i64}, tensor<4xf32> {nn.grad_of = 1 : i64},
        tensor<4xf32> {nn.grad_of = 2 : i64}) {
  %gw, %gb = dist.unbucket %flat offsets = [0, 4] : tensor<8xf32> -> tensor<4xf32>, tensor<4xf32>
  %gc = nn.silu %y : (tensor<4xf32>) -> tensor<4xf32>
  return %gw, %gb, %gc : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}

// -----

dist.mesh @mesh shape = [2] axes = ["fsdp"]

// Tests that with several micro-steps the gradient copies and their waits
// run in the last one only (the gradients are whole then); the optimizer's
// copies run once per step anyway.
// CHECK-LABEL: func.func @micro_steps(
// CHECK: dist.copy_to_host_start {{.*}} {dist.micro_step = "last"}
// CHECK-NEXT: dist.wait {{.*}} {dist.micro_step = "last"}
// CHECK-NEXT: dist.optimizer_step
// CHECK-NEXT: dist.copy_into_device_start
// CHECK-NOT: dist.micro_step
// CHECK: return
func.func @micro_steps(
    %b: tensor<4xf32> {nn.param, nn.name = "b", nn.init = {kind = "zeros", mean = 0.0, std = 0.0}},
    %gb: tensor<4xf32>)
    -> (tensor<4xf32> {nn.grad_of = 0 : i64}) attributes {dist.micro_steps = 2 : i64} {
  %sum = dist.accumulate %gb : tensor<4xf32>
  return %sum : tensor<4xf32>
}
