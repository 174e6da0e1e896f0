// RUN: plan-opt %s --plan-autodiff --plan-placement="mesh=fsdp=4 axes=fsdp" --plan-insert-collectives="grad-reduce-dtype=f32" --plan-bucketing | FileCheck %s --check-prefix=FSDP
// RUN: plan-opt %s --plan-autodiff --plan-placement="mesh=dp=2,fsdp=2 axes=dp,fsdp" --plan-insert-collectives="grad-reduce-dtype=f32" --plan-bucketing | FileCheck %s --check-prefix=HSDP
// RUN: plan-opt %s --plan-autodiff --plan-placement="mesh=fsdp=4 axes=fsdp" --plan-insert-collectives="grad-reduce-dtype=f32" --plan-bucketing --plan-schedule --plan-verify-spmd | FileCheck %s --check-prefix=ASYNC

// plan-bucketing after plan-insert-collectives with grad-reduce-dtype=f32 on
// a bf16 2-unit MLP: each unit's bf16 gradients are packed into one bf16
// bucket, reduce-scattered into an f32 shard (then all-reduced in f32 over
// dp under HSDP) and unbucketed into f32 gradient shards. The parameter
// gathers stay bf16. plan-schedule then starts the reduce-scatters with
// futures of the f32 shard.

// Tests the gradient buckets under fsdp=4.
// FSDP-LABEL: func.func @mlp(
// FSDP-SAME: -> (tensor<f32> {{.*}}, tensor<4x16xf32> {{.*}}, tensor<4x16xf32> {{.*}}, tensor<4x16xf32> {{.*}}, tensor<4x12xf32> {{.*}})
// FSDP: dist.all_gather %{{[0-9]+}} on @mesh axes = ["fsdp"] gather_dim = 0 wire = bf16 : tensor<128xbf16> -> tensor<512xbf16>
// FSDP: %[[B1:[0-9]+]] = dist.bucket %{{[0-9]+}}, %{{[0-9]+}} offsets = [0, 48] chunks = 4 : tensor<16x12xbf16>, tensor<16x16xbf16> -> tensor<448xbf16>
// FSDP-NEXT: %[[R1:[0-9]+]] = dist.reduce_scatter %[[B1]] on @mesh axes = ["fsdp"] scatter_dim = 0 reduction = sum wire = f32 accum = f32 : tensor<448xbf16> -> tensor<112xf32>
// FSDP-NEXT: dist.free %[[B1]] : tensor<448xbf16>
// FSDP-NEXT: %[[U1:[0-9]+]]:2 = dist.unbucket %[[R1]] offsets = [0, 48] : tensor<112xf32> -> tensor<4x12xf32>, tensor<4x16xf32>
// FSDP: %[[B0:[0-9]+]] = dist.bucket %{{[0-9]+}}, %{{[0-9]+}} offsets = [0, 64] chunks = 4 : tensor<16x16xbf16>, tensor<16x16xbf16> -> tensor<512xbf16>
// FSDP-NEXT: %[[R0:[0-9]+]] = dist.reduce_scatter %[[B0]] on @mesh axes = ["fsdp"] scatter_dim = 0 reduction = sum wire = f32 accum = f32 : tensor<512xbf16> -> tensor<128xf32>
// FSDP-NEXT: dist.free %[[B0]] : tensor<512xbf16>
// FSDP-NEXT: %[[U0:[0-9]+]]:2 = dist.unbucket %[[R0]] offsets = [0, 64] : tensor<128xf32> -> tensor<4x16xf32>, tensor<4x16xf32>
// FSDP-NEXT: return %{{[0-9]+}}, %[[U0]]#1, %[[U0]]#0, %[[U1]]#1, %[[U1]]#0 : tensor<f32>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x12xf32>

// Tests HSDP (dp=2 x fsdp=2): the bucket's f32 shard is all-reduced over dp
// in f32 before it is unbucketed.
// HSDP-LABEL: func.func @mlp(
// HSDP: %[[B1:[0-9]+]] = dist.bucket %{{[0-9]+}}, %{{[0-9]+}} offsets = [0, 96] chunks = 2 : tensor<16x12xbf16>, tensor<16x16xbf16> -> tensor<448xbf16>
// HSDP-NEXT: %[[R1:[0-9]+]] = dist.reduce_scatter %[[B1]] on @mesh axes = ["fsdp"] scatter_dim = 0 reduction = sum wire = f32 accum = f32 : tensor<448xbf16> -> tensor<224xf32>
// HSDP-NEXT: dist.free %[[B1]] : tensor<448xbf16>
// HSDP-NEXT: %[[A1:[0-9]+]] = dist.all_reduce %[[R1]] on @mesh axes = ["dp"] reduction = sum wire = f32 accum = f32 : tensor<224xf32> -> tensor<224xf32>
// HSDP-NEXT: dist.unbucket %[[A1]] offsets = [0, 96] : tensor<224xf32> -> tensor<8x12xf32>, tensor<8x16xf32>
// HSDP: return %{{.*}} : tensor<f32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x12xf32>

// Tests that plan-schedule's async reduce-scatters carry the f32 shard.
// ASYNC-LABEL: func.func @mlp(
// ASYNC: %[[F1:[0-9]+]] = dist.reduce_scatter_start %{{[0-9]+}} on @mesh axes = ["fsdp"] scatter_dim = 0 reduction = sum wire = f32 accum = f32 : tensor<448xbf16> -> !dist.future<tensor<112xf32>>
// ASYNC: %[[W1:[0-9]+]] = dist.wait %[[F1]] : !dist.future<tensor<112xf32>>
// ASYNC: dist.unbucket %[[W1]] offsets = [0, 48] : tensor<112xf32> -> tensor<4x12xf32>, tensor<4x16xf32>
// ASYNC: %[[F0:[0-9]+]] = dist.reduce_scatter_start %{{[0-9]+}} on @mesh axes = ["fsdp"] scatter_dim = 0 reduction = sum wire = f32 accum = f32 : tensor<512xbf16> -> !dist.future<tensor<128xf32>>
// ASYNC: dist.wait %[[F0]] : !dist.future<tensor<128xf32>>
// ASYNC: return %{{.*}} : tensor<f32>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x12xf32>
func.func @mlp(%x: tensor<8x16xbf16>, %labels: tensor<8xi32>,
    %w0a: tensor<16x16xbf16> {nn.param, nn.name = "layers.0.fc1.weight"},
    %w0b: tensor<16x16xbf16> {nn.param, nn.name = "layers.0.fc2.weight"},
    %w1a: tensor<16x16xbf16> {nn.param, nn.name = "layers.1.fc1.weight"},
    %w1b: tensor<16x12xbf16> {nn.param, nn.name = "layers.1.fc2.weight"}) -> tensor<f32> {
  %h0 = nn.linear %x, %w0a : (tensor<8x16xbf16>, tensor<16x16xbf16>) -> tensor<8x16xbf16>
  %a0 = nn.silu %h0 : (tensor<8x16xbf16>) -> tensor<8x16xbf16>
  %h1 = nn.linear %a0, %w0b : (tensor<8x16xbf16>, tensor<16x16xbf16>) -> tensor<8x16xbf16>
  %a1 = nn.silu %h1 : (tensor<8x16xbf16>) -> tensor<8x16xbf16>
  %h2 = nn.linear %a1, %w1a : (tensor<8x16xbf16>, tensor<16x16xbf16>) -> tensor<8x16xbf16>
  %a2 = nn.silu %h2 : (tensor<8x16xbf16>) -> tensor<8x16xbf16>
  %y = nn.linear %a2, %w1b : (tensor<8x16xbf16>, tensor<16x12xbf16>) -> tensor<8x12xbf16>
  %l = nn.cross_entropy %y, %labels : (tensor<8x12xbf16>, tensor<8xi32>) -> tensor<f32>
  return %l : tensor<f32>
}
