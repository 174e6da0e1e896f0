// RUN: plan-opt %s -split-input-file --plan-placement | FileCheck %s

// Each case declares its mesh, with the strategy of each axis as
// `dist.strategies`, at the top; placement_options.mlir covers the pass
// options. `dist.placement` on an argument is its storage (parameter) or
// input split, on a result the layout it is returned in;
// `dist.operand_placements` is what an op computes on and
// `dist.result_placements` what it produces.

dist.mesh @mesh shape = [8] axes = ["fsdp"] {dist.strategies = ["fsdp"]}

// Tests that an MLP under fsdp=8 (ZeRO-3) stores every parameter as shard<0>, computes
// on replicated (gathered) weights and splits the batch.
// CHECK: dist.mesh @mesh shape = [8] axes = ["fsdp"] {dist.strategies = ["fsdp"]}
// CHECK-LABEL: func.func @mlp_fsdp(
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<8x4x16xf32> {dist.placement = #dist.placement<@mesh, [shard<0>]>}
// CHECK-SAME: %[[W1:[a-z0-9]+]]: tensor<16x32xf32> {dist.placement = #dist.placement<@mesh, [shard<0>]>, nn.name = "fc1.weight", nn.param}
// CHECK-SAME: %[[B1:[a-z0-9]+]]: tensor<32xf32> {dist.placement = #dist.placement<@mesh, [shard<0>]>, nn.name = "fc1.bias", nn.param}
// CHECK-SAME: %[[W2:[a-z0-9]+]]: tensor<32x16xf32> {dist.placement = #dist.placement<@mesh, [shard<0>]>, nn.name = "fc2.weight", nn.param}
// CHECK-SAME: -> (tensor<8x4x16xf32> {dist.placement = #dist.placement<@mesh, [replicate]>})
// CHECK-NEXT: %[[H:[a-z0-9_]+]] = nn.linear %[[X]], %[[W1]], %[[B1]] {dist.operand_placements = [#dist.placement<@mesh, [shard<0>]>, #dist.placement<@mesh, [replicate]>, #dist.placement<@mesh, [replicate]>], dist.result_placements = [#dist.placement<@mesh, [shard<0>]>]} : (tensor<8x4x16xf32>, tensor<16x32xf32>, tensor<32xf32>) -> tensor<8x4x32xf32>
// CHECK-NEXT: %[[A:[a-z0-9_]+]] = nn.gelu %[[H]] {dist.operand_placements = [#dist.placement<@mesh, [shard<0>]>], dist.result_placements = [#dist.placement<@mesh, [shard<0>]>]} : (tensor<8x4x32xf32>) -> tensor<8x4x32xf32>
// CHECK-NEXT: %[[Y:[a-z0-9_]+]] = nn.linear %[[A]], %[[W2]] {dist.operand_placements = [#dist.placement<@mesh, [shard<0>]>, #dist.placement<@mesh, [replicate]>], dist.result_placements = [#dist.placement<@mesh, [shard<0>]>]} : (tensor<8x4x32xf32>, tensor<32x16xf32>) -> tensor<8x4x16xf32>
// CHECK-NEXT: return %[[Y]] : tensor<8x4x16xf32>
func.func @mlp_fsdp(%x: tensor<8x4x16xf32>,
    %w1: tensor<16x32xf32> {nn.param, nn.name = "fc1.weight"},
    %b1: tensor<32xf32> {nn.param, nn.name = "fc1.bias"},
    %w2: tensor<32x16xf32> {nn.param, nn.name = "fc2.weight"}) -> tensor<8x4x16xf32> {
  %h = nn.linear %x, %w1, %b1 : (tensor<8x4x16xf32>, tensor<16x32xf32>, tensor<32xf32>) -> tensor<8x4x32xf32>
  %a = nn.gelu %h : (tensor<8x4x32xf32>) -> tensor<8x4x32xf32>
  %y = nn.linear %a, %w2 : (tensor<8x4x32xf32>, tensor<32x16xf32>) -> tensor<8x4x16xf32>
  return %y : tensor<8x4x16xf32>
}

// -----

dist.mesh @mesh shape = [2] axes = ["tp"] {dist.strategies = ["tp"]}

// Tests that an MLP under tp=2 is one Megatron pair: fc1 column-parallel (weight
// shard<1>, bias shard<0>, output sharded on features), fc2 row-parallel
// (weight shard<0>, output partial<sum>).
// CHECK: dist.mesh @mesh shape = [2] axes = ["tp"] {dist.strategies = ["tp"]}
// CHECK-LABEL: func.func @mlp_tp(
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<8x4x16xf32> {dist.placement = #dist.placement<@mesh, [replicate]>}
// CHECK-SAME: %[[W1:[a-z0-9]+]]: tensor<16x32xf32> {dist.placement = #dist.placement<@mesh, [shard<1>]>, nn.name = "fc1.weight", nn.param}
// CHECK-SAME: %[[B1:[a-z0-9]+]]: tensor<32xf32> {dist.placement = #dist.placement<@mesh, [shard<0>]>, nn.name = "fc1.bias", nn.param}
// CHECK-SAME: %[[W2:[a-z0-9]+]]: tensor<32x16xf32> {dist.placement = #dist.placement<@mesh, [shard<0>]>, nn.name = "fc2.weight", nn.param}
// CHECK-SAME: -> (tensor<8x4x16xf32> {dist.placement = #dist.placement<@mesh, [replicate]>})
// CHECK-NEXT: %[[H:[a-z0-9_]+]] = nn.linear %[[X]], %[[W1]], %[[B1]] {dist.operand_placements = [#dist.placement<@mesh, [replicate]>, #dist.placement<@mesh, [shard<1>]>, #dist.placement<@mesh, [shard<0>]>], dist.result_placements = [#dist.placement<@mesh, [shard<2>]>]} : (tensor<8x4x16xf32>, tensor<16x32xf32>, tensor<32xf32>) -> tensor<8x4x32xf32>
// CHECK-NEXT: %[[A:[a-z0-9_]+]] = nn.gelu %[[H]] {dist.operand_placements = [#dist.placement<@mesh, [shard<2>]>], dist.result_placements = [#dist.placement<@mesh, [shard<2>]>]} : (tensor<8x4x32xf32>) -> tensor<8x4x32xf32>
// CHECK-NEXT: %[[Y:[a-z0-9_]+]] = nn.linear %[[A]], %[[W2]] {dist.operand_placements = [#dist.placement<@mesh, [shard<2>]>, #dist.placement<@mesh, [shard<0>]>], dist.result_placements = [#dist.placement<@mesh, [partial<sum>]>]} : (tensor<8x4x32xf32>, tensor<32x16xf32>) -> tensor<8x4x16xf32>
// CHECK-NEXT: return %[[Y]] : tensor<8x4x16xf32>
func.func @mlp_tp(%x: tensor<8x4x16xf32>,
    %w1: tensor<16x32xf32> {nn.param, nn.name = "fc1.weight"},
    %b1: tensor<32xf32> {nn.param, nn.name = "fc1.bias"},
    %w2: tensor<32x16xf32> {nn.param, nn.name = "fc2.weight"}) -> tensor<8x4x16xf32> {
  %h = nn.linear %x, %w1, %b1 : (tensor<8x4x16xf32>, tensor<16x32xf32>, tensor<32xf32>) -> tensor<8x4x32xf32>
  %a = nn.gelu %h : (tensor<8x4x32xf32>) -> tensor<8x4x32xf32>
  %y = nn.linear %a, %w2 : (tensor<8x4x32xf32>, tensor<32x16xf32>) -> tensor<8x4x16xf32>
  return %y : tensor<8x4x16xf32>
}

// -----

dist.mesh @mesh shape = [2, 4] axes = ["fsdp", "tp"] {dist.strategies = ["fsdp", "tp"]}

// Tests that fsdp x tp (2x4) shards each weight on the dim tp leaves whole (fc1 dim 0,
// fc2 dim 1), and keeps the column bias, whose only dim tp splits, replicated
// on fsdp because fsdp is the outer axis.
// CHECK: dist.mesh @mesh shape = [2, 4] axes = ["fsdp", "tp"] {dist.strategies = ["fsdp", "tp"]}
// CHECK-LABEL: func.func @mlp_fsdp_tp(
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<8x4x16xf32> {dist.placement = #dist.placement<@mesh, [shard<0>, replicate]>}
// CHECK-SAME: %[[W1:[a-z0-9]+]]: tensor<16x32xf32> {dist.placement = #dist.placement<@mesh, [shard<0>, shard<1>]>, nn.name = "fc1.weight", nn.param}
// CHECK-SAME: %[[B1:[a-z0-9]+]]: tensor<32xf32> {dist.placement = #dist.placement<@mesh, [replicate, shard<0>]>, nn.name = "fc1.bias", nn.param}
// CHECK-SAME: %[[W2:[a-z0-9]+]]: tensor<32x16xf32> {dist.placement = #dist.placement<@mesh, [shard<1>, shard<0>]>, nn.name = "fc2.weight", nn.param}
// CHECK-SAME: -> (tensor<8x4x16xf32> {dist.placement = #dist.placement<@mesh, [replicate, replicate]>})
// CHECK-NEXT: %[[H:[a-z0-9_]+]] = nn.linear %[[X]], %[[W1]], %[[B1]] {dist.operand_placements = [#dist.placement<@mesh, [shard<0>, replicate]>, #dist.placement<@mesh, [replicate, shard<1>]>, #dist.placement<@mesh, [replicate, shard<0>]>], dist.result_placements = [#dist.placement<@mesh, [shard<0>, shard<2>]>]} : (tensor<8x4x16xf32>, tensor<16x32xf32>, tensor<32xf32>) -> tensor<8x4x32xf32>
// CHECK-NEXT: %[[A:[a-z0-9_]+]] = nn.gelu %[[H]] {dist.operand_placements = [#dist.placement<@mesh, [shard<0>, shard<2>]>], dist.result_placements = [#dist.placement<@mesh, [shard<0>, shard<2>]>]} : (tensor<8x4x32xf32>) -> tensor<8x4x32xf32>
// CHECK-NEXT: %[[Y:[a-z0-9_]+]] = nn.linear %[[A]], %[[W2]] {dist.operand_placements = [#dist.placement<@mesh, [shard<0>, shard<2>]>, #dist.placement<@mesh, [replicate, shard<0>]>], dist.result_placements = [#dist.placement<@mesh, [shard<0>, partial<sum>]>]} : (tensor<8x4x32xf32>, tensor<32x16xf32>) -> tensor<8x4x16xf32>
// CHECK-NEXT: return %[[Y]] : tensor<8x4x16xf32>
func.func @mlp_fsdp_tp(%x: tensor<8x4x16xf32>,
    %w1: tensor<16x32xf32> {nn.param, nn.name = "fc1.weight"},
    %b1: tensor<32xf32> {nn.param, nn.name = "fc1.bias"},
    %w2: tensor<32x16xf32> {nn.param, nn.name = "fc2.weight"}) -> tensor<8x4x16xf32> {
  %h = nn.linear %x, %w1, %b1 : (tensor<8x4x16xf32>, tensor<16x32xf32>, tensor<32xf32>) -> tensor<8x4x32xf32>
  %a = nn.gelu %h : (tensor<8x4x32xf32>) -> tensor<8x4x32xf32>
  %y = nn.linear %a, %w2 : (tensor<8x4x32xf32>, tensor<32x16xf32>) -> tensor<8x4x16xf32>
  return %y : tensor<8x4x16xf32>
}

// -----

dist.mesh @mesh shape = [4, 2] axes = ["tp", "fsdp"] {dist.strategies = ["tp", "fsdp"]}

// Tests that with the tp axis outer (tp x fsdp, 4x2) the column bias is sharded by both
// axes on dim 0: the fsdp split nests inside each tp block.
// CHECK: dist.mesh @mesh shape = [4, 2] axes = ["tp", "fsdp"] {dist.strategies = ["tp", "fsdp"]}
// CHECK-LABEL: func.func @mlp_tp_fsdp(
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<8x4x16xf32> {dist.placement = #dist.placement<@mesh, [replicate, shard<0>]>}
// CHECK-SAME: %[[W1:[a-z0-9]+]]: tensor<16x32xf32> {dist.placement = #dist.placement<@mesh, [shard<1>, shard<0>]>, nn.name = "fc1.weight", nn.param}
// CHECK-SAME: %[[B1:[a-z0-9]+]]: tensor<32xf32> {dist.placement = #dist.placement<@mesh, [shard<0>, shard<0>]>, nn.name = "fc1.bias", nn.param}
// CHECK-SAME: %[[W2:[a-z0-9]+]]: tensor<32x16xf32> {dist.placement = #dist.placement<@mesh, [shard<0>, shard<1>]>, nn.name = "fc2.weight", nn.param}
// CHECK-SAME: -> (tensor<8x4x16xf32> {dist.placement = #dist.placement<@mesh, [replicate, replicate]>})
// CHECK-NEXT: %[[H:[a-z0-9_]+]] = nn.linear %[[X]], %[[W1]], %[[B1]] {dist.operand_placements = [#dist.placement<@mesh, [replicate, shard<0>]>, #dist.placement<@mesh, [shard<1>, replicate]>, #dist.placement<@mesh, [shard<0>, replicate]>], dist.result_placements = [#dist.placement<@mesh, [shard<2>, shard<0>]>]} : (tensor<8x4x16xf32>, tensor<16x32xf32>, tensor<32xf32>) -> tensor<8x4x32xf32>
// CHECK-NEXT: %[[A:[a-z0-9_]+]] = nn.gelu %[[H]] {dist.operand_placements = [#dist.placement<@mesh, [shard<2>, shard<0>]>], dist.result_placements = [#dist.placement<@mesh, [shard<2>, shard<0>]>]} : (tensor<8x4x32xf32>) -> tensor<8x4x32xf32>
// CHECK-NEXT: %[[Y:[a-z0-9_]+]] = nn.linear %[[A]], %[[W2]] {dist.operand_placements = [#dist.placement<@mesh, [shard<2>, shard<0>]>, #dist.placement<@mesh, [shard<0>, replicate]>], dist.result_placements = [#dist.placement<@mesh, [partial<sum>, shard<0>]>]} : (tensor<8x4x32xf32>, tensor<32x16xf32>) -> tensor<8x4x16xf32>
// CHECK-NEXT: return %[[Y]] : tensor<8x4x16xf32>
func.func @mlp_tp_fsdp(%x: tensor<8x4x16xf32>,
    %w1: tensor<16x32xf32> {nn.param, nn.name = "fc1.weight"},
    %b1: tensor<32xf32> {nn.param, nn.name = "fc1.bias"},
    %w2: tensor<32x16xf32> {nn.param, nn.name = "fc2.weight"}) -> tensor<8x4x16xf32> {
  %h = nn.linear %x, %w1, %b1 : (tensor<8x4x16xf32>, tensor<16x32xf32>, tensor<32xf32>) -> tensor<8x4x32xf32>
  %a = nn.gelu %h : (tensor<8x4x32xf32>) -> tensor<8x4x32xf32>
  %y = nn.linear %a, %w2 : (tensor<8x4x32xf32>, tensor<32x16xf32>) -> tensor<8x4x16xf32>
  return %y : tensor<8x4x16xf32>
}

// -----

dist.mesh @mesh shape = [2, 4] axes = ["rep", "shard"] {dist.strategies = ["dp", "fsdp"]}

// Tests that HSDP (dp x fsdp, 2x4) replicates parameters across `rep`, shards them
// within `shard`, and splits the batch over both axes.
// CHECK: dist.mesh @mesh shape = [2, 4] axes = ["rep", "shard"] {dist.strategies = ["dp", "fsdp"]}
// CHECK-LABEL: func.func @mlp_hsdp(
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<8x4x16xf32> {dist.placement = #dist.placement<@mesh, [shard<0>, shard<0>]>}
// CHECK-SAME: %[[W1:[a-z0-9]+]]: tensor<16x32xf32> {dist.placement = #dist.placement<@mesh, [replicate, shard<0>]>, nn.name = "fc1.weight", nn.param}
// CHECK-SAME: %[[B1:[a-z0-9]+]]: tensor<32xf32> {dist.placement = #dist.placement<@mesh, [replicate, shard<0>]>, nn.name = "fc1.bias", nn.param}
// CHECK-SAME: %[[W2:[a-z0-9]+]]: tensor<32x16xf32> {dist.placement = #dist.placement<@mesh, [replicate, shard<0>]>, nn.name = "fc2.weight", nn.param}
// CHECK-SAME: -> (tensor<8x4x16xf32> {dist.placement = #dist.placement<@mesh, [replicate, replicate]>})
// CHECK-NEXT: %[[H:[a-z0-9_]+]] = nn.linear %[[X]], %[[W1]], %[[B1]] {dist.operand_placements = [#dist.placement<@mesh, [shard<0>, shard<0>]>, #dist.placement<@mesh, [replicate, replicate]>, #dist.placement<@mesh, [replicate, replicate]>], dist.result_placements = [#dist.placement<@mesh, [shard<0>, shard<0>]>]} : (tensor<8x4x16xf32>, tensor<16x32xf32>, tensor<32xf32>) -> tensor<8x4x32xf32>
// CHECK-NEXT: %[[A:[a-z0-9_]+]] = nn.gelu %[[H]] {dist.operand_placements = [#dist.placement<@mesh, [shard<0>, shard<0>]>], dist.result_placements = [#dist.placement<@mesh, [shard<0>, shard<0>]>]} : (tensor<8x4x32xf32>) -> tensor<8x4x32xf32>
// CHECK-NEXT: %[[Y:[a-z0-9_]+]] = nn.linear %[[A]], %[[W2]] {dist.operand_placements = [#dist.placement<@mesh, [shard<0>, shard<0>]>, #dist.placement<@mesh, [replicate, replicate]>], dist.result_placements = [#dist.placement<@mesh, [shard<0>, shard<0>]>]} : (tensor<8x4x32xf32>, tensor<32x16xf32>) -> tensor<8x4x16xf32>
// CHECK-NEXT: return %[[Y]] : tensor<8x4x16xf32>
func.func @mlp_hsdp(%x: tensor<8x4x16xf32>,
    %w1: tensor<16x32xf32> {nn.param, nn.name = "fc1.weight"},
    %b1: tensor<32xf32> {nn.param, nn.name = "fc1.bias"},
    %w2: tensor<32x16xf32> {nn.param, nn.name = "fc2.weight"}) -> tensor<8x4x16xf32> {
  %h = nn.linear %x, %w1, %b1 : (tensor<8x4x16xf32>, tensor<16x32xf32>, tensor<32xf32>) -> tensor<8x4x32xf32>
  %a = nn.gelu %h : (tensor<8x4x32xf32>) -> tensor<8x4x32xf32>
  %y = nn.linear %a, %w2 : (tensor<8x4x32xf32>, tensor<32x16xf32>) -> tensor<8x4x16xf32>
  return %y : tensor<8x4x16xf32>
}

// -----

dist.mesh @mesh shape = [2, 2] axes = ["fsdp", "tp"] {dist.strategies = ["fsdp", "tp"]}

// Tests that a training step places gradients: fsdp x tp gives each weight gradient
// partial<sum> over fsdp (reduce-scatter to the fsdp shard the result
// carries) and the tp shard of its weight; the loss is partial<avg> over the
// batch axis and returned replicated.
// CHECK: dist.mesh @mesh shape = [2, 2] axes = ["fsdp", "tp"] {dist.strategies = ["fsdp", "tp"]}
// CHECK-LABEL: func.func @mlp_step(
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<8x4x16xf32> {dist.placement = #dist.placement<@mesh, [shard<0>, replicate]>}
// CHECK-SAME: %[[LABELS:[a-z0-9]+]]: tensor<8x4xi32> {dist.placement = #dist.placement<@mesh, [shard<0>, replicate]>}
// CHECK-SAME: %[[W1:[a-z0-9]+]]: tensor<16x32xf32> {dist.placement = #dist.placement<@mesh, [shard<0>, shard<1>]>, nn.name = "fc1.weight", nn.param}
// CHECK-SAME: %[[W2:[a-z0-9]+]]: tensor<32x64xf32> {dist.placement = #dist.placement<@mesh, [shard<1>, shard<0>]>, nn.name = "head.weight", nn.param}
// CHECK-SAME: %[[DLOSS:[a-z0-9]+]]: tensor<f32> {dist.placement = #dist.placement<@mesh, [replicate, replicate]>}
// CHECK-SAME: -> (tensor<f32> {dist.placement = #dist.placement<@mesh, [replicate, replicate]>}, tensor<16x32xf32> {dist.placement = #dist.placement<@mesh, [shard<0>, shard<1>]>, nn.grad_of = 2 : i64, nn.name = "fc1.weight"}, tensor<32x64xf32> {dist.placement = #dist.placement<@mesh, [shard<1>, shard<0>]>, nn.grad_of = 3 : i64, nn.name = "head.weight"}) attributes {nn.loss_grad_arg = 4 : i64}
// CHECK-NEXT: %[[H:[a-z0-9_]+]] = nn.linear %[[X]], %[[W1]] {dist.operand_placements = [#dist.placement<@mesh, [shard<0>, replicate]>, #dist.placement<@mesh, [replicate, shard<1>]>], dist.result_placements = [#dist.placement<@mesh, [shard<0>, shard<2>]>]} : (tensor<8x4x16xf32>, tensor<16x32xf32>) -> tensor<8x4x32xf32>
// CHECK-NEXT: %[[A:[a-z0-9_]+]] = nn.gelu %[[H]] {dist.operand_placements = [#dist.placement<@mesh, [shard<0>, shard<2>]>], dist.result_placements = [#dist.placement<@mesh, [shard<0>, shard<2>]>]} : (tensor<8x4x32xf32>) -> tensor<8x4x32xf32>
// CHECK-NEXT: %[[LOGITS:[a-z0-9_]+]] = nn.linear %[[A]], %[[W2]] {dist.operand_placements = [#dist.placement<@mesh, [shard<0>, shard<2>]>, #dist.placement<@mesh, [replicate, shard<0>]>], dist.result_placements = [#dist.placement<@mesh, [shard<0>, partial<sum>]>]} : (tensor<8x4x32xf32>, tensor<32x64xf32>) -> tensor<8x4x64xf32>
// CHECK-NEXT: %[[LOSS:[a-z0-9_]+]] = nn.cross_entropy %[[LOGITS]], %[[LABELS]] {dist.operand_placements = [#dist.placement<@mesh, [shard<0>, replicate]>, #dist.placement<@mesh, [shard<0>, replicate]>], dist.result_placements = [#dist.placement<@mesh, [partial<avg>, replicate]>]} : (tensor<8x4x64xf32>, tensor<8x4xi32>) -> tensor<f32>
// CHECK-NEXT: %[[DLOGITS:[a-z0-9_]+]] = nn.cross_entropy_grad %[[LOGITS]], %[[LABELS]], %[[DLOSS]] scale 3.125000e-02 {dist.operand_placements = [#dist.placement<@mesh, [shard<0>, replicate]>, #dist.placement<@mesh, [shard<0>, replicate]>, #dist.placement<@mesh, [replicate, replicate]>], dist.result_placements = [#dist.placement<@mesh, [shard<0>, replicate]>]} : (tensor<8x4x64xf32>, tensor<8x4xi32>, tensor<f32>) -> tensor<8x4x64xf32>
// CHECK-NEXT: %[[DA:[a-z0-9_]+]] = nn.matmul %[[DLOGITS]], %[[W2]] transpose_rhs {dist.operand_placements = [#dist.placement<@mesh, [shard<0>, replicate]>, #dist.placement<@mesh, [replicate, shard<0>]>], dist.result_placements = [#dist.placement<@mesh, [shard<0>, shard<2>]>]} : (tensor<8x4x64xf32>, tensor<32x64xf32>) -> tensor<8x4x32xf32>
// CHECK-NEXT: %[[DW2:[a-z0-9_]+]] = nn.matmul %[[A]], %[[DLOGITS]] transpose_lhs {dist.operand_placements = [#dist.placement<@mesh, [shard<0>, shard<2>]>, #dist.placement<@mesh, [shard<0>, replicate]>], dist.result_placements = [#dist.placement<@mesh, [partial<sum>, shard<0>]>]} : (tensor<8x4x32xf32>, tensor<8x4x64xf32>) -> tensor<32x64xf32>
// CHECK-NEXT: %[[DH:[a-z0-9_]+]] = nn.gelu_grad %[[H]], %[[DA]] {dist.operand_placements = [#dist.placement<@mesh, [shard<0>, shard<2>]>, #dist.placement<@mesh, [shard<0>, shard<2>]>], dist.result_placements = [#dist.placement<@mesh, [shard<0>, shard<2>]>]} : (tensor<8x4x32xf32>, tensor<8x4x32xf32>) -> tensor<8x4x32xf32>
// CHECK-NEXT: %[[DW1:[a-z0-9_]+]] = nn.matmul %[[X]], %[[DH]] transpose_lhs {dist.operand_placements = [#dist.placement<@mesh, [shard<0>, replicate]>, #dist.placement<@mesh, [shard<0>, shard<2>]>], dist.result_placements = [#dist.placement<@mesh, [partial<sum>, shard<1>]>]} : (tensor<8x4x16xf32>, tensor<8x4x32xf32>) -> tensor<16x32xf32>
// CHECK-NEXT: return %[[LOSS]], %[[DW1]], %[[DW2]] : tensor<f32>, tensor<16x32xf32>, tensor<32x64xf32>
func.func @mlp_step(%x: tensor<8x4x16xf32>, %labels: tensor<8x4xi32>,
    %w1: tensor<16x32xf32> {nn.param, nn.name = "fc1.weight"},
    %w2: tensor<32x64xf32> {nn.param, nn.name = "head.weight"}, %dloss: tensor<f32>)
    -> (tensor<f32>, tensor<16x32xf32> {nn.grad_of = 2 : i64, nn.name = "fc1.weight"},
        tensor<32x64xf32> {nn.grad_of = 3 : i64, nn.name = "head.weight"})
    attributes {nn.loss_grad_arg = 4 : i64} {
  %h = nn.linear %x, %w1 : (tensor<8x4x16xf32>, tensor<16x32xf32>) -> tensor<8x4x32xf32>
  %a = nn.gelu %h : (tensor<8x4x32xf32>) -> tensor<8x4x32xf32>
  %logits = nn.linear %a, %w2 : (tensor<8x4x32xf32>, tensor<32x64xf32>) -> tensor<8x4x64xf32>
  %loss = nn.cross_entropy %logits, %labels : (tensor<8x4x64xf32>, tensor<8x4xi32>) -> tensor<f32>
  %dlogits = nn.cross_entropy_grad %logits, %labels, %dloss scale 3.125000e-02 : (tensor<8x4x64xf32>, tensor<8x4xi32>, tensor<f32>) -> tensor<8x4x64xf32>
  %da = nn.matmul %dlogits, %w2 transpose_rhs : (tensor<8x4x64xf32>, tensor<32x64xf32>) -> tensor<8x4x32xf32>
  %dw2 = nn.matmul %a, %dlogits transpose_lhs : (tensor<8x4x32xf32>, tensor<8x4x64xf32>) -> tensor<32x64xf32>
  %dh = nn.gelu_grad %h, %da : (tensor<8x4x32xf32>, tensor<8x4x32xf32>) -> tensor<8x4x32xf32>
  %dw1 = nn.matmul %x, %dh transpose_lhs : (tensor<8x4x16xf32>, tensor<8x4x32xf32>) -> tensor<16x32xf32>
  return %loss, %dw1, %dw2 : tensor<f32>, tensor<16x32xf32>, tensor<32x64xf32>
}

// -----

dist.mesh @mesh shape = [2] axes = ["fsdp"] {dist.strategies = ["fsdp"]}

// Tests that a Llama layer under fsdp=2 splits the batch everywhere; weight gradients
// would be partial<sum>, the loss partial<avg>.
// CHECK: dist.mesh @mesh shape = [2] axes = ["fsdp"] {dist.strategies = ["fsdp"]}
// CHECK-LABEL: func.func @llama_fsdp(
// CHECK-SAME: %[[IDS:[a-z0-9]+]]: tensor<2x8xi32> {dist.placement = #dist.placement<@mesh, [shard<0>]>}
// CHECK-SAME: %[[LABELS:[a-z0-9]+]]: tensor<2x8xi32> {dist.placement = #dist.placement<@mesh, [shard<0>]>}
// CHECK-SAME: %[[EMBED:[a-z0-9]+]]: tensor<32x16xf32> {dist.placement = #dist.placement<@mesh, [shard<0>]>, nn.name = "tok_embeddings.weight", nn.param}
// CHECK-SAME: %[[ATTN_NORM:[a-z0-9]+]]: tensor<16xf32> {dist.placement = #dist.placement<@mesh, [shard<0>]>, nn.name = "layers.0.attention_norm.weight", nn.param}
// CHECK-SAME: %[[WQ:[a-z0-9]+]]: tensor<16x16xf32> {dist.placement = #dist.placement<@mesh, [shard<0>]>, nn.name = "layers.0.attention.wq.weight", nn.param}
// CHECK-SAME: %[[WK:[a-z0-9]+]]: tensor<16x8xf32> {dist.placement = #dist.placement<@mesh, [shard<0>]>, nn.name = "layers.0.attention.wk.weight", nn.param}
// CHECK-SAME: %[[WV:[a-z0-9]+]]: tensor<16x8xf32> {dist.placement = #dist.placement<@mesh, [shard<0>]>, nn.name = "layers.0.attention.wv.weight", nn.param}
// CHECK-SAME: %[[WO:[a-z0-9]+]]: tensor<16x16xf32> {dist.placement = #dist.placement<@mesh, [shard<0>]>, nn.name = "layers.0.attention.wo.weight", nn.param}
// CHECK-SAME: %[[FFN_NORM:[a-z0-9]+]]: tensor<16xf32> {dist.placement = #dist.placement<@mesh, [shard<0>]>, nn.name = "layers.0.ffn_norm.weight", nn.param}
// CHECK-SAME: %[[W1:[a-z0-9]+]]: tensor<16x24xf32> {dist.placement = #dist.placement<@mesh, [shard<0>]>, nn.name = "layers.0.feed_forward.w1.weight", nn.param}
// CHECK-SAME: %[[W3:[a-z0-9]+]]: tensor<16x24xf32> {dist.placement = #dist.placement<@mesh, [shard<0>]>, nn.name = "layers.0.feed_forward.w3.weight", nn.param}
// CHECK-SAME: %[[W2:[a-z0-9]+]]: tensor<24x16xf32> {dist.placement = #dist.placement<@mesh, [shard<0>]>, nn.name = "layers.0.feed_forward.w2.weight", nn.param}
// CHECK-SAME: %[[NORM:[a-z0-9]+]]: tensor<16xf32> {dist.placement = #dist.placement<@mesh, [shard<0>]>, nn.name = "norm.weight", nn.param}
// CHECK-SAME: %[[OUTPUT:[a-z0-9]+]]: tensor<16x32xf32> {dist.placement = #dist.placement<@mesh, [shard<0>]>, nn.name = "output.weight", nn.param}
// CHECK-SAME: -> (tensor<f32> {dist.placement = #dist.placement<@mesh, [replicate]>})
// CHECK-NEXT: %[[H:[a-z0-9_]+]] = nn.embedding %[[IDS]], %[[EMBED]] {dist.operand_placements = [#dist.placement<@mesh, [shard<0>]>, #dist.placement<@mesh, [replicate]>], dist.result_placements = [#dist.placement<@mesh, [shard<0>]>]} : (tensor<2x8xi32>, tensor<32x16xf32>) -> tensor<2x8x16xf32>
// CHECK-NEXT: %[[X:[a-z0-9_]+]] = nn.rms_norm %[[H]], %[[ATTN_NORM]] epsilon 1.000000e-05 {dist.operand_placements = [#dist.placement<@mesh, [shard<0>]>, #dist.placement<@mesh, [replicate]>], dist.result_placements = [#dist.placement<@mesh, [shard<0>]>]} : (tensor<2x8x16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
// CHECK-NEXT: %[[Q2:[a-z0-9_]+]] = nn.linear %[[X]], %[[WQ]] {dist.operand_placements = [#dist.placement<@mesh, [shard<0>]>, #dist.placement<@mesh, [replicate]>], dist.result_placements = [#dist.placement<@mesh, [shard<0>]>]} : (tensor<2x8x16xf32>, tensor<16x16xf32>) -> tensor<2x8x16xf32>
// CHECK-NEXT: %[[K2:[a-z0-9_]+]] = nn.linear %[[X]], %[[WK]] {dist.operand_placements = [#dist.placement<@mesh, [shard<0>]>, #dist.placement<@mesh, [replicate]>], dist.result_placements = [#dist.placement<@mesh, [shard<0>]>]} : (tensor<2x8x16xf32>, tensor<16x8xf32>) -> tensor<2x8x8xf32>
// CHECK-NEXT: %[[V2:[a-z0-9_]+]] = nn.linear %[[X]], %[[WV]] {dist.operand_placements = [#dist.placement<@mesh, [shard<0>]>, #dist.placement<@mesh, [replicate]>], dist.result_placements = [#dist.placement<@mesh, [shard<0>]>]} : (tensor<2x8x16xf32>, tensor<16x8xf32>) -> tensor<2x8x8xf32>
// CHECK-NEXT: %[[Q:[a-z0-9_]+]] = nn.reshape %[[Q2]] {dist.operand_placements = [#dist.placement<@mesh, [shard<0>]>], dist.result_placements = [#dist.placement<@mesh, [shard<0>]>]} : (tensor<2x8x16xf32>) -> tensor<2x8x4x4xf32>
// CHECK-NEXT: %[[K:[a-z0-9_]+]] = nn.reshape %[[K2]] {dist.operand_placements = [#dist.placement<@mesh, [shard<0>]>], dist.result_placements = [#dist.placement<@mesh, [shard<0>]>]} : (tensor<2x8x8xf32>) -> tensor<2x8x2x4xf32>
// CHECK-NEXT: %[[V:[a-z0-9_]+]] = nn.reshape %[[V2]] {dist.operand_placements = [#dist.placement<@mesh, [shard<0>]>], dist.result_placements = [#dist.placement<@mesh, [shard<0>]>]} : (tensor<2x8x8xf32>) -> tensor<2x8x2x4xf32>
// CHECK-NEXT: %[[QR:[a-z0-9_]+]] = nn.rope %[[Q]] theta 1.000000e+04 {dist.operand_placements = [#dist.placement<@mesh, [shard<0>]>], dist.result_placements = [#dist.placement<@mesh, [shard<0>]>]} : (tensor<2x8x4x4xf32>) -> tensor<2x8x4x4xf32>
// CHECK-NEXT: %[[KR:[a-z0-9_]+]] = nn.rope %[[K]] theta 1.000000e+04 {dist.operand_placements = [#dist.placement<@mesh, [shard<0>]>], dist.result_placements = [#dist.placement<@mesh, [shard<0>]>]} : (tensor<2x8x2x4xf32>) -> tensor<2x8x2x4xf32>
// CHECK-NEXT: %[[O:[a-z0-9_]+]] = nn.attention %[[QR]], %[[KR]], %[[V]] {dist.operand_placements = [#dist.placement<@mesh, [shard<0>]>, #dist.placement<@mesh, [shard<0>]>, #dist.placement<@mesh, [shard<0>]>], dist.result_placements = [#dist.placement<@mesh, [shard<0>]>]} : (tensor<2x8x4x4xf32>, tensor<2x8x2x4xf32>, tensor<2x8x2x4xf32>) -> tensor<2x8x4x4xf32>
// CHECK-NEXT: %[[O2:[a-z0-9_]+]] = nn.reshape %[[O]] {dist.operand_placements = [#dist.placement<@mesh, [shard<0>]>], dist.result_placements = [#dist.placement<@mesh, [shard<0>]>]} : (tensor<2x8x4x4xf32>) -> tensor<2x8x16xf32>
// CHECK-NEXT: %[[ATTN:[a-z0-9_]+]] = nn.linear %[[O2]], %[[WO]] {dist.operand_placements = [#dist.placement<@mesh, [shard<0>]>, #dist.placement<@mesh, [replicate]>], dist.result_placements = [#dist.placement<@mesh, [shard<0>]>]} : (tensor<2x8x16xf32>, tensor<16x16xf32>) -> tensor<2x8x16xf32>
// CHECK-NEXT: %[[H1:[a-z0-9_]+]] = nn.add %[[H]], %[[ATTN]] {dist.operand_placements = [#dist.placement<@mesh, [shard<0>]>, #dist.placement<@mesh, [shard<0>]>], dist.result_placements = [#dist.placement<@mesh, [shard<0>]>]} : (tensor<2x8x16xf32>, tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
// CHECK-NEXT: %[[Y:[a-z0-9_]+]] = nn.rms_norm %[[H1]], %[[FFN_NORM]] epsilon 1.000000e-05 {dist.operand_placements = [#dist.placement<@mesh, [shard<0>]>, #dist.placement<@mesh, [replicate]>], dist.result_placements = [#dist.placement<@mesh, [shard<0>]>]} : (tensor<2x8x16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
// CHECK-NEXT: %[[GATE:[a-z0-9_]+]] = nn.linear %[[Y]], %[[W1]] {dist.operand_placements = [#dist.placement<@mesh, [shard<0>]>, #dist.placement<@mesh, [replicate]>], dist.result_placements = [#dist.placement<@mesh, [shard<0>]>]} : (tensor<2x8x16xf32>, tensor<16x24xf32>) -> tensor<2x8x24xf32>
// CHECK-NEXT: %[[UP:[a-z0-9_]+]] = nn.linear %[[Y]], %[[W3]] {dist.operand_placements = [#dist.placement<@mesh, [shard<0>]>, #dist.placement<@mesh, [replicate]>], dist.result_placements = [#dist.placement<@mesh, [shard<0>]>]} : (tensor<2x8x16xf32>, tensor<16x24xf32>) -> tensor<2x8x24xf32>
// CHECK-NEXT: %[[ACT:[a-z0-9_]+]] = nn.silu %[[GATE]] {dist.operand_placements = [#dist.placement<@mesh, [shard<0>]>], dist.result_placements = [#dist.placement<@mesh, [shard<0>]>]} : (tensor<2x8x24xf32>) -> tensor<2x8x24xf32>
// CHECK-NEXT: %[[GATED:[a-z0-9_]+]] = nn.mul %[[ACT]], %[[UP]] {dist.operand_placements = [#dist.placement<@mesh, [shard<0>]>, #dist.placement<@mesh, [shard<0>]>], dist.result_placements = [#dist.placement<@mesh, [shard<0>]>]} : (tensor<2x8x24xf32>, tensor<2x8x24xf32>) -> tensor<2x8x24xf32>
// CHECK-NEXT: %[[DOWN:[a-z0-9_]+]] = nn.linear %[[GATED]], %[[W2]] {dist.operand_placements = [#dist.placement<@mesh, [shard<0>]>, #dist.placement<@mesh, [replicate]>], dist.result_placements = [#dist.placement<@mesh, [shard<0>]>]} : (tensor<2x8x24xf32>, tensor<24x16xf32>) -> tensor<2x8x16xf32>
// CHECK-NEXT: %[[H2:[a-z0-9_]+]] = nn.add %[[H1]], %[[DOWN]] {dist.operand_placements = [#dist.placement<@mesh, [shard<0>]>, #dist.placement<@mesh, [shard<0>]>], dist.result_placements = [#dist.placement<@mesh, [shard<0>]>]} : (tensor<2x8x16xf32>, tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
// CHECK-NEXT: %[[F:[a-z0-9_]+]] = nn.rms_norm %[[H2]], %[[NORM]] epsilon 1.000000e-05 {dist.operand_placements = [#dist.placement<@mesh, [shard<0>]>, #dist.placement<@mesh, [replicate]>], dist.result_placements = [#dist.placement<@mesh, [shard<0>]>]} : (tensor<2x8x16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
// CHECK-NEXT: %[[LOGITS:[a-z0-9_]+]] = nn.linear %[[F]], %[[OUTPUT]] {dist.operand_placements = [#dist.placement<@mesh, [shard<0>]>, #dist.placement<@mesh, [replicate]>], dist.result_placements = [#dist.placement<@mesh, [shard<0>]>]} : (tensor<2x8x16xf32>, tensor<16x32xf32>) -> tensor<2x8x32xf32>
// CHECK-NEXT: %[[LOSS:[a-z0-9_]+]] = nn.cross_entropy %[[LOGITS]], %[[LABELS]] {dist.operand_placements = [#dist.placement<@mesh, [shard<0>]>, #dist.placement<@mesh, [shard<0>]>], dist.result_placements = [#dist.placement<@mesh, [partial<avg>]>]} : (tensor<2x8x32xf32>, tensor<2x8xi32>) -> tensor<f32>
// CHECK-NEXT: return %[[LOSS]] : tensor<f32>
func.func @llama_fsdp(
    %ids: tensor<2x8xi32>, %labels: tensor<2x8xi32>,
    %embed: tensor<32x16xf32> {nn.param, nn.name = "tok_embeddings.weight"},
    %attn_norm: tensor<16xf32> {nn.param, nn.name = "layers.0.attention_norm.weight"},
    %wq: tensor<16x16xf32> {nn.param, nn.name = "layers.0.attention.wq.weight"},
    %wk: tensor<16x8xf32> {nn.param, nn.name = "layers.0.attention.wk.weight"},
    %wv: tensor<16x8xf32> {nn.param, nn.name = "layers.0.attention.wv.weight"},
    %wo: tensor<16x16xf32> {nn.param, nn.name = "layers.0.attention.wo.weight"},
    %ffn_norm: tensor<16xf32> {nn.param, nn.name = "layers.0.ffn_norm.weight"},
    %w1: tensor<16x24xf32> {nn.param, nn.name = "layers.0.feed_forward.w1.weight"},
    %w3: tensor<16x24xf32> {nn.param, nn.name = "layers.0.feed_forward.w3.weight"},
    %w2: tensor<24x16xf32> {nn.param, nn.name = "layers.0.feed_forward.w2.weight"},
    %norm: tensor<16xf32> {nn.param, nn.name = "norm.weight"},
    %output: tensor<16x32xf32> {nn.param, nn.name = "output.weight"}) -> tensor<f32> {
  %h = nn.embedding %ids, %embed : (tensor<2x8xi32>, tensor<32x16xf32>) -> tensor<2x8x16xf32>
  %x = nn.rms_norm %h, %attn_norm epsilon 1.0e-05 : (tensor<2x8x16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
  %q2 = nn.linear %x, %wq : (tensor<2x8x16xf32>, tensor<16x16xf32>) -> tensor<2x8x16xf32>
  %k2 = nn.linear %x, %wk : (tensor<2x8x16xf32>, tensor<16x8xf32>) -> tensor<2x8x8xf32>
  %v2 = nn.linear %x, %wv : (tensor<2x8x16xf32>, tensor<16x8xf32>) -> tensor<2x8x8xf32>
  %q = nn.reshape %q2 : (tensor<2x8x16xf32>) -> tensor<2x8x4x4xf32>
  %k = nn.reshape %k2 : (tensor<2x8x8xf32>) -> tensor<2x8x2x4xf32>
  %v = nn.reshape %v2 : (tensor<2x8x8xf32>) -> tensor<2x8x2x4xf32>
  %qr = nn.rope %q theta 1.0e+04 : (tensor<2x8x4x4xf32>) -> tensor<2x8x4x4xf32>
  %kr = nn.rope %k theta 1.0e+04 : (tensor<2x8x2x4xf32>) -> tensor<2x8x2x4xf32>
  %o = nn.attention %qr, %kr, %v : (tensor<2x8x4x4xf32>, tensor<2x8x2x4xf32>, tensor<2x8x2x4xf32>) -> tensor<2x8x4x4xf32>
  %o2 = nn.reshape %o : (tensor<2x8x4x4xf32>) -> tensor<2x8x16xf32>
  %attn = nn.linear %o2, %wo : (tensor<2x8x16xf32>, tensor<16x16xf32>) -> tensor<2x8x16xf32>
  %h1 = nn.add %h, %attn : (tensor<2x8x16xf32>, tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  %y = nn.rms_norm %h1, %ffn_norm epsilon 1.0e-05 : (tensor<2x8x16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
  %gate = nn.linear %y, %w1 : (tensor<2x8x16xf32>, tensor<16x24xf32>) -> tensor<2x8x24xf32>
  %up = nn.linear %y, %w3 : (tensor<2x8x16xf32>, tensor<16x24xf32>) -> tensor<2x8x24xf32>
  %act = nn.silu %gate : (tensor<2x8x24xf32>) -> tensor<2x8x24xf32>
  %gated = nn.mul %act, %up : (tensor<2x8x24xf32>, tensor<2x8x24xf32>) -> tensor<2x8x24xf32>
  %down = nn.linear %gated, %w2 : (tensor<2x8x24xf32>, tensor<24x16xf32>) -> tensor<2x8x16xf32>
  %h2 = nn.add %h1, %down : (tensor<2x8x16xf32>, tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  %f = nn.rms_norm %h2, %norm epsilon 1.0e-05 : (tensor<2x8x16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
  %logits = nn.linear %f, %output : (tensor<2x8x16xf32>, tensor<16x32xf32>) -> tensor<2x8x32xf32>
  %loss = nn.cross_entropy %logits, %labels : (tensor<2x8x32xf32>, tensor<2x8xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

dist.mesh @mesh shape = [2] axes = ["tp"] {dist.strategies = ["tp"]}

// Tests that a Llama layer under tp=2: vocab-parallel embedding (partial<sum> rows),
// wq/wk/wv and w1/w3 column-parallel, wo and w2 row-parallel, heads split in
// rope and attention, norms replicated, the residual stream partial<sum> until
// a norm needs it whole, and the output projection column-parallel with the
// vocab-sharded logits feeding the vocab-parallel loss: nn.cross_entropy is
// lowered to nn.vocab_max (partial<max>), nn.vocab_stats (partial<sum>) and
// nn.vocab_cross_entropy on the all-reduced statistics.
// CHECK: dist.mesh @mesh shape = [2] axes = ["tp"] {dist.strategies = ["tp"]}
// CHECK-LABEL: func.func @llama_tp(
// CHECK-SAME: %[[IDS:[a-z0-9]+]]: tensor<2x8xi32> {dist.placement = #dist.placement<@mesh, [replicate]>}
// CHECK-SAME: %[[LABELS:[a-z0-9]+]]: tensor<2x8xi32> {dist.placement = #dist.placement<@mesh, [replicate]>}
// CHECK-SAME: %[[EMBED:[a-z0-9]+]]: tensor<32x16xf32> {dist.placement = #dist.placement<@mesh, [shard<0>]>, nn.name = "tok_embeddings.weight", nn.param}
// CHECK-SAME: %[[ATTN_NORM:[a-z0-9]+]]: tensor<16xf32> {dist.placement = #dist.placement<@mesh, [replicate]>, nn.name = "layers.0.attention_norm.weight", nn.param}
// CHECK-SAME: %[[WQ:[a-z0-9]+]]: tensor<16x16xf32> {dist.placement = #dist.placement<@mesh, [shard<1>]>, nn.name = "layers.0.attention.wq.weight", nn.param}
// CHECK-SAME: %[[WK:[a-z0-9]+]]: tensor<16x8xf32> {dist.placement = #dist.placement<@mesh, [shard<1>]>, nn.name = "layers.0.attention.wk.weight", nn.param}
// CHECK-SAME: %[[WV:[a-z0-9]+]]: tensor<16x8xf32> {dist.placement = #dist.placement<@mesh, [shard<1>]>, nn.name = "layers.0.attention.wv.weight", nn.param}
// CHECK-SAME: %[[WO:[a-z0-9]+]]: tensor<16x16xf32> {dist.placement = #dist.placement<@mesh, [shard<0>]>, nn.name = "layers.0.attention.wo.weight", nn.param}
// CHECK-SAME: %[[FFN_NORM:[a-z0-9]+]]: tensor<16xf32> {dist.placement = #dist.placement<@mesh, [replicate]>, nn.name = "layers.0.ffn_norm.weight", nn.param}
// CHECK-SAME: %[[W1:[a-z0-9]+]]: tensor<16x24xf32> {dist.placement = #dist.placement<@mesh, [shard<1>]>, nn.name = "layers.0.feed_forward.w1.weight", nn.param}
// CHECK-SAME: %[[W3:[a-z0-9]+]]: tensor<16x24xf32> {dist.placement = #dist.placement<@mesh, [shard<1>]>, nn.name = "layers.0.feed_forward.w3.weight", nn.param}
// CHECK-SAME: %[[W2:[a-z0-9]+]]: tensor<24x16xf32> {dist.placement = #dist.placement<@mesh, [shard<0>]>, nn.name = "layers.0.feed_forward.w2.weight", nn.param}
// CHECK-SAME: %[[NORM:[a-z0-9]+]]: tensor<16xf32> {dist.placement = #dist.placement<@mesh, [replicate]>, nn.name = "norm.weight", nn.param}
// CHECK-SAME: %[[OUTPUT:[a-z0-9]+]]: tensor<16x32xf32> {dist.placement = #dist.placement<@mesh, [shard<1>]>, nn.name = "output.weight", nn.param}
// CHECK-SAME: -> (tensor<f32> {dist.placement = #dist.placement<@mesh, [replicate]>})
// CHECK-NEXT: %[[H:[a-z0-9_]+]] = nn.embedding %[[IDS]], %[[EMBED]] {dist.operand_placements = [#dist.placement<@mesh, [replicate]>, #dist.placement<@mesh, [shard<0>]>], dist.result_placements = [#dist.placement<@mesh, [partial<sum>]>]} : (tensor<2x8xi32>, tensor<32x16xf32>) -> tensor<2x8x16xf32>
// CHECK-NEXT: %[[X:[a-z0-9_]+]] = nn.rms_norm %[[H]], %[[ATTN_NORM]] epsilon 1.000000e-05 {dist.operand_placements = [#dist.placement<@mesh, [replicate]>, #dist.placement<@mesh, [replicate]>], dist.result_placements = [#dist.placement<@mesh, [replicate]>]} : (tensor<2x8x16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
// CHECK-NEXT: %[[Q2:[a-z0-9_]+]] = nn.linear %[[X]], %[[WQ]] {dist.operand_placements = [#dist.placement<@mesh, [replicate]>, #dist.placement<@mesh, [shard<1>]>], dist.result_placements = [#dist.placement<@mesh, [shard<2>]>]} : (tensor<2x8x16xf32>, tensor<16x16xf32>) -> tensor<2x8x16xf32>
// CHECK-NEXT: %[[K2:[a-z0-9_]+]] = nn.linear %[[X]], %[[WK]] {dist.operand_placements = [#dist.placement<@mesh, [replicate]>, #dist.placement<@mesh, [shard<1>]>], dist.result_placements = [#dist.placement<@mesh, [shard<2>]>]} : (tensor<2x8x16xf32>, tensor<16x8xf32>) -> tensor<2x8x8xf32>
// CHECK-NEXT: %[[V2:[a-z0-9_]+]] = nn.linear %[[X]], %[[WV]] {dist.operand_placements = [#dist.placement<@mesh, [replicate]>, #dist.placement<@mesh, [shard<1>]>], dist.result_placements = [#dist.placement<@mesh, [shard<2>]>]} : (tensor<2x8x16xf32>, tensor<16x8xf32>) -> tensor<2x8x8xf32>
// CHECK-NEXT: %[[Q:[a-z0-9_]+]] = nn.reshape %[[Q2]] {dist.operand_placements = [#dist.placement<@mesh, [shard<2>]>], dist.result_placements = [#dist.placement<@mesh, [shard<2>]>]} : (tensor<2x8x16xf32>) -> tensor<2x8x4x4xf32>
// CHECK-NEXT: %[[K:[a-z0-9_]+]] = nn.reshape %[[K2]] {dist.operand_placements = [#dist.placement<@mesh, [shard<2>]>], dist.result_placements = [#dist.placement<@mesh, [shard<2>]>]} : (tensor<2x8x8xf32>) -> tensor<2x8x2x4xf32>
// CHECK-NEXT: %[[V:[a-z0-9_]+]] = nn.reshape %[[V2]] {dist.operand_placements = [#dist.placement<@mesh, [shard<2>]>], dist.result_placements = [#dist.placement<@mesh, [shard<2>]>]} : (tensor<2x8x8xf32>) -> tensor<2x8x2x4xf32>
// CHECK-NEXT: %[[QR:[a-z0-9_]+]] = nn.rope %[[Q]] theta 1.000000e+04 {dist.operand_placements = [#dist.placement<@mesh, [shard<2>]>], dist.result_placements = [#dist.placement<@mesh, [shard<2>]>]} : (tensor<2x8x4x4xf32>) -> tensor<2x8x4x4xf32>
// CHECK-NEXT: %[[KR:[a-z0-9_]+]] = nn.rope %[[K]] theta 1.000000e+04 {dist.operand_placements = [#dist.placement<@mesh, [shard<2>]>], dist.result_placements = [#dist.placement<@mesh, [shard<2>]>]} : (tensor<2x8x2x4xf32>) -> tensor<2x8x2x4xf32>
// CHECK-NEXT: %[[O:[a-z0-9_]+]] = nn.attention %[[QR]], %[[KR]], %[[V]] {dist.operand_placements = [#dist.placement<@mesh, [shard<2>]>, #dist.placement<@mesh, [shard<2>]>, #dist.placement<@mesh, [shard<2>]>], dist.result_placements = [#dist.placement<@mesh, [shard<2>]>]} : (tensor<2x8x4x4xf32>, tensor<2x8x2x4xf32>, tensor<2x8x2x4xf32>) -> tensor<2x8x4x4xf32>
// CHECK-NEXT: %[[O2:[a-z0-9_]+]] = nn.reshape %[[O]] {dist.operand_placements = [#dist.placement<@mesh, [shard<2>]>], dist.result_placements = [#dist.placement<@mesh, [shard<2>]>]} : (tensor<2x8x4x4xf32>) -> tensor<2x8x16xf32>
// CHECK-NEXT: %[[ATTN:[a-z0-9_]+]] = nn.linear %[[O2]], %[[WO]] {dist.operand_placements = [#dist.placement<@mesh, [shard<2>]>, #dist.placement<@mesh, [shard<0>]>], dist.result_placements = [#dist.placement<@mesh, [partial<sum>]>]} : (tensor<2x8x16xf32>, tensor<16x16xf32>) -> tensor<2x8x16xf32>
// CHECK-NEXT: %[[H1:[a-z0-9_]+]] = nn.add %[[H]], %[[ATTN]] {dist.operand_placements = [#dist.placement<@mesh, [partial<sum>]>, #dist.placement<@mesh, [partial<sum>]>], dist.result_placements = [#dist.placement<@mesh, [partial<sum>]>]} : (tensor<2x8x16xf32>, tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
// CHECK-NEXT: %[[Y:[a-z0-9_]+]] = nn.rms_norm %[[H1]], %[[FFN_NORM]] epsilon 1.000000e-05 {dist.operand_placements = [#dist.placement<@mesh, [replicate]>, #dist.placement<@mesh, [replicate]>], dist.result_placements = [#dist.placement<@mesh, [replicate]>]} : (tensor<2x8x16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
// CHECK-NEXT: %[[GATE:[a-z0-9_]+]] = nn.linear %[[Y]], %[[W1]] {dist.operand_placements = [#dist.placement<@mesh, [replicate]>, #dist.placement<@mesh, [shard<1>]>], dist.result_placements = [#dist.placement<@mesh, [shard<2>]>]} : (tensor<2x8x16xf32>, tensor<16x24xf32>) -> tensor<2x8x24xf32>
// CHECK-NEXT: %[[UP:[a-z0-9_]+]] = nn.linear %[[Y]], %[[W3]] {dist.operand_placements = [#dist.placement<@mesh, [replicate]>, #dist.placement<@mesh, [shard<1>]>], dist.result_placements = [#dist.placement<@mesh, [shard<2>]>]} : (tensor<2x8x16xf32>, tensor<16x24xf32>) -> tensor<2x8x24xf32>
// CHECK-NEXT: %[[ACT:[a-z0-9_]+]] = nn.silu %[[GATE]] {dist.operand_placements = [#dist.placement<@mesh, [shard<2>]>], dist.result_placements = [#dist.placement<@mesh, [shard<2>]>]} : (tensor<2x8x24xf32>) -> tensor<2x8x24xf32>
// CHECK-NEXT: %[[GATED:[a-z0-9_]+]] = nn.mul %[[ACT]], %[[UP]] {dist.operand_placements = [#dist.placement<@mesh, [shard<2>]>, #dist.placement<@mesh, [shard<2>]>], dist.result_placements = [#dist.placement<@mesh, [shard<2>]>]} : (tensor<2x8x24xf32>, tensor<2x8x24xf32>) -> tensor<2x8x24xf32>
// CHECK-NEXT: %[[DOWN:[a-z0-9_]+]] = nn.linear %[[GATED]], %[[W2]] {dist.operand_placements = [#dist.placement<@mesh, [shard<2>]>, #dist.placement<@mesh, [shard<0>]>], dist.result_placements = [#dist.placement<@mesh, [partial<sum>]>]} : (tensor<2x8x24xf32>, tensor<24x16xf32>) -> tensor<2x8x16xf32>
// CHECK-NEXT: %[[H2:[a-z0-9_]+]] = nn.add %[[H1]], %[[DOWN]] {dist.operand_placements = [#dist.placement<@mesh, [partial<sum>]>, #dist.placement<@mesh, [partial<sum>]>], dist.result_placements = [#dist.placement<@mesh, [partial<sum>]>]} : (tensor<2x8x16xf32>, tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
// CHECK-NEXT: %[[F:[a-z0-9_]+]] = nn.rms_norm %[[H2]], %[[NORM]] epsilon 1.000000e-05 {dist.operand_placements = [#dist.placement<@mesh, [replicate]>, #dist.placement<@mesh, [replicate]>], dist.result_placements = [#dist.placement<@mesh, [replicate]>]} : (tensor<2x8x16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
// CHECK-NEXT: %[[LOGITS:[a-z0-9_]+]] = nn.linear %[[F]], %[[OUTPUT]] {dist.operand_placements = [#dist.placement<@mesh, [replicate]>, #dist.placement<@mesh, [shard<1>]>], dist.result_placements = [#dist.placement<@mesh, [shard<2>]>]} : (tensor<2x8x16xf32>, tensor<16x32xf32>) -> tensor<2x8x32xf32>
// CHECK-NEXT: %[[MAX:[a-z0-9_]+]] = nn.vocab_max %[[LOGITS]] vocab 32 {dist.operand_placements = [#dist.placement<@mesh, [shard<2>]>], dist.result_placements = [#dist.placement<@mesh, [partial<max>]>]} : (tensor<2x8x32xf32>) -> tensor<2x8xf32>
// CHECK-NEXT: %[[STATS:[a-z0-9_]+]] = nn.vocab_stats %[[LOGITS]], %[[LABELS]], %[[MAX]] vocab 32 {dist.operand_placements = [#dist.placement<@mesh, [shard<2>]>, #dist.placement<@mesh, [replicate]>, #dist.placement<@mesh, [replicate]>], dist.result_placements = [#dist.placement<@mesh, [partial<sum>]>]} : (tensor<2x8x32xf32>, tensor<2x8xi32>, tensor<2x8xf32>) -> tensor<2x8x2xf32>
// CHECK-NEXT: %[[LOSS:[a-z0-9_]+]] = nn.vocab_cross_entropy %[[STATS]] {dist.operand_placements = [#dist.placement<@mesh, [replicate]>], dist.result_placements = [#dist.placement<@mesh, [replicate]>]} : (tensor<2x8x2xf32>) -> tensor<f32>
// CHECK-NEXT: return %[[LOSS]] : tensor<f32>
func.func @llama_tp(
    %ids: tensor<2x8xi32>, %labels: tensor<2x8xi32>,
    %embed: tensor<32x16xf32> {nn.param, nn.name = "tok_embeddings.weight"},
    %attn_norm: tensor<16xf32> {nn.param, nn.name = "layers.0.attention_norm.weight"},
    %wq: tensor<16x16xf32> {nn.param, nn.name = "layers.0.attention.wq.weight"},
    %wk: tensor<16x8xf32> {nn.param, nn.name = "layers.0.attention.wk.weight"},
    %wv: tensor<16x8xf32> {nn.param, nn.name = "layers.0.attention.wv.weight"},
    %wo: tensor<16x16xf32> {nn.param, nn.name = "layers.0.attention.wo.weight"},
    %ffn_norm: tensor<16xf32> {nn.param, nn.name = "layers.0.ffn_norm.weight"},
    %w1: tensor<16x24xf32> {nn.param, nn.name = "layers.0.feed_forward.w1.weight"},
    %w3: tensor<16x24xf32> {nn.param, nn.name = "layers.0.feed_forward.w3.weight"},
    %w2: tensor<24x16xf32> {nn.param, nn.name = "layers.0.feed_forward.w2.weight"},
    %norm: tensor<16xf32> {nn.param, nn.name = "norm.weight"},
    %output: tensor<16x32xf32> {nn.param, nn.name = "output.weight"}) -> tensor<f32> {
  %h = nn.embedding %ids, %embed : (tensor<2x8xi32>, tensor<32x16xf32>) -> tensor<2x8x16xf32>
  %x = nn.rms_norm %h, %attn_norm epsilon 1.0e-05 : (tensor<2x8x16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
  %q2 = nn.linear %x, %wq : (tensor<2x8x16xf32>, tensor<16x16xf32>) -> tensor<2x8x16xf32>
  %k2 = nn.linear %x, %wk : (tensor<2x8x16xf32>, tensor<16x8xf32>) -> tensor<2x8x8xf32>
  %v2 = nn.linear %x, %wv : (tensor<2x8x16xf32>, tensor<16x8xf32>) -> tensor<2x8x8xf32>
  %q = nn.reshape %q2 : (tensor<2x8x16xf32>) -> tensor<2x8x4x4xf32>
  %k = nn.reshape %k2 : (tensor<2x8x8xf32>) -> tensor<2x8x2x4xf32>
  %v = nn.reshape %v2 : (tensor<2x8x8xf32>) -> tensor<2x8x2x4xf32>
  %qr = nn.rope %q theta 1.0e+04 : (tensor<2x8x4x4xf32>) -> tensor<2x8x4x4xf32>
  %kr = nn.rope %k theta 1.0e+04 : (tensor<2x8x2x4xf32>) -> tensor<2x8x2x4xf32>
  %o = nn.attention %qr, %kr, %v : (tensor<2x8x4x4xf32>, tensor<2x8x2x4xf32>, tensor<2x8x2x4xf32>) -> tensor<2x8x4x4xf32>
  %o2 = nn.reshape %o : (tensor<2x8x4x4xf32>) -> tensor<2x8x16xf32>
  %attn = nn.linear %o2, %wo : (tensor<2x8x16xf32>, tensor<16x16xf32>) -> tensor<2x8x16xf32>
  %h1 = nn.add %h, %attn : (tensor<2x8x16xf32>, tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  %y = nn.rms_norm %h1, %ffn_norm epsilon 1.0e-05 : (tensor<2x8x16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
  %gate = nn.linear %y, %w1 : (tensor<2x8x16xf32>, tensor<16x24xf32>) -> tensor<2x8x24xf32>
  %up = nn.linear %y, %w3 : (tensor<2x8x16xf32>, tensor<16x24xf32>) -> tensor<2x8x24xf32>
  %act = nn.silu %gate : (tensor<2x8x24xf32>) -> tensor<2x8x24xf32>
  %gated = nn.mul %act, %up : (tensor<2x8x24xf32>, tensor<2x8x24xf32>) -> tensor<2x8x24xf32>
  %down = nn.linear %gated, %w2 : (tensor<2x8x24xf32>, tensor<24x16xf32>) -> tensor<2x8x16xf32>
  %h2 = nn.add %h1, %down : (tensor<2x8x16xf32>, tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  %f = nn.rms_norm %h2, %norm epsilon 1.0e-05 : (tensor<2x8x16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
  %logits = nn.linear %f, %output : (tensor<2x8x16xf32>, tensor<16x32xf32>) -> tensor<2x8x32xf32>
  %loss = nn.cross_entropy %logits, %labels : (tensor<2x8x32xf32>, tensor<2x8xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

dist.mesh @mesh shape = [2, 2] axes = ["fsdp", "tp"] {dist.strategies = ["fsdp", "tp"]}

// Tests that a Llama layer under fsdp x tp (2x2) combines both; the
// vocab-parallel loss averages over fsdp (partial<avg>) as nn.cross_entropy
// did.
// CHECK: dist.mesh @mesh shape = [2, 2] axes = ["fsdp", "tp"] {dist.strategies = ["fsdp", "tp"]}
// CHECK-LABEL: func.func @llama_fsdp_tp(
// CHECK-SAME: %[[IDS:[a-z0-9]+]]: tensor<2x8xi32> {dist.placement = #dist.placement<@mesh, [shard<0>, replicate]>}
// CHECK-SAME: %[[LABELS:[a-z0-9]+]]: tensor<2x8xi32> {dist.placement = #dist.placement<@mesh, [shard<0>, replicate]>}
// CHECK-SAME: %[[EMBED:[a-z0-9]+]]: tensor<32x16xf32> {dist.placement = #dist.placement<@mesh, [shard<1>, shard<0>]>, nn.name = "tok_embeddings.weight", nn.param}
// CHECK-SAME: %[[ATTN_NORM:[a-z0-9]+]]: tensor<16xf32> {dist.placement = #dist.placement<@mesh, [shard<0>, replicate]>, nn.name = "layers.0.attention_norm.weight", nn.param}
// CHECK-SAME: %[[WQ:[a-z0-9]+]]: tensor<16x16xf32> {dist.placement = #dist.placement<@mesh, [shard<0>, shard<1>]>, nn.name = "layers.0.attention.wq.weight", nn.param}
// CHECK-SAME: %[[WK:[a-z0-9]+]]: tensor<16x8xf32> {dist.placement = #dist.placement<@mesh, [shard<0>, shard<1>]>, nn.name = "layers.0.attention.wk.weight", nn.param}
// CHECK-SAME: %[[WV:[a-z0-9]+]]: tensor<16x8xf32> {dist.placement = #dist.placement<@mesh, [shard<0>, shard<1>]>, nn.name = "layers.0.attention.wv.weight", nn.param}
// CHECK-SAME: %[[WO:[a-z0-9]+]]: tensor<16x16xf32> {dist.placement = #dist.placement<@mesh, [shard<1>, shard<0>]>, nn.name = "layers.0.attention.wo.weight", nn.param}
// CHECK-SAME: %[[FFN_NORM:[a-z0-9]+]]: tensor<16xf32> {dist.placement = #dist.placement<@mesh, [shard<0>, replicate]>, nn.name = "layers.0.ffn_norm.weight", nn.param}
// CHECK-SAME: %[[W1:[a-z0-9]+]]: tensor<16x24xf32> {dist.placement = #dist.placement<@mesh, [shard<0>, shard<1>]>, nn.name = "layers.0.feed_forward.w1.weight", nn.param}
// CHECK-SAME: %[[W3:[a-z0-9]+]]: tensor<16x24xf32> {dist.placement = #dist.placement<@mesh, [shard<0>, shard<1>]>, nn.name = "layers.0.feed_forward.w3.weight", nn.param}
// CHECK-SAME: %[[W2:[a-z0-9]+]]: tensor<24x16xf32> {dist.placement = #dist.placement<@mesh, [shard<1>, shard<0>]>, nn.name = "layers.0.feed_forward.w2.weight", nn.param}
// CHECK-SAME: %[[NORM:[a-z0-9]+]]: tensor<16xf32> {dist.placement = #dist.placement<@mesh, [shard<0>, replicate]>, nn.name = "norm.weight", nn.param}
// CHECK-SAME: %[[OUTPUT:[a-z0-9]+]]: tensor<16x32xf32> {dist.placement = #dist.placement<@mesh, [shard<0>, shard<1>]>, nn.name = "output.weight", nn.param}
// CHECK-SAME: -> (tensor<f32> {dist.placement = #dist.placement<@mesh, [replicate, replicate]>})
// CHECK-NEXT: %[[H:[a-z0-9_]+]] = nn.embedding %[[IDS]], %[[EMBED]] {dist.operand_placements = [#dist.placement<@mesh, [shard<0>, replicate]>, #dist.placement<@mesh, [replicate, shard<0>]>], dist.result_placements = [#dist.placement<@mesh, [shard<0>, partial<sum>]>]} : (tensor<2x8xi32>, tensor<32x16xf32>) -> tensor<2x8x16xf32>
// CHECK-NEXT: %[[X:[a-z0-9_]+]] = nn.rms_norm %[[H]], %[[ATTN_NORM]] epsilon 1.000000e-05 {dist.operand_placements = [#dist.placement<@mesh, [shard<0>, replicate]>, #dist.placement<@mesh, [replicate, replicate]>], dist.result_placements = [#dist.placement<@mesh, [shard<0>, replicate]>]} : (tensor<2x8x16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
// CHECK-NEXT: %[[Q2:[a-z0-9_]+]] = nn.linear %[[X]], %[[WQ]] {dist.operand_placements = [#dist.placement<@mesh, [shard<0>, replicate]>, #dist.placement<@mesh, [replicate, shard<1>]>], dist.result_placements = [#dist.placement<@mesh, [shard<0>, shard<2>]>]} : (tensor<2x8x16xf32>, tensor<16x16xf32>) -> tensor<2x8x16xf32>
// CHECK-NEXT: %[[K2:[a-z0-9_]+]] = nn.linear %[[X]], %[[WK]] {dist.operand_placements = [#dist.placement<@mesh, [shard<0>, replicate]>, #dist.placement<@mesh, [replicate, shard<1>]>], dist.result_placements = [#dist.placement<@mesh, [shard<0>, shard<2>]>]} : (tensor<2x8x16xf32>, tensor<16x8xf32>) -> tensor<2x8x8xf32>
// CHECK-NEXT: %[[V2:[a-z0-9_]+]] = nn.linear %[[X]], %[[WV]] {dist.operand_placements = [#dist.placement<@mesh, [shard<0>, replicate]>, #dist.placement<@mesh, [replicate, shard<1>]>], dist.result_placements = [#dist.placement<@mesh, [shard<0>, shard<2>]>]} : (tensor<2x8x16xf32>, tensor<16x8xf32>) -> tensor<2x8x8xf32>
// CHECK-NEXT: %[[Q:[a-z0-9_]+]] = nn.reshape %[[Q2]] {dist.operand_placements = [#dist.placement<@mesh, [shard<0>, shard<2>]>], dist.result_placements = [#dist.placement<@mesh, [shard<0>, shard<2>]>]} : (tensor<2x8x16xf32>) -> tensor<2x8x4x4xf32>
// CHECK-NEXT: %[[K:[a-z0-9_]+]] = nn.reshape %[[K2]] {dist.operand_placements = [#dist.placement<@mesh, [shard<0>, shard<2>]>], dist.result_placements = [#dist.placement<@mesh, [shard<0>, shard<2>]>]} : (tensor<2x8x8xf32>) -> tensor<2x8x2x4xf32>
// CHECK-NEXT: %[[V:[a-z0-9_]+]] = nn.reshape %[[V2]] {dist.operand_placements = [#dist.placement<@mesh, [shard<0>, shard<2>]>], dist.result_placements = [#dist.placement<@mesh, [shard<0>, shard<2>]>]} : (tensor<2x8x8xf32>) -> tensor<2x8x2x4xf32>
// CHECK-NEXT: %[[QR:[a-z0-9_]+]] = nn.rope %[[Q]] theta 1.000000e+04 {dist.operand_placements = [#dist.placement<@mesh, [shard<0>, shard<2>]>], dist.result_placements = [#dist.placement<@mesh, [shard<0>, shard<2>]>]} : (tensor<2x8x4x4xf32>) -> tensor<2x8x4x4xf32>
// CHECK-NEXT: %[[KR:[a-z0-9_]+]] = nn.rope %[[K]] theta 1.000000e+04 {dist.operand_placements = [#dist.placement<@mesh, [shard<0>, shard<2>]>], dist.result_placements = [#dist.placement<@mesh, [shard<0>, shard<2>]>]} : (tensor<2x8x2x4xf32>) -> tensor<2x8x2x4xf32>
// CHECK-NEXT: %[[O:[a-z0-9_]+]] = nn.attention %[[QR]], %[[KR]], %[[V]] {dist.operand_placements = [#dist.placement<@mesh, [shard<0>, shard<2>]>, #dist.placement<@mesh, [shard<0>, shard<2>]>, #dist.placement<@mesh, [shard<0>, shard<2>]>], dist.result_placements = [#dist.placement<@mesh, [shard<0>, shard<2>]>]} : (tensor<2x8x4x4xf32>, tensor<2x8x2x4xf32>, tensor<2x8x2x4xf32>) -> tensor<2x8x4x4xf32>
// CHECK-NEXT: %[[O2:[a-z0-9_]+]] = nn.reshape %[[O]] {dist.operand_placements = [#dist.placement<@mesh, [shard<0>, shard<2>]>], dist.result_placements = [#dist.placement<@mesh, [shard<0>, shard<2>]>]} : (tensor<2x8x4x4xf32>) -> tensor<2x8x16xf32>
// CHECK-NEXT: %[[ATTN:[a-z0-9_]+]] = nn.linear %[[O2]], %[[WO]] {dist.operand_placements = [#dist.placement<@mesh, [shard<0>, shard<2>]>, #dist.placement<@mesh, [replicate, shard<0>]>], dist.result_placements = [#dist.placement<@mesh, [shard<0>, partial<sum>]>]} : (tensor<2x8x16xf32>, tensor<16x16xf32>) -> tensor<2x8x16xf32>
// CHECK-NEXT: %[[H1:[a-z0-9_]+]] = nn.add %[[H]], %[[ATTN]] {dist.operand_placements = [#dist.placement<@mesh, [shard<0>, partial<sum>]>, #dist.placement<@mesh, [shard<0>, partial<sum>]>], dist.result_placements = [#dist.placement<@mesh, [shard<0>, partial<sum>]>]} : (tensor<2x8x16xf32>, tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
// CHECK-NEXT: %[[Y:[a-z0-9_]+]] = nn.rms_norm %[[H1]], %[[FFN_NORM]] epsilon 1.000000e-05 {dist.operand_placements = [#dist.placement<@mesh, [shard<0>, replicate]>, #dist.placement<@mesh, [replicate, replicate]>], dist.result_placements = [#dist.placement<@mesh, [shard<0>, replicate]>]} : (tensor<2x8x16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
// CHECK-NEXT: %[[GATE:[a-z0-9_]+]] = nn.linear %[[Y]], %[[W1]] {dist.operand_placements = [#dist.placement<@mesh, [shard<0>, replicate]>, #dist.placement<@mesh, [replicate, shard<1>]>], dist.result_placements = [#dist.placement<@mesh, [shard<0>, shard<2>]>]} : (tensor<2x8x16xf32>, tensor<16x24xf32>) -> tensor<2x8x24xf32>
// CHECK-NEXT: %[[UP:[a-z0-9_]+]] = nn.linear %[[Y]], %[[W3]] {dist.operand_placements = [#dist.placement<@mesh, [shard<0>, replicate]>, #dist.placement<@mesh, [replicate, shard<1>]>], dist.result_placements = [#dist.placement<@mesh, [shard<0>, shard<2>]>]} : (tensor<2x8x16xf32>, tensor<16x24xf32>) -> tensor<2x8x24xf32>
// CHECK-NEXT: %[[ACT:[a-z0-9_]+]] = nn.silu %[[GATE]] {dist.operand_placements = [#dist.placement<@mesh, [shard<0>, shard<2>]>], dist.result_placements = [#dist.placement<@mesh, [shard<0>, shard<2>]>]} : (tensor<2x8x24xf32>) -> tensor<2x8x24xf32>
// CHECK-NEXT: %[[GATED:[a-z0-9_]+]] = nn.mul %[[ACT]], %[[UP]] {dist.operand_placements = [#dist.placement<@mesh, [shard<0>, shard<2>]>, #dist.placement<@mesh, [shard<0>, shard<2>]>], dist.result_placements = [#dist.placement<@mesh, [shard<0>, shard<2>]>]} : (tensor<2x8x24xf32>, tensor<2x8x24xf32>) -> tensor<2x8x24xf32>
// CHECK-NEXT: %[[DOWN:[a-z0-9_]+]] = nn.linear %[[GATED]], %[[W2]] {dist.operand_placements = [#dist.placement<@mesh, [shard<0>, shard<2>]>, #dist.placement<@mesh, [replicate, shard<0>]>], dist.result_placements = [#dist.placement<@mesh, [shard<0>, partial<sum>]>]} : (tensor<2x8x24xf32>, tensor<24x16xf32>) -> tensor<2x8x16xf32>
// CHECK-NEXT: %[[H2:[a-z0-9_]+]] = nn.add %[[H1]], %[[DOWN]] {dist.operand_placements = [#dist.placement<@mesh, [shard<0>, partial<sum>]>, #dist.placement<@mesh, [shard<0>, partial<sum>]>], dist.result_placements = [#dist.placement<@mesh, [shard<0>, partial<sum>]>]} : (tensor<2x8x16xf32>, tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
// CHECK-NEXT: %[[F:[a-z0-9_]+]] = nn.rms_norm %[[H2]], %[[NORM]] epsilon 1.000000e-05 {dist.operand_placements = [#dist.placement<@mesh, [shard<0>, replicate]>, #dist.placement<@mesh, [replicate, replicate]>], dist.result_placements = [#dist.placement<@mesh, [shard<0>, replicate]>]} : (tensor<2x8x16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
// CHECK-NEXT: %[[LOGITS:[a-z0-9_]+]] = nn.linear %[[F]], %[[OUTPUT]] {dist.operand_placements = [#dist.placement<@mesh, [shard<0>, replicate]>, #dist.placement<@mesh, [replicate, shard<1>]>], dist.result_placements = [#dist.placement<@mesh, [shard<0>, shard<2>]>]} : (tensor<2x8x16xf32>, tensor<16x32xf32>) -> tensor<2x8x32xf32>
// CHECK-NEXT: %[[MAX:[a-z0-9_]+]] = nn.vocab_max %[[LOGITS]] vocab 32 {dist.operand_placements = [#dist.placement<@mesh, [shard<0>, shard<2>]>], dist.result_placements = [#dist.placement<@mesh, [shard<0>, partial<max>]>]} : (tensor<2x8x32xf32>) -> tensor<2x8xf32>
// CHECK-NEXT: %[[STATS:[a-z0-9_]+]] = nn.vocab_stats %[[LOGITS]], %[[LABELS]], %[[MAX]] vocab 32 {dist.operand_placements = [#dist.placement<@mesh, [shard<0>, shard<2>]>, #dist.placement<@mesh, [shard<0>, replicate]>, #dist.placement<@mesh, [shard<0>, replicate]>], dist.result_placements = [#dist.placement<@mesh, [shard<0>, partial<sum>]>]} : (tensor<2x8x32xf32>, tensor<2x8xi32>, tensor<2x8xf32>) -> tensor<2x8x2xf32>
// CHECK-NEXT: %[[LOSS:[a-z0-9_]+]] = nn.vocab_cross_entropy %[[STATS]] {dist.operand_placements = [#dist.placement<@mesh, [shard<0>, replicate]>], dist.result_placements = [#dist.placement<@mesh, [partial<avg>, replicate]>]} : (tensor<2x8x2xf32>) -> tensor<f32>
// CHECK-NEXT: return %[[LOSS]] : tensor<f32>
func.func @llama_fsdp_tp(
    %ids: tensor<2x8xi32>, %labels: tensor<2x8xi32>,
    %embed: tensor<32x16xf32> {nn.param, nn.name = "tok_embeddings.weight"},
    %attn_norm: tensor<16xf32> {nn.param, nn.name = "layers.0.attention_norm.weight"},
    %wq: tensor<16x16xf32> {nn.param, nn.name = "layers.0.attention.wq.weight"},
    %wk: tensor<16x8xf32> {nn.param, nn.name = "layers.0.attention.wk.weight"},
    %wv: tensor<16x8xf32> {nn.param, nn.name = "layers.0.attention.wv.weight"},
    %wo: tensor<16x16xf32> {nn.param, nn.name = "layers.0.attention.wo.weight"},
    %ffn_norm: tensor<16xf32> {nn.param, nn.name = "layers.0.ffn_norm.weight"},
    %w1: tensor<16x24xf32> {nn.param, nn.name = "layers.0.feed_forward.w1.weight"},
    %w3: tensor<16x24xf32> {nn.param, nn.name = "layers.0.feed_forward.w3.weight"},
    %w2: tensor<24x16xf32> {nn.param, nn.name = "layers.0.feed_forward.w2.weight"},
    %norm: tensor<16xf32> {nn.param, nn.name = "norm.weight"},
    %output: tensor<16x32xf32> {nn.param, nn.name = "output.weight"}) -> tensor<f32> {
  %h = nn.embedding %ids, %embed : (tensor<2x8xi32>, tensor<32x16xf32>) -> tensor<2x8x16xf32>
  %x = nn.rms_norm %h, %attn_norm epsilon 1.0e-05 : (tensor<2x8x16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
  %q2 = nn.linear %x, %wq : (tensor<2x8x16xf32>, tensor<16x16xf32>) -> tensor<2x8x16xf32>
  %k2 = nn.linear %x, %wk : (tensor<2x8x16xf32>, tensor<16x8xf32>) -> tensor<2x8x8xf32>
  %v2 = nn.linear %x, %wv : (tensor<2x8x16xf32>, tensor<16x8xf32>) -> tensor<2x8x8xf32>
  %q = nn.reshape %q2 : (tensor<2x8x16xf32>) -> tensor<2x8x4x4xf32>
  %k = nn.reshape %k2 : (tensor<2x8x8xf32>) -> tensor<2x8x2x4xf32>
  %v = nn.reshape %v2 : (tensor<2x8x8xf32>) -> tensor<2x8x2x4xf32>
  %qr = nn.rope %q theta 1.0e+04 : (tensor<2x8x4x4xf32>) -> tensor<2x8x4x4xf32>
  %kr = nn.rope %k theta 1.0e+04 : (tensor<2x8x2x4xf32>) -> tensor<2x8x2x4xf32>
  %o = nn.attention %qr, %kr, %v : (tensor<2x8x4x4xf32>, tensor<2x8x2x4xf32>, tensor<2x8x2x4xf32>) -> tensor<2x8x4x4xf32>
  %o2 = nn.reshape %o : (tensor<2x8x4x4xf32>) -> tensor<2x8x16xf32>
  %attn = nn.linear %o2, %wo : (tensor<2x8x16xf32>, tensor<16x16xf32>) -> tensor<2x8x16xf32>
  %h1 = nn.add %h, %attn : (tensor<2x8x16xf32>, tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  %y = nn.rms_norm %h1, %ffn_norm epsilon 1.0e-05 : (tensor<2x8x16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
  %gate = nn.linear %y, %w1 : (tensor<2x8x16xf32>, tensor<16x24xf32>) -> tensor<2x8x24xf32>
  %up = nn.linear %y, %w3 : (tensor<2x8x16xf32>, tensor<16x24xf32>) -> tensor<2x8x24xf32>
  %act = nn.silu %gate : (tensor<2x8x24xf32>) -> tensor<2x8x24xf32>
  %gated = nn.mul %act, %up : (tensor<2x8x24xf32>, tensor<2x8x24xf32>) -> tensor<2x8x24xf32>
  %down = nn.linear %gated, %w2 : (tensor<2x8x24xf32>, tensor<24x16xf32>) -> tensor<2x8x16xf32>
  %h2 = nn.add %h1, %down : (tensor<2x8x16xf32>, tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  %f = nn.rms_norm %h2, %norm epsilon 1.0e-05 : (tensor<2x8x16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
  %logits = nn.linear %f, %output : (tensor<2x8x16xf32>, tensor<16x32xf32>) -> tensor<2x8x32xf32>
  %loss = nn.cross_entropy %logits, %labels : (tensor<2x8x32xf32>, tensor<2x8xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

dist.mesh @mesh shape = [4, 3] axes = ["fsdp", "tp"] {dist.strategies = ["fsdp", "tp"]}

// Tests that sizes that do not divide are padded: fsdp=4 splits the 10 rows of fc1 and
// the 10 columns of fc2 as shard<D, padded>, tp=3 the 20 hidden features of
// the Megatron pair (weights and activations).
// CHECK: dist.mesh @mesh shape = [4, 3] axes = ["fsdp", "tp"] {dist.strategies = ["fsdp", "tp"]}
// CHECK-LABEL: func.func @uneven(
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<8x4x10xf32> {dist.placement = #dist.placement<@mesh, [shard<0>, replicate]>}
// CHECK-SAME: %[[W1:[a-z0-9]+]]: tensor<10x20xf32> {dist.placement = #dist.placement<@mesh, [shard<0, padded>, shard<1, padded>]>, nn.name = "fc1.weight", nn.param}
// CHECK-SAME: %[[W2:[a-z0-9]+]]: tensor<20x10xf32> {dist.placement = #dist.placement<@mesh, [shard<1, padded>, shard<0, padded>]>, nn.name = "fc2.weight", nn.param}
// CHECK-SAME: -> (tensor<8x4x10xf32> {dist.placement = #dist.placement<@mesh, [replicate, replicate]>})
// CHECK-NEXT: %[[H:[a-z0-9_]+]] = nn.linear %[[X]], %[[W1]] {dist.operand_placements = [#dist.placement<@mesh, [shard<0>, replicate]>, #dist.placement<@mesh, [replicate, shard<1, padded>]>], dist.result_placements = [#dist.placement<@mesh, [shard<0>, shard<2, padded>]>]} : (tensor<8x4x10xf32>, tensor<10x20xf32>) -> tensor<8x4x20xf32>
// CHECK-NEXT: %[[A:[a-z0-9_]+]] = nn.silu %[[H]] {dist.operand_placements = [#dist.placement<@mesh, [shard<0>, shard<2, padded>]>], dist.result_placements = [#dist.placement<@mesh, [shard<0>, shard<2, padded>]>]} : (tensor<8x4x20xf32>) -> tensor<8x4x20xf32>
// CHECK-NEXT: %[[Y:[a-z0-9_]+]] = nn.linear %[[A]], %[[W2]] {dist.operand_placements = [#dist.placement<@mesh, [shard<0>, shard<2, padded>]>, #dist.placement<@mesh, [replicate, shard<0, padded>]>], dist.result_placements = [#dist.placement<@mesh, [shard<0>, partial<sum>]>]} : (tensor<8x4x20xf32>, tensor<20x10xf32>) -> tensor<8x4x10xf32>
// CHECK-NEXT: return %[[Y]] : tensor<8x4x10xf32>
func.func @uneven(%x: tensor<8x4x10xf32>,
    %w1: tensor<10x20xf32> {nn.param, nn.name = "fc1.weight"},
    %w2: tensor<20x10xf32> {nn.param, nn.name = "fc2.weight"}) -> tensor<8x4x10xf32> {
  %h = nn.linear %x, %w1 : (tensor<8x4x10xf32>, tensor<10x20xf32>) -> tensor<8x4x20xf32>
  %a = nn.silu %h : (tensor<8x4x20xf32>) -> tensor<8x4x20xf32>
  %y = nn.linear %a, %w2 : (tensor<8x4x20xf32>, tensor<20x10xf32>) -> tensor<8x4x10xf32>
  return %y : tensor<8x4x10xf32>
}

// -----

dist.mesh @mesh shape = [2, 2] axes = ["fsdp", "tp"] {dist.strategies = ["fsdp", "tp"]}

// Tests that per-parameter overrides: `dist.strategy = "dp"` keeps a parameter
// replicated on fsdp axes, `"replicate"` on every axis, so the linear that
// uses fc1 runs unsharded on tp and fc2 becomes column-parallel.
// CHECK: dist.mesh @mesh shape = [2, 2] axes = ["fsdp", "tp"] {dist.strategies = ["fsdp", "tp"]}
// CHECK-LABEL: func.func @overrides(
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<8x4x16xf32> {dist.placement = #dist.placement<@mesh, [shard<0>, replicate]>}
// CHECK-SAME: %[[GAMMA:[a-z0-9]+]]: tensor<16xf32> {dist.placement = #dist.placement<@mesh, [replicate, replicate]>, dist.strategy = "dp", nn.name = "norm.weight", nn.param}
// CHECK-SAME: %[[W1:[a-z0-9]+]]: tensor<16x32xf32> {dist.placement = #dist.placement<@mesh, [replicate, replicate]>, dist.strategy = "replicate", nn.name = "fc1.weight", nn.param}
// CHECK-SAME: %[[W2:[a-z0-9]+]]: tensor<32x16xf32> {dist.placement = #dist.placement<@mesh, [shard<0>, shard<1>]>, nn.name = "fc2.weight", nn.param}
// CHECK-SAME: -> (tensor<8x4x16xf32> {dist.placement = #dist.placement<@mesh, [replicate, replicate]>})
// CHECK-NEXT: %[[N:[a-z0-9_]+]] = nn.rms_norm %[[X]], %[[GAMMA]] epsilon 1.000000e-05 {dist.operand_placements = [#dist.placement<@mesh, [shard<0>, replicate]>, #dist.placement<@mesh, [replicate, replicate]>], dist.result_placements = [#dist.placement<@mesh, [shard<0>, replicate]>]} : (tensor<8x4x16xf32>, tensor<16xf32>) -> tensor<8x4x16xf32>
// CHECK-NEXT: %[[H:[a-z0-9_]+]] = nn.linear %[[N]], %[[W1]] {dist.operand_placements = [#dist.placement<@mesh, [shard<0>, replicate]>, #dist.placement<@mesh, [replicate, replicate]>], dist.result_placements = [#dist.placement<@mesh, [shard<0>, replicate]>]} : (tensor<8x4x16xf32>, tensor<16x32xf32>) -> tensor<8x4x32xf32>
// CHECK-NEXT: %[[Y:[a-z0-9_]+]] = nn.linear %[[H]], %[[W2]] {dist.operand_placements = [#dist.placement<@mesh, [shard<0>, replicate]>, #dist.placement<@mesh, [replicate, shard<1>]>], dist.result_placements = [#dist.placement<@mesh, [shard<0>, shard<2>]>]} : (tensor<8x4x32xf32>, tensor<32x16xf32>) -> tensor<8x4x16xf32>
// CHECK-NEXT: return %[[Y]] : tensor<8x4x16xf32>

func.func @overrides(%x: tensor<8x4x16xf32>,
    %gamma: tensor<16xf32> {nn.param, nn.name = "norm.weight", dist.strategy = "dp"},
    %w1: tensor<16x32xf32> {nn.param, nn.name = "fc1.weight", dist.strategy = "replicate"},
    %w2: tensor<32x16xf32> {nn.param, nn.name = "fc2.weight"}) -> tensor<8x4x16xf32> {
  %n = nn.rms_norm %x, %gamma epsilon 1.0e-05 : (tensor<8x4x16xf32>, tensor<16xf32>) -> tensor<8x4x16xf32>
  %h = nn.linear %n, %w1 : (tensor<8x4x16xf32>, tensor<16x32xf32>) -> tensor<8x4x32xf32>
  %y = nn.linear %h, %w2 : (tensor<8x4x32xf32>, tensor<32x16xf32>) -> tensor<8x4x16xf32>
  return %y : tensor<8x4x16xf32>
}

// -----

dist.mesh @mesh shape = [2] axes = ["tp"] {dist.strategies = ["tp"]}

// Tests that a row-parallel linear with a bias (GPT-2's c_proj) is split into
// nn.linear without the bias (partial<sum> over tp) and nn.bias_add on the
// replicated sum, so the bias is added once, after the all-reduce
// (Megatron's RowParallelLinear); the column-parallel c_fc keeps its bias,
// sharded like its output features.
// CHECK-LABEL: func.func @bias_split(
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<4x8x16xf32> {dist.placement = #dist.placement<@mesh, [replicate]>}
// CHECK-SAME: %[[W1:[a-z0-9]+]]: tensor<16x32xf32> {dist.placement = #dist.placement<@mesh, [shard<1>]>, nn.name = "h.0.mlp.c_fc.weight", nn.param}
// CHECK-SAME: %[[B1:[a-z0-9]+]]: tensor<32xf32> {dist.placement = #dist.placement<@mesh, [shard<0>]>, nn.name = "h.0.mlp.c_fc.bias", nn.param}
// CHECK-SAME: %[[W2:[a-z0-9]+]]: tensor<32x16xf32> {dist.placement = #dist.placement<@mesh, [shard<0>]>, nn.name = "h.0.mlp.c_proj.weight", nn.param}
// CHECK-SAME: %[[B2:[a-z0-9]+]]: tensor<16xf32> {dist.placement = #dist.placement<@mesh, [replicate]>, nn.name = "h.0.mlp.c_proj.bias", nn.param}
// CHECK-NEXT: %[[H:[a-z0-9_]+]] = nn.linear %[[X]], %[[W1]], %[[B1]] {dist.operand_placements = [#dist.placement<@mesh, [replicate]>, #dist.placement<@mesh, [shard<1>]>, #dist.placement<@mesh, [shard<0>]>], dist.result_placements = [#dist.placement<@mesh, [shard<2>]>]} : (tensor<4x8x16xf32>, tensor<16x32xf32>, tensor<32xf32>) -> tensor<4x8x32xf32>
// CHECK-NEXT: %[[A:[a-z0-9_]+]] = nn.gelu %[[H]]
// CHECK-NEXT: %[[Y:[a-z0-9_]+]] = nn.linear %[[A]], %[[W2]] {dist.operand_placements = [#dist.placement<@mesh, [shard<2>]>, #dist.placement<@mesh, [shard<0>]>], dist.result_placements = [#dist.placement<@mesh, [partial<sum>]>]} : (tensor<4x8x32xf32>, tensor<32x16xf32>) -> tensor<4x8x16xf32>
// CHECK-NEXT: %[[YB:[a-z0-9_]+]] = nn.bias_add %[[Y]], %[[B2]] {dist.operand_placements = [#dist.placement<@mesh, [replicate]>, #dist.placement<@mesh, [replicate]>], dist.result_placements = [#dist.placement<@mesh, [replicate]>]} : (tensor<4x8x16xf32>, tensor<16xf32>) -> tensor<4x8x16xf32>
// CHECK-NEXT: %[[R:[a-z0-9_]+]] = nn.add %[[X]], %[[YB]]
// CHECK-NEXT: return %[[R]]
func.func @bias_split(%x: tensor<4x8x16xf32>,
    %w1: tensor<16x32xf32> {nn.param, nn.name = "h.0.mlp.c_fc.weight"},
    %b1: tensor<32xf32> {nn.param, nn.name = "h.0.mlp.c_fc.bias"},
    %w2: tensor<32x16xf32> {nn.param, nn.name = "h.0.mlp.c_proj.weight"},
    %b2: tensor<16xf32> {nn.param, nn.name = "h.0.mlp.c_proj.bias"}) -> tensor<4x8x16xf32> {
  %h = nn.linear %x, %w1, %b1 : (tensor<4x8x16xf32>, tensor<16x32xf32>, tensor<32xf32>) -> tensor<4x8x32xf32>
  %a = nn.gelu %h : (tensor<4x8x32xf32>) -> tensor<4x8x32xf32>
  %y = nn.linear %a, %w2, %b2 : (tensor<4x8x32xf32>, tensor<32x16xf32>, tensor<16xf32>) -> tensor<4x8x16xf32>
  %r = nn.add %x, %y : (tensor<4x8x16xf32>, tensor<4x8x16xf32>) -> tensor<4x8x16xf32>
  return %r : tensor<4x8x16xf32>
}
