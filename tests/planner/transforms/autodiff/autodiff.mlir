// RUN: plan-opt %s --plan-autodiff -split-input-file -verify-diagnostics | FileCheck %s

// Tests that a two-layer MLP gets the backward ops of its VJPs in reverse
// order, no cotangent for its input, and its gradients returned after the
// loss in parameter order, each paired with its argument.
// CHECK-LABEL: func.func @mlp
// CHECK-SAME: %[[X:[^:]+]]: tensor<4x8xf32>, %[[LABELS:[^:]+]]: tensor<4xi32>
// CHECK-SAME: %[[W1:[^:]+]]: tensor<8x16xf32> {nn.name = "fc1.weight", nn.param}
// CHECK-SAME: %[[B1:[^:]+]]: tensor<16xf32> {nn.name = "fc1.bias", nn.param}
// CHECK-SAME: %[[W2:[^:]+]]: tensor<16x10xf32> {nn.name = "fc2.weight", nn.param}
// CHECK-SAME: %[[DLOSS:[^:]+]]: tensor<f32>)
// CHECK-SAME: -> (tensor<f32>,
// CHECK-SAME: tensor<8x16xf32> {nn.grad_of = 2 : i64, nn.name = "fc1.weight"},
// CHECK-SAME: tensor<16xf32> {nn.grad_of = 3 : i64, nn.name = "fc1.bias"},
// CHECK-SAME: tensor<16x10xf32> {nn.grad_of = 4 : i64, nn.name = "fc2.weight"})
// CHECK-SAME: attributes {nn.loss_grad_arg = 5 : i64}
// CHECK-NEXT: %[[H:.+]] = nn.linear %[[X]], %[[W1]], %[[B1]]
// CHECK-NEXT: %[[A:.+]] = nn.gelu %[[H]]
// CHECK-NEXT: %[[LOGITS:.+]] = nn.linear %[[A]], %[[W2]]
// CHECK-NEXT: %[[LOSS:.+]] = nn.cross_entropy %[[LOGITS]], %[[LABELS]]
// CHECK-NEXT: %[[DLOGITS:.+]] = nn.cross_entropy_grad %[[LOGITS]], %[[LABELS]], %[[DLOSS]] scale 2.500000e-01
// CHECK-NEXT: %[[DA:.+]] = nn.matmul %[[DLOGITS]], %[[W2]] transpose_rhs
// CHECK-NEXT: %[[DW2:.+]] = nn.matmul %[[A]], %[[DLOGITS]] transpose_lhs
// CHECK-NEXT: %[[DH:.+]] = nn.gelu_grad %[[H]], %[[DA]]
// CHECK-NEXT: %[[DW1:.+]] = nn.matmul %[[X]], %[[DH]] transpose_lhs
// CHECK-NEXT: %[[DB1:.+]] = nn.reduce_sum %[[DH]] dims [0]
// CHECK-NEXT: return %[[LOSS]], %[[DW1]], %[[DB1]], %[[DW2]] :
func.func @mlp(%x: tensor<4x8xf32>, %labels: tensor<4xi32>,
    %w1: tensor<8x16xf32> {nn.param, nn.name = "fc1.weight"},
    %b1: tensor<16xf32> {nn.param, nn.name = "fc1.bias"},
    %w2: tensor<16x10xf32> {nn.param, nn.name = "fc2.weight"}) -> tensor<f32> {
  %h = nn.linear %x, %w1, %b1 : (tensor<4x8xf32>, tensor<8x16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  %a = nn.gelu %h : (tensor<4x16xf32>) -> tensor<4x16xf32>
  %logits = nn.linear %a, %w2 : (tensor<4x16xf32>, tensor<16x10xf32>) -> tensor<4x10xf32>
  %loss = nn.cross_entropy %logits, %labels : (tensor<4x10xf32>, tensor<4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Tests that a value used twice gets the nn.add of its two cotangents.
// CHECK-LABEL: func.func @fan_out
// CHECK-SAME: %[[X:[^:]+]]: tensor<4x8xf32>, %[[LABELS:[^:]+]]: tensor<4xi32>, %[[W:[^:]+]]: tensor<8x8xf32> {nn.param}, %[[DLOSS:[^:]+]]: tensor<f32>)
// CHECK-SAME: -> (tensor<f32>, tensor<8x8xf32> {nn.grad_of = 2 : i64})
// CHECK-NEXT: %[[H:.+]] = nn.linear %[[X]], %[[W]]
// CHECK-NEXT: %[[A:.+]] = nn.silu %[[H]]
// CHECK-NEXT: %[[R:.+]] = nn.add %[[A]], %[[H]]
// CHECK-NEXT: %[[LOSS:.+]] = nn.cross_entropy %[[R]], %[[LABELS]]
// CHECK-NEXT: %[[DR:.+]] = nn.cross_entropy_grad %[[R]], %[[LABELS]], %[[DLOSS]]
// CHECK-NEXT: %[[DA:.+]] = nn.silu_grad %[[H]], %[[DR]]
// CHECK-NEXT: %[[DH:.+]] = nn.add %[[DR]], %[[DA]]
// CHECK-NEXT: %[[DW:.+]] = nn.matmul %[[X]], %[[DH]] transpose_lhs
// CHECK-NEXT: return %[[LOSS]], %[[DW]] :
func.func @fan_out(%x: tensor<4x8xf32>, %labels: tensor<4xi32>,
    %w: tensor<8x8xf32> {nn.param}) -> tensor<f32> {
  %h = nn.linear %x, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %a = nn.silu %h : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %r = nn.add %a, %h : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %loss = nn.cross_entropy %r, %labels : (tensor<4x8xf32>, tensor<4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Tests that a tied weight (GPT-2's token table, read by the embedding and
// by the LM head) gets the sum of the gradients of both uses.
// CHECK-LABEL: func.func @tied_embedding
// CHECK-SAME: %[[IDS:[^:]+]]: tensor<2x4xi32>, %[[LABELS:[^:]+]]: tensor<2x4xi32>, %[[WTE:[^:]+]]: tensor<16x8xf32> {{{.*}}}, %[[DLOSS:[^:]+]]: tensor<f32>)
// CHECK-SAME: -> (tensor<f32>, tensor<16x8xf32> {nn.grad_of = 2 : i64, nn.name = "transformer.wte.weight"})
// CHECK-NEXT: %[[H:.+]] = nn.embedding %[[IDS]], %[[WTE]]
// CHECK-NEXT: %[[LOGITS:.+]] = nn.matmul %[[H]], %[[WTE]] transpose_rhs
// CHECK-NEXT: %[[LOSS:.+]] = nn.cross_entropy %[[LOGITS]], %[[LABELS]]
// CHECK-NEXT: %[[DLOGITS:.+]] = nn.cross_entropy_grad %[[LOGITS]], %[[LABELS]], %[[DLOSS]] scale 1.250000e-01
// CHECK-NEXT: %[[DH:.+]] = nn.matmul %[[DLOGITS]], %[[WTE]] :
// CHECK-NEXT: %[[DHEAD:.+]] = nn.matmul %[[DLOGITS]], %[[H]] transpose_lhs
// CHECK-NEXT: %[[DEMBED:.+]] = nn.embedding_grad %[[IDS]], %[[DH]]
// CHECK-NEXT: %[[DWTE:.+]] = nn.add %[[DHEAD]], %[[DEMBED]]
// CHECK-NEXT: return %[[LOSS]], %[[DWTE]] :
func.func @tied_embedding(%ids: tensor<2x4xi32>, %labels: tensor<2x4xi32>,
    %wte: tensor<16x8xf32> {nn.param, nn.name = "transformer.wte.weight"}) -> tensor<f32> {
  %h = nn.embedding %ids, %wte : (tensor<2x4xi32>, tensor<16x8xf32>) -> tensor<2x4x8xf32>
  %logits = nn.matmul %h, %wte transpose_rhs : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
  %loss = nn.cross_entropy %logits, %labels : (tensor<2x4x16xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Tests that a Llama-style layer (rms_norm, rope, grouped-query attention,
// SwiGLU, residual adds) gets every backward op and one gradient per
// parameter, the residual stream's cotangents summed at each fork.
// CHECK-LABEL: func.func @llama_layer
// CHECK-SAME: -> (tensor<f32>, tensor<32x16xf32> {nn.grad_of = 2 : i64, nn.name = "tok_embeddings.weight"}
// CHECK-SAME: tensor<16x32xf32> {nn.grad_of = 12 : i64, nn.name = "output.weight"})
// CHECK-SAME: attributes {nn.loss_grad_arg = 13 : i64}
// CHECK: %[[LOSS:.+]] = nn.cross_entropy
// CHECK-NEXT: nn.cross_entropy_grad
// CHECK: %[[DFFN:.+]] = nn.add
// CHECK-NEXT: %{{.+}}, %[[DFFN_NORM:.+]] = nn.rms_norm_grad %{{.+}}, %{{.+}}, %[[DFFN]]
// CHECK-NEXT: %[[DH1:.+]] = nn.add %{{.+}}, %{{.+}}
// CHECK: %[[DQ:.+]], %[[DK:.+]], %[[DV:.+]] = nn.attention_grad
// CHECK-NEXT: nn.rope %[[DK]] theta 1.000000e+04 inverse
// CHECK-NEXT: nn.rope %[[DQ]] theta 1.000000e+04 inverse
// CHECK: %{{.+}}, %[[DATTN_NORM:.+]] = nn.rms_norm_grad
// CHECK-NEXT: %[[DH:.+]] = nn.add %[[DH1]], %{{.+}}
// CHECK-NEXT: %[[DEMBED:.+]] = nn.embedding_grad %{{.+}}, %[[DH]]
// CHECK-NEXT: return %[[LOSS]], %[[DEMBED]], %[[DATTN_NORM]], %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, %[[DFFN_NORM]], %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}} :
func.func @llama_layer(%ids: tensor<2x8xi32>, %labels: tensor<2x8xi32>,
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
  %logits = nn.linear %h2, %output : (tensor<2x8x16xf32>, tensor<16x32xf32>) -> tensor<2x8x32xf32>
  %loss = nn.cross_entropy %logits, %labels : (tensor<2x8x32xf32>, tensor<2x8xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Tests that a function without a loss is refused.
// expected-error @+1 {{'func.func' op must return one scalar loss of type 'tensor<f32>' to be differentiated, got: (); return the nn.cross_entropy result alone}}
func.func @no_loss(%w: tensor<4x8xf32> {nn.param}) {
  return
}

// -----

// Tests that a non-scalar result is refused.
// expected-error @+1 {{must return one scalar loss of type 'tensor<f32>' to be differentiated, got: ('tensor<4x8xf32>'); return the nn.cross_entropy result alone}}
func.func @non_scalar(%x: tensor<4x8xf32>, %w: tensor<8x8xf32> {nn.param}) -> tensor<4x8xf32> {
  %y = nn.linear %x, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// Tests that returning more than the loss is refused.
// expected-error @+1 {{got: ('tensor<f32>', 'tensor<4x8xf32>')}}
func.func @loss_and_logits(%x: tensor<4x8xf32>, %labels: tensor<4xi32>, %w: tensor<8x8xf32> {nn.param}) -> (tensor<f32>, tensor<4x8xf32>) {
  %y = nn.linear %x, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %loss = nn.cross_entropy %y, %labels : (tensor<4x8xf32>, tensor<4xi32>) -> tensor<f32>
  return %loss, %y : tensor<f32>, tensor<4x8xf32>
}

// -----

// Tests that a function without parameters is refused.
// expected-error @+1 {{'func.func' op has no parameter to differentiate; mark the trainable arguments with {nn.param}}}
func.func @no_params(%logits: tensor<4x8xf32>, %labels: tensor<4xi32>) -> tensor<f32> {
  %loss = nn.cross_entropy %logits, %labels : (tensor<4x8xf32>, tensor<4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Tests that an op without a VJP between a parameter and the loss is refused.
func.func @no_vjp(%x: tensor<4x8xf32>, %labels: tensor<1xi32>, %w: tensor<8x8xf32> {nn.param}) -> tensor<f32> {
  %y = nn.linear %x, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  // expected-error @+1 {{'nn.reduce_sum' op has no vector-Jacobian product (VjpOpInterface), but the loss depends on a parameter through it; build the forward graph from differentiable nn ops}}
  %s = nn.reduce_sum %y dims [0] : (tensor<4x8xf32>) -> tensor<8xf32>
  %r = nn.reshape %s : (tensor<8xf32>) -> tensor<1x8xf32>
  %loss = nn.cross_entropy %r, %labels : (tensor<1x8xf32>, tensor<1xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Tests that a parameter the loss does not depend on is refused by name.
// expected-error @+1 {{the loss does not depend on parameter #2 'unused.weight', so its gradient is zero and nn has no op to build it; use the parameter or drop its {nn.param}}}
func.func @unused_param(%logits: tensor<4x8xf32>, %labels: tensor<4xi32>, %w: tensor<8x8xf32> {nn.param, nn.name = "unused.weight"}) -> tensor<f32> {
  %loss = nn.cross_entropy %logits, %labels : (tensor<4x8xf32>, tensor<4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Tests that a function differentiated already is refused.
// expected-error @+1 {{'func.func' op is already a training step (it has 'nn.loss_grad_arg'); run plan-autodiff once, on the forward function}}
func.func @twice(%logits: tensor<4x8xf32>, %labels: tensor<4xi32>, %w: tensor<8x8xf32> {nn.param}, %dloss: tensor<f32>) -> (tensor<f32>, tensor<8x8xf32>) attributes {nn.loss_grad_arg = 3 : i64} {
  %loss = nn.cross_entropy %logits, %labels : (tensor<4x8xf32>, tensor<4xi32>) -> tensor<f32>
  return %loss, %w : tensor<f32>, tensor<8x8xf32>
}
