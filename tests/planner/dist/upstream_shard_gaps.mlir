// Evidence for docs/planner_dist.md: what MLIR 22's upstream `shard` dialect
// offers a plan and where it falls short, checked against the installed
// mlir-opt so an LLVM upgrade that closes a gap makes this test fail and the
// decision gets revisited.
//
// RUN: split-file %s %t
// RUN: mlir-opt %t/fits.mlir | mlir-opt | FileCheck %t/fits.mlir
// RUN: not mlir-opt %t/partial.mlir 2>&1 | FileCheck %t/partial.mlir
// RUN: mlir-opt %t/dtype.mlir | FileCheck %t/dtype.mlir
// RUN: not mlir-opt %t/async.mlir 2>&1 | FileCheck %t/async.mlir
// RUN: not mlir-opt %t/uneven.mlir --pass-pipeline='builtin.module(func.func(shard-partition))' 2>&1 | FileCheck %t/uneven.mlir

//--- fits.mlir
// The grid, shardings and blocking collectives parse and print. The grid's
// axes are positions: a plan's axis names ("dp", "tp") have no place in it.
// CHECK: shard.grid @grid(shape = 2x4)
shard.grid @grid(shape = 2x4)
// CHECK-LABEL: func.func @collectives
// CHECK: shard.sharding @grid split_axes = {{\[\[}}0], [1]] : !shard.sharding
// CHECK: shard.all_gather %{{.*}} on @grid grid_axes = [0] gather_axis = 0 : tensor<2x16xf32> -> tensor<4x16xf32>
// CHECK: shard.reduce_scatter %{{.*}} on @grid grid_axes = [1] scatter_axis = 1 : tensor<4x16xf32> -> tensor<4x4xf32>
// CHECK: shard.all_to_all %{{.*}} on @grid grid_axes = [1] split_axis = 1 concat_axis = 0 : tensor<4x16xf32> -> tensor<16x4xf32>
func.func @collectives(%arg0: tensor<8x16xf32>, %x: tensor<2x16xf32>) -> tensor<8x16xf32> {
  %s = shard.sharding @grid split_axes = [[0], [1]] : !shard.sharding
  %0 = shard.shard %arg0 to %s : tensor<8x16xf32>
  %g = shard.all_gather %x on @grid grid_axes = [0] gather_axis = 0 : tensor<2x16xf32> -> tensor<4x16xf32>
  %rs = shard.reduce_scatter %g on @grid grid_axes = [1] scatter_axis = 1 : tensor<4x16xf32> -> tensor<4x4xf32>
  %a = shard.all_to_all %g on @grid grid_axes = [1] split_axis = 1 concat_axis = 0 : tensor<4x16xf32> -> tensor<16x4xf32>
  return %0 : tensor<8x16xf32>
}

//--- partial.mlir
// A sharding has split axes only: no per-axis Partial(sum) placement.
// CHECK: error: expected ':'
shard.grid @grid(shape = 2x4)
func.func @partial(%arg0: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %s = shard.sharding @grid split_axes = [[0]] partial = sum [1] : !shard.sharding
  %0 = shard.shard %arg0 to %s : tensor<8x16xf32>
  return %0 : tensor<8x16xf32>
}

//--- dtype.mlir
// Reductions accept any result element type (here f32 summed into i8): there
// is no wire type and no accumulation rule to check.
// CHECK: shard.all_reduce %{{.*}} on @grid grid_axes = [0] : tensor<4xf32> -> tensor<4xi8>
shard.grid @grid(shape = 2)
func.func @dtype(%x: tensor<4xf32>) -> tensor<4xi8> {
  %0 = shard.all_reduce %x on @grid grid_axes = [0] : tensor<4xf32> -> tensor<4xi8>
  return %0 : tensor<4xi8>
}

//--- async.mlir
// Collectives are blocking values only: no start/wait pair to schedule.
// CHECK: error: custom op 'shard.all_gather_start' is unknown
shard.grid @grid(shape = 2)
func.func @async(%x: tensor<2xf32>) {
  %f = shard.all_gather_start %x on @grid grid_axes = [0] gather_axis = 0 : tensor<2xf32> -> tensor<4xf32>
  return
}

//--- uneven.mlir
// Partitioning a dim that does not divide (7 rows over 2 ranks) builds
// invalid IR instead of padding or refusing.
// CHECK: error: 'tensor.cast' op operand type 'tensor<6x16xf32>' and result type 'tensor<7x16xf32>' are cast incompatible
shard.grid @grid(shape = 2)
func.func @uneven(%arg0: tensor<7x16xf32>) -> tensor<7x16xf32> {
  %s = shard.sharding @grid split_axes = [[0]] : !shard.sharding
  %0 = shard.shard %arg0 to %s : tensor<7x16xf32>
  %r = shard.sharding @grid split_axes = [[]] : !shard.sharding
  %1 = shard.shard %0 to %r annotate_for_users : tensor<7x16xf32>
  return %1 : tensor<7x16xf32>
}
