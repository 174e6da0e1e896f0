// RUN: plan-opt %s -split-input-file --plan-autodiff --plan-placement="mesh=tp=2 axes=tp" --plan-insert-collectives | FileCheck %s

// plan-autodiff, plan-placement and plan-insert-collectives under tp=2
// (Megatron) on an MLP, a Llama layer and a GPT-2 block training step:
// all-reduces after the row-parallel wo and w2 (c_proj) and where the
// vocab-parallel embedding's partial sum meets a norm; the vocab-sharded
// logits feed the vocab-parallel cross-entropy (an all-reduce of the max and
// one of the statistics, no gather), whose gradient stays vocab-sharded for
// the column-parallel head. GPT-2's row-parallel biases are added once,
// after the all-reduce (nn.bias_add).

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
// Forward: 3 all_reduces (embedding, after wo, after w2) and the loss's 2
// (max, then the [tokens, 2] statistics). Backward: 3 all_reduces (the input
// gradients of the output head, of w1 + w3 and of wq + wk + wv). 8
// collectives, all over tp, no gather and no slice; every parameter gradient
// stays local.
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
// CHECK-NEXT: %[[V26:[a-z0-9_]+]] = nn.vocab_max %[[V25]] vocab 32
// CHECK-NEXT: %[[V27:[a-z0-9_]+]] = dist.all_reduce %[[V26]] on @mesh axes = ["tp"] reduction = max wire = f32 accum = f32 : tensor<4x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT: %[[V28:[a-z0-9_]+]] = nn.vocab_stats %[[V25]], %arg1, %[[V27]] vocab 32
// CHECK-NEXT: %[[V29:[a-z0-9_]+]] = dist.all_reduce %[[V28]] on @mesh axes = ["tp"] reduction = sum wire = f32 accum = f32 : tensor<4x8x2xf32> -> tensor<4x8x2xf32>
// CHECK-NEXT: %[[V30:[a-z0-9_]+]] = nn.vocab_cross_entropy %[[V29]]
// CHECK-NEXT: %[[V31:[a-z0-9_]+]] = nn.vocab_cross_entropy_grad %[[V25]], %arg1, %[[V27]], %[[V29]], %arg14 scale 3.125000e-02 vocab 32
// CHECK-NEXT: %[[V32:[a-z0-9_]+]] = nn.matmul %[[V31]], %arg13 transpose_rhs
// CHECK-NEXT: %[[V33:[a-z0-9_]+]] = nn.matmul %[[V24]], %[[V31]] transpose_lhs
// CHECK-NEXT: %[[V34:[a-z0-9_]+]] = dist.all_reduce %[[V32]] on @mesh axes = ["tp"] reduction = sum wire = f32 accum = f32 : tensor<4x8x16xf32> -> tensor<4x8x16xf32>
// CHECK-NEXT: %[[V35:[a-z0-9_]+]], %[[V36:[a-z0-9_]+]] = nn.rms_norm_grad %[[V23]], %arg12, %[[V34]] epsilon 1.000000e-05
// CHECK-NEXT: %[[V37:[a-z0-9_]+]] = nn.matmul %[[V35]], %arg11 transpose_rhs
// CHECK-NEXT: %[[V38:[a-z0-9_]+]] = nn.matmul %[[V20]], %[[V35]] transpose_lhs
// CHECK-NEXT: %[[V39:[a-z0-9_]+]] = nn.mul %[[V37]], %[[V18]]
// CHECK-NEXT: %[[V40:[a-z0-9_]+]] = nn.mul %[[V37]], %[[V19]]
// CHECK-NEXT: %[[V41:[a-z0-9_]+]] = nn.silu_grad %[[V17]], %[[V39]]
// CHECK-NEXT: %[[V42:[a-z0-9_]+]] = nn.matmul %[[V40]], %arg10 transpose_rhs
// CHECK-NEXT: %[[V43:[a-z0-9_]+]] = nn.matmul %[[V16]], %[[V40]] transpose_lhs
// CHECK-NEXT: %[[V44:[a-z0-9_]+]] = nn.matmul %[[V41]], %arg9 transpose_rhs
// CHECK-NEXT: %[[V45:[a-z0-9_]+]] = nn.matmul %[[V16]], %[[V41]] transpose_lhs
// CHECK-NEXT: %[[V46:[a-z0-9_]+]] = nn.add %[[V42]], %[[V44]]
// CHECK-NEXT: %[[V47:[a-z0-9_]+]] = dist.all_reduce %[[V46]] on @mesh axes = ["tp"] reduction = sum wire = f32 accum = f32 : tensor<4x8x16xf32> -> tensor<4x8x16xf32>
// CHECK-NEXT: %[[V48:[a-z0-9_]+]], %[[V49:[a-z0-9_]+]] = nn.rms_norm_grad %[[V15]], %arg8, %[[V47]] epsilon 1.000000e-05
// CHECK-NEXT: %[[V50:[a-z0-9_]+]] = nn.add %[[V35]], %[[V48]]
// CHECK-NEXT: %[[V51:[a-z0-9_]+]] = nn.matmul %[[V50]], %arg7 transpose_rhs
// CHECK-NEXT: %[[V52:[a-z0-9_]+]] = nn.matmul %[[V12]], %[[V50]] transpose_lhs
// CHECK-NEXT: %[[V53:[a-z0-9_]+]] = nn.reshape %[[V51]]
// CHECK-NEXT: %[[V54:[a-z0-9_]+]], %[[V55:[a-z0-9_]+]], %[[V56:[a-z0-9_]+]] = nn.attention_grad %[[V9]], %[[V10]], %[[V8]], %[[V53]]
// CHECK-NEXT: %[[V57:[a-z0-9_]+]] = nn.rope %[[V55]] theta 1.000000e+04 inverse
// CHECK-NEXT: %[[V58:[a-z0-9_]+]] = nn.rope %[[V54]] theta 1.000000e+04 inverse
// CHECK-NEXT: %[[V59:[a-z0-9_]+]] = nn.reshape %[[V56]]
// CHECK-NEXT: %[[V60:[a-z0-9_]+]] = nn.reshape %[[V57]]
// CHECK-NEXT: %[[V61:[a-z0-9_]+]] = nn.reshape %[[V58]]
// CHECK-NEXT: %[[V62:[a-z0-9_]+]] = nn.matmul %[[V59]], %arg6 transpose_rhs
// CHECK-NEXT: %[[V63:[a-z0-9_]+]] = nn.matmul %[[V2]], %[[V59]] transpose_lhs
// CHECK-NEXT: %[[V64:[a-z0-9_]+]] = nn.matmul %[[V60]], %arg5 transpose_rhs
// CHECK-NEXT: %[[V65:[a-z0-9_]+]] = nn.matmul %[[V2]], %[[V60]] transpose_lhs
// CHECK-NEXT: %[[V66:[a-z0-9_]+]] = nn.add %[[V62]], %[[V64]]
// CHECK-NEXT: %[[V67:[a-z0-9_]+]] = nn.matmul %[[V61]], %arg4 transpose_rhs
// CHECK-NEXT: %[[V68:[a-z0-9_]+]] = nn.matmul %[[V2]], %[[V61]] transpose_lhs
// CHECK-NEXT: %[[V69:[a-z0-9_]+]] = nn.add %[[V66]], %[[V67]]
// CHECK-NEXT: %[[V70:[a-z0-9_]+]] = dist.all_reduce %[[V69]] on @mesh axes = ["tp"] reduction = sum wire = f32 accum = f32 : tensor<4x8x16xf32> -> tensor<4x8x16xf32>
// CHECK-NEXT: %[[V71:[a-z0-9_]+]], %[[V72:[a-z0-9_]+]] = nn.rms_norm_grad %[[V1]], %arg3, %[[V70]] epsilon 1.000000e-05
// CHECK-NEXT: %[[V73:[a-z0-9_]+]] = nn.add %[[V50]], %[[V71]]
// CHECK-NEXT: %[[V74:[a-z0-9_]+]] = nn.embedding_grad %arg0, %[[V73]]
// CHECK-NEXT: return %[[V30]], %[[V74]], %[[V72]], %[[V68]], %[[V65]], %[[V63]], %[[V52]], %[[V49]], %[[V45]], %[[V43]], %[[V38]], %[[V36]], %[[V33]] : tensor<f32>, tensor<16x16xf32>, tensor<16xf32>, tensor<16x8xf32>, tensor<16x4xf32>, tensor<16x4xf32>, tensor<8x16xf32>, tensor<16xf32>, tensor<16x12xf32>, tensor<16x12xf32>, tensor<12x16xf32>, tensor<16xf32>, tensor<16x16xf32>
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

// Tests the exact collective sequence of a GPT-2 block training step (tied
// LM head). Forward: the all_reduce of the summed token and position
// embeddings (both vocab-parallel), after attn.c_proj and mlp.c_proj each an
// all_reduce then nn.bias_add of the replicated bias, and the loss's max and
// statistics. Backward: all_reduces of the input gradients of the head, of
// c_fc and of c_attn; the row-parallel bias gradients are reduce_sums of the
// replicated output cotangents, and the tied wte gradient adds the head's
// vocab shard to the slice of the embedding gradient. 8 all_reduces and 1
// slice, all over tp.
// CHECK-LABEL: func.func @gpt2(
// CHECK-NEXT: %[[V0:[a-z0-9_]+]] = nn.embedding %arg0, %arg3
// CHECK-NEXT: %[[V1:[a-z0-9_]+]] = nn.embedding %arg2, %arg4
// CHECK-NEXT: %[[V2:[a-z0-9_]+]] = nn.add %[[V0]], %[[V1]]
// CHECK-NEXT: %[[V3:[a-z0-9_]+]] = dist.all_reduce %[[V2]] on @mesh axes = ["tp"] reduction = sum wire = f32 accum = f32 : tensor<2x8x16xf32> -> tensor<2x8x16xf32>
// CHECK-NEXT: %[[V4:[a-z0-9_]+]] = nn.layer_norm %[[V3]], %arg5, %arg6 epsilon 1.000000e-05
// CHECK-NEXT: %[[V5:[a-z0-9_]+]] = nn.linear %[[V4]], %arg7, %arg8
// CHECK-NEXT: %[[V6:[a-z0-9_]+]] = nn.reshape %[[V5]]
// CHECK-NEXT: %[[V7:[a-z0-9_]+]] = nn.linear %[[V4]], %arg9, %arg10
// CHECK-NEXT: %[[V8:[a-z0-9_]+]] = nn.reshape %[[V7]]
// CHECK-NEXT: %[[V9:[a-z0-9_]+]] = nn.linear %[[V4]], %arg11, %arg12
// CHECK-NEXT: %[[V10:[a-z0-9_]+]] = nn.reshape %[[V9]]
// CHECK-NEXT: %[[V11:[a-z0-9_]+]] = nn.attention %[[V6]], %[[V8]], %[[V10]]
// CHECK-NEXT: %[[V12:[a-z0-9_]+]] = nn.reshape %[[V11]]
// CHECK-NEXT: %[[V13:[a-z0-9_]+]] = nn.linear %[[V12]], %arg13
// CHECK-NEXT: %[[V14:[a-z0-9_]+]] = dist.all_reduce %[[V13]] on @mesh axes = ["tp"] reduction = sum wire = f32 accum = f32 : tensor<2x8x16xf32> -> tensor<2x8x16xf32>
// CHECK-NEXT: %[[V15:[a-z0-9_]+]] = nn.bias_add %[[V14]], %arg14
// CHECK-NEXT: %[[V16:[a-z0-9_]+]] = nn.add %[[V3]], %[[V15]]
// CHECK-NEXT: %[[V17:[a-z0-9_]+]] = nn.layer_norm %[[V16]], %arg15, %arg16 epsilon 1.000000e-05
// CHECK-NEXT: %[[V18:[a-z0-9_]+]] = nn.linear %[[V17]], %arg17, %arg18
// CHECK-NEXT: %[[V19:[a-z0-9_]+]] = nn.gelu %[[V18]]
// CHECK-NEXT: %[[V20:[a-z0-9_]+]] = nn.linear %[[V19]], %arg19
// CHECK-NEXT: %[[V21:[a-z0-9_]+]] = dist.all_reduce %[[V20]] on @mesh axes = ["tp"] reduction = sum wire = f32 accum = f32 : tensor<2x8x16xf32> -> tensor<2x8x16xf32>
// CHECK-NEXT: %[[V22:[a-z0-9_]+]] = nn.bias_add %[[V21]], %arg20
// CHECK-NEXT: %[[V23:[a-z0-9_]+]] = nn.add %[[V16]], %[[V22]]
// CHECK-NEXT: %[[V24:[a-z0-9_]+]] = nn.layer_norm %[[V23]], %arg21, %arg22 epsilon 1.000000e-05
// CHECK-NEXT: %[[V25:[a-z0-9_]+]] = nn.matmul %[[V24]], %arg3 transpose_rhs
// CHECK-NEXT: %[[V26:[a-z0-9_]+]] = nn.vocab_max %[[V25]] vocab 32
// CHECK-NEXT: %[[V27:[a-z0-9_]+]] = dist.all_reduce %[[V26]] on @mesh axes = ["tp"] reduction = max wire = f32 accum = f32 : tensor<2x8xf32> -> tensor<2x8xf32>
// CHECK-NEXT: %[[V28:[a-z0-9_]+]] = nn.vocab_stats %[[V25]], %arg1, %[[V27]] vocab 32
// CHECK-NEXT: %[[V29:[a-z0-9_]+]] = dist.all_reduce %[[V28]] on @mesh axes = ["tp"] reduction = sum wire = f32 accum = f32 : tensor<2x8x2xf32> -> tensor<2x8x2xf32>
// CHECK-NEXT: %[[V30:[a-z0-9_]+]] = nn.vocab_cross_entropy %[[V29]]
// CHECK-NEXT: %[[V31:[a-z0-9_]+]] = nn.vocab_cross_entropy_grad %[[V25]], %arg1, %[[V27]], %[[V29]], %arg23 scale 6.250000e-02 vocab 32
// CHECK-NEXT: %[[V32:[a-z0-9_]+]] = nn.matmul %[[V31]], %arg3
// CHECK-NEXT: %[[V33:[a-z0-9_]+]] = nn.matmul %[[V31]], %[[V24]] transpose_lhs
// CHECK-NEXT: %[[V34:[a-z0-9_]+]] = dist.all_reduce %[[V32]] on @mesh axes = ["tp"] reduction = sum wire = f32 accum = f32 : tensor<2x8x16xf32> -> tensor<2x8x16xf32>
// CHECK-NEXT: %[[V35:[a-z0-9_]+]], %[[V36:[a-z0-9_]+]], %[[V37:[a-z0-9_]+]] = nn.layer_norm_grad %[[V23]], %arg21, %[[V34]] epsilon 1.000000e-05
// CHECK-NEXT: %[[V38:[a-z0-9_]+]] = nn.matmul %[[V35]], %arg19 transpose_rhs
// CHECK-NEXT: %[[V39:[a-z0-9_]+]] = nn.matmul %[[V19]], %[[V35]] transpose_lhs
// CHECK-NEXT: %[[V40:[a-z0-9_]+]] = nn.reduce_sum %[[V35]] dims [0, 1]
// CHECK-NEXT: %[[V41:[a-z0-9_]+]] = nn.gelu_grad %[[V18]], %[[V38]]
// CHECK-NEXT: %[[V42:[a-z0-9_]+]] = nn.matmul %[[V41]], %arg17 transpose_rhs
// CHECK-NEXT: %[[V43:[a-z0-9_]+]] = nn.matmul %[[V17]], %[[V41]] transpose_lhs
// CHECK-NEXT: %[[V44:[a-z0-9_]+]] = nn.reduce_sum %[[V41]] dims [0, 1]
// CHECK-NEXT: %[[V45:[a-z0-9_]+]] = dist.all_reduce %[[V42]] on @mesh axes = ["tp"] reduction = sum wire = f32 accum = f32 : tensor<2x8x16xf32> -> tensor<2x8x16xf32>
// CHECK-NEXT: %[[V46:[a-z0-9_]+]], %[[V47:[a-z0-9_]+]], %[[V48:[a-z0-9_]+]] = nn.layer_norm_grad %[[V16]], %arg15, %[[V45]] epsilon 1.000000e-05
// CHECK-NEXT: %[[V49:[a-z0-9_]+]] = nn.add %[[V35]], %[[V46]]
// CHECK-NEXT: %[[V50:[a-z0-9_]+]] = nn.matmul %[[V49]], %arg13 transpose_rhs
// CHECK-NEXT: %[[V51:[a-z0-9_]+]] = nn.matmul %[[V12]], %[[V49]] transpose_lhs
// CHECK-NEXT: %[[V52:[a-z0-9_]+]] = nn.reduce_sum %[[V49]] dims [0, 1]
// CHECK-NEXT: %[[V53:[a-z0-9_]+]] = nn.reshape %[[V50]]
// CHECK-NEXT: %[[V54:[a-z0-9_]+]], %[[V55:[a-z0-9_]+]], %[[V56:[a-z0-9_]+]] = nn.attention_grad %[[V6]], %[[V8]], %[[V10]], %[[V53]]
// CHECK-NEXT: %[[V57:[a-z0-9_]+]] = nn.reshape %[[V56]]
// CHECK-NEXT: %[[V58:[a-z0-9_]+]] = nn.matmul %[[V57]], %arg11 transpose_rhs
// CHECK-NEXT: %[[V59:[a-z0-9_]+]] = nn.matmul %[[V4]], %[[V57]] transpose_lhs
// CHECK-NEXT: %[[V60:[a-z0-9_]+]] = nn.reduce_sum %[[V57]] dims [0, 1]
// CHECK-NEXT: %[[V61:[a-z0-9_]+]] = nn.reshape %[[V55]]
// CHECK-NEXT: %[[V62:[a-z0-9_]+]] = nn.matmul %[[V61]], %arg9 transpose_rhs
// CHECK-NEXT: %[[V63:[a-z0-9_]+]] = nn.matmul %[[V4]], %[[V61]] transpose_lhs
// CHECK-NEXT: %[[V64:[a-z0-9_]+]] = nn.reduce_sum %[[V61]] dims [0, 1]
// CHECK-NEXT: %[[V65:[a-z0-9_]+]] = nn.add %[[V58]], %[[V62]]
// CHECK-NEXT: %[[V66:[a-z0-9_]+]] = nn.reshape %[[V54]]
// CHECK-NEXT: %[[V67:[a-z0-9_]+]] = nn.matmul %[[V66]], %arg7 transpose_rhs
// CHECK-NEXT: %[[V68:[a-z0-9_]+]] = nn.matmul %[[V4]], %[[V66]] transpose_lhs
// CHECK-NEXT: %[[V69:[a-z0-9_]+]] = nn.reduce_sum %[[V66]] dims [0, 1]
// CHECK-NEXT: %[[V70:[a-z0-9_]+]] = nn.add %[[V65]], %[[V67]]
// CHECK-NEXT: %[[V71:[a-z0-9_]+]] = dist.all_reduce %[[V70]] on @mesh axes = ["tp"] reduction = sum wire = f32 accum = f32 : tensor<2x8x16xf32> -> tensor<2x8x16xf32>
// CHECK-NEXT: %[[V72:[a-z0-9_]+]], %[[V73:[a-z0-9_]+]], %[[V74:[a-z0-9_]+]] = nn.layer_norm_grad %[[V3]], %arg5, %[[V71]] epsilon 1.000000e-05
// CHECK-NEXT: %[[V75:[a-z0-9_]+]] = nn.add %[[V49]], %[[V72]]
// CHECK-NEXT: %[[V76:[a-z0-9_]+]] = nn.embedding_grad %arg2, %[[V75]]
// CHECK-NEXT: %[[V77:[a-z0-9_]+]] = nn.embedding_grad %arg0, %[[V75]]
// CHECK-NEXT: %[[V78:[a-z0-9_]+]] = dist.slice %[[V77]] on @mesh axes = ["tp"] slice_dim = 0 : tensor<32x16xf32> -> tensor<16x16xf32>
// CHECK-NEXT: %[[V79:[a-z0-9_]+]] = nn.add %[[V33]], %[[V78]]
// CHECK-NEXT: return %[[V30]], %[[V79]], %[[V76]], %[[V73]], %[[V74]], %[[V68]], %[[V69]], %[[V63]], %[[V64]], %[[V59]], %[[V60]], %[[V51]], %[[V52]], %[[V47]], %[[V48]], %[[V43]], %[[V44]], %[[V39]], %[[V40]], %[[V36]], %[[V37]] : tensor<f32>, tensor<16x16xf32>, tensor<4x16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16x8xf32>, tensor<8xf32>, tensor<16x8xf32>, tensor<8xf32>, tensor<16x8xf32>, tensor<8xf32>, tensor<8x16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16x16xf32>, tensor<16xf32>, tensor<16x16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>
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
