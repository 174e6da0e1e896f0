// An nn graph whose second projection has the weight the wrong way round
// ([out, in] as PyTorch stores it), for the plan tool's error test.
func.func @bad_linear(%x: tensor<2x8x16xf32>,
    %w1: tensor<16x64xf32> {nn.param, nn.name = "fc1.weight"},
    %w2: tensor<16x64xf32> {nn.param, nn.name = "fc2.weight"}) -> tensor<2x8x16xf32> {
  %a = nn.linear %x, %w1 : (tensor<2x8x16xf32>, tensor<16x64xf32>) -> tensor<2x8x64xf32>
  %b = nn.linear %a, %w2 : (tensor<2x8x64xf32>, tensor<16x64xf32>) -> tensor<2x8x16xf32>
  return %b : tensor<2x8x16xf32>
}
