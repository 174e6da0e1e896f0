// RUN: plan-opt %s --plan-pipeline="mesh=fsdp=2 axes=fsdp micro-steps=4" | FileCheck %s --check-prefix=SHARDS
// RUN: plan-opt %s --plan-pipeline="mesh=fsdp=2 axes=fsdp micro-steps=4 defer-grad-sync=true" | FileCheck %s --check-prefix=DEFER
// RUN: plan-opt %s --plan-pipeline="mesh=fsdp=2 axes=fsdp micro-steps=4 keep-gathered=true" | FileCheck %s --check-prefix=KEEP
// RUN: plan-opt %s --plan-pipeline="mesh=fsdp=2 axes=fsdp micro-steps=1" | FileCheck %s --check-prefix=ONE

// By default every micro-step reduce-scatters its own gradients and
// dist.accumulate sums the shards right after the unbucket; the optimizer
// reads the sums. Nothing is marked, and the sums (224 f32 shards, 896
// bytes) are held all step: at the peak, in the forward, too.
// SHARDS-LABEL: func.func @mlp(
// SHARDS-SAME: dist.micro_steps = 4 : i64
// SHARDS-SAME: grad = 896 : i64
// SHARDS-NOT: dist.micro_step =
// SHARDS: %[[RS:.*]] = dist.reduce_scatter_start
// SHARDS-NEXT: %[[SHARDS:.*]] = dist.wait %[[RS]]
// SHARDS-NEXT: dist.free
// SHARDS-NEXT: %[[G:.*]]:2 = dist.unbucket %[[SHARDS]]
// SHARDS-NEXT: %[[S0:.*]] = dist.accumulate %[[G]]#0 : tensor<8x12xf32>
// SHARDS-NEXT: %[[S1:.*]] = dist.accumulate %[[G]]#1 : tensor<8x16xf32>
// SHARDS: dist.optimizer_step %{{.*}}, %[[S1]],
// SHARDS-NEXT: dist.optimizer_step %{{.*}}, %[[S0]],
// SHARDS-NEXT: return %{{.*}}, %[[S1]], %[[S0]]

// defer-grad-sync: the local gradients are summed where they are made; the
// bucket, reduce-scatter, wait, free and unbucket that reduce the sums run
// in the last micro-step only.
// DEFER-LABEL: func.func @mlp(
// DEFER: %[[DW1:.*]] = nn.matmul %{{.*}}, %{{.*}} transpose_lhs
// DEFER-NEXT: %[[A1:.*]] = dist.accumulate %[[DW1]] : tensor<16x12xf32>
// DEFER: %[[DW0:.*]] = nn.matmul %{{.*}}, %{{.*}} transpose_lhs
// DEFER-NEXT: %[[A0:.*]] = dist.accumulate %[[DW0]] : tensor<16x16xf32>
// DEFER-NEXT: %[[B:.*]] = dist.bucket %[[A1]], %[[A0]] {{.*}} {dist.micro_step = "last"}
// DEFER-NEXT: %[[RS:.*]] = dist.reduce_scatter_start %[[B]] {{.*}} {dist.micro_step = "last"}
// DEFER-NEXT: %[[W:.*]] = dist.wait %[[RS]] {dist.micro_step = "last"}
// DEFER-NEXT: dist.free %[[B]] {dist.micro_step = "last"}
// DEFER-NEXT: %[[G:.*]]:2 = dist.unbucket %[[W]] {{.*}} {dist.micro_step = "last"}
// DEFER-NOT: dist.accumulate
// DEFER: dist.optimizer_step %{{.*}}, %[[G]]#1,
// The loss's all-reduce is no gradient reduction: it runs every micro-step.
// DEFER-NOT: all_reduce_start {{.*}}micro_step

// keep-gathered: one gather (the backward keeps the forward's copy) in the
// first micro-step; its bucket and the gathered buffer are freed there,
// and the unbucketed parameters are kept for the later micro-steps.
// KEEP-LABEL: func.func @mlp(
// KEEP: %[[B:.*]] = dist.bucket %arg2, %arg3 {{.*}} {dist.micro_step = "first"}
// KEEP-NEXT: %[[AG:.*]] = dist.all_gather_start %[[B]] {{.*}} {dist.micro_step = "first"}
// KEEP-NEXT: %[[FULL:.*]] = dist.wait %[[AG]] {dist.micro_step = "first"}
// KEEP-NEXT: dist.free %[[B]] {dist.micro_step = "first"}
// KEEP-NEXT: %[[P:.*]]:2 = dist.unbucket %[[FULL]] {{.*}} {dist.micro_step = "first"}
// KEEP-NOT: dist.all_gather
// KEEP: nn.matmul %{{.*}}, %[[P]]#1 transpose_rhs
// KEEP: dist.free %[[FULL]] {dist.micro_step = "first"}
// KEEP: dist.reduce_scatter_start
// KEEP-NOT: micro_step

// One micro-step: nothing changes.
// ONE-LABEL: func.func @mlp(
// ONE-NOT: dist.micro_steps
// ONE-NOT: dist.accumulate
func.func @mlp(%x: tensor<8x16xf32>, %labels: tensor<8xi32>,
    %w0: tensor<16x16xf32> {nn.param, nn.name = "fc1.weight", nn.init = {kind = "normal", mean = 0.0, std = 0.02}},
    %w1: tensor<16x12xf32> {nn.param, nn.name = "fc2.weight", nn.init = {kind = "normal", mean = 0.0, std = 0.02}}) -> tensor<f32> {
  %h = nn.linear %x, %w0 : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
  %a = nn.silu %h : (tensor<8x16xf32>) -> tensor<8x16xf32>
  %y = nn.linear %a, %w1 : (tensor<8x16xf32>, tensor<16x12xf32>) -> tensor<8x12xf32>
  %l = nn.cross_entropy %y, %labels : (tensor<8x12xf32>, tensor<8xi32>) -> tensor<f32>
  return %l : tensor<f32>
}
