// RUN: wiring-opt %s -split-input-file -verify-diagnostics

// Tests that the ODS-declared verifier rejects a non-positive factor.
func.func @zero_factor(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{factor must be positive, got: 0}}
  %y = wiring.scale %x by 0.0 : tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

// Tests that the SameOperandsAndResultType trait from ODS is enforced.
func.func @type_mismatch(%x: tensor<4xf32>) -> tensor<8xf32> {
  // expected-note @-1 {{prior use here}}
  // expected-error @+1 {{use of value '%x' expects different type than prior uses}}
  %y = wiring.scale %x by 1.0 : tensor<8xf32>
  return %y : tensor<8xf32>
}
