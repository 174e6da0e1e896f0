// RUN: plan-opt %s --plan-autodiff --plan-placement="mesh=fsdp=1 axes=fsdp" --plan-insert-collectives | FileCheck %s --check-prefix=FSDP1
// RUN: plan-opt %s --plan-autodiff --plan-placement="mesh=dp=2,fsdp=1 axes=dp,fsdp" --plan-insert-collectives | FileCheck %s --check-prefix=HSDP

// A mesh axis of one rank takes no part in a conversion: a shard of one is
// the whole tensor and a partial sum of one is the sum.

// Tests that the 1-rank fsdp step (fsdp=1) has no collective and no free:
// every parameter and gradient is used as it is.
// FSDP1-LABEL: func.func @mlp(
// FSDP1-NEXT: %[[V0:[a-z0-9_]+]] = nn.linear %arg0, %arg2
// FSDP1-NEXT: %[[V1:[a-z0-9_]+]] = nn.silu %[[V0]]
// FSDP1-NEXT: %[[V2:[a-z0-9_]+]] = nn.linear %[[V1]], %arg3
// FSDP1-NEXT: %[[V3:[a-z0-9_]+]] = nn.cross_entropy %[[V2]], %arg1
// FSDP1-NEXT: %[[V4:[a-z0-9_]+]] = nn.cross_entropy_grad %[[V2]], %arg1, %arg4
// FSDP1-NEXT: %[[V5:[a-z0-9_]+]] = nn.matmul %[[V4]], %arg3 transpose_rhs
// FSDP1-NEXT: %[[V6:[a-z0-9_]+]] = nn.matmul %[[V1]], %[[V4]] transpose_lhs
// FSDP1-NEXT: %[[V7:[a-z0-9_]+]] = nn.silu_grad %[[V0]], %[[V5]]
// FSDP1-NEXT: %[[V8:[a-z0-9_]+]] = nn.matmul %arg0, %[[V7]] transpose_lhs
// FSDP1-NEXT: return %[[V3]], %[[V8]], %[[V6]] : tensor<f32>, tensor<16x16xf32>, tensor<16x12xf32>

// Tests that HSDP with fsdp=1 (dp=2) keeps the collectives of the dp axis
// alone: the loss averaged and each gradient summed over dp, nothing gathered
// or scattered over fsdp.
// HSDP-LABEL: func.func @mlp(
// HSDP-NEXT: %[[V0:[a-z0-9_]+]] = nn.linear %arg0, %arg2
// HSDP-NEXT: %[[V1:[a-z0-9_]+]] = nn.silu %[[V0]]
// HSDP-NEXT: %[[V2:[a-z0-9_]+]] = nn.linear %[[V1]], %arg3
// HSDP-NEXT: %[[V3:[a-z0-9_]+]] = nn.cross_entropy %[[V2]], %arg1
// HSDP-NEXT: %[[V4:[a-z0-9_]+]] = dist.all_reduce %[[V3]] on @mesh axes = ["dp"] reduction = avg wire = f32 accum = f32 : tensor<f32> -> tensor<f32>
// HSDP-NEXT: %[[V5:[a-z0-9_]+]] = nn.cross_entropy_grad %[[V2]], %arg1, %arg4
// HSDP-NEXT: %[[V6:[a-z0-9_]+]] = nn.matmul %[[V5]], %arg3 transpose_rhs
// HSDP-NEXT: %[[V7:[a-z0-9_]+]] = nn.matmul %[[V1]], %[[V5]] transpose_lhs
// HSDP-NEXT: %[[V8:[a-z0-9_]+]] = dist.all_reduce %[[V7]] on @mesh axes = ["dp"] reduction = sum wire = f32 accum = f32 : tensor<16x12xf32> -> tensor<16x12xf32>
// HSDP-NEXT: %[[V9:[a-z0-9_]+]] = nn.silu_grad %[[V0]], %[[V6]]
// HSDP-NEXT: %[[V10:[a-z0-9_]+]] = nn.matmul %arg0, %[[V9]] transpose_lhs
// HSDP-NEXT: %[[V11:[a-z0-9_]+]] = dist.all_reduce %[[V10]] on @mesh axes = ["dp"] reduction = sum wire = f32 accum = f32 : tensor<16x16xf32> -> tensor<16x16xf32>
// HSDP-NEXT: return %[[V4]], %[[V11]], %[[V8]] : tensor<f32>, tensor<16x16xf32>, tensor<16x12xf32>
func.func @mlp(%x: tensor<8x16xf32>, %labels: tensor<8xi32>,
    %w1: tensor<16x16xf32> {nn.param, nn.name = "fc1.weight"},
    %w2: tensor<16x12xf32> {nn.param, nn.name = "head.weight"}) -> tensor<f32> {
  %h = nn.linear %x, %w1 : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
  %a = nn.silu %h : (tensor<8x16xf32>) -> tensor<8x16xf32>
  %y = nn.linear %a, %w2 : (tensor<8x16xf32>, tensor<16x12xf32>) -> tensor<8x12xf32>
  %l = nn.cross_entropy %y, %labels : (tensor<8x12xf32>, tensor<8xi32>) -> tensor<f32>
  return %l : tensor<f32>
}
