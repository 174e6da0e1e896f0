// RUN: plan-opt %s --plan-bucketing | FileCheck %s

// plan-bucketing keys gradient buckets by the input and the result element
// types: under grad-reduce-dtype=f32 a bf16 and an f32 gradient both
// reduce-scatter into f32 shards with the same wire and accumulation types,
// but one flat buffer holds one type, so they must not share a bucket.

dist.mesh @mesh shape = [2] axes = ["fsdp"] {dist.strategies = ["fsdp"]}

// Tests that the two bf16 gradients of unit layers.0 share a bf16 bucket
// reduced into f32, and the f32 gradient keeps its own reduce-scatter.
// CHECK-LABEL: func.func @mixed(
// CHECK-NEXT: %[[C:[0-9]+]] = dist.reduce_scatter %arg1 on @mesh axes = ["fsdp"] scatter_dim = 0 reduction = sum wire = f32 accum = f32 : tensor<16x4xf32> -> tensor<8x4xf32>
// CHECK-NEXT: %[[B:[0-9]+]] = dist.bucket %arg0, %arg2 offsets = [0, 32] chunks = 2 : tensor<16x4xbf16>, tensor<16x4xbf16> -> tensor<128xbf16>
// CHECK-NEXT: %[[R:[0-9]+]] = dist.reduce_scatter %[[B]] on @mesh axes = ["fsdp"] scatter_dim = 0 reduction = sum wire = f32 accum = f32 : tensor<128xbf16> -> tensor<64xf32>
// CHECK-NEXT: dist.free %[[B]] : tensor<128xbf16>
// CHECK-NEXT: %[[U:[0-9]+]]:2 = dist.unbucket %[[R]] offsets = [0, 32] : tensor<64xf32> -> tensor<8x4xf32>, tensor<8x4xf32>
// CHECK-NEXT: return %[[U]]#0, %[[U]]#1, %[[C]] : tensor<8x4xf32>, tensor<8x4xf32>, tensor<8x4xf32>
func.func @mixed(%ga: tensor<16x4xbf16>, %gc: tensor<16x4xf32>, %gb: tensor<16x4xbf16>,
    %a: tensor<8x4xbf16> {nn.param, nn.name = "layers.0.a.weight"},
    %b: tensor<8x4xbf16> {nn.param, nn.name = "layers.0.b.weight"},
    %c: tensor<8x4xf32> {nn.param, nn.name = "layers.0.c.weight"})
    -> (tensor<8x4xf32> {nn.grad_of = 3 : i64}, tensor<8x4xf32> {nn.grad_of = 4 : i64},
        tensor<8x4xf32> {nn.grad_of = 5 : i64}) {
  %0 = dist.reduce_scatter %ga on @mesh axes = ["fsdp"] scatter_dim = 0 reduction = sum wire = f32 accum = f32 : tensor<16x4xbf16> -> tensor<8x4xf32>
  %1 = dist.reduce_scatter %gc on @mesh axes = ["fsdp"] scatter_dim = 0 reduction = sum wire = f32 accum = f32 : tensor<16x4xf32> -> tensor<8x4xf32>
  %2 = dist.reduce_scatter %gb on @mesh axes = ["fsdp"] scatter_dim = 0 reduction = sum wire = f32 accum = f32 : tensor<16x4xbf16> -> tensor<8x4xf32>
  return %0, %2, %1 : tensor<8x4xf32>, tensor<8x4xf32>, tensor<8x4xf32>
}
