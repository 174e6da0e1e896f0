// RUN: plan-opt %s --plan-autodiff --plan-placement="mesh=fsdp=2 axes=fsdp" --plan-recompute="mode=full" --plan-insert-collectives | FileCheck %s

// Under fsdp with reshard-after-forward, the forward frees each gathered
// weight after its last forward use (recompute does not keep it alive), and
// each layer's clones read the weights the backward gathers again.
// CHECK-LABEL: func.func @stack
// CHECK: %[[G1:.+]] = dist.all_gather %[[NORM1:arg4]]
// CHECK-NEXT: nn.rms_norm
// CHECK-NEXT: dist.free %[[G1]]
// CHECK: nn.cross_entropy_grad
// CHECK: %[[BG1:.+]] = dist.all_gather %[[NORM1]]
// CHECK-NEXT: %[[RN1:.+]] = nn.rms_norm %{{.+}}, %[[BG1]] epsilon 1.000000e-05 {{{.*}}nn.recompute}
// CHECK-NEXT: %[[BW1:.+]] = dist.all_gather %arg5
// CHECK-NEXT: %[[RH1:.+]] = nn.linear %[[RN1]], %[[BW1]] {{{.*}}nn.recompute}
// CHECK-NEXT: nn.silu_grad %[[RH1]]
// CHECK: nn.rms_norm_grad %{{.+}}, %[[BG1]]
// CHECK: %[[BG0:.+]] = dist.all_gather %arg2
// CHECK-NEXT: nn.rms_norm %arg0, %[[BG0]] epsilon 1.000000e-05 {{{.*}}nn.recompute}
// CHECK: return

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
