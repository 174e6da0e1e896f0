// RUN: plan-opt %s -split-input-file --plan-autodiff --plan-placement="mesh=fsdp=4 axes=fsdp" --plan-insert-collectives | FileCheck %s

// plan-autodiff, plan-placement and plan-insert-collectives under fsdp=4
// (ZeRO-3): per parameter one all-gather before its first forward use and one
// before its first backward use (none for the embedding table and the first
// weight, whose backward passes do not read them), a free after each, one
// reduce-scatter per gradient, one all-reduce (avg) of the loss.

// Tests the exact collective sequence of the MLP training step.
// CHECK-LABEL: func.func @mlp(
// CHECK-NEXT: %[[V0:[a-z0-9_]+]] = dist.all_gather %arg2 on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<4x16xf32> -> tensor<16x16xf32>
// CHECK-NEXT: %[[V1:[a-z0-9_]+]] = nn.linear %arg0, %[[V0]]
// CHECK-NEXT: dist.free %[[V0]] : tensor<16x16xf32>
// CHECK-NEXT: %[[V2:[a-z0-9_]+]] = nn.silu %[[V1]]
// CHECK-NEXT: %[[V3:[a-z0-9_]+]] = dist.all_gather %arg3 on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<4x12xf32> -> tensor<16x12xf32>
// CHECK-NEXT: %[[V4:[a-z0-9_]+]] = nn.linear %[[V2]], %[[V3]]
// CHECK-NEXT: dist.free %[[V3]] : tensor<16x12xf32>
// CHECK-NEXT: %[[V5:[a-z0-9_]+]] = nn.cross_entropy %[[V4]], %arg1
// CHECK-NEXT: %[[V6:[a-z0-9_]+]] = dist.all_reduce %[[V5]] on @mesh axes = ["fsdp"] reduction = avg wire = f32 accum = f32 : tensor<f32> -> tensor<f32>
// CHECK-NEXT: %[[V7:[a-z0-9_]+]] = nn.cross_entropy_grad %[[V4]], %arg1, %arg4 scale 1.250000e-01
// CHECK-NEXT: %[[V8:[a-z0-9_]+]] = dist.all_gather %arg3 on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<4x12xf32> -> tensor<16x12xf32>
// CHECK-NEXT: %[[V9:[a-z0-9_]+]] = nn.matmul %[[V7]], %[[V8]] transpose_rhs
// CHECK-NEXT: dist.free %[[V8]] : tensor<16x12xf32>
// CHECK-NEXT: %[[V10:[a-z0-9_]+]] = nn.matmul %[[V2]], %[[V7]] transpose_lhs
// CHECK-NEXT: %[[V11:[a-z0-9_]+]] = dist.reduce_scatter %[[V10]] on @mesh axes = ["fsdp"] scatter_dim = 0 reduction = sum wire = f32 accum = f32 : tensor<16x12xf32> -> tensor<4x12xf32>
// CHECK-NEXT: %[[V12:[a-z0-9_]+]] = nn.silu_grad %[[V1]], %[[V9]]
// CHECK-NEXT: %[[V13:[a-z0-9_]+]] = nn.matmul %arg0, %[[V12]] transpose_lhs
// CHECK-NEXT: %[[V14:[a-z0-9_]+]] = dist.reduce_scatter %[[V13]] on @mesh axes = ["fsdp"] scatter_dim = 0 reduction = sum wire = f32 accum = f32 : tensor<16x16xf32> -> tensor<4x16xf32>
// CHECK-NEXT: return %[[V6]], %[[V14]], %[[V11]] : tensor<f32>, tensor<4x16xf32>, tensor<4x12xf32>
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

// Tests the exact collective sequence of the Llama layer's training step.
// CHECK-LABEL: func.func @llama(
// CHECK-NEXT: %[[V0:[a-z0-9_]+]] = dist.all_gather %arg2 on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<8x16xf32> -> tensor<32x16xf32>
// CHECK-NEXT: %[[V1:[a-z0-9_]+]] = nn.embedding %arg0, %[[V0]]
// CHECK-NEXT: dist.free %[[V0]] : tensor<32x16xf32>
// CHECK-NEXT: %[[V2:[a-z0-9_]+]] = dist.all_gather %arg3 on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<4xf32> -> tensor<16xf32>
// CHECK-NEXT: %[[V3:[a-z0-9_]+]] = nn.rms_norm %[[V1]], %[[V2]] epsilon 1.000000e-05
// CHECK-NEXT: dist.free %[[V2]] : tensor<16xf32>
// CHECK-NEXT: %[[V4:[a-z0-9_]+]] = dist.all_gather %arg4 on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<4x16xf32> -> tensor<16x16xf32>
// CHECK-NEXT: %[[V5:[a-z0-9_]+]] = nn.linear %[[V3]], %[[V4]]
// CHECK-NEXT: dist.free %[[V4]] : tensor<16x16xf32>
// CHECK-NEXT: %[[V6:[a-z0-9_]+]] = dist.all_gather %arg5 on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<4x8xf32> -> tensor<16x8xf32>
// CHECK-NEXT: %[[V7:[a-z0-9_]+]] = nn.linear %[[V3]], %[[V6]]
// CHECK-NEXT: dist.free %[[V6]] : tensor<16x8xf32>
// CHECK-NEXT: %[[V8:[a-z0-9_]+]] = dist.all_gather %arg6 on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<4x8xf32> -> tensor<16x8xf32>
// CHECK-NEXT: %[[V9:[a-z0-9_]+]] = nn.linear %[[V3]], %[[V8]]
// CHECK-NEXT: dist.free %[[V8]] : tensor<16x8xf32>
// CHECK-NEXT: %[[V10:[a-z0-9_]+]] = nn.reshape %[[V5]]
// CHECK-NEXT: %[[V11:[a-z0-9_]+]] = nn.reshape %[[V7]]
// CHECK-NEXT: %[[V12:[a-z0-9_]+]] = nn.reshape %[[V9]]
// CHECK-NEXT: %[[V13:[a-z0-9_]+]] = nn.rope %[[V10]] theta 1.000000e+04
// CHECK-NEXT: %[[V14:[a-z0-9_]+]] = nn.rope %[[V11]] theta 1.000000e+04
// CHECK-NEXT: %[[V15:[a-z0-9_]+]] = nn.attention %[[V13]], %[[V14]], %[[V12]]
// CHECK-NEXT: %[[V16:[a-z0-9_]+]] = nn.reshape %[[V15]]
// CHECK-NEXT: %[[V17:[a-z0-9_]+]] = dist.all_gather %arg7 on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<4x16xf32> -> tensor<16x16xf32>
// CHECK-NEXT: %[[V18:[a-z0-9_]+]] = nn.linear %[[V16]], %[[V17]]
// CHECK-NEXT: dist.free %[[V17]] : tensor<16x16xf32>
// CHECK-NEXT: %[[V19:[a-z0-9_]+]] = nn.add %[[V1]], %[[V18]]
// CHECK-NEXT: %[[V20:[a-z0-9_]+]] = dist.all_gather %arg8 on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<4xf32> -> tensor<16xf32>
// CHECK-NEXT: %[[V21:[a-z0-9_]+]] = nn.rms_norm %[[V19]], %[[V20]] epsilon 1.000000e-05
// CHECK-NEXT: dist.free %[[V20]] : tensor<16xf32>
// CHECK-NEXT: %[[V22:[a-z0-9_]+]] = dist.all_gather %arg9 on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<4x24xf32> -> tensor<16x24xf32>
// CHECK-NEXT: %[[V23:[a-z0-9_]+]] = nn.linear %[[V21]], %[[V22]]
// CHECK-NEXT: dist.free %[[V22]] : tensor<16x24xf32>
// CHECK-NEXT: %[[V24:[a-z0-9_]+]] = dist.all_gather %arg10 on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<4x24xf32> -> tensor<16x24xf32>
// CHECK-NEXT: %[[V25:[a-z0-9_]+]] = nn.linear %[[V21]], %[[V24]]
// CHECK-NEXT: dist.free %[[V24]] : tensor<16x24xf32>
// CHECK-NEXT: %[[V26:[a-z0-9_]+]] = nn.silu %[[V23]]
// CHECK-NEXT: %[[V27:[a-z0-9_]+]] = nn.mul %[[V26]], %[[V25]]
// CHECK-NEXT: %[[V28:[a-z0-9_]+]] = dist.all_gather %arg11 on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<6x16xf32> -> tensor<24x16xf32>
// CHECK-NEXT: %[[V29:[a-z0-9_]+]] = nn.linear %[[V27]], %[[V28]]
// CHECK-NEXT: dist.free %[[V28]] : tensor<24x16xf32>
// CHECK-NEXT: %[[V30:[a-z0-9_]+]] = nn.add %[[V19]], %[[V29]]
// CHECK-NEXT: %[[V31:[a-z0-9_]+]] = dist.all_gather %arg12 on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<4xf32> -> tensor<16xf32>
// CHECK-NEXT: %[[V32:[a-z0-9_]+]] = nn.rms_norm %[[V30]], %[[V31]] epsilon 1.000000e-05
// CHECK-NEXT: dist.free %[[V31]] : tensor<16xf32>
// CHECK-NEXT: %[[V33:[a-z0-9_]+]] = dist.all_gather %arg13 on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<4x32xf32> -> tensor<16x32xf32>
// CHECK-NEXT: %[[V34:[a-z0-9_]+]] = nn.linear %[[V32]], %[[V33]]
// CHECK-NEXT: dist.free %[[V33]] : tensor<16x32xf32>
// CHECK-NEXT: %[[V35:[a-z0-9_]+]] = nn.cross_entropy %[[V34]], %arg1
// CHECK-NEXT: %[[V36:[a-z0-9_]+]] = dist.all_reduce %[[V35]] on @mesh axes = ["fsdp"] reduction = avg wire = f32 accum = f32 : tensor<f32> -> tensor<f32>
// CHECK-NEXT: %[[V37:[a-z0-9_]+]] = nn.cross_entropy_grad %[[V34]], %arg1, %arg14 scale 3.125000e-02
// CHECK-NEXT: %[[V38:[a-z0-9_]+]] = dist.all_gather %arg13 on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<4x32xf32> -> tensor<16x32xf32>
// CHECK-NEXT: %[[V39:[a-z0-9_]+]] = nn.matmul %[[V37]], %[[V38]] transpose_rhs
// CHECK-NEXT: dist.free %[[V38]] : tensor<16x32xf32>
// CHECK-NEXT: %[[V40:[a-z0-9_]+]] = nn.matmul %[[V32]], %[[V37]] transpose_lhs
// CHECK-NEXT: %[[V41:[a-z0-9_]+]] = dist.reduce_scatter %[[V40]] on @mesh axes = ["fsdp"] scatter_dim = 0 reduction = sum wire = f32 accum = f32 : tensor<16x32xf32> -> tensor<4x32xf32>
// CHECK-NEXT: %[[V42:[a-z0-9_]+]] = dist.all_gather %arg12 on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<4xf32> -> tensor<16xf32>
// CHECK-NEXT: %[[VINPUTGRAD:[a-z0-9_]+]], %[[VGAMMAGRAD:[a-z0-9_]+]] = nn.rms_norm_grad %[[V30]], %[[V42]], %[[V39]] epsilon 1.000000e-05
// CHECK-NEXT: dist.free %[[V42]] : tensor<16xf32>
// CHECK-NEXT: %[[V43:[a-z0-9_]+]] = dist.reduce_scatter %[[VGAMMAGRAD]] on @mesh axes = ["fsdp"] scatter_dim = 0 reduction = sum wire = f32 accum = f32 : tensor<16xf32> -> tensor<4xf32>
// CHECK-NEXT: %[[V44:[a-z0-9_]+]] = dist.all_gather %arg11 on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<6x16xf32> -> tensor<24x16xf32>
// CHECK-NEXT: %[[V45:[a-z0-9_]+]] = nn.matmul %[[VINPUTGRAD]], %[[V44]] transpose_rhs
// CHECK-NEXT: dist.free %[[V44]] : tensor<24x16xf32>
// CHECK-NEXT: %[[V46:[a-z0-9_]+]] = nn.matmul %[[V27]], %[[VINPUTGRAD]] transpose_lhs
// CHECK-NEXT: %[[V47:[a-z0-9_]+]] = dist.reduce_scatter %[[V46]] on @mesh axes = ["fsdp"] scatter_dim = 0 reduction = sum wire = f32 accum = f32 : tensor<24x16xf32> -> tensor<6x16xf32>
// CHECK-NEXT: %[[V48:[a-z0-9_]+]] = nn.mul %[[V45]], %[[V25]]
// CHECK-NEXT: %[[V49:[a-z0-9_]+]] = nn.mul %[[V45]], %[[V26]]
// CHECK-NEXT: %[[V50:[a-z0-9_]+]] = nn.silu_grad %[[V23]], %[[V48]]
// CHECK-NEXT: %[[V51:[a-z0-9_]+]] = dist.all_gather %arg10 on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<4x24xf32> -> tensor<16x24xf32>
// CHECK-NEXT: %[[V52:[a-z0-9_]+]] = nn.matmul %[[V49]], %[[V51]] transpose_rhs
// CHECK-NEXT: dist.free %[[V51]] : tensor<16x24xf32>
// CHECK-NEXT: %[[V53:[a-z0-9_]+]] = nn.matmul %[[V21]], %[[V49]] transpose_lhs
// CHECK-NEXT: %[[V54:[a-z0-9_]+]] = dist.reduce_scatter %[[V53]] on @mesh axes = ["fsdp"] scatter_dim = 0 reduction = sum wire = f32 accum = f32 : tensor<16x24xf32> -> tensor<4x24xf32>
// CHECK-NEXT: %[[V55:[a-z0-9_]+]] = dist.all_gather %arg9 on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<4x24xf32> -> tensor<16x24xf32>
// CHECK-NEXT: %[[V56:[a-z0-9_]+]] = nn.matmul %[[V50]], %[[V55]] transpose_rhs
// CHECK-NEXT: dist.free %[[V55]] : tensor<16x24xf32>
// CHECK-NEXT: %[[V57:[a-z0-9_]+]] = nn.matmul %[[V21]], %[[V50]] transpose_lhs
// CHECK-NEXT: %[[V58:[a-z0-9_]+]] = dist.reduce_scatter %[[V57]] on @mesh axes = ["fsdp"] scatter_dim = 0 reduction = sum wire = f32 accum = f32 : tensor<16x24xf32> -> tensor<4x24xf32>
// CHECK-NEXT: %[[V59:[a-z0-9_]+]] = nn.add %[[V52]], %[[V56]]
// CHECK-NEXT: %[[V60:[a-z0-9_]+]] = dist.all_gather %arg8 on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<4xf32> -> tensor<16xf32>
// CHECK-NEXT: %[[VINPUTGRAD0:[a-z0-9_]+]], %[[VGAMMAGRAD1:[a-z0-9_]+]] = nn.rms_norm_grad %[[V19]], %[[V60]], %[[V59]] epsilon 1.000000e-05
// CHECK-NEXT: dist.free %[[V60]] : tensor<16xf32>
// CHECK-NEXT: %[[V61:[a-z0-9_]+]] = dist.reduce_scatter %[[VGAMMAGRAD1]] on @mesh axes = ["fsdp"] scatter_dim = 0 reduction = sum wire = f32 accum = f32 : tensor<16xf32> -> tensor<4xf32>
// CHECK-NEXT: %[[V62:[a-z0-9_]+]] = nn.add %[[VINPUTGRAD]], %[[VINPUTGRAD0]]
// CHECK-NEXT: %[[V63:[a-z0-9_]+]] = dist.all_gather %arg7 on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<4x16xf32> -> tensor<16x16xf32>
// CHECK-NEXT: %[[V64:[a-z0-9_]+]] = nn.matmul %[[V62]], %[[V63]] transpose_rhs
// CHECK-NEXT: dist.free %[[V63]] : tensor<16x16xf32>
// CHECK-NEXT: %[[V65:[a-z0-9_]+]] = nn.matmul %[[V16]], %[[V62]] transpose_lhs
// CHECK-NEXT: %[[V66:[a-z0-9_]+]] = dist.reduce_scatter %[[V65]] on @mesh axes = ["fsdp"] scatter_dim = 0 reduction = sum wire = f32 accum = f32 : tensor<16x16xf32> -> tensor<4x16xf32>
// CHECK-NEXT: %[[V67:[a-z0-9_]+]] = nn.reshape %[[V64]]
// CHECK-NEXT: %[[VQUERYGRAD:[a-z0-9_]+]], %[[VKEYGRAD:[a-z0-9_]+]], %[[VVALUEGRAD:[a-z0-9_]+]] = nn.attention_grad %[[V13]], %[[V14]], %[[V12]], %[[V67]]
// CHECK-NEXT: %[[V68:[a-z0-9_]+]] = nn.rope %[[VKEYGRAD]] theta 1.000000e+04 inverse
// CHECK-NEXT: %[[V69:[a-z0-9_]+]] = nn.rope %[[VQUERYGRAD]] theta 1.000000e+04 inverse
// CHECK-NEXT: %[[V70:[a-z0-9_]+]] = nn.reshape %[[VVALUEGRAD]]
// CHECK-NEXT: %[[V71:[a-z0-9_]+]] = nn.reshape %[[V68]]
// CHECK-NEXT: %[[V72:[a-z0-9_]+]] = nn.reshape %[[V69]]
// CHECK-NEXT: %[[V73:[a-z0-9_]+]] = dist.all_gather %arg6 on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<4x8xf32> -> tensor<16x8xf32>
// CHECK-NEXT: %[[V74:[a-z0-9_]+]] = nn.matmul %[[V70]], %[[V73]] transpose_rhs
// CHECK-NEXT: dist.free %[[V73]] : tensor<16x8xf32>
// CHECK-NEXT: %[[V75:[a-z0-9_]+]] = nn.matmul %[[V3]], %[[V70]] transpose_lhs
// CHECK-NEXT: %[[V76:[a-z0-9_]+]] = dist.reduce_scatter %[[V75]] on @mesh axes = ["fsdp"] scatter_dim = 0 reduction = sum wire = f32 accum = f32 : tensor<16x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT: %[[V77:[a-z0-9_]+]] = dist.all_gather %arg5 on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<4x8xf32> -> tensor<16x8xf32>
// CHECK-NEXT: %[[V78:[a-z0-9_]+]] = nn.matmul %[[V71]], %[[V77]] transpose_rhs
// CHECK-NEXT: dist.free %[[V77]] : tensor<16x8xf32>
// CHECK-NEXT: %[[V79:[a-z0-9_]+]] = nn.matmul %[[V3]], %[[V71]] transpose_lhs
// CHECK-NEXT: %[[V80:[a-z0-9_]+]] = dist.reduce_scatter %[[V79]] on @mesh axes = ["fsdp"] scatter_dim = 0 reduction = sum wire = f32 accum = f32 : tensor<16x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT: %[[V81:[a-z0-9_]+]] = nn.add %[[V74]], %[[V78]]
// CHECK-NEXT: %[[V82:[a-z0-9_]+]] = dist.all_gather %arg4 on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<4x16xf32> -> tensor<16x16xf32>
// CHECK-NEXT: %[[V83:[a-z0-9_]+]] = nn.matmul %[[V72]], %[[V82]] transpose_rhs
// CHECK-NEXT: dist.free %[[V82]] : tensor<16x16xf32>
// CHECK-NEXT: %[[V84:[a-z0-9_]+]] = nn.matmul %[[V3]], %[[V72]] transpose_lhs
// CHECK-NEXT: %[[V85:[a-z0-9_]+]] = dist.reduce_scatter %[[V84]] on @mesh axes = ["fsdp"] scatter_dim = 0 reduction = sum wire = f32 accum = f32 : tensor<16x16xf32> -> tensor<4x16xf32>
// CHECK-NEXT: %[[V86:[a-z0-9_]+]] = nn.add %[[V81]], %[[V83]]
// CHECK-NEXT: %[[V87:[a-z0-9_]+]] = dist.all_gather %arg3 on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<4xf32> -> tensor<16xf32>
// CHECK-NEXT: %[[VINPUTGRAD2:[a-z0-9_]+]], %[[VGAMMAGRAD3:[a-z0-9_]+]] = nn.rms_norm_grad %[[V1]], %[[V87]], %[[V86]] epsilon 1.000000e-05
// CHECK-NEXT: dist.free %[[V87]] : tensor<16xf32>
// CHECK-NEXT: %[[V88:[a-z0-9_]+]] = dist.reduce_scatter %[[VGAMMAGRAD3]] on @mesh axes = ["fsdp"] scatter_dim = 0 reduction = sum wire = f32 accum = f32 : tensor<16xf32> -> tensor<4xf32>
// CHECK-NEXT: %[[V89:[a-z0-9_]+]] = nn.add %[[V62]], %[[VINPUTGRAD2]]
// CHECK-NEXT: %[[V90:[a-z0-9_]+]] = nn.embedding_grad %arg0, %[[V89]]
// CHECK-NEXT: %[[V91:[a-z0-9_]+]] = dist.reduce_scatter %[[V90]] on @mesh axes = ["fsdp"] scatter_dim = 0 reduction = sum wire = f32 accum = f32 : tensor<32x16xf32> -> tensor<8x16xf32>
// CHECK-NEXT: return %[[V36]], %[[V91]], %[[V88]], %[[V85]], %[[V80]], %[[V76]], %[[V66]], %[[V61]], %[[V58]], %[[V54]], %[[V47]], %[[V43]], %[[V41]] : tensor<f32>, tensor<8x16xf32>, tensor<4xf32>, tensor<4x16xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x16xf32>, tensor<4xf32>, tensor<4x24xf32>, tensor<4x24xf32>, tensor<6x16xf32>, tensor<4xf32>, tensor<4x32xf32>
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



