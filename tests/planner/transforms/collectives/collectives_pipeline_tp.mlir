// RUN: plan-opt %s -split-input-file --plan-placement="mesh=tp=2 axes=tp" --plan-insert-collectives | FileCheck %s

// plan-placement and plan-insert-collectives under tp=2 (Megatron) on an MLP
// training step and a Llama layer's forward graph: all-reduces after the
// row-parallel wo and w2 and where the vocab-parallel embedding's partial sum
// meets a norm; the logits are gathered for the loss. A Llama training step
// under tp is refused (see docs/planner_collectives.md).

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
func.func @mlp(%arg0: tensor<8x16xf32>, %arg1: tensor<8xi32>, %arg2: tensor<16x16xf32> {nn.name = "fc1.weight", nn.param}, %arg3: tensor<16x12xf32> {nn.name = "head.weight", nn.param}, %arg4: tensor<f32>) -> (tensor<f32>, tensor<16x16xf32> {nn.grad_of = 2 : i64, nn.name = "fc1.weight"}, tensor<16x12xf32> {nn.grad_of = 3 : i64, nn.name = "head.weight"}) attributes {nn.loss_grad_arg = 4 : i64} {
  %0 = nn.linear %arg0, %arg2 : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
  %1 = nn.silu %0 : (tensor<8x16xf32>) -> tensor<8x16xf32>
  %2 = nn.linear %1, %arg3 : (tensor<8x16xf32>, tensor<16x12xf32>) -> tensor<8x12xf32>
  %3 = nn.cross_entropy %2, %arg1 : (tensor<8x12xf32>, tensor<8xi32>) -> tensor<f32>
  %4 = nn.cross_entropy_grad %2, %arg1, %arg4 scale 1.250000e-01 : (tensor<8x12xf32>, tensor<8xi32>, tensor<f32>) -> tensor<8x12xf32>
  %5 = nn.matmul %4, %arg3 transpose_rhs : (tensor<8x12xf32>, tensor<16x12xf32>) -> tensor<8x16xf32>
  %6 = nn.matmul %1, %4 transpose_lhs : (tensor<8x16xf32>, tensor<8x12xf32>) -> tensor<16x12xf32>
  %7 = nn.silu_grad %0, %5 : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  %8 = nn.matmul %arg0, %7 transpose_lhs : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<16x16xf32>
  return %3, %8, %6 : tensor<f32>, tensor<16x16xf32>, tensor<16x12xf32>
}

// -----

// Tests the exact collective sequence of the Llama layer's forward graph.
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
// CHECK-NEXT: return %[[V27]] : tensor<f32>
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



