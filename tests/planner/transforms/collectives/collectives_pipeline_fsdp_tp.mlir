// RUN: plan-opt %s -split-input-file --plan-autodiff --plan-placement="mesh=fsdp=2,tp=2 axes=fsdp,tp" --plan-insert-collectives | FileCheck %s

// The same under fsdp x tp (2x2): each weight gathered over fsdp only, on the
// dim tp leaves whole, and its gradient reduce-scattered over fsdp, plus the tp
// all-reduces (the vocab-parallel loss's among them).

// Tests the exact collective sequence of the MLP training step.
// CHECK-LABEL: func.func @mlp(
// CHECK-NEXT: %[[V0:[a-z0-9_]+]] = dist.all_gather %arg2 on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<8x8xf32> -> tensor<16x8xf32>
// CHECK-NEXT: %[[V1:[a-z0-9_]+]] = nn.linear %arg0, %[[V0]]
// CHECK-NEXT: dist.free %[[V0]] : tensor<16x8xf32>
// CHECK-NEXT: %[[V2:[a-z0-9_]+]] = nn.silu %[[V1]]
// CHECK-NEXT: %[[V3:[a-z0-9_]+]] = dist.all_gather %arg3 on @mesh axes = ["fsdp"] gather_dim = 1 wire = f32 : tensor<8x6xf32> -> tensor<8x12xf32>
// CHECK-NEXT: %[[V4:[a-z0-9_]+]] = nn.linear %[[V2]], %[[V3]]
// CHECK-NEXT: dist.free %[[V3]] : tensor<8x12xf32>
// CHECK-NEXT: %[[V5:[a-z0-9_]+]] = dist.all_reduce %[[V4]] on @mesh axes = ["tp"] reduction = sum wire = f32 accum = f32 : tensor<4x12xf32> -> tensor<4x12xf32>
// CHECK-NEXT: %[[V6:[a-z0-9_]+]] = nn.cross_entropy %[[V5]], %arg1
// CHECK-NEXT: %[[V7:[a-z0-9_]+]] = dist.all_reduce %[[V6]] on @mesh axes = ["fsdp"] reduction = avg wire = f32 accum = f32 : tensor<f32> -> tensor<f32>
// CHECK-NEXT: %[[V8:[a-z0-9_]+]] = nn.cross_entropy_grad %[[V5]], %arg1, %arg4 scale 1.250000e-01
// CHECK-NEXT: %[[V9:[a-z0-9_]+]] = dist.all_gather %arg3 on @mesh axes = ["fsdp"] gather_dim = 1 wire = f32 : tensor<8x6xf32> -> tensor<8x12xf32>
// CHECK-NEXT: %[[V10:[a-z0-9_]+]] = nn.matmul %[[V8]], %[[V9]] transpose_rhs
// CHECK-NEXT: dist.free %[[V9]] : tensor<8x12xf32>
// CHECK-NEXT: %[[V11:[a-z0-9_]+]] = nn.matmul %[[V2]], %[[V8]] transpose_lhs
// CHECK-NEXT: %[[V12:[a-z0-9_]+]] = dist.reduce_scatter %[[V11]] on @mesh axes = ["fsdp"] scatter_dim = 1 reduction = sum wire = f32 accum = f32 : tensor<8x12xf32> -> tensor<8x6xf32>
// CHECK-NEXT: %[[V13:[a-z0-9_]+]] = nn.silu_grad %[[V1]], %[[V10]]
// CHECK-NEXT: %[[V14:[a-z0-9_]+]] = nn.matmul %arg0, %[[V13]] transpose_lhs
// CHECK-NEXT: %[[V15:[a-z0-9_]+]] = dist.reduce_scatter %[[V14]] on @mesh axes = ["fsdp"] scatter_dim = 0 reduction = sum wire = f32 accum = f32 : tensor<16x8xf32> -> tensor<8x8xf32>
// CHECK-NEXT: return %[[V7]], %[[V15]], %[[V12]] : tensor<f32>, tensor<8x8xf32>, tensor<8x6xf32>
func.func @mlp(%x: tensor<8x16xf32>, %labels: tensor<8xi32>,
    %w1: tensor<16x16xf32> {nn.param, nn.name = "fc1.weight"},
    %w2: tensor<16x12xf32> {nn.param, nn.name = "head.weight"}) -> tensor<f32> {
  %h = nn.linear %x, %w1 : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
  %a = nn.silu %h : (tensor<8x16xf32>) -> tensor<8x16xf32>
  %y = nn.linear %a, %w2 : (tensor<8x16xf32>, tensor<16x12xf32>) -> tensor<8x12xf32>
  %l = nn.cross_entropy %y, %labels : (tensor<8x12xf32>, tensor<8xi32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests the exact collective sequence of the Llama layer training step.
// Forward: 12 all_gathers over fsdp (one per parameter, each freed after its
// use), 3 all_reduces over tp (embedding, after wo, after w2), the
// vocab-parallel loss's 2 all_reduces over tp (max, statistics) and 1
// all_reduce (avg) of the loss over fsdp. Backward: 11 all_gathers over fsdp
// (every parameter but tok_embeddings.weight, each freed), 3 all_reduces over
// tp (as under tp alone) and 12 reduce_scatters over fsdp (one per gradient).
// 44 collectives in all, no gather of the logits and no slice.
// CHECK-LABEL: func.func @llama(
// CHECK-NEXT: %[[V0:[a-z0-9_]+]] = dist.all_gather %arg2 on @mesh axes = ["fsdp"] gather_dim = 1 wire = f32 : tensor<16x8xf32> -> tensor<16x16xf32>
// CHECK-NEXT: %[[V1:[a-z0-9_]+]] = nn.embedding %arg0, %[[V0]]
// CHECK-NEXT: dist.free %[[V0]] : tensor<16x16xf32>
// CHECK-NEXT: %[[V2:[a-z0-9_]+]] = dist.all_reduce %[[V1]] on @mesh axes = ["tp"] reduction = sum wire = f32 accum = f32 : tensor<2x8x16xf32> -> tensor<2x8x16xf32>
// CHECK-NEXT: %[[V3:[a-z0-9_]+]] = dist.all_gather %arg3 on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<8xf32> -> tensor<16xf32>
// CHECK-NEXT: %[[V4:[a-z0-9_]+]] = nn.rms_norm %[[V2]], %[[V3]] epsilon 1.000000e-05
// CHECK-NEXT: dist.free %[[V3]] : tensor<16xf32>
// CHECK-NEXT: %[[V5:[a-z0-9_]+]] = dist.all_gather %arg4 on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<8x8xf32> -> tensor<16x8xf32>
// CHECK-NEXT: %[[V6:[a-z0-9_]+]] = nn.linear %[[V4]], %[[V5]]
// CHECK-NEXT: dist.free %[[V5]] : tensor<16x8xf32>
// CHECK-NEXT: %[[V7:[a-z0-9_]+]] = dist.all_gather %arg5 on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<8x4xf32> -> tensor<16x4xf32>
// CHECK-NEXT: %[[V8:[a-z0-9_]+]] = nn.linear %[[V4]], %[[V7]]
// CHECK-NEXT: dist.free %[[V7]] : tensor<16x4xf32>
// CHECK-NEXT: %[[V9:[a-z0-9_]+]] = dist.all_gather %arg6 on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<8x4xf32> -> tensor<16x4xf32>
// CHECK-NEXT: %[[V10:[a-z0-9_]+]] = nn.linear %[[V4]], %[[V9]]
// CHECK-NEXT: dist.free %[[V9]] : tensor<16x4xf32>
// CHECK-NEXT: %[[V11:[a-z0-9_]+]] = nn.reshape %[[V6]]
// CHECK-NEXT: %[[V12:[a-z0-9_]+]] = nn.reshape %[[V8]]
// CHECK-NEXT: %[[V13:[a-z0-9_]+]] = nn.reshape %[[V10]]
// CHECK-NEXT: %[[V14:[a-z0-9_]+]] = nn.rope %[[V11]] theta 1.000000e+04
// CHECK-NEXT: %[[V15:[a-z0-9_]+]] = nn.rope %[[V12]] theta 1.000000e+04
// CHECK-NEXT: %[[V16:[a-z0-9_]+]] = nn.attention %[[V14]], %[[V15]], %[[V13]]
// CHECK-NEXT: %[[V17:[a-z0-9_]+]] = nn.reshape %[[V16]]
// CHECK-NEXT: %[[V18:[a-z0-9_]+]] = dist.all_gather %arg7 on @mesh axes = ["fsdp"] gather_dim = 1 wire = f32 : tensor<8x8xf32> -> tensor<8x16xf32>
// CHECK-NEXT: %[[V19:[a-z0-9_]+]] = nn.linear %[[V17]], %[[V18]]
// CHECK-NEXT: dist.free %[[V18]] : tensor<8x16xf32>
// CHECK-NEXT: %[[V20:[a-z0-9_]+]] = nn.add %[[V1]], %[[V19]]
// CHECK-NEXT: %[[V21:[a-z0-9_]+]] = dist.all_reduce %[[V20]] on @mesh axes = ["tp"] reduction = sum wire = f32 accum = f32 : tensor<2x8x16xf32> -> tensor<2x8x16xf32>
// CHECK-NEXT: %[[V22:[a-z0-9_]+]] = dist.all_gather %arg8 on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<8xf32> -> tensor<16xf32>
// CHECK-NEXT: %[[V23:[a-z0-9_]+]] = nn.rms_norm %[[V21]], %[[V22]] epsilon 1.000000e-05
// CHECK-NEXT: dist.free %[[V22]] : tensor<16xf32>
// CHECK-NEXT: %[[V24:[a-z0-9_]+]] = dist.all_gather %arg9 on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<8x12xf32> -> tensor<16x12xf32>
// CHECK-NEXT: %[[V25:[a-z0-9_]+]] = nn.linear %[[V23]], %[[V24]]
// CHECK-NEXT: dist.free %[[V24]] : tensor<16x12xf32>
// CHECK-NEXT: %[[V26:[a-z0-9_]+]] = dist.all_gather %arg10 on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<8x12xf32> -> tensor<16x12xf32>
// CHECK-NEXT: %[[V27:[a-z0-9_]+]] = nn.linear %[[V23]], %[[V26]]
// CHECK-NEXT: dist.free %[[V26]] : tensor<16x12xf32>
// CHECK-NEXT: %[[V28:[a-z0-9_]+]] = nn.silu %[[V25]]
// CHECK-NEXT: %[[V29:[a-z0-9_]+]] = nn.mul %[[V28]], %[[V27]]
// CHECK-NEXT: %[[V30:[a-z0-9_]+]] = dist.all_gather %arg11 on @mesh axes = ["fsdp"] gather_dim = 1 wire = f32 : tensor<12x8xf32> -> tensor<12x16xf32>
// CHECK-NEXT: %[[V31:[a-z0-9_]+]] = nn.linear %[[V29]], %[[V30]]
// CHECK-NEXT: dist.free %[[V30]] : tensor<12x16xf32>
// CHECK-NEXT: %[[V32:[a-z0-9_]+]] = nn.add %[[V20]], %[[V31]]
// CHECK-NEXT: %[[V33:[a-z0-9_]+]] = dist.all_reduce %[[V32]] on @mesh axes = ["tp"] reduction = sum wire = f32 accum = f32 : tensor<2x8x16xf32> -> tensor<2x8x16xf32>
// CHECK-NEXT: %[[V34:[a-z0-9_]+]] = dist.all_gather %arg12 on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<8xf32> -> tensor<16xf32>
// CHECK-NEXT: %[[V35:[a-z0-9_]+]] = nn.rms_norm %[[V33]], %[[V34]] epsilon 1.000000e-05
// CHECK-NEXT: dist.free %[[V34]] : tensor<16xf32>
// CHECK-NEXT: %[[V36:[a-z0-9_]+]] = dist.all_gather %arg13 on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<8x16xf32> -> tensor<16x16xf32>
// CHECK-NEXT: %[[V37:[a-z0-9_]+]] = nn.linear %[[V35]], %[[V36]]
// CHECK-NEXT: dist.free %[[V36]] : tensor<16x16xf32>
// CHECK-NEXT: %[[V38:[a-z0-9_]+]] = nn.vocab_max %[[V37]] vocab 32
// CHECK-NEXT: %[[V39:[a-z0-9_]+]] = dist.all_reduce %[[V38]] on @mesh axes = ["tp"] reduction = max wire = f32 accum = f32 : tensor<2x8xf32> -> tensor<2x8xf32>
// CHECK-NEXT: %[[V40:[a-z0-9_]+]] = nn.vocab_stats %[[V37]], %arg1, %[[V39]] vocab 32
// CHECK-NEXT: %[[V41:[a-z0-9_]+]] = dist.all_reduce %[[V40]] on @mesh axes = ["tp"] reduction = sum wire = f32 accum = f32 : tensor<2x8x2xf32> -> tensor<2x8x2xf32>
// CHECK-NEXT: %[[V42:[a-z0-9_]+]] = nn.vocab_cross_entropy %[[V41]]
// CHECK-NEXT: %[[V43:[a-z0-9_]+]] = dist.all_reduce %[[V42]] on @mesh axes = ["fsdp"] reduction = avg wire = f32 accum = f32 : tensor<f32> -> tensor<f32>
// CHECK-NEXT: %[[V44:[a-z0-9_]+]] = nn.vocab_cross_entropy_grad %[[V37]], %arg1, %[[V39]], %[[V41]], %arg14 scale 3.125000e-02 vocab 32
// CHECK-NEXT: %[[V45:[a-z0-9_]+]] = dist.all_gather %arg13 on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<8x16xf32> -> tensor<16x16xf32>
// CHECK-NEXT: %[[V46:[a-z0-9_]+]] = nn.matmul %[[V44]], %[[V45]] transpose_rhs
// CHECK-NEXT: dist.free %[[V45]] : tensor<16x16xf32>
// CHECK-NEXT: %[[V47:[a-z0-9_]+]] = nn.matmul %[[V35]], %[[V44]] transpose_lhs
// CHECK-NEXT: %[[V48:[a-z0-9_]+]] = dist.reduce_scatter %[[V47]] on @mesh axes = ["fsdp"] scatter_dim = 0 reduction = sum wire = f32 accum = f32 : tensor<16x16xf32> -> tensor<8x16xf32>
// CHECK-NEXT: %[[V49:[a-z0-9_]+]] = dist.all_gather %arg12 on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<8xf32> -> tensor<16xf32>
// CHECK-NEXT: %[[V50:[a-z0-9_]+]] = dist.all_reduce %[[V46]] on @mesh axes = ["tp"] reduction = sum wire = f32 accum = f32 : tensor<2x8x16xf32> -> tensor<2x8x16xf32>
// CHECK-NEXT: %[[V51:[a-z0-9_]+]], %[[V52:[a-z0-9_]+]] = nn.rms_norm_grad %[[V33]], %[[V49]], %[[V50]] epsilon 1.000000e-05
// CHECK-NEXT: dist.free %[[V49]] : tensor<16xf32>
// CHECK-NEXT: %[[V53:[a-z0-9_]+]] = dist.reduce_scatter %[[V52]] on @mesh axes = ["fsdp"] scatter_dim = 0 reduction = sum wire = f32 accum = f32 : tensor<16xf32> -> tensor<8xf32>
// CHECK-NEXT: %[[V54:[a-z0-9_]+]] = dist.all_gather %arg11 on @mesh axes = ["fsdp"] gather_dim = 1 wire = f32 : tensor<12x8xf32> -> tensor<12x16xf32>
// CHECK-NEXT: %[[V55:[a-z0-9_]+]] = nn.matmul %[[V51]], %[[V54]] transpose_rhs
// CHECK-NEXT: dist.free %[[V54]] : tensor<12x16xf32>
// CHECK-NEXT: %[[V56:[a-z0-9_]+]] = nn.matmul %[[V29]], %[[V51]] transpose_lhs
// CHECK-NEXT: %[[V57:[a-z0-9_]+]] = dist.reduce_scatter %[[V56]] on @mesh axes = ["fsdp"] scatter_dim = 1 reduction = sum wire = f32 accum = f32 : tensor<12x16xf32> -> tensor<12x8xf32>
// CHECK-NEXT: %[[V58:[a-z0-9_]+]] = nn.mul %[[V55]], %[[V27]]
// CHECK-NEXT: %[[V59:[a-z0-9_]+]] = nn.mul %[[V55]], %[[V28]]
// CHECK-NEXT: %[[V60:[a-z0-9_]+]] = nn.silu_grad %[[V25]], %[[V58]]
// CHECK-NEXT: %[[V61:[a-z0-9_]+]] = dist.all_gather %arg10 on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<8x12xf32> -> tensor<16x12xf32>
// CHECK-NEXT: %[[V62:[a-z0-9_]+]] = nn.matmul %[[V59]], %[[V61]] transpose_rhs
// CHECK-NEXT: dist.free %[[V61]] : tensor<16x12xf32>
// CHECK-NEXT: %[[V63:[a-z0-9_]+]] = nn.matmul %[[V23]], %[[V59]] transpose_lhs
// CHECK-NEXT: %[[V64:[a-z0-9_]+]] = dist.reduce_scatter %[[V63]] on @mesh axes = ["fsdp"] scatter_dim = 0 reduction = sum wire = f32 accum = f32 : tensor<16x12xf32> -> tensor<8x12xf32>
// CHECK-NEXT: %[[V65:[a-z0-9_]+]] = dist.all_gather %arg9 on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<8x12xf32> -> tensor<16x12xf32>
// CHECK-NEXT: %[[V66:[a-z0-9_]+]] = nn.matmul %[[V60]], %[[V65]] transpose_rhs
// CHECK-NEXT: dist.free %[[V65]] : tensor<16x12xf32>
// CHECK-NEXT: %[[V67:[a-z0-9_]+]] = nn.matmul %[[V23]], %[[V60]] transpose_lhs
// CHECK-NEXT: %[[V68:[a-z0-9_]+]] = dist.reduce_scatter %[[V67]] on @mesh axes = ["fsdp"] scatter_dim = 0 reduction = sum wire = f32 accum = f32 : tensor<16x12xf32> -> tensor<8x12xf32>
// CHECK-NEXT: %[[V69:[a-z0-9_]+]] = nn.add %[[V62]], %[[V66]]
// CHECK-NEXT: %[[V70:[a-z0-9_]+]] = dist.all_gather %arg8 on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<8xf32> -> tensor<16xf32>
// CHECK-NEXT: %[[V71:[a-z0-9_]+]] = dist.all_reduce %[[V69]] on @mesh axes = ["tp"] reduction = sum wire = f32 accum = f32 : tensor<2x8x16xf32> -> tensor<2x8x16xf32>
// CHECK-NEXT: %[[V72:[a-z0-9_]+]], %[[V73:[a-z0-9_]+]] = nn.rms_norm_grad %[[V21]], %[[V70]], %[[V71]] epsilon 1.000000e-05
// CHECK-NEXT: dist.free %[[V70]] : tensor<16xf32>
// CHECK-NEXT: %[[V74:[a-z0-9_]+]] = dist.reduce_scatter %[[V73]] on @mesh axes = ["fsdp"] scatter_dim = 0 reduction = sum wire = f32 accum = f32 : tensor<16xf32> -> tensor<8xf32>
// CHECK-NEXT: %[[V75:[a-z0-9_]+]] = nn.add %[[V51]], %[[V72]]
// CHECK-NEXT: %[[V76:[a-z0-9_]+]] = dist.all_gather %arg7 on @mesh axes = ["fsdp"] gather_dim = 1 wire = f32 : tensor<8x8xf32> -> tensor<8x16xf32>
// CHECK-NEXT: %[[V77:[a-z0-9_]+]] = nn.matmul %[[V75]], %[[V76]] transpose_rhs
// CHECK-NEXT: dist.free %[[V76]] : tensor<8x16xf32>
// CHECK-NEXT: %[[V78:[a-z0-9_]+]] = nn.matmul %[[V17]], %[[V75]] transpose_lhs
// CHECK-NEXT: %[[V79:[a-z0-9_]+]] = dist.reduce_scatter %[[V78]] on @mesh axes = ["fsdp"] scatter_dim = 1 reduction = sum wire = f32 accum = f32 : tensor<8x16xf32> -> tensor<8x8xf32>
// CHECK-NEXT: %[[V80:[a-z0-9_]+]] = nn.reshape %[[V77]]
// CHECK-NEXT: %[[V81:[a-z0-9_]+]], %[[V82:[a-z0-9_]+]], %[[V83:[a-z0-9_]+]] = nn.attention_grad %[[V14]], %[[V15]], %[[V13]], %[[V80]]
// CHECK-NEXT: %[[V84:[a-z0-9_]+]] = nn.rope %[[V82]] theta 1.000000e+04 inverse
// CHECK-NEXT: %[[V85:[a-z0-9_]+]] = nn.rope %[[V81]] theta 1.000000e+04 inverse
// CHECK-NEXT: %[[V86:[a-z0-9_]+]] = nn.reshape %[[V83]]
// CHECK-NEXT: %[[V87:[a-z0-9_]+]] = nn.reshape %[[V84]]
// CHECK-NEXT: %[[V88:[a-z0-9_]+]] = nn.reshape %[[V85]]
// CHECK-NEXT: %[[V89:[a-z0-9_]+]] = dist.all_gather %arg6 on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<8x4xf32> -> tensor<16x4xf32>
// CHECK-NEXT: %[[V90:[a-z0-9_]+]] = nn.matmul %[[V86]], %[[V89]] transpose_rhs
// CHECK-NEXT: dist.free %[[V89]] : tensor<16x4xf32>
// CHECK-NEXT: %[[V91:[a-z0-9_]+]] = nn.matmul %[[V4]], %[[V86]] transpose_lhs
// CHECK-NEXT: %[[V92:[a-z0-9_]+]] = dist.reduce_scatter %[[V91]] on @mesh axes = ["fsdp"] scatter_dim = 0 reduction = sum wire = f32 accum = f32 : tensor<16x4xf32> -> tensor<8x4xf32>
// CHECK-NEXT: %[[V93:[a-z0-9_]+]] = dist.all_gather %arg5 on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<8x4xf32> -> tensor<16x4xf32>
// CHECK-NEXT: %[[V94:[a-z0-9_]+]] = nn.matmul %[[V87]], %[[V93]] transpose_rhs
// CHECK-NEXT: dist.free %[[V93]] : tensor<16x4xf32>
// CHECK-NEXT: %[[V95:[a-z0-9_]+]] = nn.matmul %[[V4]], %[[V87]] transpose_lhs
// CHECK-NEXT: %[[V96:[a-z0-9_]+]] = dist.reduce_scatter %[[V95]] on @mesh axes = ["fsdp"] scatter_dim = 0 reduction = sum wire = f32 accum = f32 : tensor<16x4xf32> -> tensor<8x4xf32>
// CHECK-NEXT: %[[V97:[a-z0-9_]+]] = nn.add %[[V90]], %[[V94]]
// CHECK-NEXT: %[[V98:[a-z0-9_]+]] = dist.all_gather %arg4 on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<8x8xf32> -> tensor<16x8xf32>
// CHECK-NEXT: %[[V99:[a-z0-9_]+]] = nn.matmul %[[V88]], %[[V98]] transpose_rhs
// CHECK-NEXT: dist.free %[[V98]] : tensor<16x8xf32>
// CHECK-NEXT: %[[V100:[a-z0-9_]+]] = nn.matmul %[[V4]], %[[V88]] transpose_lhs
// CHECK-NEXT: %[[V101:[a-z0-9_]+]] = dist.reduce_scatter %[[V100]] on @mesh axes = ["fsdp"] scatter_dim = 0 reduction = sum wire = f32 accum = f32 : tensor<16x8xf32> -> tensor<8x8xf32>
// CHECK-NEXT: %[[V102:[a-z0-9_]+]] = nn.add %[[V97]], %[[V99]]
// CHECK-NEXT: %[[V103:[a-z0-9_]+]] = dist.all_gather %arg3 on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<8xf32> -> tensor<16xf32>
// CHECK-NEXT: %[[V104:[a-z0-9_]+]] = dist.all_reduce %[[V102]] on @mesh axes = ["tp"] reduction = sum wire = f32 accum = f32 : tensor<2x8x16xf32> -> tensor<2x8x16xf32>
// CHECK-NEXT: %[[V105:[a-z0-9_]+]], %[[V106:[a-z0-9_]+]] = nn.rms_norm_grad %[[V2]], %[[V103]], %[[V104]] epsilon 1.000000e-05
// CHECK-NEXT: dist.free %[[V103]] : tensor<16xf32>
// CHECK-NEXT: %[[V107:[a-z0-9_]+]] = dist.reduce_scatter %[[V106]] on @mesh axes = ["fsdp"] scatter_dim = 0 reduction = sum wire = f32 accum = f32 : tensor<16xf32> -> tensor<8xf32>
// CHECK-NEXT: %[[V108:[a-z0-9_]+]] = nn.add %[[V75]], %[[V105]]
// CHECK-NEXT: %[[V109:[a-z0-9_]+]] = nn.embedding_grad %arg0, %[[V108]]
// CHECK-NEXT: %[[V110:[a-z0-9_]+]] = dist.reduce_scatter %[[V109]] on @mesh axes = ["fsdp"] scatter_dim = 1 reduction = sum wire = f32 accum = f32 : tensor<16x16xf32> -> tensor<16x8xf32>
// CHECK-NEXT: return %[[V43]], %[[V110]], %[[V107]], %[[V101]], %[[V96]], %[[V92]], %[[V79]], %[[V74]], %[[V68]], %[[V64]], %[[V57]], %[[V53]], %[[V48]] : tensor<f32>, tensor<16x8xf32>, tensor<8xf32>, tensor<8x8xf32>, tensor<8x4xf32>, tensor<8x4xf32>, tensor<8x8xf32>, tensor<8xf32>, tensor<8x12xf32>, tensor<8x12xf32>, tensor<12x8xf32>, tensor<8xf32>, tensor<8x16xf32>
func.func @llama(
    %ids: tensor<4x8xi32>, %labels: tensor<4x8xi32>,
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
  %h = nn.embedding %ids, %embed : (tensor<4x8xi32>, tensor<32x16xf32>) -> tensor<4x8x16xf32>
  %x = nn.rms_norm %h, %attn_norm epsilon 1.0e-05 : (tensor<4x8x16xf32>, tensor<16xf32>) -> tensor<4x8x16xf32>
  %q2 = nn.linear %x, %wq : (tensor<4x8x16xf32>, tensor<16x16xf32>) -> tensor<4x8x16xf32>
  %k2 = nn.linear %x, %wk : (tensor<4x8x16xf32>, tensor<16x8xf32>) -> tensor<4x8x8xf32>
  %v2 = nn.linear %x, %wv : (tensor<4x8x16xf32>, tensor<16x8xf32>) -> tensor<4x8x8xf32>
  %q = nn.reshape %q2 : (tensor<4x8x16xf32>) -> tensor<4x8x4x4xf32>
  %k = nn.reshape %k2 : (tensor<4x8x8xf32>) -> tensor<4x8x2x4xf32>
  %v = nn.reshape %v2 : (tensor<4x8x8xf32>) -> tensor<4x8x2x4xf32>
  %qr = nn.rope %q theta 1.0e+04 : (tensor<4x8x4x4xf32>) -> tensor<4x8x4x4xf32>
  %kr = nn.rope %k theta 1.0e+04 : (tensor<4x8x2x4xf32>) -> tensor<4x8x2x4xf32>
  %o = nn.attention %qr, %kr, %v : (tensor<4x8x4x4xf32>, tensor<4x8x2x4xf32>, tensor<4x8x2x4xf32>) -> tensor<4x8x4x4xf32>
  %o2 = nn.reshape %o : (tensor<4x8x4x4xf32>) -> tensor<4x8x16xf32>
  %attn = nn.linear %o2, %wo : (tensor<4x8x16xf32>, tensor<16x16xf32>) -> tensor<4x8x16xf32>
  %h1 = nn.add %h, %attn : (tensor<4x8x16xf32>, tensor<4x8x16xf32>) -> tensor<4x8x16xf32>
  %y = nn.rms_norm %h1, %ffn_norm epsilon 1.0e-05 : (tensor<4x8x16xf32>, tensor<16xf32>) -> tensor<4x8x16xf32>
  %gate = nn.linear %y, %w1 : (tensor<4x8x16xf32>, tensor<16x24xf32>) -> tensor<4x8x24xf32>
  %up = nn.linear %y, %w3 : (tensor<4x8x16xf32>, tensor<16x24xf32>) -> tensor<4x8x24xf32>
  %act = nn.silu %gate : (tensor<4x8x24xf32>) -> tensor<4x8x24xf32>
  %gated = nn.mul %act, %up : (tensor<4x8x24xf32>, tensor<4x8x24xf32>) -> tensor<4x8x24xf32>
  %down = nn.linear %gated, %w2 : (tensor<4x8x24xf32>, tensor<24x16xf32>) -> tensor<4x8x16xf32>
  %h2 = nn.add %h1, %down : (tensor<4x8x16xf32>, tensor<4x8x16xf32>) -> tensor<4x8x16xf32>
  %f = nn.rms_norm %h2, %norm epsilon 1.0e-05 : (tensor<4x8x16xf32>, tensor<16xf32>) -> tensor<4x8x16xf32>
  %logits = nn.linear %f, %output : (tensor<4x8x16xf32>, tensor<16x32xf32>) -> tensor<4x8x32xf32>
  %loss = nn.cross_entropy %logits, %labels : (tensor<4x8x32xf32>, tensor<4x8xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Tests the exact collective sequence of a GPT-2 block training step under
// fsdp x tp: the tp collectives of collectives_pipeline_tp.mlir (the
// row-parallel c_proj biases gathered over fsdp and added after the tp
// all_reduce) plus 26 all_gathers over fsdp (16 forward, 10 backward), 16
// reduce_scatters over fsdp (the tied wte gradient once, after the add of its
// two parts), 4 all_reduces over fsdp of the column-parallel biases (split by
// tp on their only dim, so replicated on the outer fsdp axis) and the loss's
// all_reduce (avg): 55 collectives and 1 slice.
// CHECK-LABEL: func.func @gpt2(
// CHECK-NEXT: %[[V0:[a-z0-9_]+]] = dist.all_gather %arg3 on @mesh axes = ["fsdp"] gather_dim = 1 wire = f32 : tensor<16x8xf32> -> tensor<16x16xf32>
// CHECK-NEXT: %[[V1:[a-z0-9_]+]] = nn.embedding %arg0, %[[V0]]
// CHECK-NEXT: %[[V2:[a-z0-9_]+]] = dist.all_gather %arg4 on @mesh axes = ["fsdp"] gather_dim = 1 wire = f32 : tensor<4x8xf32> -> tensor<4x16xf32>
// CHECK-NEXT: %[[V3:[a-z0-9_]+]] = nn.embedding %arg2, %[[V2]]
// CHECK-NEXT: dist.free %[[V2]] : tensor<4x16xf32>
// CHECK-NEXT: %[[V4:[a-z0-9_]+]] = nn.add %[[V1]], %[[V3]]
// CHECK-NEXT: %[[V5:[a-z0-9_]+]] = dist.all_reduce %[[V4]] on @mesh axes = ["tp"] reduction = sum wire = f32 accum = f32 : tensor<1x8x16xf32> -> tensor<1x8x16xf32>
// CHECK-NEXT: %[[V6:[a-z0-9_]+]] = dist.all_gather %arg5 on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<8xf32> -> tensor<16xf32>
// CHECK-NEXT: %[[V7:[a-z0-9_]+]] = dist.all_gather %arg6 on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<8xf32> -> tensor<16xf32>
// CHECK-NEXT: %[[V8:[a-z0-9_]+]] = nn.layer_norm %[[V5]], %[[V6]], %[[V7]] epsilon 1.000000e-05
// CHECK-NEXT: dist.free %[[V6]] : tensor<16xf32>
// CHECK-NEXT: dist.free %[[V7]] : tensor<16xf32>
// CHECK-NEXT: %[[V9:[a-z0-9_]+]] = dist.all_gather %arg7 on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<8x8xf32> -> tensor<16x8xf32>
// CHECK-NEXT: %[[V10:[a-z0-9_]+]] = nn.linear %[[V8]], %[[V9]], %arg8
// CHECK-NEXT: dist.free %[[V9]] : tensor<16x8xf32>
// CHECK-NEXT: %[[V11:[a-z0-9_]+]] = nn.reshape %[[V10]]
// CHECK-NEXT: %[[V12:[a-z0-9_]+]] = dist.all_gather %arg9 on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<8x8xf32> -> tensor<16x8xf32>
// CHECK-NEXT: %[[V13:[a-z0-9_]+]] = nn.linear %[[V8]], %[[V12]], %arg10
// CHECK-NEXT: dist.free %[[V12]] : tensor<16x8xf32>
// CHECK-NEXT: %[[V14:[a-z0-9_]+]] = nn.reshape %[[V13]]
// CHECK-NEXT: %[[V15:[a-z0-9_]+]] = dist.all_gather %arg11 on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<8x8xf32> -> tensor<16x8xf32>
// CHECK-NEXT: %[[V16:[a-z0-9_]+]] = nn.linear %[[V8]], %[[V15]], %arg12
// CHECK-NEXT: dist.free %[[V15]] : tensor<16x8xf32>
// CHECK-NEXT: %[[V17:[a-z0-9_]+]] = nn.reshape %[[V16]]
// CHECK-NEXT: %[[V18:[a-z0-9_]+]] = nn.attention %[[V11]], %[[V14]], %[[V17]]
// CHECK-NEXT: %[[V19:[a-z0-9_]+]] = nn.reshape %[[V18]]
// CHECK-NEXT: %[[V20:[a-z0-9_]+]] = dist.all_gather %arg13 on @mesh axes = ["fsdp"] gather_dim = 1 wire = f32 : tensor<8x8xf32> -> tensor<8x16xf32>
// CHECK-NEXT: %[[V21:[a-z0-9_]+]] = nn.linear %[[V19]], %[[V20]]
// CHECK-NEXT: dist.free %[[V20]] : tensor<8x16xf32>
// CHECK-NEXT: %[[V22:[a-z0-9_]+]] = dist.all_reduce %[[V21]] on @mesh axes = ["tp"] reduction = sum wire = f32 accum = f32 : tensor<1x8x16xf32> -> tensor<1x8x16xf32>
// CHECK-NEXT: %[[V23:[a-z0-9_]+]] = dist.all_gather %arg14 on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<8xf32> -> tensor<16xf32>
// CHECK-NEXT: %[[V24:[a-z0-9_]+]] = nn.bias_add %[[V22]], %[[V23]]
// CHECK-NEXT: dist.free %[[V23]] : tensor<16xf32>
// CHECK-NEXT: %[[V25:[a-z0-9_]+]] = nn.add %[[V5]], %[[V24]]
// CHECK-NEXT: %[[V26:[a-z0-9_]+]] = dist.all_gather %arg15 on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<8xf32> -> tensor<16xf32>
// CHECK-NEXT: %[[V27:[a-z0-9_]+]] = dist.all_gather %arg16 on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<8xf32> -> tensor<16xf32>
// CHECK-NEXT: %[[V28:[a-z0-9_]+]] = nn.layer_norm %[[V25]], %[[V26]], %[[V27]] epsilon 1.000000e-05
// CHECK-NEXT: dist.free %[[V26]] : tensor<16xf32>
// CHECK-NEXT: dist.free %[[V27]] : tensor<16xf32>
// CHECK-NEXT: %[[V29:[a-z0-9_]+]] = dist.all_gather %arg17 on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<8x16xf32> -> tensor<16x16xf32>
// CHECK-NEXT: %[[V30:[a-z0-9_]+]] = nn.linear %[[V28]], %[[V29]], %arg18
// CHECK-NEXT: dist.free %[[V29]] : tensor<16x16xf32>
// CHECK-NEXT: %[[V31:[a-z0-9_]+]] = nn.gelu %[[V30]]
// CHECK-NEXT: %[[V32:[a-z0-9_]+]] = dist.all_gather %arg19 on @mesh axes = ["fsdp"] gather_dim = 1 wire = f32 : tensor<16x8xf32> -> tensor<16x16xf32>
// CHECK-NEXT: %[[V33:[a-z0-9_]+]] = nn.linear %[[V31]], %[[V32]]
// CHECK-NEXT: dist.free %[[V32]] : tensor<16x16xf32>
// CHECK-NEXT: %[[V34:[a-z0-9_]+]] = dist.all_reduce %[[V33]] on @mesh axes = ["tp"] reduction = sum wire = f32 accum = f32 : tensor<1x8x16xf32> -> tensor<1x8x16xf32>
// CHECK-NEXT: %[[V35:[a-z0-9_]+]] = dist.all_gather %arg20 on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<8xf32> -> tensor<16xf32>
// CHECK-NEXT: %[[V36:[a-z0-9_]+]] = nn.bias_add %[[V34]], %[[V35]]
// CHECK-NEXT: dist.free %[[V35]] : tensor<16xf32>
// CHECK-NEXT: %[[V37:[a-z0-9_]+]] = nn.add %[[V25]], %[[V36]]
// CHECK-NEXT: %[[V38:[a-z0-9_]+]] = dist.all_gather %arg21 on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<8xf32> -> tensor<16xf32>
// CHECK-NEXT: %[[V39:[a-z0-9_]+]] = dist.all_gather %arg22 on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<8xf32> -> tensor<16xf32>
// CHECK-NEXT: %[[V40:[a-z0-9_]+]] = nn.layer_norm %[[V37]], %[[V38]], %[[V39]] epsilon 1.000000e-05
// CHECK-NEXT: dist.free %[[V38]] : tensor<16xf32>
// CHECK-NEXT: dist.free %[[V39]] : tensor<16xf32>
// CHECK-NEXT: %[[V41:[a-z0-9_]+]] = nn.matmul %[[V40]], %[[V0]] transpose_rhs
// CHECK-NEXT: dist.free %[[V0]] : tensor<16x16xf32>
// CHECK-NEXT: %[[V42:[a-z0-9_]+]] = nn.vocab_max %[[V41]] vocab 32
// CHECK-NEXT: %[[V43:[a-z0-9_]+]] = dist.all_reduce %[[V42]] on @mesh axes = ["tp"] reduction = max wire = f32 accum = f32 : tensor<1x8xf32> -> tensor<1x8xf32>
// CHECK-NEXT: %[[V44:[a-z0-9_]+]] = nn.vocab_stats %[[V41]], %arg1, %[[V43]] vocab 32
// CHECK-NEXT: %[[V45:[a-z0-9_]+]] = dist.all_reduce %[[V44]] on @mesh axes = ["tp"] reduction = sum wire = f32 accum = f32 : tensor<1x8x2xf32> -> tensor<1x8x2xf32>
// CHECK-NEXT: %[[V46:[a-z0-9_]+]] = nn.vocab_cross_entropy %[[V45]]
// CHECK-NEXT: %[[V47:[a-z0-9_]+]] = dist.all_reduce %[[V46]] on @mesh axes = ["fsdp"] reduction = avg wire = f32 accum = f32 : tensor<f32> -> tensor<f32>
// CHECK-NEXT: %[[V48:[a-z0-9_]+]] = nn.vocab_cross_entropy_grad %[[V41]], %arg1, %[[V43]], %[[V45]], %arg23 scale 6.250000e-02 vocab 32
// CHECK-NEXT: %[[V49:[a-z0-9_]+]] = dist.all_gather %arg3 on @mesh axes = ["fsdp"] gather_dim = 1 wire = f32 : tensor<16x8xf32> -> tensor<16x16xf32>
// CHECK-NEXT: %[[V50:[a-z0-9_]+]] = nn.matmul %[[V48]], %[[V49]]
// CHECK-NEXT: dist.free %[[V49]] : tensor<16x16xf32>
// CHECK-NEXT: %[[V51:[a-z0-9_]+]] = nn.matmul %[[V48]], %[[V40]] transpose_lhs
// CHECK-NEXT: %[[V52:[a-z0-9_]+]] = dist.all_gather %arg21 on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<8xf32> -> tensor<16xf32>
// CHECK-NEXT: %[[V53:[a-z0-9_]+]] = dist.all_reduce %[[V50]] on @mesh axes = ["tp"] reduction = sum wire = f32 accum = f32 : tensor<1x8x16xf32> -> tensor<1x8x16xf32>
// CHECK-NEXT: %[[V54:[a-z0-9_]+]], %[[V55:[a-z0-9_]+]], %[[V56:[a-z0-9_]+]] = nn.layer_norm_grad %[[V37]], %[[V52]], %[[V53]] epsilon 1.000000e-05
// CHECK-NEXT: dist.free %[[V52]] : tensor<16xf32>
// CHECK-NEXT: %[[V57:[a-z0-9_]+]] = dist.reduce_scatter %[[V55]] on @mesh axes = ["fsdp"] scatter_dim = 0 reduction = sum wire = f32 accum = f32 : tensor<16xf32> -> tensor<8xf32>
// CHECK-NEXT: %[[V58:[a-z0-9_]+]] = dist.reduce_scatter %[[V56]] on @mesh axes = ["fsdp"] scatter_dim = 0 reduction = sum wire = f32 accum = f32 : tensor<16xf32> -> tensor<8xf32>
// CHECK-NEXT: %[[V59:[a-z0-9_]+]] = dist.all_gather %arg19 on @mesh axes = ["fsdp"] gather_dim = 1 wire = f32 : tensor<16x8xf32> -> tensor<16x16xf32>
// CHECK-NEXT: %[[V60:[a-z0-9_]+]] = nn.matmul %[[V54]], %[[V59]] transpose_rhs
// CHECK-NEXT: dist.free %[[V59]] : tensor<16x16xf32>
// CHECK-NEXT: %[[V61:[a-z0-9_]+]] = nn.matmul %[[V31]], %[[V54]] transpose_lhs
// CHECK-NEXT: %[[V62:[a-z0-9_]+]] = dist.reduce_scatter %[[V61]] on @mesh axes = ["fsdp"] scatter_dim = 1 reduction = sum wire = f32 accum = f32 : tensor<16x16xf32> -> tensor<16x8xf32>
// CHECK-NEXT: %[[V63:[a-z0-9_]+]] = nn.reduce_sum %[[V54]] dims [0, 1]
// CHECK-NEXT: %[[V64:[a-z0-9_]+]] = dist.reduce_scatter %[[V63]] on @mesh axes = ["fsdp"] scatter_dim = 0 reduction = sum wire = f32 accum = f32 : tensor<16xf32> -> tensor<8xf32>
// CHECK-NEXT: %[[V65:[a-z0-9_]+]] = nn.gelu_grad %[[V30]], %[[V60]]
// CHECK-NEXT: %[[V66:[a-z0-9_]+]] = dist.all_gather %arg17 on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<8x16xf32> -> tensor<16x16xf32>
// CHECK-NEXT: %[[V67:[a-z0-9_]+]] = nn.matmul %[[V65]], %[[V66]] transpose_rhs
// CHECK-NEXT: dist.free %[[V66]] : tensor<16x16xf32>
// CHECK-NEXT: %[[V68:[a-z0-9_]+]] = nn.matmul %[[V28]], %[[V65]] transpose_lhs
// CHECK-NEXT: %[[V69:[a-z0-9_]+]] = dist.reduce_scatter %[[V68]] on @mesh axes = ["fsdp"] scatter_dim = 0 reduction = sum wire = f32 accum = f32 : tensor<16x16xf32> -> tensor<8x16xf32>
// CHECK-NEXT: %[[V70:[a-z0-9_]+]] = nn.reduce_sum %[[V65]] dims [0, 1]
// CHECK-NEXT: %[[V71:[a-z0-9_]+]] = dist.all_reduce %[[V70]] on @mesh axes = ["fsdp"] reduction = sum wire = f32 accum = f32 : tensor<16xf32> -> tensor<16xf32>
// CHECK-NEXT: %[[V72:[a-z0-9_]+]] = dist.all_gather %arg15 on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<8xf32> -> tensor<16xf32>
// CHECK-NEXT: %[[V73:[a-z0-9_]+]] = dist.all_reduce %[[V67]] on @mesh axes = ["tp"] reduction = sum wire = f32 accum = f32 : tensor<1x8x16xf32> -> tensor<1x8x16xf32>
// CHECK-NEXT: %[[V74:[a-z0-9_]+]], %[[V75:[a-z0-9_]+]], %[[V76:[a-z0-9_]+]] = nn.layer_norm_grad %[[V25]], %[[V72]], %[[V73]] epsilon 1.000000e-05
// CHECK-NEXT: dist.free %[[V72]] : tensor<16xf32>
// CHECK-NEXT: %[[V77:[a-z0-9_]+]] = dist.reduce_scatter %[[V75]] on @mesh axes = ["fsdp"] scatter_dim = 0 reduction = sum wire = f32 accum = f32 : tensor<16xf32> -> tensor<8xf32>
// CHECK-NEXT: %[[V78:[a-z0-9_]+]] = dist.reduce_scatter %[[V76]] on @mesh axes = ["fsdp"] scatter_dim = 0 reduction = sum wire = f32 accum = f32 : tensor<16xf32> -> tensor<8xf32>
// CHECK-NEXT: %[[V79:[a-z0-9_]+]] = nn.add %[[V54]], %[[V74]]
// CHECK-NEXT: %[[V80:[a-z0-9_]+]] = dist.all_gather %arg13 on @mesh axes = ["fsdp"] gather_dim = 1 wire = f32 : tensor<8x8xf32> -> tensor<8x16xf32>
// CHECK-NEXT: %[[V81:[a-z0-9_]+]] = nn.matmul %[[V79]], %[[V80]] transpose_rhs
// CHECK-NEXT: dist.free %[[V80]] : tensor<8x16xf32>
// CHECK-NEXT: %[[V82:[a-z0-9_]+]] = nn.matmul %[[V19]], %[[V79]] transpose_lhs
// CHECK-NEXT: %[[V83:[a-z0-9_]+]] = dist.reduce_scatter %[[V82]] on @mesh axes = ["fsdp"] scatter_dim = 1 reduction = sum wire = f32 accum = f32 : tensor<8x16xf32> -> tensor<8x8xf32>
// CHECK-NEXT: %[[V84:[a-z0-9_]+]] = nn.reduce_sum %[[V79]] dims [0, 1]
// CHECK-NEXT: %[[V85:[a-z0-9_]+]] = dist.reduce_scatter %[[V84]] on @mesh axes = ["fsdp"] scatter_dim = 0 reduction = sum wire = f32 accum = f32 : tensor<16xf32> -> tensor<8xf32>
// CHECK-NEXT: %[[V86:[a-z0-9_]+]] = nn.reshape %[[V81]]
// CHECK-NEXT: %[[V87:[a-z0-9_]+]], %[[V88:[a-z0-9_]+]], %[[V89:[a-z0-9_]+]] = nn.attention_grad %[[V11]], %[[V14]], %[[V17]], %[[V86]]
// CHECK-NEXT: %[[V90:[a-z0-9_]+]] = nn.reshape %[[V89]]
// CHECK-NEXT: %[[V91:[a-z0-9_]+]] = dist.all_gather %arg11 on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<8x8xf32> -> tensor<16x8xf32>
// CHECK-NEXT: %[[V92:[a-z0-9_]+]] = nn.matmul %[[V90]], %[[V91]] transpose_rhs
// CHECK-NEXT: dist.free %[[V91]] : tensor<16x8xf32>
// CHECK-NEXT: %[[V93:[a-z0-9_]+]] = nn.matmul %[[V8]], %[[V90]] transpose_lhs
// CHECK-NEXT: %[[V94:[a-z0-9_]+]] = dist.reduce_scatter %[[V93]] on @mesh axes = ["fsdp"] scatter_dim = 0 reduction = sum wire = f32 accum = f32 : tensor<16x8xf32> -> tensor<8x8xf32>
// CHECK-NEXT: %[[V95:[a-z0-9_]+]] = nn.reduce_sum %[[V90]] dims [0, 1]
// CHECK-NEXT: %[[V96:[a-z0-9_]+]] = dist.all_reduce %[[V95]] on @mesh axes = ["fsdp"] reduction = sum wire = f32 accum = f32 : tensor<8xf32> -> tensor<8xf32>
// CHECK-NEXT: %[[V97:[a-z0-9_]+]] = nn.reshape %[[V88]]
// CHECK-NEXT: %[[V98:[a-z0-9_]+]] = dist.all_gather %arg9 on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<8x8xf32> -> tensor<16x8xf32>
// CHECK-NEXT: %[[V99:[a-z0-9_]+]] = nn.matmul %[[V97]], %[[V98]] transpose_rhs
// CHECK-NEXT: dist.free %[[V98]] : tensor<16x8xf32>
// CHECK-NEXT: %[[V100:[a-z0-9_]+]] = nn.matmul %[[V8]], %[[V97]] transpose_lhs
// CHECK-NEXT: %[[V101:[a-z0-9_]+]] = dist.reduce_scatter %[[V100]] on @mesh axes = ["fsdp"] scatter_dim = 0 reduction = sum wire = f32 accum = f32 : tensor<16x8xf32> -> tensor<8x8xf32>
// CHECK-NEXT: %[[V102:[a-z0-9_]+]] = nn.reduce_sum %[[V97]] dims [0, 1]
// CHECK-NEXT: %[[V103:[a-z0-9_]+]] = dist.all_reduce %[[V102]] on @mesh axes = ["fsdp"] reduction = sum wire = f32 accum = f32 : tensor<8xf32> -> tensor<8xf32>
// CHECK-NEXT: %[[V104:[a-z0-9_]+]] = nn.add %[[V92]], %[[V99]]
// CHECK-NEXT: %[[V105:[a-z0-9_]+]] = nn.reshape %[[V87]]
// CHECK-NEXT: %[[V106:[a-z0-9_]+]] = dist.all_gather %arg7 on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<8x8xf32> -> tensor<16x8xf32>
// CHECK-NEXT: %[[V107:[a-z0-9_]+]] = nn.matmul %[[V105]], %[[V106]] transpose_rhs
// CHECK-NEXT: dist.free %[[V106]] : tensor<16x8xf32>
// CHECK-NEXT: %[[V108:[a-z0-9_]+]] = nn.matmul %[[V8]], %[[V105]] transpose_lhs
// CHECK-NEXT: %[[V109:[a-z0-9_]+]] = dist.reduce_scatter %[[V108]] on @mesh axes = ["fsdp"] scatter_dim = 0 reduction = sum wire = f32 accum = f32 : tensor<16x8xf32> -> tensor<8x8xf32>
// CHECK-NEXT: %[[V110:[a-z0-9_]+]] = nn.reduce_sum %[[V105]] dims [0, 1]
// CHECK-NEXT: %[[V111:[a-z0-9_]+]] = dist.all_reduce %[[V110]] on @mesh axes = ["fsdp"] reduction = sum wire = f32 accum = f32 : tensor<8xf32> -> tensor<8xf32>
// CHECK-NEXT: %[[V112:[a-z0-9_]+]] = nn.add %[[V104]], %[[V107]]
// CHECK-NEXT: %[[V113:[a-z0-9_]+]] = dist.all_gather %arg5 on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<8xf32> -> tensor<16xf32>
// CHECK-NEXT: %[[V114:[a-z0-9_]+]] = dist.all_reduce %[[V112]] on @mesh axes = ["tp"] reduction = sum wire = f32 accum = f32 : tensor<1x8x16xf32> -> tensor<1x8x16xf32>
// CHECK-NEXT: %[[V115:[a-z0-9_]+]], %[[V116:[a-z0-9_]+]], %[[V117:[a-z0-9_]+]] = nn.layer_norm_grad %[[V5]], %[[V113]], %[[V114]] epsilon 1.000000e-05
// CHECK-NEXT: dist.free %[[V113]] : tensor<16xf32>
// CHECK-NEXT: %[[V118:[a-z0-9_]+]] = dist.reduce_scatter %[[V116]] on @mesh axes = ["fsdp"] scatter_dim = 0 reduction = sum wire = f32 accum = f32 : tensor<16xf32> -> tensor<8xf32>
// CHECK-NEXT: %[[V119:[a-z0-9_]+]] = dist.reduce_scatter %[[V117]] on @mesh axes = ["fsdp"] scatter_dim = 0 reduction = sum wire = f32 accum = f32 : tensor<16xf32> -> tensor<8xf32>
// CHECK-NEXT: %[[V120:[a-z0-9_]+]] = nn.add %[[V79]], %[[V115]]
// CHECK-NEXT: %[[V121:[a-z0-9_]+]] = nn.embedding_grad %arg2, %[[V120]]
// CHECK-NEXT: %[[V122:[a-z0-9_]+]] = dist.reduce_scatter %[[V121]] on @mesh axes = ["fsdp"] scatter_dim = 1 reduction = sum wire = f32 accum = f32 : tensor<4x16xf32> -> tensor<4x8xf32>
// CHECK-NEXT: %[[V123:[a-z0-9_]+]] = nn.embedding_grad %arg0, %[[V120]]
// CHECK-NEXT: %[[V124:[a-z0-9_]+]] = dist.slice %[[V123]] on @mesh axes = ["tp"] slice_dim = 0 : tensor<32x16xf32> -> tensor<16x16xf32>
// CHECK-NEXT: %[[V125:[a-z0-9_]+]] = nn.add %[[V51]], %[[V124]]
// CHECK-NEXT: %[[V126:[a-z0-9_]+]] = dist.reduce_scatter %[[V125]] on @mesh axes = ["fsdp"] scatter_dim = 1 reduction = sum wire = f32 accum = f32 : tensor<16x16xf32> -> tensor<16x8xf32>
// CHECK-NEXT: return %[[V47]], %[[V126]], %[[V122]], %[[V118]], %[[V119]], %[[V109]], %[[V111]], %[[V101]], %[[V103]], %[[V94]], %[[V96]], %[[V83]], %[[V85]], %[[V77]], %[[V78]], %[[V69]], %[[V71]], %[[V62]], %[[V64]], %[[V57]], %[[V58]] : tensor<f32>, tensor<16x8xf32>, tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8x8xf32>, tensor<8xf32>, tensor<8x8xf32>, tensor<8xf32>, tensor<8x8xf32>, tensor<8xf32>, tensor<8x8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8x16xf32>, tensor<16xf32>, tensor<16x8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>
func.func @gpt2(%ids: tensor<2x8xi32>, %labels: tensor<2x8xi32>, %pos: tensor<2x8xi32>,
    %wte: tensor<32x16xf32> {nn.param, nn.name = "transformer.wte.weight"},
    %wpe: tensor<8x16xf32> {nn.param, nn.name = "transformer.wpe.weight"},
    %ln1_g: tensor<16xf32> {nn.param, nn.name = "transformer.h.0.ln_1.weight"},
    %ln1_b: tensor<16xf32> {nn.param, nn.name = "transformer.h.0.ln_1.bias"},
    %wq: tensor<16x16xf32> {nn.param, nn.name = "transformer.h.0.attn.c_attn.weight[:, 0:16]"},
    %bq: tensor<16xf32> {nn.param, nn.name = "transformer.h.0.attn.c_attn.bias[0:16]"},
    %wk: tensor<16x16xf32> {nn.param, nn.name = "transformer.h.0.attn.c_attn.weight[:, 16:32]"},
    %bk: tensor<16xf32> {nn.param, nn.name = "transformer.h.0.attn.c_attn.bias[16:32]"},
    %wv: tensor<16x16xf32> {nn.param, nn.name = "transformer.h.0.attn.c_attn.weight[:, 32:48]"},
    %bv: tensor<16xf32> {nn.param, nn.name = "transformer.h.0.attn.c_attn.bias[32:48]"},
    %wo: tensor<16x16xf32> {nn.param, nn.name = "transformer.h.0.attn.c_proj.weight"},
    %bo: tensor<16xf32> {nn.param, nn.name = "transformer.h.0.attn.c_proj.bias"},
    %ln2_g: tensor<16xf32> {nn.param, nn.name = "transformer.h.0.ln_2.weight"},
    %ln2_b: tensor<16xf32> {nn.param, nn.name = "transformer.h.0.ln_2.bias"},
    %wfc: tensor<16x32xf32> {nn.param, nn.name = "transformer.h.0.mlp.c_fc.weight"},
    %bfc: tensor<32xf32> {nn.param, nn.name = "transformer.h.0.mlp.c_fc.bias"},
    %wproj: tensor<32x16xf32> {nn.param, nn.name = "transformer.h.0.mlp.c_proj.weight"},
    %bproj: tensor<16xf32> {nn.param, nn.name = "transformer.h.0.mlp.c_proj.bias"},
    %lnf_g: tensor<16xf32> {nn.param, nn.name = "transformer.ln_f.weight"},
    %lnf_b: tensor<16xf32> {nn.param, nn.name = "transformer.ln_f.bias"}) -> tensor<f32> {
  %tok = nn.embedding %ids, %wte : (tensor<2x8xi32>, tensor<32x16xf32>) -> tensor<2x8x16xf32>
  %pe = nn.embedding %pos, %wpe : (tensor<2x8xi32>, tensor<8x16xf32>) -> tensor<2x8x16xf32>
  %h0 = nn.add %tok, %pe : (tensor<2x8x16xf32>, tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  %x1 = nn.layer_norm %h0, %ln1_g, %ln1_b epsilon 1.000000e-05 : (tensor<2x8x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
  %q2 = nn.linear %x1, %wq, %bq : (tensor<2x8x16xf32>, tensor<16x16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
  %q = nn.reshape %q2 : (tensor<2x8x16xf32>) -> tensor<2x8x2x8xf32>
  %k2 = nn.linear %x1, %wk, %bk : (tensor<2x8x16xf32>, tensor<16x16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
  %k = nn.reshape %k2 : (tensor<2x8x16xf32>) -> tensor<2x8x2x8xf32>
  %v2 = nn.linear %x1, %wv, %bv : (tensor<2x8x16xf32>, tensor<16x16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
  %v = nn.reshape %v2 : (tensor<2x8x16xf32>) -> tensor<2x8x2x8xf32>
  %o = nn.attention %q, %k, %v : (tensor<2x8x2x8xf32>, tensor<2x8x2x8xf32>, tensor<2x8x2x8xf32>) -> tensor<2x8x2x8xf32>
  %o2 = nn.reshape %o : (tensor<2x8x2x8xf32>) -> tensor<2x8x16xf32>
  %attn = nn.linear %o2, %wo, %bo : (tensor<2x8x16xf32>, tensor<16x16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
  %h1 = nn.add %h0, %attn : (tensor<2x8x16xf32>, tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  %x2 = nn.layer_norm %h1, %ln2_g, %ln2_b epsilon 1.000000e-05 : (tensor<2x8x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
  %fc = nn.linear %x2, %wfc, %bfc : (tensor<2x8x16xf32>, tensor<16x32xf32>, tensor<32xf32>) -> tensor<2x8x32xf32>
  %act = nn.gelu %fc : (tensor<2x8x32xf32>) -> tensor<2x8x32xf32>
  %mlp = nn.linear %act, %wproj, %bproj : (tensor<2x8x32xf32>, tensor<32x16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
  %h2 = nn.add %h1, %mlp : (tensor<2x8x16xf32>, tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  %f = nn.layer_norm %h2, %lnf_g, %lnf_b epsilon 1.000000e-05 : (tensor<2x8x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
  %logits = nn.matmul %f, %wte transpose_rhs : (tensor<2x8x16xf32>, tensor<32x16xf32>) -> tensor<2x8x32xf32>
  %loss = nn.cross_entropy %logits, %labels : (tensor<2x8x32xf32>, tensor<2x8xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
