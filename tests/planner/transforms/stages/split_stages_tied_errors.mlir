// RUN: plan-opt %s --split-input-file --verify-diagnostics --plan-autodiff --plan-placement="mesh=pp=2 axes=pp" --plan-stages="stages=2 virtual=2" --plan-split-stages

// What plan-split-stages cannot honour of a tied parameter, on four-layer
// steps cut into two chunks per stage (chunk c on stage c mod 2).

// Tests that a weight shared by layers 0 and 2, which run in chunks 0 and
// 2 on stage 0, is refused: a stage holds one replica of a parameter.
// expected-error @below {{parameter shared.weight (argument 2) is read by pipeline chunks 0 and 2, which both run on stage 0; a stage holds one replica of a tied parameter, so cut the layers so that its readers run on different stages (other layers= counts or fewer virtual stages)}}
func.func @step(%x: tensor<4x8xf32>, %labels: tensor<4xi32>,
    %shared: tensor<8x8xf32> {nn.param, nn.name = "shared.weight"},
    %w1: tensor<8x8xf32> {nn.param, nn.name = "h.1.fc.weight"},
    %w3: tensor<8x8xf32> {nn.param, nn.name = "h.3.fc.weight"}) -> tensor<f32> {
  %h0 = nn.linear %x, %shared : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32> loc("h.0.fc")
  %h1 = nn.linear %h0, %w1 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32> loc("h.1.fc")
  %h2 = nn.linear %h1, %shared : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32> loc("h.2.fc")
  %h3 = nn.linear %h2, %w3 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32> loc("h.3.fc")
  %loss = nn.cross_entropy %h3, %labels : (tensor<4x8xf32>, tensor<4xi32>) -> tensor<f32> loc("loss")
  return %loss : tensor<f32>
}

// -----

// Tests that a chunk reading the table only in an op the loss does not
// depend on is refused: its replica would get no part of the gradient.
// expected-error @below {{tied parameter wte.weight is read by pipeline chunk 3, which adds nothing to its gradient; each stage that holds a replica must compute part of its gradient (untie it)}}
func.func @step(%ids: tensor<4x6xi32>, %labels: tensor<4x6xi32>,
    %wte: tensor<16x8xf32> {nn.param, nn.name = "wte.weight"},
    %w0: tensor<8x8xf32> {nn.param, nn.name = "h.0.fc.weight"},
    %w1: tensor<8x8xf32> {nn.param, nn.name = "h.1.fc.weight"},
    %w2: tensor<8x8xf32> {nn.param, nn.name = "h.2.fc.weight"},
    %w3: tensor<8x8xf32> {nn.param, nn.name = "h.3.fc.weight"},
    %head: tensor<8x16xf32> {nn.param, nn.name = "lm_head.weight"}) -> tensor<f32> {
  %x0 = nn.embedding %ids, %wte : (tensor<4x6xi32>, tensor<16x8xf32>) -> tensor<4x6x8xf32> loc("wte")
  %h0 = nn.linear %x0, %w0 : (tensor<4x6x8xf32>, tensor<8x8xf32>) -> tensor<4x6x8xf32> loc("h.0.fc")
  %h1 = nn.linear %h0, %w1 : (tensor<4x6x8xf32>, tensor<8x8xf32>) -> tensor<4x6x8xf32> loc("h.1.fc")
  %h2 = nn.linear %h1, %w2 : (tensor<4x6x8xf32>, tensor<8x8xf32>) -> tensor<4x6x8xf32> loc("h.2.fc")
  %h3 = nn.linear %h2, %w3 : (tensor<4x6x8xf32>, tensor<8x8xf32>) -> tensor<4x6x8xf32> loc("h.3.fc")
  %unused = nn.matmul %h3, %wte transpose_rhs : (tensor<4x6x8xf32>, tensor<16x8xf32>) -> tensor<4x6x16xf32> loc("h.3.probe")
  %logits = nn.linear %h3, %head : (tensor<4x6x8xf32>, tensor<8x16xf32>) -> tensor<4x6x16xf32> loc("lm_head")
  %loss = nn.cross_entropy %logits, %labels : (tensor<4x6x16xf32>, tensor<4x6xi32>) -> tensor<f32> loc("loss")
  return %loss : tensor<f32>
}
