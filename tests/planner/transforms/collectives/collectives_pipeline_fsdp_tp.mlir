// RUN: plan-opt %s -split-input-file --plan-autodiff --plan-placement="mesh=fsdp=2,tp=2 axes=fsdp,tp" --plan-insert-collectives | FileCheck %s

// The same under fsdp x tp (2x2): each weight gathered over fsdp only, on the
// dim tp leaves whole, and its gradient reduce-scattered over fsdp, plus the tp
// all-reduces, the logits gather and the slice of the loss cotangent.

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
// use), 3 all_reduces over tp (embedding, after wo, after w2), 1 all_gather
// over tp (the logits) and 1 all_reduce (avg) of the loss over fsdp.
// Backward: 1 slice over tp (the logits cotangent), 11 all_gathers over fsdp
// (every parameter but tok_embeddings.weight, each freed), 3 all_reduces over
// tp (as under tp alone) and 12 reduce_scatters over fsdp (one per gradient).
// 43 collectives and 1 slice in all.
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
// CHECK-NEXT: %[[V38:[a-z0-9_]+]] = dist.all_gather %[[V37]] on @mesh axes = ["tp"] gather_dim = 2 wire = f32 : tensor<2x8x16xf32> -> tensor<2x8x32xf32>
// CHECK-NEXT: %[[V39:[a-z0-9_]+]] = nn.cross_entropy %[[V38]], %arg1
// CHECK-NEXT: %[[V40:[a-z0-9_]+]] = dist.all_reduce %[[V39]] on @mesh axes = ["fsdp"] reduction = avg wire = f32 accum = f32 : tensor<f32> -> tensor<f32>
// CHECK-NEXT: %[[V41:[a-z0-9_]+]] = nn.cross_entropy_grad %[[V38]], %arg1, %arg14 scale 3.125000e-02
// CHECK-NEXT: %[[V42:[a-z0-9_]+]] = dist.slice %[[V41]] on @mesh axes = ["tp"] slice_dim = 2 : tensor<2x8x32xf32> -> tensor<2x8x16xf32>
// CHECK-NEXT: %[[V43:[a-z0-9_]+]] = dist.all_gather %arg13 on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<8x16xf32> -> tensor<16x16xf32>
// CHECK-NEXT: %[[V44:[a-z0-9_]+]] = nn.matmul %[[V42]], %[[V43]] transpose_rhs
// CHECK-NEXT: dist.free %[[V43]] : tensor<16x16xf32>
// CHECK-NEXT: %[[V45:[a-z0-9_]+]] = nn.matmul %[[V35]], %[[V42]] transpose_lhs
// CHECK-NEXT: %[[V46:[a-z0-9_]+]] = dist.reduce_scatter %[[V45]] on @mesh axes = ["fsdp"] scatter_dim = 0 reduction = sum wire = f32 accum = f32 : tensor<16x16xf32> -> tensor<8x16xf32>
// CHECK-NEXT: %[[V47:[a-z0-9_]+]] = dist.all_gather %arg12 on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<8xf32> -> tensor<16xf32>
// CHECK-NEXT: %[[V48:[a-z0-9_]+]] = dist.all_reduce %[[V44]] on @mesh axes = ["tp"] reduction = sum wire = f32 accum = f32 : tensor<2x8x16xf32> -> tensor<2x8x16xf32>
// CHECK-NEXT: %[[VINPUTGRAD:[a-z0-9_]+]], %[[VGAMMAGRAD:[a-z0-9_]+]] = nn.rms_norm_grad %[[V33]], %[[V47]], %[[V48]] epsilon 1.000000e-05
// CHECK-NEXT: dist.free %[[V47]] : tensor<16xf32>
// CHECK-NEXT: %[[V49:[a-z0-9_]+]] = dist.reduce_scatter %[[VGAMMAGRAD]] on @mesh axes = ["fsdp"] scatter_dim = 0 reduction = sum wire = f32 accum = f32 : tensor<16xf32> -> tensor<8xf32>
// CHECK-NEXT: %[[V50:[a-z0-9_]+]] = dist.all_gather %arg11 on @mesh axes = ["fsdp"] gather_dim = 1 wire = f32 : tensor<12x8xf32> -> tensor<12x16xf32>
// CHECK-NEXT: %[[V51:[a-z0-9_]+]] = nn.matmul %[[VINPUTGRAD]], %[[V50]] transpose_rhs
// CHECK-NEXT: dist.free %[[V50]] : tensor<12x16xf32>
// CHECK-NEXT: %[[V52:[a-z0-9_]+]] = nn.matmul %[[V29]], %[[VINPUTGRAD]] transpose_lhs
// CHECK-NEXT: %[[V53:[a-z0-9_]+]] = dist.reduce_scatter %[[V52]] on @mesh axes = ["fsdp"] scatter_dim = 1 reduction = sum wire = f32 accum = f32 : tensor<12x16xf32> -> tensor<12x8xf32>
// CHECK-NEXT: %[[V54:[a-z0-9_]+]] = nn.mul %[[V51]], %[[V27]]
// CHECK-NEXT: %[[V55:[a-z0-9_]+]] = nn.mul %[[V51]], %[[V28]]
// CHECK-NEXT: %[[V56:[a-z0-9_]+]] = nn.silu_grad %[[V25]], %[[V54]]
// CHECK-NEXT: %[[V57:[a-z0-9_]+]] = dist.all_gather %arg10 on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<8x12xf32> -> tensor<16x12xf32>
// CHECK-NEXT: %[[V58:[a-z0-9_]+]] = nn.matmul %[[V55]], %[[V57]] transpose_rhs
// CHECK-NEXT: dist.free %[[V57]] : tensor<16x12xf32>
// CHECK-NEXT: %[[V59:[a-z0-9_]+]] = nn.matmul %[[V23]], %[[V55]] transpose_lhs
// CHECK-NEXT: %[[V60:[a-z0-9_]+]] = dist.reduce_scatter %[[V59]] on @mesh axes = ["fsdp"] scatter_dim = 0 reduction = sum wire = f32 accum = f32 : tensor<16x12xf32> -> tensor<8x12xf32>
// CHECK-NEXT: %[[V61:[a-z0-9_]+]] = dist.all_gather %arg9 on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<8x12xf32> -> tensor<16x12xf32>
// CHECK-NEXT: %[[V62:[a-z0-9_]+]] = nn.matmul %[[V56]], %[[V61]] transpose_rhs
// CHECK-NEXT: dist.free %[[V61]] : tensor<16x12xf32>
// CHECK-NEXT: %[[V63:[a-z0-9_]+]] = nn.matmul %[[V23]], %[[V56]] transpose_lhs
// CHECK-NEXT: %[[V64:[a-z0-9_]+]] = dist.reduce_scatter %[[V63]] on @mesh axes = ["fsdp"] scatter_dim = 0 reduction = sum wire = f32 accum = f32 : tensor<16x12xf32> -> tensor<8x12xf32>
// CHECK-NEXT: %[[V65:[a-z0-9_]+]] = nn.add %[[V58]], %[[V62]]
// CHECK-NEXT: %[[V66:[a-z0-9_]+]] = dist.all_gather %arg8 on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<8xf32> -> tensor<16xf32>
// CHECK-NEXT: %[[V67:[a-z0-9_]+]] = dist.all_reduce %[[V65]] on @mesh axes = ["tp"] reduction = sum wire = f32 accum = f32 : tensor<2x8x16xf32> -> tensor<2x8x16xf32>
// CHECK-NEXT: %[[VINPUTGRAD0:[a-z0-9_]+]], %[[VGAMMAGRAD1:[a-z0-9_]+]] = nn.rms_norm_grad %[[V21]], %[[V66]], %[[V67]] epsilon 1.000000e-05
// CHECK-NEXT: dist.free %[[V66]] : tensor<16xf32>
// CHECK-NEXT: %[[V68:[a-z0-9_]+]] = dist.reduce_scatter %[[VGAMMAGRAD1]] on @mesh axes = ["fsdp"] scatter_dim = 0 reduction = sum wire = f32 accum = f32 : tensor<16xf32> -> tensor<8xf32>
// CHECK-NEXT: %[[V69:[a-z0-9_]+]] = nn.add %[[VINPUTGRAD]], %[[VINPUTGRAD0]]
// CHECK-NEXT: %[[V70:[a-z0-9_]+]] = dist.all_gather %arg7 on @mesh axes = ["fsdp"] gather_dim = 1 wire = f32 : tensor<8x8xf32> -> tensor<8x16xf32>
// CHECK-NEXT: %[[V71:[a-z0-9_]+]] = nn.matmul %[[V69]], %[[V70]] transpose_rhs
// CHECK-NEXT: dist.free %[[V70]] : tensor<8x16xf32>
// CHECK-NEXT: %[[V72:[a-z0-9_]+]] = nn.matmul %[[V17]], %[[V69]] transpose_lhs
// CHECK-NEXT: %[[V73:[a-z0-9_]+]] = dist.reduce_scatter %[[V72]] on @mesh axes = ["fsdp"] scatter_dim = 1 reduction = sum wire = f32 accum = f32 : tensor<8x16xf32> -> tensor<8x8xf32>
// CHECK-NEXT: %[[V74:[a-z0-9_]+]] = nn.reshape %[[V71]]
// CHECK-NEXT: %[[VQUERYGRAD:[a-z0-9_]+]], %[[VKEYGRAD:[a-z0-9_]+]], %[[VVALUEGRAD:[a-z0-9_]+]] = nn.attention_grad %[[V14]], %[[V15]], %[[V13]], %[[V74]]
// CHECK-NEXT: %[[V75:[a-z0-9_]+]] = nn.rope %[[VKEYGRAD]] theta 1.000000e+04 inverse
// CHECK-NEXT: %[[V76:[a-z0-9_]+]] = nn.rope %[[VQUERYGRAD]] theta 1.000000e+04 inverse
// CHECK-NEXT: %[[V77:[a-z0-9_]+]] = nn.reshape %[[VVALUEGRAD]]
// CHECK-NEXT: %[[V78:[a-z0-9_]+]] = nn.reshape %[[V75]]
// CHECK-NEXT: %[[V79:[a-z0-9_]+]] = nn.reshape %[[V76]]
// CHECK-NEXT: %[[V80:[a-z0-9_]+]] = dist.all_gather %arg6 on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<8x4xf32> -> tensor<16x4xf32>
// CHECK-NEXT: %[[V81:[a-z0-9_]+]] = nn.matmul %[[V77]], %[[V80]] transpose_rhs
// CHECK-NEXT: dist.free %[[V80]] : tensor<16x4xf32>
// CHECK-NEXT: %[[V82:[a-z0-9_]+]] = nn.matmul %[[V4]], %[[V77]] transpose_lhs
// CHECK-NEXT: %[[V83:[a-z0-9_]+]] = dist.reduce_scatter %[[V82]] on @mesh axes = ["fsdp"] scatter_dim = 0 reduction = sum wire = f32 accum = f32 : tensor<16x4xf32> -> tensor<8x4xf32>
// CHECK-NEXT: %[[V84:[a-z0-9_]+]] = dist.all_gather %arg5 on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<8x4xf32> -> tensor<16x4xf32>
// CHECK-NEXT: %[[V85:[a-z0-9_]+]] = nn.matmul %[[V78]], %[[V84]] transpose_rhs
// CHECK-NEXT: dist.free %[[V84]] : tensor<16x4xf32>
// CHECK-NEXT: %[[V86:[a-z0-9_]+]] = nn.matmul %[[V4]], %[[V78]] transpose_lhs
// CHECK-NEXT: %[[V87:[a-z0-9_]+]] = dist.reduce_scatter %[[V86]] on @mesh axes = ["fsdp"] scatter_dim = 0 reduction = sum wire = f32 accum = f32 : tensor<16x4xf32> -> tensor<8x4xf32>
// CHECK-NEXT: %[[V88:[a-z0-9_]+]] = nn.add %[[V81]], %[[V85]]
// CHECK-NEXT: %[[V89:[a-z0-9_]+]] = dist.all_gather %arg4 on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<8x8xf32> -> tensor<16x8xf32>
// CHECK-NEXT: %[[V90:[a-z0-9_]+]] = nn.matmul %[[V79]], %[[V89]] transpose_rhs
// CHECK-NEXT: dist.free %[[V89]] : tensor<16x8xf32>
// CHECK-NEXT: %[[V91:[a-z0-9_]+]] = nn.matmul %[[V4]], %[[V79]] transpose_lhs
// CHECK-NEXT: %[[V92:[a-z0-9_]+]] = dist.reduce_scatter %[[V91]] on @mesh axes = ["fsdp"] scatter_dim = 0 reduction = sum wire = f32 accum = f32 : tensor<16x8xf32> -> tensor<8x8xf32>
// CHECK-NEXT: %[[V93:[a-z0-9_]+]] = nn.add %[[V88]], %[[V90]]
// CHECK-NEXT: %[[V94:[a-z0-9_]+]] = dist.all_gather %arg3 on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<8xf32> -> tensor<16xf32>
// CHECK-NEXT: %[[V95:[a-z0-9_]+]] = dist.all_reduce %[[V93]] on @mesh axes = ["tp"] reduction = sum wire = f32 accum = f32 : tensor<2x8x16xf32> -> tensor<2x8x16xf32>
// CHECK-NEXT: %[[VINPUTGRAD2:[a-z0-9_]+]], %[[VGAMMAGRAD3:[a-z0-9_]+]] = nn.rms_norm_grad %[[V2]], %[[V94]], %[[V95]] epsilon 1.000000e-05
// CHECK-NEXT: dist.free %[[V94]] : tensor<16xf32>
// CHECK-NEXT: %[[V96:[a-z0-9_]+]] = dist.reduce_scatter %[[VGAMMAGRAD3]] on @mesh axes = ["fsdp"] scatter_dim = 0 reduction = sum wire = f32 accum = f32 : tensor<16xf32> -> tensor<8xf32>
// CHECK-NEXT: %[[V97:[a-z0-9_]+]] = nn.add %[[V69]], %[[VINPUTGRAD2]]
// CHECK-NEXT: %[[V98:[a-z0-9_]+]] = nn.embedding_grad %arg0, %[[V97]]
// CHECK-NEXT: %[[V99:[a-z0-9_]+]] = dist.reduce_scatter %[[V98]] on @mesh axes = ["fsdp"] scatter_dim = 1 reduction = sum wire = f32 accum = f32 : tensor<16x16xf32> -> tensor<16x8xf32>
// CHECK-NEXT: return %[[V40]], %[[V99]], %[[V96]], %[[V92]], %[[V87]], %[[V83]], %[[V73]], %[[V68]], %[[V64]], %[[V60]], %[[V53]], %[[V49]], %[[V46]] : tensor<f32>, tensor<16x8xf32>, tensor<8xf32>, tensor<8x8xf32>, tensor<8x4xf32>, tensor<8x4xf32>, tensor<8x8xf32>, tensor<8xf32>, tensor<8x12xf32>, tensor<8x12xf32>, tensor<12x8xf32>, tensor<8xf32>, tensor<8x16xf32>
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
