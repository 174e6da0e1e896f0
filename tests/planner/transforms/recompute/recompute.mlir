// RUN: plan-opt %s --plan-autodiff --plan-recompute="mode=full" | FileCheck %s --check-prefix=FULL
// RUN: plan-opt %s --plan-autodiff --plan-recompute="mode=selective" | FileCheck %s --check-prefix=SEL
// RUN: plan-opt %s --plan-autodiff --plan-recompute="mode=full every=2" | FileCheck %s --check-prefix=EVERY
// RUN: plan-opt %s --plan-autodiff --plan-recompute="mode=none" | FileCheck %s --check-prefix=NONE
// RUN: plan-opt %s --plan-autodiff --plan-recompute="layers=selective:1 mode=full" | FileCheck %s --check-prefix=PERLAYER
// RUN: plan-opt %s --plan-autodiff --plan-recompute="layers=none:1,full:1" | FileCheck %s --check-prefix=SECOND
// RUN: not plan-opt %s --plan-autodiff --plan-recompute="layers=full:2,selective:1" 2>&1 | FileCheck %s --check-prefix=MANY
// MANY: plan-recompute layers=full:2,selective:1 names 3 layers, but @stack has 2 in its 'layers' stack; give at most that many

// A two-layer stack: norm, linear, silu and a residual add per layer, then
// a head. The backward reads each layer's norm output (the linear's weight
// gradient) and linear output (silu_grad), and the layer's input (the norm
// gradient), which is its checkpoint.

// Full: each layer's norm and linear are cloned, in forward order, just
// before the layer's first backward op that reads them (layer 1's before
// its silu_grad, which comes first), and the backward reads the clones.
// FULL-LABEL: func.func @stack
// FULL: %[[N0:.+]] = nn.rms_norm %[[X:[^,]+]], %[[G0:[^ ]+]]
// FULL-NEXT: %[[H0:.+]] = nn.linear %[[N0]], %[[W0:[^ ]+]]
// FULL: %[[R0:.+]] = nn.add
// FULL-NEXT: %[[N1:.+]] = nn.rms_norm %[[R0]], %[[G1:[^ ]+]]
// FULL-NEXT: %[[H1:.+]] = nn.linear %[[N1]], %[[W1:[^ ]+]]
// FULL: nn.cross_entropy_grad
// FULL: %[[RN1:.+]] = nn.rms_norm %[[R0]], %[[G1]] epsilon 1.000000e-05 {nn.recompute}
// FULL-NEXT: %[[RH1:.+]] = nn.linear %[[RN1]], %[[W1]] {nn.recompute}
// FULL-NEXT: nn.silu_grad %[[RH1]]
// FULL-NOT: nn.silu_grad %[[H1]]
// FULL: nn.matmul %[[RN1]], %{{.+}} transpose_lhs
// FULL: nn.rms_norm_grad %[[R0]], %[[G1]]
// FULL: %[[RN0:.+]] = nn.rms_norm %[[X]], %[[G0]] epsilon 1.000000e-05 {nn.recompute}
// FULL-NEXT: %[[RH0:.+]] = nn.linear %[[RN0]], %[[W0]] {nn.recompute}
// FULL-NEXT: nn.silu_grad %[[RH0]]
// FULL: nn.matmul %[[RN0]], %{{.+}} transpose_lhs
// FULL: nn.rms_norm_grad %[[X]], %[[G0]]
// FULL: return

// Selective keeps the linear's output: only the norm is cloned, just before
// the weight gradient that reads it.
// SEL-LABEL: func.func @stack
// SEL: %[[H0:.+]] = nn.linear
// SEL: %[[H1:.+]] = nn.linear
// SEL: nn.cross_entropy_grad
// SEL: %[[S1:.+]] = nn.silu_grad %[[H1]]
// SEL: %[[RN1:.+]] = nn.rms_norm %{{.+}} epsilon 1.000000e-05 {nn.recompute}
// SEL-NEXT: nn.matmul %[[RN1]], %[[S1]] transpose_lhs
// SEL: %[[S0:.+]] = nn.silu_grad %[[H0]]
// SEL: %[[RN0:.+]] = nn.rms_norm %{{.+}} epsilon 1.000000e-05 {nn.recompute}
// SEL-NEXT: nn.matmul %[[RN0]], %[[S0]] transpose_lhs
// SEL-NOT: nn.recompute
// SEL: return

// every=2 recomputes layer 0 only.
// Per layer: layer 0 selective (its norm again, its linear's result
// kept), layer 1 full (the later layers take `mode`).
// PERLAYER-LABEL: func.func @stack
// PERLAYER: nn.cross_entropy_grad
// PERLAYER: nn.rms_norm %{{.+}} {nn.recompute}
// PERLAYER-NEXT: nn.linear %{{.+}} {nn.recompute}
// PERLAYER: nn.rms_norm %arg0, %arg2 epsilon 1.000000e-05 {nn.recompute}
// PERLAYER-NOT: {nn.recompute}
// PERLAYER: return

// Layer 0 none, layer 1 full.
// SECOND-LABEL: func.func @stack
// SECOND-COUNT-2: {nn.recompute}
// SECOND-NOT: {nn.recompute}
// SECOND: nn.rms_norm_grad %{{.+}}, %arg4
// SECOND: return

// EVERY-LABEL: func.func @stack
// EVERY-COUNT-2: {nn.recompute}
// EVERY-NOT: {nn.recompute}
// EVERY: nn.rms_norm_grad
// EVERY: return

// NONE-NOT: nn.recompute

func.func @stack(%x: tensor<4x8xf32>, %labels: tensor<4xi32>,
    %g0: tensor<8xf32> {nn.param, nn.name = "layers.0.norm.weight"},
    %w0: tensor<8x8xf32> {nn.param, nn.name = "layers.0.fc.weight"},
    %g1: tensor<8xf32> {nn.param, nn.name = "layers.1.norm.weight"},
    %w1: tensor<8x8xf32> {nn.param, nn.name = "layers.1.fc.weight"},
    %wh: tensor<8x10xf32> {nn.param, nn.name = "head.weight"}) -> tensor<f32> {
  %n0 = nn.rms_norm %x, %g0 epsilon 1.0e-05 : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32> loc("layers.0.norm")
  %h0 = nn.linear %n0, %w0 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32> loc("layers.0.fc")
  %a0 = nn.silu %h0 : (tensor<4x8xf32>) -> tensor<4x8xf32> loc("layers.0.act")
  %r0 = nn.add %a0, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32> loc("layers.0.residual")
  %n1 = nn.rms_norm %r0, %g1 epsilon 1.0e-05 : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32> loc("layers.1.norm")
  %h1 = nn.linear %n1, %w1 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32> loc("layers.1.fc")
  %a1 = nn.silu %h1 : (tensor<4x8xf32>) -> tensor<4x8xf32> loc("layers.1.act")
  %r1 = nn.add %a1, %r0 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32> loc("layers.1.residual")
  %logits = nn.linear %r1, %wh : (tensor<4x8xf32>, tensor<8x10xf32>) -> tensor<4x10xf32> loc("head")
  %loss = nn.cross_entropy %logits, %labels : (tensor<4x10xf32>, tensor<4xi32>) -> tensor<f32> loc("loss")
  return %loss : tensor<f32>
}
