// A one-block MLP language model in nn IR for the plan tool's tests: an
// embedding, a GELU MLP with a residual, and a loss over an untied head.
func.func @mlp_lm(%ids: tensor<2x8xi32>, %labels: tensor<2x8xi32>,
    %embed: tensor<32x16xf32> {nn.param, nn.name = "embed.weight", nn.init = {kind = "normal", mean = 0.0, std = 2.0e-02}},
    %w1: tensor<16x64xf32> {nn.param, nn.name = "blocks.0.fc1.weight", nn.init = {kind = "normal", mean = 0.0, std = 2.0e-02}},
    %b1: tensor<64xf32> {nn.param, nn.name = "blocks.0.fc1.bias", nn.init = {kind = "zeros", mean = 0.0, std = 0.0}},
    %w2: tensor<64x16xf32> {nn.param, nn.name = "blocks.0.fc2.weight", nn.init = {kind = "normal", mean = 0.0, std = 2.0e-02}},
    %head: tensor<16x32xf32> {nn.param, nn.name = "head.weight", nn.init = {kind = "normal", mean = 0.0, std = 2.0e-02}}) -> tensor<f32> {
  %h = nn.embedding %ids, %embed : (tensor<2x8xi32>, tensor<32x16xf32>) -> tensor<2x8x16xf32> loc("embed")
  %a = nn.linear %h, %w1, %b1 : (tensor<2x8x16xf32>, tensor<16x64xf32>, tensor<64xf32>) -> tensor<2x8x64xf32> loc("blocks.0.fc1")
  %g = nn.gelu %a : (tensor<2x8x64xf32>) -> tensor<2x8x64xf32> loc("blocks.0.act")
  %m = nn.linear %g, %w2 : (tensor<2x8x64xf32>, tensor<64x16xf32>) -> tensor<2x8x16xf32> loc("blocks.0.fc2")
  %r = nn.add %h, %m : (tensor<2x8x16xf32>, tensor<2x8x16xf32>) -> tensor<2x8x16xf32> loc("blocks.0")
  %logits = nn.linear %r, %head : (tensor<2x8x16xf32>, tensor<16x32xf32>) -> tensor<2x8x32xf32> loc("head")
  %loss = nn.cross_entropy %logits, %labels : (tensor<2x8x32xf32>, tensor<2x8xi32>) -> tensor<f32> loc("loss")
  return %loss : tensor<f32>
}
