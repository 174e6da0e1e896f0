// RUN: plan-opt %s --plan-autodiff --plan-placement="mesh=fsdp=4 axes=fsdp" --plan-insert-collectives --plan-bucketing --plan-schedule="memory-budget-gb=8e-06" | FileCheck %s --check-prefix=K0
// RUN: plan-opt %s --plan-autodiff --plan-placement="mesh=fsdp=4 axes=fsdp" --plan-insert-collectives --plan-bucketing --plan-schedule="memory-budget-gb=9e-06" | FileCheck %s --check-prefix=K1
// RUN: plan-opt %s --plan-autodiff --plan-placement="mesh=fsdp=4 axes=fsdp" --plan-insert-collectives --plan-bucketing --plan-schedule="memory-budget-gb=1.1e-05" | FileCheck %s --check-prefix=K2
// RUN: plan-opt %s --plan-autodiff --plan-placement="mesh=fsdp=4 axes=fsdp" --plan-insert-collectives --plan-bucketing --plan-schedule="prefetch=1 memory-budget-gb=100" | FileCheck %s --check-prefix=K3

// memory-budget-gb (GiB, as plan-memory-plan's) picks the largest k whose
// peak, as plan-memory-plan computes it on the scheduled function, fits:
// 960 bytes of parameter shards, 1920 of AdamW states, the activations live
// at the peak, and the gathered buffers in flight (shard buckets, futures,
// gathered buckets). The peaks are 7908, 9484, 11724 and 12748 bytes for
// k = 0..3 (schedule_test pins them), so budgets of 8e-06 GiB (8590
// bytes), 9e-06 (9664) and 1.1e-05 (11811) give k = 0, 1 and 2. k stops at 3
// (one less than the steps: a larger k moves nothing), and the budget
// replaces `prefetch`.

// Tests the chosen k and where the second step starts.
// K0-LABEL: func.func @mlp(
// K0-SAME: plan.prefetch = 0 : i64
// K0-NEXT: dist.bucket %arg2, %arg3
// K0-NEXT: dist.all_gather_start
// K0-NEXT: dist.wait
// K1-LABEL: func.func @mlp(
// K1-SAME: plan.prefetch = 1 : i64
// K1-NEXT: dist.bucket %arg2, %arg3
// K1-NEXT: dist.all_gather_start
// K1-NEXT: dist.wait
// K1-NEXT: dist.free
// K1-NEXT: dist.bucket %arg4, %arg5
// K1-NEXT: dist.all_gather_start
// K2-LABEL: func.func @mlp(
// K2-SAME: plan.prefetch = 2 : i64
// K2-NEXT: dist.bucket %arg2, %arg3
// K2-NEXT: dist.all_gather_start
// K2-NEXT: dist.bucket %arg4, %arg5
// K2-NEXT: dist.all_gather_start
// K2-NEXT: dist.wait
// K3-LABEL: func.func @mlp(
// K3-SAME: plan.prefetch = 3 : i64
// K3-NEXT: dist.bucket %arg2, %arg3
// K3-NEXT: dist.all_gather_start
// K3-NEXT: dist.bucket %arg4, %arg5
// K3-NEXT: dist.all_gather_start
// K3-NEXT: dist.bucket %arg5, %arg4
// K3-NEXT: dist.all_gather_start
// K3-NEXT: dist.wait
func.func @mlp(%x: tensor<8x16xf32>, %labels: tensor<8xi32>,
    %w0a: tensor<16x16xf32> {nn.param, nn.name = "layers.0.fc1.weight"},
    %w0b: tensor<16x16xf32> {nn.param, nn.name = "layers.0.fc2.weight"},
    %w1a: tensor<16x16xf32> {nn.param, nn.name = "layers.1.fc1.weight"},
    %w1b: tensor<16x12xf32> {nn.param, nn.name = "layers.1.fc2.weight"}) -> tensor<f32> {
  %h0 = nn.linear %x, %w0a : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
  %a0 = nn.silu %h0 : (tensor<8x16xf32>) -> tensor<8x16xf32>
  %h1 = nn.linear %a0, %w0b : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
  %a1 = nn.silu %h1 : (tensor<8x16xf32>) -> tensor<8x16xf32>
  %h2 = nn.linear %a1, %w1a : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
  %a2 = nn.silu %h2 : (tensor<8x16xf32>) -> tensor<8x16xf32>
  %y = nn.linear %a2, %w1b : (tensor<8x16xf32>, tensor<16x12xf32>) -> tensor<8x12xf32>
  %l = nn.cross_entropy %y, %labels : (tensor<8x12xf32>, tensor<8xi32>) -> tensor<f32>
  return %l : tensor<f32>
}
