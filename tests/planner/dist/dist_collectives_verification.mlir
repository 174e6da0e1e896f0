// RUN: plan-opt %s -split-input-file -verify-diagnostics

dist.mesh @mesh shape = [2, 4] axes = ["dp", "tp"]

// Tests that a collective spans at least one mesh axis.
func.func @no_axes(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'dist.all_reduce' op names no mesh axes; list at least one axis in `axes`}}
  %0 = dist.all_reduce %x on @mesh axes = [] reduction = sum wire = f32 accum = f32 : tensor<4xf32> -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

dist.mesh @mesh shape = [2, 4] axes = ["dp", "tp"]

// Tests that a mesh axis is listed at most once.
func.func @repeated_axis(%x: tensor<2xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{'dist.all_gather' op lists mesh axis "tp" twice; list each axis once}}
  %0 = dist.all_gather %x on @mesh axes = ["tp", "tp"] gather_dim = 0 wire = f32 : tensor<2xf32> -> tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

// expected-note @+1 {{mesh @mesh declared here}}
dist.mesh @mesh shape = [2, 4] axes = ["dp", "tp"]

// Tests that every listed axis exists in the mesh.
func.func @unknown_axis(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'dist.all_reduce' op mesh axis "pp" is not an axis of @mesh (dp=2, tp=4); use one of its axes}}
  %0 = dist.all_reduce %x on @mesh axes = ["pp"] reduction = sum wire = f32 accum = f32 : tensor<4xf32> -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Tests that a collective's mesh must exist.
func.func @missing_mesh(%x: tensor<8xf32>) -> tensor<2xf32> {
  // expected-error @+1 {{'dist.reduce_scatter' op @mesh does not name a dist.mesh}}
  %0 = dist.reduce_scatter %x on @mesh axes = ["tp"] scatter_dim = 0 reduction = sum wire = f32 accum = f32 : tensor<8xf32> -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

dist.mesh @mesh shape = [2, 4] axes = ["dp", "tp"]

// Tests that gather_dim names a dim of the operand.
func.func @gather_dim_out_of_range(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  // expected-error @+1 {{'dist.all_gather' op gather_dim 2 is out of range for a rank-2 operand; use a dim in [0, 2)}}
  %0 = dist.all_gather %x on @mesh axes = ["dp"] gather_dim = 2 wire = f32 : tensor<2x4xf32> -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// -----

dist.mesh @mesh shape = [2, 4] axes = ["dp", "tp"]

// Tests that scatter_dim may not be negative.
func.func @scatter_dim_negative(%x: tensor<8xf32>) -> tensor<2xf32> {
  // expected-error @+1 {{'dist.reduce_scatter' op scatter_dim -1 is out of range for a rank-1 operand; use a dim in [0, 1)}}
  %0 = dist.reduce_scatter %x on @mesh axes = ["tp"] scatter_dim = -1 reduction = sum wire = f32 accum = f32 : tensor<8xf32> -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

dist.mesh @mesh shape = [2, 4] axes = ["dp", "tp"]

// Tests that split_dim names a dim of the operand.
func.func @split_dim_out_of_range(%x: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{'dist.all_to_all' op split_dim 1 is out of range for a rank-1 operand; use a dim in [0, 1)}}
  %0 = dist.all_to_all %x on @mesh axes = ["tp"] split_dim = 1 concat_dim = 0 wire = f32 : tensor<8xf32> -> tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

dist.mesh @mesh shape = [2, 4] axes = ["dp", "tp"]

// Tests that concat_dim names a dim of the operand.
func.func @concat_dim_out_of_range(%x: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{'dist.all_to_all' op concat_dim 3 is out of range for a rank-1 operand; use a dim in [0, 1)}}
  %0 = dist.all_to_all %x on @mesh axes = ["tp"] split_dim = 0 concat_dim = 3 wire = f32 : tensor<8xf32> -> tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

dist.mesh @mesh shape = [2, 4] axes = ["dp", "tp"]

// Tests that gathering keeps the rank.
func.func @gather_changes_rank(%x: tensor<2x4xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{'dist.all_gather' op result rank 1 != operand rank 2; the collective keeps the rank}}
  %0 = dist.all_gather %x on @mesh axes = ["dp"] gather_dim = 0 wire = f32 : tensor<2x4xf32> -> tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

dist.mesh @mesh shape = [2, 4] axes = ["dp", "tp"]

// Tests that gathering changes only gather_dim.
func.func @gather_changes_other_dim(%x: tensor<2x4xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'dist.all_gather' op result dim 1 of size 8 != operand dim 1 of size 4; only gather_dim 0 changes}}
  %0 = dist.all_gather %x on @mesh axes = ["dp"] gather_dim = 0 wire = f32 : tensor<2x4xf32> -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

dist.mesh @mesh shape = [2, 4] axes = ["dp", "tp"]

// Tests that reduce-scatter changes only scatter_dim.
func.func @scatter_changes_other_dim(%x: tensor<8x4xf32>) -> tensor<2x2xf32> {
  // expected-error @+1 {{'dist.reduce_scatter' op result dim 1 of size 2 != operand dim 1 of size 4; only scatter_dim 0 changes}}
  %0 = dist.reduce_scatter %x on @mesh axes = ["tp"] scatter_dim = 0 reduction = sum wire = f32 accum = f32 : tensor<8x4xf32> -> tensor<2x2xf32>
  return %0 : tensor<2x2xf32>
}

// -----

dist.mesh @mesh shape = [2, 4] axes = ["dp", "tp"]

// Tests that the gathered size is the operand size times the group size,
// here the product of both mesh axes.
func.func @gather_wrong_size(%x: tensor<2x4xf32>) -> tensor<8x4xf32> {
  // expected-error @+1 {{'dist.all_gather' op result dim 0 of size 8 != 16, operand dim 0 (2) times group size 8 (over dp=2, tp=4); set it to 16}}
  %0 = dist.all_gather %x on @mesh axes = ["dp", "tp"] gather_dim = 0 wire = f32 : tensor<2x4xf32> -> tensor<8x4xf32>
  return %0 : tensor<8x4xf32>
}

// -----

dist.mesh @mesh shape = [2, 4] axes = ["dp", "tp"]

// Tests that a padded gather whose result divides is refused: nothing is
// padded.
func.func @gather_needless_padding(%x: tensor<3xf32>) -> tensor<12xf32> {
  // expected-error @+1 {{'dist.all_gather' op result dim 0 of size 12 divides by group size 4 (over tp=4), so nothing is padded; drop `padded`}}
  %0 = dist.all_gather %x on @mesh axes = ["tp"] gather_dim = 0 padded wire = f32 : tensor<3xf32> -> tensor<12xf32>
  return %0 : tensor<12xf32>
}

// -----

dist.mesh @mesh shape = [2, 4] axes = ["dp", "tp"]

// Tests that a padded gather's result needs exactly the operand's rows per
// rank, and that the message gives the valid sizes.
func.func @gather_padded_wrong_size(%x: tensor<3xf32>) -> tensor<13xf32> {
  // expected-error @+1 {{'dist.all_gather' op padded result dim 0 of size 13 needs ceil(13 / 4) = 4 rows per rank, but operand dim 0 has 3; use a size in [9, 11]}}
  %0 = dist.all_gather %x on @mesh axes = ["tp"] gather_dim = 0 padded wire = f32 : tensor<3xf32> -> tensor<13xf32>
  return %0 : tensor<13xf32>
}

// -----

dist.mesh @mesh shape = [2, 4] axes = ["dp", "tp"]

// Tests that an uneven reduce-scatter must say it pads.
func.func @scatter_uneven(%x: tensor<10xf32>) -> tensor<3xf32> {
  // expected-error @+1 {{'dist.reduce_scatter' op operand dim 0 of size 10 does not divide by group size 4 (over tp=4), got: 10 % 4 = 2; mark the op `padded` (each rank then keeps ceil(10 / 4) = 3 rows) or make the dim divisible}}
  %0 = dist.reduce_scatter %x on @mesh axes = ["tp"] scatter_dim = 0 reduction = sum wire = f32 accum = f32 : tensor<10xf32> -> tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----

dist.mesh @mesh shape = [2, 4] axes = ["dp", "tp"]

// Tests that a padded reduce-scatter of a divisible dim is refused.
func.func @scatter_needless_padding(%x: tensor<8xf32>) -> tensor<2xf32> {
  // expected-error @+1 {{'dist.reduce_scatter' op operand dim 0 of size 8 divides by group size 4 (over tp=4), so nothing is padded; drop `padded`}}
  %0 = dist.reduce_scatter %x on @mesh axes = ["tp"] scatter_dim = 0 padded reduction = sum wire = f32 accum = f32 : tensor<8xf32> -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

dist.mesh @mesh shape = [2, 4] axes = ["dp", "tp"]

// Tests that the scattered size is the rows each rank keeps (rounded up when
// padded).
func.func @scatter_wrong_size(%x: tensor<10xf32>) -> tensor<2xf32> {
  // expected-error @+1 {{'dist.reduce_scatter' op result dim 0 of size 2 != 3, the rows each rank keeps of operand dim 0 (10 over group size 4); set it to 3}}
  %0 = dist.reduce_scatter %x on @mesh axes = ["tp"] scatter_dim = 0 padded reduction = sum wire = f32 accum = f32 : tensor<10xf32> -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

dist.mesh @mesh shape = [2, 4] axes = ["dp", "tp"]

// Tests that all-reduce keeps the shape.
func.func @all_reduce_shape(%x: tensor<4x16xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'dist.all_reduce' op result shape [4, 8] != operand shape [4, 16]; all-reduce keeps the shape}}
  %0 = dist.all_reduce %x on @mesh axes = ["tp"] reduction = sum wire = f32 accum = f32 : tensor<4x16xf32> -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

dist.mesh @mesh shape = [2, 4] axes = ["dp", "tp"]

// Tests that all-to-all's split dim divides by the group size.
func.func @all_to_all_uneven(%x: tensor<6x4xf32>) -> tensor<6x4xf32> {
  // expected-error @+1 {{'dist.all_to_all' op split_dim 0 of size 6 does not divide by group size 4 (over tp=4), got: 6 % 4 = 2; make it divisible}}
  %0 = dist.all_to_all %x on @mesh axes = ["tp"] split_dim = 0 concat_dim = 0 wire = f32 : tensor<6x4xf32> -> tensor<6x4xf32>
  return %0 : tensor<6x4xf32>
}

// -----

dist.mesh @mesh shape = [2, 4] axes = ["dp", "tp"]

// Tests that all-to-all's result divides split_dim and multiplies concat_dim.
func.func @all_to_all_wrong_shape(%x: tensor<8x4xf32>) -> tensor<8x4xf32> {
  // expected-error @+1 {{'dist.all_to_all' op result shape [8, 4] != [2, 16] (split_dim 0 divided and concat_dim 1 multiplied by group size 4); set the result shape to [2, 16]}}
  %0 = dist.all_to_all %x on @mesh axes = ["tp"] split_dim = 0 concat_dim = 1 wire = f32 : tensor<8x4xf32> -> tensor<8x4xf32>
  return %0 : tensor<8x4xf32>
}

// -----

dist.mesh @mesh shape = [2, 4] axes = ["dp", "tp"]

// Tests that float values cannot travel as an integer wire type.
func.func @wire_kind(%x: tensor<2xf32>) -> tensor<4xi8> {
  // expected-error @+1 {{'dist.all_gather' op wire type 'i8' cannot carry 'f32' values; use a wire type of the same kind (float or integer)}}
  %0 = dist.all_gather %x on @mesh axes = ["dp"] gather_dim = 0 wire = i8 : tensor<2xf32> -> tensor<4xi8>
  return %0 : tensor<4xi8>
}

// -----

dist.mesh @mesh shape = [2, 4] axes = ["dp", "tp"]

// Tests that a gather's result arrives in the wire type.
func.func @gather_result_not_wire(%x: tensor<2xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'dist.all_gather' op result element type 'f32' != wire type 'bf16'; the result arrives in the wire type}}
  %0 = dist.all_gather %x on @mesh axes = ["dp"] gather_dim = 0 wire = bf16 : tensor<2xf32> -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

dist.mesh @mesh shape = [2, 4] axes = ["dp", "tp"]

// Tests that an all-to-all's result arrives in the wire type.
func.func @all_to_all_result_not_wire(%x: tensor<8xf32>) -> tensor<8xbf16> {
  // expected-error @+1 {{'dist.all_to_all' op result element type 'bf16' != wire type 'f32'}}
  %0 = dist.all_to_all %x on @mesh axes = ["tp"] split_dim = 0 concat_dim = 0 wire = f32 : tensor<8xf32> -> tensor<8xbf16>
  return %0 : tensor<8xbf16>
}

// -----

dist.mesh @mesh shape = [2, 4] axes = ["dp", "tp"]

// Tests that a reduction's wire type carries the operand's kind of values.
func.func @reduce_wire_kind(%x: tensor<4xi32>) -> tensor<4xf32> {
  // expected-error @+1 {{'dist.all_reduce' op wire type 'f32' cannot carry 'i32' values}}
  %0 = dist.all_reduce %x on @mesh axes = ["dp"] reduction = sum wire = f32 accum = f32 : tensor<4xi32> -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

dist.mesh @mesh shape = [2, 4] axes = ["dp", "tp"]

// Tests that accumulation and wire types are of one kind.
func.func @accum_kind(%x: tensor<4xbf16>) -> tensor<4xbf16> {
  // expected-error @+1 {{'dist.all_reduce' op accum type 'i32' and wire type 'bf16' must both be float or both be integer}}
  %0 = dist.all_reduce %x on @mesh axes = ["dp"] reduction = sum wire = bf16 accum = i32 : tensor<4xbf16> -> tensor<4xbf16>
  return %0 : tensor<4xbf16>
}

// -----

dist.mesh @mesh shape = [2, 4] axes = ["dp", "tp"]

// Tests that accumulating narrower than the wire is refused.
func.func @accum_narrower(%x: tensor<8xf32>) -> tensor<2xf32> {
  // expected-error @+1 {{'dist.reduce_scatter' op accum type 'bf16' (16 bits) is narrower than wire type 'f32' (32 bits); accumulate in at least 32 bits}}
  %0 = dist.reduce_scatter %x on @mesh axes = ["tp"] scatter_dim = 0 reduction = sum wire = f32 accum = bf16 : tensor<8xf32> -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

dist.mesh @mesh shape = [2, 4] axes = ["dp", "tp"]

// Tests that averaging needs a float accumulator.
func.func @integer_average(%x: tensor<4xi32>) -> tensor<4xi32> {
  // expected-error @+1 {{'dist.all_reduce' op reduction avg needs a float accum type, got: 'i32'; use sum or a float accum type}}
  %0 = dist.all_reduce %x on @mesh axes = ["dp"] reduction = avg wire = i32 accum = i32 : tensor<4xi32> -> tensor<4xi32>
  return %0 : tensor<4xi32>
}

// -----

dist.mesh @mesh shape = [2, 4] axes = ["dp", "tp"]

// Tests that a reduction's result is in the wire or the accumulation type.
func.func @reduce_result_type(%x: tensor<4xbf16>) -> tensor<4xf16> {
  // expected-error @+1 {{'dist.all_reduce' op result element type 'f16' must be the wire type 'bf16' or the accum type 'f32'}}
  %0 = dist.all_reduce %x on @mesh axes = ["dp"] reduction = sum wire = bf16 accum = f32 : tensor<4xbf16> -> tensor<4xf16>
  return %0 : tensor<4xf16>
}
