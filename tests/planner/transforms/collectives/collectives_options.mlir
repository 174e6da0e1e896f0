// RUN: plan-opt %s --plan-insert-collectives="reshard-after-forward=false" | FileCheck %s --check-prefix=KEEP
// RUN: plan-opt %s --plan-insert-collectives="wire-dtype=bf16" | FileCheck %s --check-prefix=BF16
// RUN: not plan-opt %s --plan-insert-collectives="reduce-dtype=bf16" 2>&1 | FileCheck %s --check-prefix=NARROW
// RUN: not plan-opt %s --plan-insert-collectives="wire-dtype=f8" 2>&1 | FileCheck %s --check-prefix=BADTYPE
// RUN: plan-opt %s --plan-insert-collectives="grad-reduce-dtype=bf16" | FileCheck %s --check-prefix=GRADBF16
// RUN: plan-opt %s --plan-insert-collectives="grad-reduce-dtype=f32" | FileCheck %s --check-prefix=GRADF32
// RUN: not plan-opt %s --plan-insert-collectives="grad-reduce-dtype=f64" 2>&1 | FileCheck %s --check-prefix=BADGRAD

// The options of plan-insert-collectives on the fsdp=2 MLP step of
// collectives.mlir.

dist.mesh @mesh shape = [2] axes = ["fsdp"] {dist.strategies = ["fsdp"]}

// Tests that reshard-after-forward=false gathers head.weight once and keeps the
// copy for the backward pass, freeing it after its last backward use.
// KEEP-LABEL: func.func @fsdp_step(
// KEEP-NEXT: %[[V0:[a-z0-9_]+]] = dist.all_gather %arg2 on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<8x16xf32> -> tensor<16x16xf32>
// KEEP-NEXT: %[[V1:[a-z0-9_]+]] = nn.linear %arg0, %[[V0]]
// KEEP-NEXT: dist.free %[[V0]] : tensor<16x16xf32>
// KEEP-NEXT: %[[V2:[a-z0-9_]+]] = nn.silu %[[V1]]
// KEEP-NEXT: %[[V3:[a-z0-9_]+]] = dist.all_gather %arg3 on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<8x12xf32> -> tensor<16x12xf32>
// KEEP-NEXT: %[[V4:[a-z0-9_]+]] = nn.linear %[[V2]], %[[V3]]
// KEEP-NEXT: %[[V5:[a-z0-9_]+]] = nn.cross_entropy %[[V4]], %arg1
// KEEP-NEXT: %[[V6:[a-z0-9_]+]] = dist.all_reduce %[[V5]] on @mesh axes = ["fsdp"] reduction = avg wire = f32 accum = f32 : tensor<f32> -> tensor<f32>
// KEEP-NEXT: %[[V7:[a-z0-9_]+]] = nn.cross_entropy_grad %[[V4]], %arg1, %arg4
// KEEP-NEXT: %[[V8:[a-z0-9_]+]] = nn.matmul %[[V7]], %[[V3]] transpose_rhs
// KEEP-NEXT: dist.free %[[V3]] : tensor<16x12xf32>
// KEEP-NEXT: %[[V9:[a-z0-9_]+]] = nn.matmul %[[V2]], %[[V7]] transpose_lhs
// KEEP-NEXT: %[[V10:[a-z0-9_]+]] = dist.reduce_scatter %[[V9]] on @mesh axes = ["fsdp"] scatter_dim = 0 reduction = sum wire = f32 accum = f32 : tensor<16x12xf32> -> tensor<8x12xf32>
// KEEP-NEXT: %[[V11:[a-z0-9_]+]] = nn.silu_grad %[[V1]], %[[V8]]
// KEEP-NEXT: %[[V12:[a-z0-9_]+]] = nn.matmul %arg0, %[[V11]] transpose_lhs
// KEEP-NEXT: %[[V13:[a-z0-9_]+]] = dist.reduce_scatter %[[V12]] on @mesh axes = ["fsdp"] scatter_dim = 0 reduction = sum wire = f32 accum = f32 : tensor<16x16xf32> -> tensor<8x16xf32>
// KEEP-NEXT: return %[[V6]], %[[V13]], %[[V10]] : tensor<f32>, tensor<8x16xf32>, tensor<8x12xf32>

// Tests that wire-dtype=bf16 sends every float reduction as bf16 and still
// accumulates in f32 (the result keeps the f32 element type).
// BF16: dist.all_reduce %{{[0-9]+}} on @mesh axes = ["fsdp"] reduction = avg wire = bf16 accum = f32 : tensor<f32> -> tensor<f32>
// BF16: dist.reduce_scatter %{{[0-9]+}} on @mesh axes = ["fsdp"] scatter_dim = 0 reduction = sum wire = bf16 accum = f32 : tensor<16x12xf32> -> tensor<8x12xf32>
// BF16: dist.reduce_scatter %{{[0-9]+}} on @mesh axes = ["fsdp"] scatter_dim = 0 reduction = sum wire = bf16 accum = f32 : tensor<16x16xf32> -> tensor<8x16xf32>

// Tests that an accumulation type narrower than the wire is refused.
// NARROW: error: 'func.return' op needs a reduction with wire type 'f32' and accumulation type 'bf16', which is narrower than the wire; set reduce-dtype to a type at least as wide as 'f32'

// Tests that an unknown dtype is refused.
// BADTYPE: error: invalid wire-dtype=f8; use bf16, f16, f32 or f64

// Tests that grad-reduce-dtype=bf16 narrows the f32 gradients (bf16 wire,
// f32 accumulation, bf16 shards and results) and leaves the loss's f32
// all-reduce alone.
// GRADBF16-LABEL: func.func @fsdp_step(
// GRADBF16-SAME: -> (tensor<f32> {{.*}}, tensor<8x16xbf16> {{.*}}, tensor<8x12xbf16> {{.*}})
// GRADBF16: dist.all_reduce %{{[0-9]+}} on @mesh axes = ["fsdp"] reduction = avg wire = f32 accum = f32 : tensor<f32> -> tensor<f32>
// GRADBF16: dist.reduce_scatter %{{[0-9]+}} on @mesh axes = ["fsdp"] scatter_dim = 0 reduction = sum wire = bf16 accum = f32 : tensor<16x12xf32> -> tensor<8x12xbf16>
// GRADBF16: dist.reduce_scatter %{{[0-9]+}} on @mesh axes = ["fsdp"] scatter_dim = 0 reduction = sum wire = bf16 accum = f32 : tensor<16x16xf32> -> tensor<8x16xbf16>
// GRADBF16: return %{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}} : tensor<f32>, tensor<8x16xbf16>, tensor<8x12xbf16>

// Tests that a gradient an op also reads gets its own reduction: the
// returned gradient widens to f32, the op's operand stays bf16.
// GRADF32-LABEL: func.func @shared_gradient(
// GRADF32-SAME: -> (tensor<8x12xf32> {{.*}}, tensor<8x12xbf16> {{.*}})
// GRADF32-NEXT: %[[G:[0-9]+]] = nn.matmul
// GRADF32-NEXT: %[[R:[0-9]+]] = dist.reduce_scatter %[[G]] on @mesh axes = ["fsdp"] scatter_dim = 0 reduction = sum wire = f32 accum = f32 : tensor<16x12xbf16> -> tensor<8x12xf32>
// GRADF32-NEXT: %[[S:[0-9]+]] = dist.reduce_scatter %[[G]] on @mesh axes = ["fsdp"] scatter_dim = 0 reduction = sum wire = bf16 accum = f32 : tensor<16x12xbf16> -> tensor<8x12xbf16>
// GRADF32-NEXT: %[[A:[0-9]+]] = nn.silu %[[S]]
// GRADF32-NEXT: return %[[R]], %[[A]] : tensor<8x12xf32>, tensor<8x12xbf16>

// Tests that grad-reduce-dtype offers no f64.
// BADGRAD: error: invalid grad-reduce-dtype=f64; use bf16, f16 or f32, or leave it empty to keep the gradient's type
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

func.func @shared_gradient(%x: tensor<8x16xbf16> {dist.placement = #dist.placement<@mesh, [shard<0>]>}, %dy: tensor<8x12xbf16> {dist.placement = #dist.placement<@mesh, [shard<0>]>}, %w: tensor<16x12xbf16> {dist.placement = #dist.placement<@mesh, [shard<0>]>, nn.name = "w", nn.param}) -> (tensor<16x12xbf16> {dist.placement = #dist.placement<@mesh, [shard<0>]>, nn.grad_of = 2 : i64, nn.name = "w"}, tensor<16x12xbf16> {dist.placement = #dist.placement<@mesh, [shard<0>]>}) {
  %g = nn.matmul %x, %dy transpose_lhs {dist.operand_placements = [#dist.placement<@mesh, [shard<0>]>, #dist.placement<@mesh, [shard<0>]>], dist.result_placements = [#dist.placement<@mesh, [partial<sum>]>]} : (tensor<8x16xbf16>, tensor<8x12xbf16>) -> tensor<16x12xbf16>
  %s = nn.silu %g {dist.operand_placements = [#dist.placement<@mesh, [shard<0>]>], dist.result_placements = [#dist.placement<@mesh, [shard<0>]>]} : (tensor<16x12xbf16>) -> tensor<16x12xbf16>
  return %g, %s : tensor<16x12xbf16>, tensor<16x12xbf16>
}
