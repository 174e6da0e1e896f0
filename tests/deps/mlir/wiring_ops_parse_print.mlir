// RUN: wiring-opt %s | wiring-opt | FileCheck %s
// RUN: wiring-opt %s --canonicalize | FileCheck %s --check-prefix=CANON

// Tests that wiring.scale round-trips through its custom assembly format.
// CHECK-LABEL: func.func @scale_round_trip
// CHECK-SAME: (%[[X:.*]]: tensor<4xf32>)
// CHECK-NEXT: %[[Y:.*]] = wiring.scale %[[X]] by 2.500000e+00 : tensor<4xf32>
// CHECK-NEXT: return %[[Y]]
func.func @scale_round_trip(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = wiring.scale %x by 2.5 : tensor<4xf32>
  return %y : tensor<4xf32>
}

// Tests that the canonicalizer erases an unused op declared Pure in ODS.
// CHECK-LABEL: func.func @dead_scale
// CHECK-NEXT: wiring.scale
// CANON-LABEL: func.func @dead_scale
// CANON-NEXT: return %arg0
func.func @dead_scale(%x: tensor<4xf32>) -> tensor<4xf32> {
  %unused = wiring.scale %x by 3.0 : tensor<4xf32>
  return %x : tensor<4xf32>
}
