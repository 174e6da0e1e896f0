// RUN: plan-opt %s | FileCheck %s

// Tests that a Llama-style decoder layer with a loss head is valid nn IR:
// rms_norm, grouped-query attention with rope, a SwiGLU MLP, residual adds
// and the cross-entropy loss over an untied output projection.
// CHECK-LABEL: func.func @llama_layer
// CHECK: nn.embedding
// CHECK: nn.rope
// CHECK: nn.attention
// CHECK: nn.silu
// CHECK: nn.cross_entropy
func.func @llama_layer(
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
