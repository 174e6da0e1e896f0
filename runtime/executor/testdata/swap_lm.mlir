// A one-block language model whose hidden states swap the batch and
// sequence dims (nn.transpose [1, 0, 2]) before an MLP, a norm and the head,
// so the loss pairs position (s, b) with label (b, s). Batch and sequence
// are both 8. Under any batch-splitting mesh the logits come out split on
// dim 1 while the labels are split on dim 0, so the plan reshards the
// labels with a dist.all_to_all: the runtime tests train it to check the
// transpose kernel and the all-to-all route against the 1-rank run.
func.func @swap_lm(%ids: tensor<8x8xi32>, %labels: tensor<8x8xi32>,
    %embed: tensor<64x64xf32> {nn.param, nn.name = "embed.weight", nn.init = {kind = "normal", mean = 0.0, std = 2.0e-02}},
    %w1: tensor<64x128xf32> {nn.param, nn.name = "blocks.0.fc1.weight", nn.init = {kind = "normal", mean = 0.0, std = 2.0e-02}},
    %w2: tensor<128x64xf32> {nn.param, nn.name = "blocks.0.fc2.weight", nn.init = {kind = "normal", mean = 0.0, std = 2.0e-02}},
    %gamma: tensor<64xf32> {nn.param, nn.name = "final_norm.weight", nn.init = {kind = "ones", mean = 0.0, std = 0.0}},
    %head: tensor<64x64xf32> {nn.param, nn.name = "head.weight", nn.init = {kind = "normal", mean = 0.0, std = 2.0e-02}}) -> tensor<f32> {
  %h = nn.embedding %ids, %embed : (tensor<8x8xi32>, tensor<64x64xf32>) -> tensor<8x8x64xf32> loc("embed")
  %t = nn.transpose %h permutation [1, 0, 2] : (tensor<8x8x64xf32>) -> tensor<8x8x64xf32> loc("swap")
  %a = nn.linear %t, %w1 : (tensor<8x8x64xf32>, tensor<64x128xf32>) -> tensor<8x8x128xf32> loc("blocks.0.fc1")
  %g = nn.gelu %a : (tensor<8x8x128xf32>) -> tensor<8x8x128xf32> loc("blocks.0.act")
  %m = nn.linear %g, %w2 : (tensor<8x8x128xf32>, tensor<128x64xf32>) -> tensor<8x8x64xf32> loc("blocks.0.fc2")
  %r = nn.add %t, %m : (tensor<8x8x64xf32>, tensor<8x8x64xf32>) -> tensor<8x8x64xf32> loc("blocks.0")
  %n = nn.rms_norm %r, %gamma epsilon 1.0e-05 : (tensor<8x8x64xf32>, tensor<64xf32>) -> tensor<8x8x64xf32> loc("final_norm")
  %logits = nn.linear %n, %head : (tensor<8x8x64xf32>, tensor<64x64xf32>) -> tensor<8x8x64xf32> loc("head")
  %loss = nn.cross_entropy %logits, %labels : (tensor<8x8x64xf32>, tensor<8x8xi32>) -> tensor<f32> loc("loss")
  return %loss : tensor<f32>
}
