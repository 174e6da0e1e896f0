// RUN: plan-opt %s --canonicalize --cse | FileCheck %s

// Tests that nn ops are side-effect free, so the upstream clean-ups that
// planner pipelines run erase dead ones and merge duplicates.
// CHECK-LABEL: func.func @dead_and_duplicate
// CHECK-SAME: (%[[X:.*]]: tensor<4x8xf32>, %[[W:.*]]: tensor<8x8xf32>)
// CHECK-NEXT: %[[Y:.*]] = nn.linear %[[X]], %[[W]]
// CHECK-NEXT: %[[S:.*]] = nn.add %[[Y]], %[[Y]]
// CHECK-NEXT: return %[[S]]
func.func @dead_and_duplicate(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>) -> tensor<4x8xf32> {
  %unused = nn.silu %x : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %a = nn.linear %x, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %b = nn.linear %x, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %s = nn.add %a, %b : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %s : tensor<4x8xf32>
}
