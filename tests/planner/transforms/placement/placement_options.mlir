// RUN: plan-opt %s --plan-placement="mesh=fsdp=2,tp=4 axes=fsdp,tp devices=8" | FileCheck %s
// RUN: not plan-opt %s --plan-placement="mesh=dp=3,tp=4 axes=dp,tp devices=8" 2>&1 | FileCheck %s --check-prefix=DEVICES
// RUN: not plan-opt %s --plan-placement="mesh=dp=2,,tp=4 axes=dp,tp" 2>&1 | FileCheck %s --check-prefix=SYNTAX
// RUN: not plan-opt %s --plan-placement="mesh=dp=2,tp=4 axes=dp" 2>&1 | FileCheck %s --check-prefix=COUNT
// RUN: not plan-opt %s --plan-placement="mesh=dp=2,tp=4 axes=dp,zero3" 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// RUN: plan-opt %s --plan-placement="mesh=pp=2,tp=4 axes=pp,tp" | FileCheck %s --check-prefix=PP
// RUN: not plan-opt %s --plan-placement="mesh=pp=2,tp=2,pp2=2 axes=pp,tp,pp" 2>&1 | FileCheck %s --check-prefix=TWOPP
// RUN: not plan-opt %s --plan-placement 2>&1 | FileCheck %s --check-prefix=NOMESH
// RUN: plan-opt %s --plan-placement="mesh=tp=2 axes=tp" | FileCheck %s --check-prefix=VOCAB
// RUN: plan-opt %s --plan-placement="mesh=tp=2 axes=tp vocab-parallel-loss=false" | FileCheck %s --check-prefix=GATHERED

// Tests that the mesh and strategies come from the options: the pass declares
// the mesh with its strategies, then places the Megatron pair under fsdp x tp.
// CHECK: dist.mesh @mesh shape = [2, 4] axes = ["fsdp", "tp"] {dist.strategies = ["fsdp", "tp"]}
// CHECK-LABEL: func.func @mlp(
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<8x4x16xf32> {dist.placement = #dist.placement<@mesh, [shard<0>, replicate]>}
// CHECK-SAME: %[[W1:[a-z0-9]+]]: tensor<16x32xf32> {dist.placement = #dist.placement<@mesh, [shard<0>, shard<1>]>, nn.name = "fc1.weight", nn.param}
// CHECK-SAME: %[[W2:[a-z0-9]+]]: tensor<32x16xf32> {dist.placement = #dist.placement<@mesh, [shard<1>, shard<0>]>, nn.name = "fc2.weight", nn.param}
// CHECK-NEXT: %[[H:[a-z0-9_]+]] = nn.linear %[[X]], %[[W1]] {dist.operand_placements = [#dist.placement<@mesh, [shard<0>, replicate]>, #dist.placement<@mesh, [replicate, shard<1>]>], dist.result_placements = [#dist.placement<@mesh, [shard<0>, shard<2>]>]}
// CHECK-NEXT: %[[A:[a-z0-9_]+]] = nn.gelu %[[H]] {dist.operand_placements = [#dist.placement<@mesh, [shard<0>, shard<2>]>], dist.result_placements = [#dist.placement<@mesh, [shard<0>, shard<2>]>]}
// CHECK-NEXT: %[[Y:[a-z0-9_]+]] = nn.linear %[[A]], %[[W2]] {dist.operand_placements = [#dist.placement<@mesh, [shard<0>, shard<2>]>, #dist.placement<@mesh, [replicate, shard<0>]>], dist.result_placements = [#dist.placement<@mesh, [shard<0>, partial<sum>]>]}
// CHECK-NEXT: return %[[Y]]

// DEVICES: error: invalid mesh 'dp=3,tp=4': mesh spec "dp=3,tp=4": mesh shape 3x4 has 12 devices but world size is 8
// SYNTAX: error: invalid mesh 'dp=2,,tp=4': mesh spec "dp=2,,tp=4": missing an axis at column 6
// COUNT: error: 'dist.mesh' op got 1 axis strategies ('dp') for 2 mesh axes [dp, tp]; give exactly one strategy per mesh axis, in mesh order
// UNKNOWN: error: 'dist.mesh' op unknown strategy 'zero3' for mesh axis 'tp'; expected fsdp, dp, tp or pp
// A pp axis splits nothing: every tensor is whole along it (plan-stages and
// plan-split-stages give each coordinate its layers), the tp axis as alone.
// PP: dist.mesh @mesh shape = [2, 4] axes = ["pp", "tp"] {dist.strategies = ["pp", "tp"]}
// PP-LABEL: func.func @mlp(
// PP-SAME: tensor<8x4x16xf32> {dist.placement = #dist.placement<@mesh, [replicate, replicate]>}
// PP-SAME: tensor<16x32xf32> {dist.placement = #dist.placement<@mesh, [replicate, shard<1>]>, nn.name = "fc1.weight", nn.param}
// PP-SAME: tensor<32x16xf32> {dist.placement = #dist.placement<@mesh, [replicate, shard<0>]>, nn.name = "fc2.weight", nn.param}
// PP: nn.linear {{.+}} dist.result_placements = [#dist.placement<@mesh, [replicate, partial<sum>]>]
// TWOPP: error: 'dist.mesh' op got 2 pp axes in 'pp,tp,pp'; pipeline stages use one mesh axis, merge them into one
// NOMESH: error: plan-placement needs one mesh, got 0 dist.mesh ops and no mesh= option; pass e.g. --plan-placement="mesh=dp=2,tp=4 axes=dp,tp" or declare one dist.mesh
func.func @mlp(%x: tensor<8x4x16xf32>,
    %w1: tensor<16x32xf32> {nn.param, nn.name = "fc1.weight"},
    %w2: tensor<32x16xf32> {nn.param, nn.name = "fc2.weight"}) -> tensor<8x4x16xf32> {
  %h = nn.linear %x, %w1 : (tensor<8x4x16xf32>, tensor<16x32xf32>) -> tensor<8x4x32xf32>
  %a = nn.gelu %h : (tensor<8x4x32xf32>) -> tensor<8x4x32xf32>
  %y = nn.linear %a, %w2 : (tensor<8x4x32xf32>, tensor<32x16xf32>) -> tensor<8x4x16xf32>
  return %y : tensor<8x4x16xf32>
}

// Tests vocab-parallel-loss: by default the loss of vocab-sharded logits (a
// column-parallel head) is lowered to the vocab-parallel ops; with
// vocab-parallel-loss=false nn.cross_entropy stays and wants the logits
// replicated, so collective insertion gathers them.
// VOCAB-LABEL: func.func @head(
// VOCAB: %[[LOGITS:[a-z0-9_]+]] = nn.linear
// VOCAB-SAME: dist.result_placements = [#dist.placement<@mesh, [shard<1>]>]
// VOCAB-NEXT: %[[MAX:[a-z0-9_]+]] = nn.vocab_max %[[LOGITS]] vocab 32
// VOCAB-NEXT: %[[STATS:[a-z0-9_]+]] = nn.vocab_stats %[[LOGITS]], %{{.*}}, %[[MAX]] vocab 32
// VOCAB-NEXT: %[[LOSS:[a-z0-9_]+]] = nn.vocab_cross_entropy %[[STATS]]
// VOCAB-NEXT: return %[[LOSS]]
// GATHERED-LABEL: func.func @head(
// GATHERED: %[[LOGITS:[a-z0-9_]+]] = nn.linear
// GATHERED-SAME: dist.result_placements = [#dist.placement<@mesh, [shard<1>]>]
// GATHERED-NEXT: %[[LOSS:[a-z0-9_]+]] = nn.cross_entropy %[[LOGITS]], %{{.*}} {dist.operand_placements = [#dist.placement<@mesh, [replicate]>, #dist.placement<@mesh, [replicate]>], dist.result_placements = [#dist.placement<@mesh, [replicate]>]}
// GATHERED-NEXT: return %[[LOSS]]
func.func @head(%x: tensor<8x16xf32>, %labels: tensor<8xi32>,
    %w: tensor<16x32xf32> {nn.param, nn.name = "output.weight"}) -> tensor<f32> {
  %logits = nn.linear %x, %w : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
  %loss = nn.cross_entropy %logits, %labels : (tensor<8x32xf32>, tensor<8xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
