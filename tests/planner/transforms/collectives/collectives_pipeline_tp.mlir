// RUN: plan-opt %s -split-input-file --plan-autodiff --plan-placement="mesh=tp=2 axes=tp" --plan-insert-collectives | FileCheck %s

// plan-autodiff, plan-placement and plan-insert-collectives under tp=2
// (Megatron) on an MLP and a Llama layer training step: all-reduces after the
// row-parallel wo and w2 and where the vocab-parallel embedding's partial sum
// meets a norm; the logits are gathered for the loss, and the loss cotangent
// is sliced back to this rank's vocab columns for the column-parallel head
// (dist.slice, no communication).

// Tests the exact collective sequence of the MLP training step.
// CHECK-LABEL: func.func @mlp(
// CHECK-NEXT: %[[V0:[a-z0-9_]+]] = nn.linear %arg0, %arg2
// CHECK-NEXT: %[[V1:[a-z0-9_]+]] = nn.silu %[[V0]]
// CHECK-NEXT: %[[V2:[a-z0-9_]+]] = nn.linear %[[V1]], %arg3
// CHECK-NEXT: %[[V3:[a-z0-9_]+]] = dist.all_reduce %[[V2]] on @mesh axes = ["tp"] reduction = sum wire = f32 accum = f32 : tensor<8x12xf32> -> tensor<8x12xf32>
// CHECK-NEXT: %[[V4:[a-z0-9_]+]] = nn.cross_entropy %[[V3]], %arg1
// CHECK-NEXT: %[[V5:[a-z0-9_]+]] = nn.cross_entropy_grad %[[V3]], %arg1, %arg4 scale 1.250000e-01
// CHECK-NEXT: %[[V6:[a-z0-9_]+]] = nn.matmul %[[V5]], %arg3 transpose_rhs
// CHECK-NEXT: %[[V7:[a-z0-9_]+]] = nn.matmul %[[V1]], %[[V5]] transpose_lhs
// CHECK-NEXT: %[[V8:[a-z0-9_]+]] = nn.silu_grad %[[V0]], %[[V6]]
// CHECK-NEXT: %[[V9:[a-z0-9_]+]] = nn.matmul %arg0, %[[V8]] transpose_lhs
// CHECK-NEXT: return %[[V4]], %[[V9]], %[[V7]] : tensor<f32>, tensor<16x8xf32>, tensor<8x12xf32>
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
// Forward: 3 all_reduces (embedding, after wo, after w2) and 1 all_gather (the
// logits over vocab). Backward: 1 slice (the logits cotangent to this rank's
// vocab columns) and 3 all_reduces (the input gradients of the output head,
// of w1 + w3 and of wq + wk + wv). 7 collectives and 1 slice, all over tp;
// every parameter gradient stays local.
// CHECK-LABEL: func.func @llama(
// CHECK-NEXT: %[[V0:[a-z0-9_]+]] = nn.embedding %arg0, %arg2
// CHECK-NEXT: %[[V1:[a-z0-9_]+]] = dist.all_reduce %[[V0]] on @mesh axes = ["tp"] reduction = sum wire = f32 accum = f32 : tensor<4x8x16xf32> -> tensor<4x8x16xf32>
// CHECK-NEXT: %[[V2:[a-z0-9_]+]] = nn.rms_norm %[[V1]], %arg3 epsilon 1.000000e-05
// CHECK-NEXT: %[[V3:[a-z0-9_]+]] = nn.linear %[[V2]], %arg4
// CHECK-NEXT: %[[V4:[a-z0-9_]+]] = nn.linear %[[V2]], %arg5
// CHECK-NEXT: %[[V5:[a-z0-9_]+]] = nn.linear %[[V2]], %arg6
// CHECK-NEXT: %[[V6:[a-z0-9_]+]] = nn.reshape %[[V3]]
// CHECK-NEXT: %[[V7:[a-z0-9_]+]] = nn.reshape %[[V4]]
// CHECK-NEXT: %[[V8:[a-z0-9_]+]] = nn.reshape %[[V5]]
// CHECK-NEXT: %[[V9:[a-z0-9_]+]] = nn.rope %[[V6]] theta 1.000000e+04
// CHECK-NEXT: %[[V10:[a-z0-9_]+]] = nn.rope %[[V7]] theta 1.000000e+04
// CHECK-NEXT: %[[V11:[a-z0-9_]+]] = nn.attention %[[V9]], %[[V10]], %[[V8]]
// CHECK-NEXT: %[[V12:[a-z0-9_]+]] = nn.reshape %[[V11]]
// CHECK-NEXT: %[[V13:[a-z0-9_]+]] = nn.linear %[[V12]], %arg7
// CHECK-NEXT: %[[V14:[a-z0-9_]+]] = nn.add %[[V0]], %[[V13]]
// CHECK-NEXT: %[[V15:[a-z0-9_]+]] = dist.all_reduce %[[V14]] on @mesh axes = ["tp"] reduction = sum wire = f32 accum = f32 : tensor<4x8x16xf32> -> tensor<4x8x16xf32>
// CHECK-NEXT: %[[V16:[a-z0-9_]+]] = nn.rms_norm %[[V15]], %arg8 epsilon 1.000000e-05
// CHECK-NEXT: %[[V17:[a-z0-9_]+]] = nn.linear %[[V16]], %arg9
// CHECK-NEXT: %[[V18:[a-z0-9_]+]] = nn.linear %[[V16]], %arg10
// CHECK-NEXT: %[[V19:[a-z0-9_]+]] = nn.silu %[[V17]]
// CHECK-NEXT: %[[V20:[a-z0-9_]+]] = nn.mul %[[V19]], %[[V18]]
// CHECK-NEXT: %[[V21:[a-z0-9_]+]] = nn.linear %[[V20]], %arg11
// CHECK-NEXT: %[[V22:[a-z0-9_]+]] = nn.add %[[V14]], %[[V21]]
// CHECK-NEXT: %[[V23:[a-z0-9_]+]] = dist.all_reduce %[[V22]] on @mesh axes = ["tp"] reduction = sum wire = f32 accum = f32 : tensor<4x8x16xf32> -> tensor<4x8x16xf32>
// CHECK-NEXT: %[[V24:[a-z0-9_]+]] = nn.rms_norm %[[V23]], %arg12 epsilon 1.000000e-05
// CHECK-NEXT: %[[V25:[a-z0-9_]+]] = nn.linear %[[V24]], %arg13
// CHECK-NEXT: %[[V26:[a-z0-9_]+]] = dist.all_gather %[[V25]] on @mesh axes = ["tp"] gather_dim = 2 wire = f32 : tensor<4x8x16xf32> -> tensor<4x8x32xf32>
// CHECK-NEXT: %[[V27:[a-z0-9_]+]] = nn.cross_entropy %[[V26]], %arg1
// CHECK-NEXT: %[[V28:[a-z0-9_]+]] = nn.cross_entropy_grad %[[V26]], %arg1, %arg14 scale 3.125000e-02
// CHECK-NEXT: %[[V29:[a-z0-9_]+]] = dist.slice %[[V28]] on @mesh axes = ["tp"] slice_dim = 2 : tensor<4x8x32xf32> -> tensor<4x8x16xf32>
// CHECK-NEXT: %[[V30:[a-z0-9_]+]] = nn.matmul %[[V29]], %arg13 transpose_rhs
// CHECK-NEXT: %[[V31:[a-z0-9_]+]] = nn.matmul %[[V24]], %[[V29]] transpose_lhs
// CHECK-NEXT: %[[V32:[a-z0-9_]+]] = dist.all_reduce %[[V30]] on @mesh axes = ["tp"] reduction = sum wire = f32 accum = f32 : tensor<4x8x16xf32> -> tensor<4x8x16xf32>
// CHECK-NEXT: %[[VINPUTGRAD:[a-z0-9_]+]], %[[VGAMMAGRAD:[a-z0-9_]+]] = nn.rms_norm_grad %[[V23]], %arg12, %[[V32]] epsilon 1.000000e-05
// CHECK-NEXT: %[[V33:[a-z0-9_]+]] = nn.matmul %[[VINPUTGRAD]], %arg11 transpose_rhs
// CHECK-NEXT: %[[V34:[a-z0-9_]+]] = nn.matmul %[[V20]], %[[VINPUTGRAD]] transpose_lhs
// CHECK-NEXT: %[[V35:[a-z0-9_]+]] = nn.mul %[[V33]], %[[V18]]
// CHECK-NEXT: %[[V36:[a-z0-9_]+]] = nn.mul %[[V33]], %[[V19]]
// CHECK-NEXT: %[[V37:[a-z0-9_]+]] = nn.silu_grad %[[V17]], %[[V35]]
// CHECK-NEXT: %[[V38:[a-z0-9_]+]] = nn.matmul %[[V36]], %arg10 transpose_rhs
// CHECK-NEXT: %[[V39:[a-z0-9_]+]] = nn.matmul %[[V16]], %[[V36]] transpose_lhs
// CHECK-NEXT: %[[V40:[a-z0-9_]+]] = nn.matmul %[[V37]], %arg9 transpose_rhs
// CHECK-NEXT: %[[V41:[a-z0-9_]+]] = nn.matmul %[[V16]], %[[V37]] transpose_lhs
// CHECK-NEXT: %[[V42:[a-z0-9_]+]] = nn.add %[[V38]], %[[V40]]
// CHECK-NEXT: %[[V43:[a-z0-9_]+]] = dist.all_reduce %[[V42]] on @mesh axes = ["tp"] reduction = sum wire = f32 accum = f32 : tensor<4x8x16xf32> -> tensor<4x8x16xf32>
// CHECK-NEXT: %[[VINPUTGRAD0:[a-z0-9_]+]], %[[VGAMMAGRAD1:[a-z0-9_]+]] = nn.rms_norm_grad %[[V15]], %arg8, %[[V43]] epsilon 1.000000e-05
// CHECK-NEXT: %[[V44:[a-z0-9_]+]] = nn.add %[[VINPUTGRAD]], %[[VINPUTGRAD0]]
// CHECK-NEXT: %[[V45:[a-z0-9_]+]] = nn.matmul %[[V44]], %arg7 transpose_rhs
// CHECK-NEXT: %[[V46:[a-z0-9_]+]] = nn.matmul %[[V12]], %[[V44]] transpose_lhs
// CHECK-NEXT: %[[V47:[a-z0-9_]+]] = nn.reshape %[[V45]]
// CHECK-NEXT: %[[VQUERYGRAD:[a-z0-9_]+]], %[[VKEYGRAD:[a-z0-9_]+]], %[[VVALUEGRAD:[a-z0-9_]+]] = nn.attention_grad %[[V9]], %[[V10]], %[[V8]], %[[V47]]
// CHECK-NEXT: %[[V48:[a-z0-9_]+]] = nn.rope %[[VKEYGRAD]] theta 1.000000e+04 inverse
// CHECK-NEXT: %[[V49:[a-z0-9_]+]] = nn.rope %[[VQUERYGRAD]] theta 1.000000e+04 inverse
// CHECK-NEXT: %[[V50:[a-z0-9_]+]] = nn.reshape %[[VVALUEGRAD]]
// CHECK-NEXT: %[[V51:[a-z0-9_]+]] = nn.reshape %[[V48]]
// CHECK-NEXT: %[[V52:[a-z0-9_]+]] = nn.reshape %[[V49]]
// CHECK-NEXT: %[[V53:[a-z0-9_]+]] = nn.matmul %[[V50]], %arg6 transpose_rhs
// CHECK-NEXT: %[[V54:[a-z0-9_]+]] = nn.matmul %[[V2]], %[[V50]] transpose_lhs
// CHECK-NEXT: %[[V55:[a-z0-9_]+]] = nn.matmul %[[V51]], %arg5 transpose_rhs
// CHECK-NEXT: %[[V56:[a-z0-9_]+]] = nn.matmul %[[V2]], %[[V51]] transpose_lhs
// CHECK-NEXT: %[[V57:[a-z0-9_]+]] = nn.add %[[V53]], %[[V55]]
// CHECK-NEXT: %[[V58:[a-z0-9_]+]] = nn.matmul %[[V52]], %arg4 transpose_rhs
// CHECK-NEXT: %[[V59:[a-z0-9_]+]] = nn.matmul %[[V2]], %[[V52]] transpose_lhs
// CHECK-NEXT: %[[V60:[a-z0-9_]+]] = nn.add %[[V57]], %[[V58]]
// CHECK-NEXT: %[[V61:[a-z0-9_]+]] = dist.all_reduce %[[V60]] on @mesh axes = ["tp"] reduction = sum wire = f32 accum = f32 : tensor<4x8x16xf32> -> tensor<4x8x16xf32>
// CHECK-NEXT: %[[VINPUTGRAD2:[a-z0-9_]+]], %[[VGAMMAGRAD3:[a-z0-9_]+]] = nn.rms_norm_grad %[[V1]], %arg3, %[[V61]] epsilon 1.000000e-05
// CHECK-NEXT: %[[V62:[a-z0-9_]+]] = nn.add %[[V44]], %[[VINPUTGRAD2]]
// CHECK-NEXT: %[[V63:[a-z0-9_]+]] = nn.embedding_grad %arg0, %[[V62]]
// CHECK-NEXT: return %[[V27]], %[[V63]], %[[VGAMMAGRAD3]], %[[V59]], %[[V56]], %[[V54]], %[[V46]], %[[VGAMMAGRAD1]], %[[V41]], %[[V39]], %[[V34]], %[[VGAMMAGRAD]], %[[V31]] : tensor<f32>, tensor<16x16xf32>, tensor<16xf32>, tensor<16x8xf32>, tensor<16x4xf32>, tensor<16x4xf32>, tensor<8x16xf32>, tensor<16xf32>, tensor<16x12xf32>, tensor<16x12xf32>, tensor<12x16xf32>, tensor<16xf32>, tensor<16x16xf32>
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
