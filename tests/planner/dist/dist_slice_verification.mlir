// RUN: plan-opt %s -split-input-file -verify-diagnostics

// One case per dist.slice verifier message (and the mesh note).

dist.mesh @mesh shape = [2, 4] axes = ["dp", "tp"]

// Tests that a slice spans at least one mesh axis.
func.func @no_axes(%x: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{'dist.slice' op names no mesh axes; list at least one axis in `axes`}}
  %0 = dist.slice %x on @mesh axes = [] slice_dim = 0 : tensor<8xf32> -> tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

dist.mesh @mesh shape = [2, 4] axes = ["dp", "tp"]

// Tests that a mesh axis is listed at most once.
func.func @repeated_axis(%x: tensor<16xf32>) -> tensor<1xf32> {
  // expected-error @+1 {{'dist.slice' op lists mesh axis "tp" twice; list each axis once}}
  %0 = dist.slice %x on @mesh axes = ["tp", "tp"] slice_dim = 0 : tensor<16xf32> -> tensor<1xf32>
  return %0 : tensor<1xf32>
}

// -----

// expected-note @+1 {{mesh @mesh declared here}}
dist.mesh @mesh shape = [2, 4] axes = ["dp", "tp"]

// Tests that every listed axis exists in the mesh.
func.func @unknown_axis(%x: tensor<8xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'dist.slice' op mesh axis "pp" is not an axis of @mesh (dp=2, tp=4); use one of its axes}}
  %0 = dist.slice %x on @mesh axes = ["pp"] slice_dim = 0 : tensor<8xf32> -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Tests that the slice's mesh must exist.
func.func @missing_mesh(%x: tensor<8xf32>) -> tensor<2xf32> {
  // expected-error @+1 {{'dist.slice' op @mesh does not name a dist.mesh; declare it with `dist.mesh @mesh shape = [...] axes = [...]` in the enclosing module}}
  %0 = dist.slice %x on @mesh axes = ["tp"] slice_dim = 0 : tensor<8xf32> -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

dist.mesh @mesh shape = [2, 4] axes = ["dp", "tp"]

// Tests that the sliced dim is a dim of the operand.
func.func @dim_out_of_range(%x: tensor<8x16xf32>) -> tensor<8x4xf32> {
  // expected-error @+1 {{'dist.slice' op slice_dim 2 is out of range for a rank-2 operand; use a dim in [0, 2)}}
  %0 = dist.slice %x on @mesh axes = ["tp"] slice_dim = 2 : tensor<8x16xf32> -> tensor<8x4xf32>
  return %0 : tensor<8x4xf32>
}

// -----

dist.mesh @mesh shape = [2, 4] axes = ["dp", "tp"]

// Tests that slicing keeps the rank.
func.func @rank_changes(%x: tensor<8x16xf32>) -> tensor<32xf32> {
  // expected-error @+1 {{'dist.slice' op result rank 1 != operand rank 2; the slice keeps the rank}}
  %0 = dist.slice %x on @mesh axes = ["tp"] slice_dim = 0 : tensor<8x16xf32> -> tensor<32xf32>
  return %0 : tensor<32xf32>
}

// -----

dist.mesh @mesh shape = [2, 4] axes = ["dp", "tp"]

// Tests that only the sliced dim changes.
func.func @other_dim_changes(%x: tensor<8x16xf32>) -> tensor<2x8xf32> {
  // expected-error @+1 {{'dist.slice' op result dim 1 of size 8 != operand dim 1 of size 16; only slice_dim 0 changes}}
  %0 = dist.slice %x on @mesh axes = ["tp"] slice_dim = 0 : tensor<8x16xf32> -> tensor<2x8xf32>
  return %0 : tensor<2x8xf32>
}

// -----

dist.mesh @mesh shape = [2, 4] axes = ["dp", "tp"]

// Tests that a slice keeps the element type: nothing is sent, so nothing
// converts.
func.func @element_type_changes(%x: tensor<8x16xf32>) -> tensor<2x16xbf16> {
  // expected-error @+1 {{'dist.slice' op result element type 'bf16' != operand element type 'f32'; a slice keeps the element type, set it to 'f32'}}
  %0 = dist.slice %x on @mesh axes = ["tp"] slice_dim = 0 : tensor<8x16xf32> -> tensor<2x16xbf16>
  return %0 : tensor<2x16xbf16>
}

// -----

dist.mesh @mesh shape = [2, 4] axes = ["dp", "tp"]

// Tests that a dim the group does not divide must be marked `padded`.
func.func @uneven_not_padded(%x: tensor<10x16xf32>) -> tensor<3x16xf32> {
  // expected-error @+1 {{'dist.slice' op operand dim 0 of size 10 does not divide by group size 4 (over tp=4), got: 10 % 4 = 2; mark the op `padded` (each rank then keeps ceil(10 / 4) = 3 rows) or make the dim divisible}}
  %0 = dist.slice %x on @mesh axes = ["tp"] slice_dim = 0 : tensor<10x16xf32> -> tensor<3x16xf32>
  return %0 : tensor<3x16xf32>
}

// -----

dist.mesh @mesh shape = [2, 4] axes = ["dp", "tp"]

// Tests that `padded` is refused when the group divides the dim, so each
// layout has one spelling.
func.func @padded_divides(%x: tensor<8x16xf32>) -> tensor<2x16xf32> {
  // expected-error @+1 {{'dist.slice' op operand dim 0 of size 8 divides by group size 4 (over tp=4), so nothing is padded; drop `padded`}}
  %0 = dist.slice %x on @mesh axes = ["tp"] slice_dim = 0 padded : tensor<8x16xf32> -> tensor<2x16xf32>
  return %0 : tensor<2x16xf32>
}

// -----

dist.mesh @mesh shape = [2, 4] axes = ["dp", "tp"]

// Tests that the result dim is the rows each rank keeps, over the product of
// the listed axes.
func.func @wrong_size(%x: tensor<16x4xf32>) -> tensor<4x4xf32> {
  // expected-error @+1 {{'dist.slice' op result dim 0 of size 4 != 2, the rows each rank keeps of operand dim 0 (16 over group size 8); set it to 2}}
  %0 = dist.slice %x on @mesh axes = ["dp", "tp"] slice_dim = 0 : tensor<16x4xf32> -> tensor<4x4xf32>
  return %0 : tensor<4x4xf32>
}

// -----

dist.mesh @mesh shape = [2, 4] axes = ["dp", "tp"]

// Tests that a padded slice keeps ceil(n / group) rows.
func.func @wrong_padded_size(%x: tensor<10x16xf32>) -> tensor<2x16xf32> {
  // expected-error @+1 {{'dist.slice' op result dim 0 of size 2 != 3, the rows each rank keeps of operand dim 0 (10 over group size 4); set it to 3}}
  %0 = dist.slice %x on @mesh axes = ["tp"] slice_dim = 0 padded : tensor<10x16xf32> -> tensor<2x16xf32>
  return %0 : tensor<2x16xf32>
}
