// RUN: plan-opt %s -split-input-file -verify-diagnostics --plan-placement

// Tests that the strategy list must have one entry per mesh axis.
// expected-error @+1 {{'dist.mesh' op got 1 axis strategies ('fsdp') for 2 mesh axes [fsdp, tp]; give exactly one strategy per mesh axis, in mesh order}}
dist.mesh @mesh shape = [2, 4] axes = ["fsdp", "tp"] {dist.strategies = ["fsdp"]}

// -----

// Tests that an unknown strategy is named with its axis.
// expected-error @+1 {{unknown strategy 'zero3' for mesh axis 'tp'; expected fsdp, dp, tp or pp (HSDP is one fsdp and one dp axis)}}
dist.mesh @mesh shape = [2, 4] axes = ["fsdp", "tp"] {dist.strategies = ["fsdp", "zero3"]}

// -----

// Tests that tensor parallelism takes one mesh axis.
// expected-error @+1 {{got 2 tp axes in 'tp,tp'; tensor parallelism uses one mesh axis, merge them into one}}
dist.mesh @mesh shape = [2, 4] axes = ["a", "b"] {dist.strategies = ["tp", "tp"]}

// -----

// Tests that a mesh without strategies and no axes= option is refused.
// expected-error @+1 {{'dist.mesh' op has no dist.strategies and no axes= option is given; pass one strategy per mesh axis (fsdp, dp, tp, pp), e.g. axes=fsdp,tp}}
dist.mesh @mesh shape = [8] axes = ["fsdp"]

// -----

// Tests that strategies must be strings.
// expected-error @+1 {{'dist.mesh' op dist.strategies must hold strings, got: [1]}}
dist.mesh @mesh shape = [8] axes = ["fsdp"] {dist.strategies = [1]}

// -----

dist.mesh @mesh shape = [2, 2] axes = ["dp", "fsdp"] {dist.strategies = ["dp", "fsdp"]}

// Tests that a batch that does not divide by the data axes is refused rather
// than padded (padded rows would enter the mean loss).
// expected-error @+1 {{input argument #0 has batch dim 0 of size 6, which does not divide by the 4 ranks of the data axes (dp=2, fsdp=2); use a batch that is a multiple of 4}}
func.func @batch(%x: tensor<6x16xf32>,
    %w: tensor<16x16xf32> {nn.param}) -> tensor<6x16xf32> {
  %y = nn.linear %x, %w : (tensor<6x16xf32>, tensor<16x16xf32>) -> tensor<6x16xf32>
  return %y : tensor<6x16xf32>
}

// -----

dist.mesh @mesh shape = [4] axes = ["tp"] {dist.strategies = ["tp"]}

// Tests that attention heads that do not divide by the tp size are refused:
// 2 heads (of head_dim 1) over tp=4.
func.func @heads(%x: tensor<2x8x16xf32>,
    %wq: tensor<16x2xf32> {nn.param}, %wk: tensor<16x2xf32> {nn.param},
    %wv: tensor<16x2xf32> {nn.param}) -> tensor<2x8x2x1xf32> {
  %q2 = nn.linear %x, %wq : (tensor<2x8x16xf32>, tensor<16x2xf32>) -> tensor<2x8x2xf32>
  %k2 = nn.linear %x, %wk : (tensor<2x8x16xf32>, tensor<16x2xf32>) -> tensor<2x8x2xf32>
  %v2 = nn.linear %x, %wv : (tensor<2x8x16xf32>, tensor<16x2xf32>) -> tensor<2x8x2xf32>
  %q = nn.reshape %q2 : (tensor<2x8x2xf32>) -> tensor<2x8x2x1xf32>
  %k = nn.reshape %k2 : (tensor<2x8x2xf32>) -> tensor<2x8x2x1xf32>
  %v = nn.reshape %v2 : (tensor<2x8x2xf32>) -> tensor<2x8x2x1xf32>
  // expected-error @+1 {{'nn.attention' op cannot split 2 attention heads (factor 'h') over the tp axis 'tp' of size 4: heads must divide by the tensor-parallel size}}
  %o = nn.attention %q, %k, %v : (tensor<2x8x2x1xf32>, tensor<2x8x2x1xf32>, tensor<2x8x2x1xf32>) -> tensor<2x8x2x1xf32>
  return %o : tensor<2x8x2x1xf32>
}

// -----

dist.mesh @mesh shape = [4] axes = ["tp"] {dist.strategies = ["tp"]}

// Tests that grouped-query attention with 2 kv heads is refused under tp=4:
// the kv projection's 8 features divide, but splitting them into heads would
// cut heads apart (kv heads are not replicated; see the docs).
func.func @kv_heads(%x: tensor<2x8x16xf32>,
    %wk: tensor<16x8xf32> {nn.param}) -> tensor<2x8x2x4xf32> {
  %k2 = nn.linear %x, %wk : (tensor<2x8x16xf32>, tensor<16x8xf32>) -> tensor<2x8x8xf32>
  // expected-error @+1 {{'nn.reshape' op cannot split factor 'r2' of size 2 unevenly over the tp axis 'tp' of size 4: operand #0 merges it with other factors in dim 2, where zero padding would not line up; use a tp size that divides 2 (with attention: the head count)}}
  %k = nn.reshape %k2 : (tensor<2x8x8xf32>) -> tensor<2x8x2x4xf32>
  return %k : tensor<2x8x2x4xf32>
}

// -----

dist.mesh @mesh shape = [2] axes = ["fsdp"] {dist.strategies = ["fsdp"]}

func.func private @helper(tensor<2x16xf32>) -> tensor<2x16xf32>

// Tests that an op without a sharding rule is refused.
func.func @call(%x: tensor<2x16xf32>) -> tensor<2x16xf32> {
  // expected-error @+1 {{'func.call' op has no sharding rule; plan-placement places functions of nn ops, so lower or remove this op first}}
  %y = func.call @helper(%x) : (tensor<2x16xf32>) -> tensor<2x16xf32>
  return %y : tensor<2x16xf32>
}

// -----

dist.mesh @mesh shape = [2] axes = ["fsdp"] {dist.strategies = ["fsdp"]}

// Tests that an unknown per-parameter strategy is refused.
// expected-error @+1 {{argument #1: unknown parameter strategy 'zero'; expected dp (not sharded by fsdp) or replicate (not sharded on any axis)}}
func.func @param_strategy(%x: tensor<2x16xf32>,
    %w: tensor<16x16xf32> {nn.param, dist.strategy = "zero"}) -> tensor<2x16xf32> {
  %y = nn.linear %x, %w : (tensor<2x16xf32>, tensor<16x16xf32>) -> tensor<2x16xf32>
  return %y : tensor<2x16xf32>
}

// -----

dist.mesh @mesh shape = [2] axes = ["fsdp"] {dist.strategies = ["fsdp"]}

// Tests that a per-parameter strategy on an input is refused.
// expected-error @+1 {{argument #0 has dist.strategy = "dp", expected a string on an nn.param argument; use "dp" or "replicate" on a parameter}}
func.func @input_strategy(%x: tensor<2x16xf32> {dist.strategy = "dp"},
    %w: tensor<16x16xf32> {nn.param}) -> tensor<2x16xf32> {
  %y = nn.linear %x, %w : (tensor<2x16xf32>, tensor<16x16xf32>) -> tensor<2x16xf32>
  return %y : tensor<2x16xf32>
}

// -----

dist.mesh @mesh shape = [2] axes = ["fsdp"] {dist.strategies = ["fsdp"]}

// Tests that nn.grad_of must name a parameter argument.
// expected-error @+1 {{result #0 has nn.grad_of = 0 : i64, which is not the index of an nn.param argument; it must name the parameter the result is the gradient of}}
func.func @grad_of(%x: tensor<2x16xf32>, %w: tensor<16x16xf32> {nn.param})
    -> (tensor<2x16xf32> {nn.grad_of = 0 : i64}) {
  %y = nn.linear %x, %w : (tensor<2x16xf32>, tensor<16x16xf32>) -> tensor<2x16xf32>
  return %y : tensor<2x16xf32>
}
