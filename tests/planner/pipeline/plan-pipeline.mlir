// RUN: plan-opt %s --plan-pipeline="mesh=fsdp=2 axes=fsdp" | FileCheck %s
// RUN: plan-opt %s --plan-pipeline="mesh=fsdp=2 axes=fsdp prefetch=0 bucket-mb=0 lr=0.0003 beta2=0.95 weight-decay=0 memory-gb=80" | FileCheck %s --check-prefix=OPTIONS

// Tests that the registered pipeline takes an nn step to the per-rank
// program: global shapes recorded on the localized arguments, AdamW states
// appended, the gradients' reduce-scatter bucketed and started async, the
// optimizer steps after the loss's wait and the memory plan on the function.
// CHECK-LABEL: func.func @mlp(
// CHECK-SAME: %[[W0:[^:]*]]: tensor<8x16xf32> {dist.global_shape = array<i64: 16, 16>, dist.placement = #dist.placement<@mesh, [shard<0>]>, nn.init = {{.*}}, nn.name = "fc1.weight", nn.param}
// CHECK-SAME: %[[W1:[^:]*]]: tensor<8x12xf32> {dist.global_shape = array<i64: 16, 12>, dist.placement = #dist.placement<@mesh, [shard<0>]>, nn.init = {{.*}}, nn.name = "fc2.weight", nn.param}
// CHECK-SAME: %[[M0:[^:]*]]: tensor<8x16xf32> {dist.global_shape = array<i64: 16, 16>, dist.optimizer_state = "exp_avg"
// CHECK-SAME: %[[V0:[^:]*]]: tensor<8x16xf32> {dist.global_shape = array<i64: 16, 16>, dist.optimizer_state = "exp_avg_sq"
// CHECK-SAME: %[[M1:[^:]*]]: tensor<8x12xf32> {dist.global_shape = array<i64: 16, 12>, dist.optimizer_state = "exp_avg"
// CHECK-SAME: %[[V1:[^:]*]]: tensor<8x12xf32> {dist.global_shape = array<i64: 16, 12>, dist.optimizer_state = "exp_avg_sq"
// CHECK-SAME: plan.memory = {activation = 532 : i64, gathered = 4352 : i64, grad = 0 : i64, optimizer_state = 1792 : i64, param = 896 : i64, peak_op = 6 : i64}, plan.peak_bytes = 7572 : i64, plan.prefetch = 1 : i64
// CHECK: %[[BUCKET:.*]] = dist.bucket %{{.*}}, %{{.*}} offsets = [0, 96] chunks = 2
// CHECK-NEXT: %[[RS:.*]] = dist.reduce_scatter_start %[[BUCKET]] on @mesh axes = ["fsdp"]
// CHECK-NEXT: %[[SHARDS:.*]] = dist.wait %[[RS]]
// CHECK-NEXT: dist.free %[[BUCKET]]
// CHECK-NEXT: %[[G:.*]]:2 = dist.unbucket %[[SHARDS]]
// CHECK-NEXT: %[[LOSS:.*]] = dist.wait
// CHECK-NEXT: dist.optimizer_step %[[W0]], %[[G]]#1, %[[M0]], %[[V0]] lr = 1.000000e-03 betas = (9.000000e-01, {{[0-9.e+-]+}}) eps = 1.000000e-08 weight_decay = 1.000000e-02
// CHECK-NEXT: dist.optimizer_step %[[W1]], %[[G]]#0, %[[M1]], %[[V1]] lr = 1.000000e-03
// CHECK-NEXT: return %[[LOSS]], %[[G]]#1, %[[G]]#0
// OPTIONS-LABEL: func.func @mlp(
// OPTIONS-SAME: plan.prefetch = 0 : i64
// OPTIONS: dist.optimizer_step {{.*}} lr = 3.000000e-04 betas = (9.000000e-01, 0.94999999999999996) eps = 1.000000e-08 weight_decay = 0.000000e+00
func.func @mlp(%x: tensor<8x16xf32>, %labels: tensor<8xi32>,
    %w0: tensor<16x16xf32> {nn.param, nn.name = "fc1.weight", nn.init = {kind = "normal", mean = 0.0, std = 0.02}},
    %w1: tensor<16x12xf32> {nn.param, nn.name = "fc2.weight", nn.init = {kind = "normal", mean = 0.0, std = 0.02}}) -> tensor<f32> {
  %h = nn.linear %x, %w0 : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
  %a = nn.silu %h : (tensor<8x16xf32>) -> tensor<8x16xf32>
  %y = nn.linear %a, %w1 : (tensor<8x16xf32>, tensor<16x12xf32>) -> tensor<8x12xf32>
  %l = nn.cross_entropy %y, %labels : (tensor<8x12xf32>, tensor<8xi32>) -> tensor<f32>
  return %l : tensor<f32>
}
