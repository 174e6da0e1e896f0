// RUN: plan-opt %s --plan-autodiff --plan-placement="mesh=fsdp=2 axes=fsdp" --plan-insert-collectives="keep-units=layers.1" | FileCheck %s
// RUN: not plan-opt %s --plan-autodiff --plan-placement="mesh=fsdp=2 axes=fsdp" --plan-insert-collectives="keep-units=layers.1,layers.7" 2>&1 | FileCheck %s --check-prefix=UNKNOWN

// keep-units: per-unit reshard_after_forward on a 2-unit MLP under fsdp=2.

// Tests that the kept unit layers.1 is gathered once, its forward copy freed
// after its last backward use, while layers.0 is gathered again for the
// backward pass.
// CHECK-LABEL: func.func @mlp(
// CHECK-NEXT: %[[W0A:[a-z0-9_]+]] = dist.all_gather %arg2 {{.*}} : tensor<8x16xf32> -> tensor<16x16xf32>
// CHECK-NEXT: nn.linear %arg0, %[[W0A]]
// CHECK-NEXT: dist.free %[[W0A]]
// CHECK-NEXT: nn.silu
// CHECK-NEXT: %[[W0B:[a-z0-9_]+]] = dist.all_gather %arg3 {{.*}} : tensor<8x16xf32> -> tensor<16x16xf32>
// CHECK-NEXT: nn.linear
// CHECK-NEXT: dist.free %[[W0B]]
// CHECK-NEXT: nn.silu
// CHECK-NEXT: %[[W1A:[a-z0-9_]+]] = dist.all_gather %arg4 {{.*}} : tensor<8x16xf32> -> tensor<16x16xf32>
// CHECK-NEXT: nn.linear
// CHECK-NEXT: nn.silu
// CHECK-NEXT: %[[W1B:[a-z0-9_]+]] = dist.all_gather %arg5 {{.*}} : tensor<8x12xf32> -> tensor<16x12xf32>
// CHECK-NEXT: nn.linear
// CHECK-NOT: dist.all_gather %arg4
// CHECK-NOT: dist.all_gather %arg5
// CHECK: nn.matmul %{{.*}}, %[[W1B]] transpose_rhs
// CHECK-NEXT: dist.free %[[W1B]]
// CHECK-NOT: dist.all_gather %arg4
// CHECK: nn.matmul %{{.*}}, %[[W1A]] transpose_rhs
// CHECK-NEXT: dist.free %[[W1A]]
// CHECK: %[[W0B2:[a-z0-9_]+]] = dist.all_gather %arg3 {{.*}} : tensor<8x16xf32> -> tensor<16x16xf32>
// CHECK-NEXT: nn.matmul %{{.*}}, %[[W0B2]] transpose_rhs
// CHECK-NEXT: dist.free %[[W0B2]]
// CHECK-NOT: dist.all_gather
// CHECK: return

// Tests that a unit no parameter belongs to is refused, with the units.
// UNKNOWN: error: keep-units names unit 'layers.7', which no parameter belongs to; use units of the model (layers.0, layers.1)
func.func @mlp(%x: tensor<8x16xf32>, %labels: tensor<8xi32>,
    %w0a: tensor<16x16xf32> {nn.param, nn.name = "layers.0.fc1.weight"},
    %w0b: tensor<16x16xf32> {nn.param, nn.name = "layers.0.fc2.weight"},
    %w1a: tensor<16x16xf32> {nn.param, nn.name = "layers.1.fc1.weight"},
    %w1b: tensor<16x12xf32> {nn.param, nn.name = "layers.1.fc2.weight"}) -> tensor<f32> {
  %h0 = nn.linear %x, %w0a : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
  %a0 = nn.silu %h0 : (tensor<8x16xf32>) -> tensor<8x16xf32>
  %h1 = nn.linear %a0, %w0b : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
  %a1 = nn.silu %h1 : (tensor<8x16xf32>) -> tensor<8x16xf32>
  %h2 = nn.linear %a1, %w1a : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
  %a2 = nn.silu %h2 : (tensor<8x16xf32>) -> tensor<8x16xf32>
  %y = nn.linear %a2, %w1b : (tensor<8x16xf32>, tensor<16x12xf32>) -> tensor<8x12xf32>
  %l = nn.cross_entropy %y, %labels : (tensor<8x12xf32>, tensor<8xi32>) -> tensor<f32>
  return %l : tensor<f32>
}
