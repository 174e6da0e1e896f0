// RUN: plan-opt %s -split-input-file --plan-optimizer-step --plan-memory-plan="memory-budget-gb=0.000001" -verify-diagnostics

dist.mesh @mesh shape = [2] axes = ["fsdp"]

// Tests that a step whose peak (1920 bytes) is over the budget (1073 bytes)
// is refused with the breakdown, a fix and a note at the peak op.
// expected-error @+1 {{plan needs 1.9 KiB per rank at its peak, over the 1e-06 GiB device memory (got: 1920 > 1073 bytes): params 256 B, grads 0 B, optimizer states 512 B, activations 1.1 KiB, gathered 0 B; lower the batch or sequence length per rank, or add tensor parallelism (a tp axis) to split the activations}}
func.func @step(%x: tensor<4x8xf32>, %w: tensor<4x16xf32> {nn.param})
    -> (tensor<4x16xf32>, tensor<4x16xf32> {nn.grad_of = 1 : i64}) {
  %g = dist.all_gather %w on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32 : tensor<4x16xf32> -> tensor<8x16xf32>
  %y = nn.linear %x, %g : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  dist.free %g : tensor<8x16xf32>
  %s = nn.silu %y : (tensor<4x16xf32>) -> tensor<4x16xf32>
  // expected-note @+1 {{the peak is reached here}}
  %p = nn.matmul %x, %s transpose_lhs : (tensor<4x8xf32>, tensor<4x16xf32>) -> tensor<8x16xf32>
  %r = dist.reduce_scatter %p on @mesh axes = ["fsdp"] scatter_dim = 0 reduction = sum wire = f32 accum = f32 : tensor<8x16xf32> -> tensor<4x16xf32>
  return %y, %r : tensor<4x16xf32>, tensor<4x16xf32>
}
