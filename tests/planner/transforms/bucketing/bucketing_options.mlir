// RUN: plan-opt %s --plan-autodiff --plan-placement="mesh=fsdp=4 axes=fsdp" --plan-insert-collectives --plan-bucketing="bucket-mb=0" | FileCheck %s --check-prefix=ONE
// RUN: plan-opt %s --plan-autodiff --plan-placement="mesh=fsdp=4 axes=fsdp" --plan-insert-collectives --plan-bucketing="bucket-mb=1" | FileCheck %s --check-prefix=SPLIT

// bucket-mb caps the gathered (whole) bucket: 0 packs the unit's two 4 MiB
// weights into one bucket, 1 gives each its own collective.

// Tests one bucket per unit and pass with bucket-mb=0, one per weight with 1.
// ONE-LABEL: func.func @unit(
// ONE-NEXT: %[[B:[a-z0-9_]+]] = dist.bucket %arg2, %arg3 offsets = [0, 262144] : tensor<256x1024xf32>, tensor<256x1024xf32> -> tensor<524288xf32>
// ONE-NEXT: %[[G:[a-z0-9_]+]] = dist.all_gather %[[B]] on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<524288xf32> -> tensor<2097152xf32>
// SPLIT-LABEL: func.func @unit(
// SPLIT-NEXT: %[[G0:[a-z0-9_]+]] = dist.all_gather %arg2 on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<256x1024xf32> -> tensor<1024x1024xf32>
// SPLIT-NEXT: nn.linear %arg0, %[[G0]]
// SPLIT-NEXT: dist.free %[[G0]]
// SPLIT-NEXT: %[[A:[a-z0-9_]+]] = nn.silu
// SPLIT-NEXT: %[[G1:[a-z0-9_]+]] = dist.all_gather %arg3 on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<256x1024xf32> -> tensor<1024x1024xf32>
// SPLIT-NOT: dist.bucket
func.func @unit(%x: tensor<8x1024xf32>, %labels: tensor<8xi32>,
    %w0: tensor<1024x1024xf32> {nn.param, nn.name = "layers.0.fc1.weight"},
    %w1: tensor<1024x1024xf32> {nn.param, nn.name = "layers.0.fc2.weight"}) -> tensor<f32> {
  %h = nn.linear %x, %w0 : (tensor<8x1024xf32>, tensor<1024x1024xf32>) -> tensor<8x1024xf32>
  %a = nn.silu %h : (tensor<8x1024xf32>) -> tensor<8x1024xf32>
  %y = nn.linear %a, %w1 : (tensor<8x1024xf32>, tensor<1024x1024xf32>) -> tensor<8x1024xf32>
  %l = nn.cross_entropy %y, %labels : (tensor<8x1024xf32>, tensor<8xi32>) -> tensor<f32>
  return %l : tensor<f32>
}
