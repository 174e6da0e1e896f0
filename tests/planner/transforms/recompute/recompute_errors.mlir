// RUN: plan-opt %s --plan-autodiff --plan-recompute="mode=full" -split-input-file -verify-diagnostics
// RUN: not plan-opt %s --plan-recompute="mode=sometimes" 2>&1 | FileCheck %s --check-prefix=MODE
// RUN: not plan-opt %s --plan-recompute="mode=full every=0" 2>&1 | FileCheck %s --check-prefix=EVERY
// RUN: not plan-opt %s --plan-recompute="mode=full" 2>&1 | FileCheck %s --check-prefix=STEP
// RUN: not plan-opt %s --plan-autodiff --plan-placement="mesh=fsdp=2 axes=fsdp" --plan-insert-collectives --plan-recompute="mode=full" 2>&1 | FileCheck %s --check-prefix=DIST

// MODE: plan-recompute mode 'sometimes' is not none, full or selective
// EVERY: plan-recompute every=0 must be >= 1 (1: every layer)
// STEP: plan-recompute needs a training step, but @flat has no nn.loss_grad_arg; run --plan-autodiff first
// DIST: is a dist op, but plan-recompute runs before --plan-insert-collectives
// RUN: not plan-opt %s --plan-recompute="layers=full:two" 2>&1 | FileCheck %s --check-prefix=RUNS
// RUN: not plan-opt %s --plan-recompute="layers=full:1 every=2" 2>&1 | FileCheck %s --check-prefix=RUNS-EVERY
// RUNS: plan-recompute layers: 'full:two' is not mode:count (a mode of none, full or selective and a layer count >= 1), e.g. layers=full:4,selective:10
// RUNS-EVERY: plan-recompute layers=full:1 gives each layer its mode, so it cannot go with every=2; drop one of them

// Tests that a graph without numbered layers is refused with what to do.
// expected-error @+1 {{plan-recompute found no repeated layers in @flat: no forward op is located at a numbered block}}
func.func @flat(%x: tensor<4x8xf32>, %labels: tensor<4xi32>,
    %w: tensor<8x10xf32> {nn.param, nn.name = "head.weight"}) -> tensor<f32> {
  %logits = nn.linear %x, %w : (tensor<4x8xf32>, tensor<8x10xf32>) -> tensor<4x10xf32> loc("head")
  %loss = nn.cross_entropy %logits, %labels : (tensor<4x10xf32>, tensor<4xi32>) -> tensor<f32> loc("loss")
  return %loss : tensor<f32>
}
