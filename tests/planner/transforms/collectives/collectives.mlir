// RUN: plan-opt %s -split-input-file --plan-insert-collectives | FileCheck %s

// Inputs are plan-placement output (MLP steps from plan-autodiff); the CHECK
// lines pin every op of the result, so no collective can be added, dropped
// or reordered unnoticed.

dist.mesh @mesh shape = [2] axes = ["fsdp"] {dist.strategies = ["fsdp"]}

// Tests that an MLP step under fsdp=2 gathers each parameter before its first
// forward use and again before its first backward use (fc1's weight has none),
// frees every gathered copy after its last use in the pass, all-reduces the
// loss (avg) and reduce-scatters each gradient right after it is final.
// Arguments keep their global shape in dist.global_shape.
// CHECK-LABEL: func.func @fsdp_step(
// CHECK-SAME: %arg0: tensor<4x16xf32> {dist.global_shape = array<i64: 8, 16>, dist.placement = #dist.placement<@mesh, [shard<0>]>}
// CHECK-SAME: %arg2: tensor<8x16xf32> {dist.global_shape = array<i64: 16, 16>, dist.placement = #dist.placement<@mesh, [shard<0>]>, nn.name = "fc1.weight", nn.param}
// CHECK-SAME: -> (tensor<f32> {dist.placement = #dist.placement<@mesh, [replicate]>}, tensor<8x16xf32> {dist.placement = #dist.placement<@mesh, [shard<0>]>, nn.grad_of = 2 : i64, nn.name = "fc1.weight"}
// CHECK-NEXT: %[[V0:[a-z0-9_]+]] = dist.all_gather %arg2 on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<8x16xf32> -> tensor<16x16xf32>
// CHECK-NEXT: %[[V1:[a-z0-9_]+]] = nn.linear %arg0, %[[V0]]
// CHECK-NEXT: dist.free %[[V0]] : tensor<16x16xf32>
// CHECK-NEXT: %[[V2:[a-z0-9_]+]] = nn.silu %[[V1]]
// CHECK-NEXT: %[[V3:[a-z0-9_]+]] = dist.all_gather %arg3 on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<8x12xf32> -> tensor<16x12xf32>
// CHECK-NEXT: %[[V4:[a-z0-9_]+]] = nn.linear %[[V2]], %[[V3]]
// CHECK-NEXT: dist.free %[[V3]] : tensor<16x12xf32>
// CHECK-NEXT: %[[V5:[a-z0-9_]+]] = nn.cross_entropy %[[V4]], %arg1
// CHECK-NEXT: %[[V6:[a-z0-9_]+]] = dist.all_reduce %[[V5]] on @mesh axes = ["fsdp"] reduction = avg wire = f32 accum = f32 : tensor<f32> -> tensor<f32>
// CHECK-NEXT: %[[V7:[a-z0-9_]+]] = nn.cross_entropy_grad %[[V4]], %arg1, %arg4
// CHECK-NEXT: %[[V8:[a-z0-9_]+]] = dist.all_gather %arg3 on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<8x12xf32> -> tensor<16x12xf32>
// CHECK-NEXT: %[[V9:[a-z0-9_]+]] = nn.matmul %[[V7]], %[[V8]] transpose_rhs
// CHECK-NEXT: dist.free %[[V8]] : tensor<16x12xf32>
// CHECK-NEXT: %[[V10:[a-z0-9_]+]] = nn.matmul %[[V2]], %[[V7]] transpose_lhs
// CHECK-NEXT: %[[V11:[a-z0-9_]+]] = dist.reduce_scatter %[[V10]] on @mesh axes = ["fsdp"] scatter_dim = 0 reduction = sum wire = f32 accum = f32 : tensor<16x12xf32> -> tensor<8x12xf32>
// CHECK-NEXT: %[[V12:[a-z0-9_]+]] = nn.silu_grad %[[V1]], %[[V9]]
// CHECK-NEXT: %[[V13:[a-z0-9_]+]] = nn.matmul %arg0, %[[V12]] transpose_lhs
// CHECK-NEXT: %[[V14:[a-z0-9_]+]] = dist.reduce_scatter %[[V13]] on @mesh axes = ["fsdp"] scatter_dim = 0 reduction = sum wire = f32 accum = f32 : tensor<16x16xf32> -> tensor<8x16xf32>
// CHECK-NEXT: return %[[V6]], %[[V14]], %[[V11]] : tensor<f32>, tensor<8x16xf32>, tensor<8x12xf32>
func.func @fsdp_step(%arg0: tensor<8x16xf32> {dist.placement = #dist.placement<@mesh, [shard<0>]>}, %arg1: tensor<8xi32> {dist.placement = #dist.placement<@mesh, [shard<0>]>}, %arg2: tensor<16x16xf32> {dist.placement = #dist.placement<@mesh, [shard<0>]>, nn.name = "fc1.weight", nn.param}, %arg3: tensor<16x12xf32> {dist.placement = #dist.placement<@mesh, [shard<0>]>, nn.name = "head.weight", nn.param}, %arg4: tensor<f32> {dist.placement = #dist.placement<@mesh, [replicate]>}) -> (tensor<f32> {dist.placement = #dist.placement<@mesh, [replicate]>}, tensor<16x16xf32> {dist.placement = #dist.placement<@mesh, [shard<0>]>, nn.grad_of = 2 : i64, nn.name = "fc1.weight"}, tensor<16x12xf32> {dist.placement = #dist.placement<@mesh, [shard<0>]>, nn.grad_of = 3 : i64, nn.name = "head.weight"}) attributes {nn.loss_grad_arg = 4 : i64} {
  %0 = nn.linear %arg0, %arg2 {dist.operand_placements = [#dist.placement<@mesh, [shard<0>]>, #dist.placement<@mesh, [replicate]>], dist.result_placements = [#dist.placement<@mesh, [shard<0>]>]} : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
  %1 = nn.silu %0 {dist.operand_placements = [#dist.placement<@mesh, [shard<0>]>], dist.result_placements = [#dist.placement<@mesh, [shard<0>]>]} : (tensor<8x16xf32>) -> tensor<8x16xf32>
  %2 = nn.linear %1, %arg3 {dist.operand_placements = [#dist.placement<@mesh, [shard<0>]>, #dist.placement<@mesh, [replicate]>], dist.result_placements = [#dist.placement<@mesh, [shard<0>]>]} : (tensor<8x16xf32>, tensor<16x12xf32>) -> tensor<8x12xf32>
  %3 = nn.cross_entropy %2, %arg1 {dist.operand_placements = [#dist.placement<@mesh, [shard<0>]>, #dist.placement<@mesh, [shard<0>]>], dist.result_placements = [#dist.placement<@mesh, [partial<avg>]>]} : (tensor<8x12xf32>, tensor<8xi32>) -> tensor<f32>
  %4 = nn.cross_entropy_grad %2, %arg1, %arg4 scale 1.250000e-01 {dist.operand_placements = [#dist.placement<@mesh, [shard<0>]>, #dist.placement<@mesh, [shard<0>]>, #dist.placement<@mesh, [replicate]>], dist.result_placements = [#dist.placement<@mesh, [shard<0>]>]} : (tensor<8x12xf32>, tensor<8xi32>, tensor<f32>) -> tensor<8x12xf32>
  %5 = nn.matmul %4, %arg3 transpose_rhs {dist.operand_placements = [#dist.placement<@mesh, [shard<0>]>, #dist.placement<@mesh, [replicate]>], dist.result_placements = [#dist.placement<@mesh, [shard<0>]>]} : (tensor<8x12xf32>, tensor<16x12xf32>) -> tensor<8x16xf32>
  %6 = nn.matmul %1, %4 transpose_lhs {dist.operand_placements = [#dist.placement<@mesh, [shard<0>]>, #dist.placement<@mesh, [shard<0>]>], dist.result_placements = [#dist.placement<@mesh, [partial<sum>]>]} : (tensor<8x16xf32>, tensor<8x12xf32>) -> tensor<16x12xf32>
  %7 = nn.silu_grad %0, %5 {dist.operand_placements = [#dist.placement<@mesh, [shard<0>]>, #dist.placement<@mesh, [shard<0>]>], dist.result_placements = [#dist.placement<@mesh, [shard<0>]>]} : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  %8 = nn.matmul %arg0, %7 transpose_lhs {dist.operand_placements = [#dist.placement<@mesh, [shard<0>]>, #dist.placement<@mesh, [shard<0>]>], dist.result_placements = [#dist.placement<@mesh, [partial<sum>]>]} : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<16x16xf32>
  return %3, %8, %6 : tensor<f32>, tensor<16x16xf32>, tensor<16x12xf32>
}

// -----

dist.mesh @mesh shape = [4] axes = ["fsdp"] {dist.strategies = ["fsdp"]}

// Tests that an uneven parameter (10 rows over 4 ranks) is gathered and its
// gradient reduce-scattered with `padded`, from and to its 3-row local shard.
// CHECK-LABEL: func.func @padded_step(
// CHECK-NEXT: %[[V0:[a-z0-9_]+]] = dist.all_gather %arg2 on @mesh axes = ["fsdp"] gather_dim = 0 padded wire = f32 : tensor<3x16xf32> -> tensor<10x16xf32>
// CHECK-NEXT: %[[V1:[a-z0-9_]+]] = nn.linear %arg0, %[[V0]]
// CHECK-NEXT: dist.free %[[V0]] : tensor<10x16xf32>
// CHECK-NEXT: %[[V2:[a-z0-9_]+]] = nn.silu %[[V1]]
// CHECK-NEXT: %[[V3:[a-z0-9_]+]] = dist.all_gather %arg3 on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<4x12xf32> -> tensor<16x12xf32>
// CHECK-NEXT: %[[V4:[a-z0-9_]+]] = nn.linear %[[V2]], %[[V3]]
// CHECK-NEXT: dist.free %[[V3]] : tensor<16x12xf32>
// CHECK-NEXT: %[[V5:[a-z0-9_]+]] = nn.cross_entropy %[[V4]], %arg1
// CHECK-NEXT: %[[V6:[a-z0-9_]+]] = dist.all_reduce %[[V5]] on @mesh axes = ["fsdp"] reduction = avg wire = f32 accum = f32 : tensor<f32> -> tensor<f32>
// CHECK-NEXT: %[[V7:[a-z0-9_]+]] = nn.cross_entropy_grad %[[V4]], %arg1, %arg4
// CHECK-NEXT: %[[V8:[a-z0-9_]+]] = dist.all_gather %arg3 on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<4x12xf32> -> tensor<16x12xf32>
// CHECK-NEXT: %[[V9:[a-z0-9_]+]] = nn.matmul %[[V7]], %[[V8]] transpose_rhs
// CHECK-NEXT: dist.free %[[V8]] : tensor<16x12xf32>
// CHECK-NEXT: %[[V10:[a-z0-9_]+]] = nn.matmul %[[V2]], %[[V7]] transpose_lhs
// CHECK-NEXT: %[[V11:[a-z0-9_]+]] = dist.reduce_scatter %[[V10]] on @mesh axes = ["fsdp"] scatter_dim = 0 reduction = sum wire = f32 accum = f32 : tensor<16x12xf32> -> tensor<4x12xf32>
// CHECK-NEXT: %[[V12:[a-z0-9_]+]] = nn.silu_grad %[[V1]], %[[V9]]
// CHECK-NEXT: %[[V13:[a-z0-9_]+]] = nn.matmul %arg0, %[[V12]] transpose_lhs
// CHECK-NEXT: %[[V14:[a-z0-9_]+]] = dist.reduce_scatter %[[V13]] on @mesh axes = ["fsdp"] scatter_dim = 0 padded reduction = sum wire = f32 accum = f32 : tensor<10x16xf32> -> tensor<3x16xf32>
// CHECK-NEXT: return %[[V6]], %[[V14]], %[[V11]] : tensor<f32>, tensor<3x16xf32>, tensor<4x12xf32>
func.func @padded_step(%arg0: tensor<8x10xf32> {dist.placement = #dist.placement<@mesh, [shard<0>]>}, %arg1: tensor<8xi32> {dist.placement = #dist.placement<@mesh, [shard<0>]>}, %arg2: tensor<10x16xf32> {dist.placement = #dist.placement<@mesh, [shard<0, padded>]>, nn.name = "fc1.weight", nn.param}, %arg3: tensor<16x12xf32> {dist.placement = #dist.placement<@mesh, [shard<0>]>, nn.name = "head.weight", nn.param}, %arg4: tensor<f32> {dist.placement = #dist.placement<@mesh, [replicate]>}) -> (tensor<f32> {dist.placement = #dist.placement<@mesh, [replicate]>}, tensor<10x16xf32> {dist.placement = #dist.placement<@mesh, [shard<0, padded>]>, nn.grad_of = 2 : i64, nn.name = "fc1.weight"}, tensor<16x12xf32> {dist.placement = #dist.placement<@mesh, [shard<0>]>, nn.grad_of = 3 : i64, nn.name = "head.weight"}) attributes {nn.loss_grad_arg = 4 : i64} {
  %0 = nn.linear %arg0, %arg2 {dist.operand_placements = [#dist.placement<@mesh, [shard<0>]>, #dist.placement<@mesh, [replicate]>], dist.result_placements = [#dist.placement<@mesh, [shard<0>]>]} : (tensor<8x10xf32>, tensor<10x16xf32>) -> tensor<8x16xf32>
  %1 = nn.silu %0 {dist.operand_placements = [#dist.placement<@mesh, [shard<0>]>], dist.result_placements = [#dist.placement<@mesh, [shard<0>]>]} : (tensor<8x16xf32>) -> tensor<8x16xf32>
  %2 = nn.linear %1, %arg3 {dist.operand_placements = [#dist.placement<@mesh, [shard<0>]>, #dist.placement<@mesh, [replicate]>], dist.result_placements = [#dist.placement<@mesh, [shard<0>]>]} : (tensor<8x16xf32>, tensor<16x12xf32>) -> tensor<8x12xf32>
  %3 = nn.cross_entropy %2, %arg1 {dist.operand_placements = [#dist.placement<@mesh, [shard<0>]>, #dist.placement<@mesh, [shard<0>]>], dist.result_placements = [#dist.placement<@mesh, [partial<avg>]>]} : (tensor<8x12xf32>, tensor<8xi32>) -> tensor<f32>
  %4 = nn.cross_entropy_grad %2, %arg1, %arg4 scale 1.250000e-01 {dist.operand_placements = [#dist.placement<@mesh, [shard<0>]>, #dist.placement<@mesh, [shard<0>]>, #dist.placement<@mesh, [replicate]>], dist.result_placements = [#dist.placement<@mesh, [shard<0>]>]} : (tensor<8x12xf32>, tensor<8xi32>, tensor<f32>) -> tensor<8x12xf32>
  %5 = nn.matmul %4, %arg3 transpose_rhs {dist.operand_placements = [#dist.placement<@mesh, [shard<0>]>, #dist.placement<@mesh, [replicate]>], dist.result_placements = [#dist.placement<@mesh, [shard<0>]>]} : (tensor<8x12xf32>, tensor<16x12xf32>) -> tensor<8x16xf32>
  %6 = nn.matmul %1, %4 transpose_lhs {dist.operand_placements = [#dist.placement<@mesh, [shard<0>]>, #dist.placement<@mesh, [shard<0>]>], dist.result_placements = [#dist.placement<@mesh, [partial<sum>]>]} : (tensor<8x16xf32>, tensor<8x12xf32>) -> tensor<16x12xf32>
  %7 = nn.silu_grad %0, %5 {dist.operand_placements = [#dist.placement<@mesh, [shard<0>]>, #dist.placement<@mesh, [shard<0>]>], dist.result_placements = [#dist.placement<@mesh, [shard<0>]>]} : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  %8 = nn.matmul %arg0, %7 transpose_lhs {dist.operand_placements = [#dist.placement<@mesh, [shard<0>]>, #dist.placement<@mesh, [shard<0>]>], dist.result_placements = [#dist.placement<@mesh, [partial<sum>]>]} : (tensor<8x10xf32>, tensor<8x16xf32>) -> tensor<10x16xf32>
  return %3, %8, %6 : tensor<f32>, tensor<10x16xf32>, tensor<16x12xf32>
}

// -----

dist.mesh @mesh shape = [2, 2] axes = ["dp", "fsdp"] {dist.strategies = ["dp", "fsdp"]}

// Tests that under HSDP (dp=2 x fsdp=2) a gradient is reduce-scattered over
// fsdp, then all-reduced over dp on the shard, and the loss averaged over both
// axes at once.
// CHECK-LABEL: func.func @hsdp_step(
// CHECK-NEXT: %[[V0:[a-z0-9_]+]] = dist.all_gather %arg2 on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<8x16xf32> -> tensor<16x16xf32>
// CHECK-NEXT: %[[V1:[a-z0-9_]+]] = nn.linear %arg0, %[[V0]]
// CHECK-NEXT: dist.free %[[V0]] : tensor<16x16xf32>
// CHECK-NEXT: %[[V2:[a-z0-9_]+]] = nn.silu %[[V1]]
// CHECK-NEXT: %[[V3:[a-z0-9_]+]] = dist.all_gather %arg3 on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<8x12xf32> -> tensor<16x12xf32>
// CHECK-NEXT: %[[V4:[a-z0-9_]+]] = nn.linear %[[V2]], %[[V3]]
// CHECK-NEXT: dist.free %[[V3]] : tensor<16x12xf32>
// CHECK-NEXT: %[[V5:[a-z0-9_]+]] = nn.cross_entropy %[[V4]], %arg1
// CHECK-NEXT: %[[V6:[a-z0-9_]+]] = dist.all_reduce %[[V5]] on @mesh axes = ["dp", "fsdp"] reduction = avg wire = f32 accum = f32 : tensor<f32> -> tensor<f32>
// CHECK-NEXT: %[[V7:[a-z0-9_]+]] = nn.cross_entropy_grad %[[V4]], %arg1, %arg4
// CHECK-NEXT: %[[V8:[a-z0-9_]+]] = dist.all_gather %arg3 on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<8x12xf32> -> tensor<16x12xf32>
// CHECK-NEXT: %[[V9:[a-z0-9_]+]] = nn.matmul %[[V7]], %[[V8]] transpose_rhs
// CHECK-NEXT: dist.free %[[V8]] : tensor<16x12xf32>
// CHECK-NEXT: %[[V10:[a-z0-9_]+]] = nn.matmul %[[V2]], %[[V7]] transpose_lhs
// CHECK-NEXT: %[[V11:[a-z0-9_]+]] = dist.reduce_scatter %[[V10]] on @mesh axes = ["fsdp"] scatter_dim = 0 reduction = sum wire = f32 accum = f32 : tensor<16x12xf32> -> tensor<8x12xf32>
// CHECK-NEXT: %[[V12:[a-z0-9_]+]] = dist.all_reduce %[[V11]] on @mesh axes = ["dp"] reduction = sum wire = f32 accum = f32 : tensor<8x12xf32> -> tensor<8x12xf32>
// CHECK-NEXT: %[[V13:[a-z0-9_]+]] = nn.silu_grad %[[V1]], %[[V9]]
// CHECK-NEXT: %[[V14:[a-z0-9_]+]] = nn.matmul %arg0, %[[V13]] transpose_lhs
// CHECK-NEXT: %[[V15:[a-z0-9_]+]] = dist.reduce_scatter %[[V14]] on @mesh axes = ["fsdp"] scatter_dim = 0 reduction = sum wire = f32 accum = f32 : tensor<16x16xf32> -> tensor<8x16xf32>
// CHECK-NEXT: %[[V16:[a-z0-9_]+]] = dist.all_reduce %[[V15]] on @mesh axes = ["dp"] reduction = sum wire = f32 accum = f32 : tensor<8x16xf32> -> tensor<8x16xf32>
// CHECK-NEXT: return %[[V6]], %[[V16]], %[[V12]] : tensor<f32>, tensor<8x16xf32>, tensor<8x12xf32>
func.func @hsdp_step(%arg0: tensor<8x16xf32> {dist.placement = #dist.placement<@mesh, [shard<0>, shard<0>]>}, %arg1: tensor<8xi32> {dist.placement = #dist.placement<@mesh, [shard<0>, shard<0>]>}, %arg2: tensor<16x16xf32> {dist.placement = #dist.placement<@mesh, [replicate, shard<0>]>, nn.name = "fc1.weight", nn.param}, %arg3: tensor<16x12xf32> {dist.placement = #dist.placement<@mesh, [replicate, shard<0>]>, nn.name = "head.weight", nn.param}, %arg4: tensor<f32> {dist.placement = #dist.placement<@mesh, [replicate, replicate]>}) -> (tensor<f32> {dist.placement = #dist.placement<@mesh, [replicate, replicate]>}, tensor<16x16xf32> {dist.placement = #dist.placement<@mesh, [replicate, shard<0>]>, nn.grad_of = 2 : i64, nn.name = "fc1.weight"}, tensor<16x12xf32> {dist.placement = #dist.placement<@mesh, [replicate, shard<0>]>, nn.grad_of = 3 : i64, nn.name = "head.weight"}) attributes {nn.loss_grad_arg = 4 : i64} {
  %0 = nn.linear %arg0, %arg2 {dist.operand_placements = [#dist.placement<@mesh, [shard<0>, shard<0>]>, #dist.placement<@mesh, [replicate, replicate]>], dist.result_placements = [#dist.placement<@mesh, [shard<0>, shard<0>]>]} : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
  %1 = nn.silu %0 {dist.operand_placements = [#dist.placement<@mesh, [shard<0>, shard<0>]>], dist.result_placements = [#dist.placement<@mesh, [shard<0>, shard<0>]>]} : (tensor<8x16xf32>) -> tensor<8x16xf32>
  %2 = nn.linear %1, %arg3 {dist.operand_placements = [#dist.placement<@mesh, [shard<0>, shard<0>]>, #dist.placement<@mesh, [replicate, replicate]>], dist.result_placements = [#dist.placement<@mesh, [shard<0>, shard<0>]>]} : (tensor<8x16xf32>, tensor<16x12xf32>) -> tensor<8x12xf32>
  %3 = nn.cross_entropy %2, %arg1 {dist.operand_placements = [#dist.placement<@mesh, [shard<0>, shard<0>]>, #dist.placement<@mesh, [shard<0>, shard<0>]>], dist.result_placements = [#dist.placement<@mesh, [partial<avg>, partial<avg>]>]} : (tensor<8x12xf32>, tensor<8xi32>) -> tensor<f32>
  %4 = nn.cross_entropy_grad %2, %arg1, %arg4 scale 1.250000e-01 {dist.operand_placements = [#dist.placement<@mesh, [shard<0>, shard<0>]>, #dist.placement<@mesh, [shard<0>, shard<0>]>, #dist.placement<@mesh, [replicate, replicate]>], dist.result_placements = [#dist.placement<@mesh, [shard<0>, shard<0>]>]} : (tensor<8x12xf32>, tensor<8xi32>, tensor<f32>) -> tensor<8x12xf32>
  %5 = nn.matmul %4, %arg3 transpose_rhs {dist.operand_placements = [#dist.placement<@mesh, [shard<0>, shard<0>]>, #dist.placement<@mesh, [replicate, replicate]>], dist.result_placements = [#dist.placement<@mesh, [shard<0>, shard<0>]>]} : (tensor<8x12xf32>, tensor<16x12xf32>) -> tensor<8x16xf32>
  %6 = nn.matmul %1, %4 transpose_lhs {dist.operand_placements = [#dist.placement<@mesh, [shard<0>, shard<0>]>, #dist.placement<@mesh, [shard<0>, shard<0>]>], dist.result_placements = [#dist.placement<@mesh, [partial<sum>, partial<sum>]>]} : (tensor<8x16xf32>, tensor<8x12xf32>) -> tensor<16x12xf32>
  %7 = nn.silu_grad %0, %5 {dist.operand_placements = [#dist.placement<@mesh, [shard<0>, shard<0>]>, #dist.placement<@mesh, [shard<0>, shard<0>]>], dist.result_placements = [#dist.placement<@mesh, [shard<0>, shard<0>]>]} : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  %8 = nn.matmul %arg0, %7 transpose_lhs {dist.operand_placements = [#dist.placement<@mesh, [shard<0>, shard<0>]>, #dist.placement<@mesh, [shard<0>, shard<0>]>], dist.result_placements = [#dist.placement<@mesh, [partial<sum>, partial<sum>]>]} : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<16x16xf32>
  return %3, %8, %6 : tensor<f32>, tensor<16x16xf32>, tensor<16x12xf32>
}

// -----

dist.mesh @mesh shape = [2] axes = ["tp"] {dist.strategies = ["tp"]}

// Tests that a Megatron MLP under tp=2 needs one all-reduce, after the
// row-parallel fc2, and none for its tp-stored weights.
// CHECK-LABEL: func.func @tp_forward(
// CHECK-NEXT: %[[V0:[a-z0-9_]+]] = nn.linear %arg0, %arg2
// CHECK-NEXT: %[[V1:[a-z0-9_]+]] = nn.silu %[[V0]]
// CHECK-NEXT: %[[V2:[a-z0-9_]+]] = nn.linear %[[V1]], %arg3
// CHECK-NEXT: %[[V3:[a-z0-9_]+]] = dist.all_reduce %[[V2]] on @mesh axes = ["tp"] reduction = sum wire = f32 accum = f32 : tensor<8x12xf32> -> tensor<8x12xf32>
// CHECK-NEXT: %[[V4:[a-z0-9_]+]] = nn.cross_entropy %[[V3]], %arg1
// CHECK-NEXT: return %[[V4]] : tensor<f32>
func.func @tp_forward(%arg0: tensor<8x16xf32> {dist.placement = #dist.placement<@mesh, [replicate]>}, %arg1: tensor<8xi32> {dist.placement = #dist.placement<@mesh, [replicate]>}, %arg2: tensor<16x16xf32> {dist.placement = #dist.placement<@mesh, [shard<1>]>, nn.name = "fc1.weight", nn.param}, %arg3: tensor<16x12xf32> {dist.placement = #dist.placement<@mesh, [shard<0>]>, nn.name = "head.weight", nn.param}) -> (tensor<f32> {dist.placement = #dist.placement<@mesh, [replicate]>}) {
  %0 = nn.linear %arg0, %arg2 {dist.operand_placements = [#dist.placement<@mesh, [replicate]>, #dist.placement<@mesh, [shard<1>]>], dist.result_placements = [#dist.placement<@mesh, [shard<1>]>]} : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
  %1 = nn.silu %0 {dist.operand_placements = [#dist.placement<@mesh, [shard<1>]>], dist.result_placements = [#dist.placement<@mesh, [shard<1>]>]} : (tensor<8x16xf32>) -> tensor<8x16xf32>
  %2 = nn.linear %1, %arg3 {dist.operand_placements = [#dist.placement<@mesh, [shard<1>]>, #dist.placement<@mesh, [shard<0>]>], dist.result_placements = [#dist.placement<@mesh, [partial<sum>]>]} : (tensor<8x16xf32>, tensor<16x12xf32>) -> tensor<8x12xf32>
  %3 = nn.cross_entropy %2, %arg1 {dist.operand_placements = [#dist.placement<@mesh, [replicate]>, #dist.placement<@mesh, [replicate]>], dist.result_placements = [#dist.placement<@mesh, [replicate]>]} : (tensor<8x12xf32>, tensor<8xi32>) -> tensor<f32>
  return %3 : tensor<f32>
}

// -----

dist.mesh @mesh shape = [2, 2] axes = ["a", "b"]

// Tests where the slice (replicate -> shard) goes in a conversion: first when
// the collectives allow it, so the all-reduce moves half the rows; after the
// reduce-scatter that shards the same dim on the earlier axis "a"; after the
// gather that takes "a" off the dim; and padded when the dim does not divide.
// CHECK-LABEL: func.func @slices(
// CHECK-NEXT: %[[V0:[a-z0-9_]+]] = dist.slice %arg0 on @mesh axes = ["b"] slice_dim = 1 : tensor<8x16xf32> -> tensor<8x8xf32>
// CHECK-NEXT: %[[V1:[a-z0-9_]+]] = dist.all_reduce %[[V0]] on @mesh axes = ["a"] reduction = sum wire = f32 accum = f32 : tensor<8x8xf32> -> tensor<8x8xf32>
// CHECK-NEXT: %[[V2:[a-z0-9_]+]] = nn.silu %[[V1]]
// CHECK-NEXT: %[[V3:[a-z0-9_]+]] = dist.reduce_scatter %arg0 on @mesh axes = ["a"] scatter_dim = 0 reduction = sum wire = f32 accum = f32 : tensor<8x16xf32> -> tensor<4x16xf32>
// CHECK-NEXT: %[[V4:[a-z0-9_]+]] = dist.slice %[[V3]] on @mesh axes = ["b"] slice_dim = 0 : tensor<4x16xf32> -> tensor<2x16xf32>
// CHECK-NEXT: %[[V5:[a-z0-9_]+]] = nn.gelu %[[V4]]
// CHECK-NEXT: %[[V6:[a-z0-9_]+]] = dist.all_gather %arg1 on @mesh axes = ["a"] gather_dim = 0 wire = f32 : tensor<4x16xf32> -> tensor<8x16xf32>
// CHECK-NEXT: %[[V7:[a-z0-9_]+]] = dist.slice %[[V6]] on @mesh axes = ["b"] slice_dim = 0 : tensor<8x16xf32> -> tensor<4x16xf32>
// CHECK-NEXT: %[[V8:[a-z0-9_]+]] = nn.silu %[[V7]]
// CHECK-NEXT: %[[V9:[a-z0-9_]+]] = dist.slice %arg2 on @mesh axes = ["a", "b"] slice_dim = 0 padded : tensor<10x16xf32> -> tensor<3x16xf32>
// CHECK-NEXT: %[[V10:[a-z0-9_]+]] = nn.gelu %[[V9]]
// CHECK-NEXT: return %[[V2]], %[[V5]], %[[V8]], %[[V10]] : tensor<8x8xf32>, tensor<2x16xf32>, tensor<4x16xf32>, tensor<3x16xf32>
func.func @slices(%arg0: tensor<8x16xf32> {dist.placement = #dist.placement<@mesh, [partial<sum>, replicate]>}, %arg1: tensor<8x16xf32> {dist.placement = #dist.placement<@mesh, [shard<0>, replicate]>}, %arg2: tensor<10x16xf32> {dist.placement = #dist.placement<@mesh, [replicate, replicate]>})
    -> (tensor<8x16xf32> {dist.placement = #dist.placement<@mesh, [replicate, shard<1>]>}, tensor<8x16xf32> {dist.placement = #dist.placement<@mesh, [shard<0>, shard<0>]>}, tensor<8x16xf32> {dist.placement = #dist.placement<@mesh, [replicate, shard<0>]>}, tensor<10x16xf32> {dist.placement = #dist.placement<@mesh, [shard<0, padded>, shard<0, padded>]>}) {
  %0 = nn.silu %arg0 {dist.operand_placements = [#dist.placement<@mesh, [replicate, shard<1>]>], dist.result_placements = [#dist.placement<@mesh, [replicate, shard<1>]>]} : (tensor<8x16xf32>) -> tensor<8x16xf32>
  %1 = nn.gelu %arg0 {dist.operand_placements = [#dist.placement<@mesh, [shard<0>, shard<0>]>], dist.result_placements = [#dist.placement<@mesh, [shard<0>, shard<0>]>]} : (tensor<8x16xf32>) -> tensor<8x16xf32>
  %2 = nn.silu %arg1 {dist.operand_placements = [#dist.placement<@mesh, [replicate, shard<0>]>], dist.result_placements = [#dist.placement<@mesh, [replicate, shard<0>]>]} : (tensor<8x16xf32>) -> tensor<8x16xf32>
  %3 = nn.gelu %arg2 {dist.operand_placements = [#dist.placement<@mesh, [shard<0, padded>, shard<0, padded>]>], dist.result_placements = [#dist.placement<@mesh, [shard<0, padded>, shard<0, padded>]>]} : (tensor<10x16xf32>) -> tensor<10x16xf32>
  return %0, %1, %2, %3 : tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<10x16xf32>
}
