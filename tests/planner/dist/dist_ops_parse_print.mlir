// RUN: plan-opt %s | plan-opt | FileCheck %s
// RUN: plan-opt %s --mlir-print-op-generic | plan-opt | FileCheck %s

// CHECK: dist.mesh @mesh shape = [2, 4] axes = ["dp", "tp"]
dist.mesh @mesh shape = [2, 4] axes = ["dp", "tp"]
// CHECK: dist.mesh @single shape = [1] axes = ["d0"]
dist.mesh @single shape = [1] axes = ["d0"]

// Tests that dist.annotate prints its placement and global type, padded
// entries included.
// CHECK-LABEL: func.func @annotate
// CHECK-SAME: (%[[W:.*]]: tensor<6x16xf32>, %[[B:.*]]: tensor<64xf32>)
// CHECK-NEXT: dist.annotate %[[W]] <@mesh, [shard<0, padded>, shard<1>]> global tensor<11x64xf32> : tensor<6x16xf32>
// CHECK-NEXT: dist.annotate %[[B]] <@mesh, [replicate, partial<sum>]> global tensor<64xf32> : tensor<64xf32>
func.func @annotate(%w: tensor<6x16xf32>, %b: tensor<64xf32>) -> (tensor<6x16xf32>, tensor<64xf32>) {
  %0 = dist.annotate %w <@mesh, [shard<0, padded>, shard<1>]> global tensor<11x64xf32> : tensor<6x16xf32>
  %1 = dist.annotate %b <@mesh, [replicate, partial<sum>]> global tensor<64xf32> : tensor<64xf32>
  return %0, %1 : tensor<6x16xf32>, tensor<64xf32>
}

// Tests that one dim may be sharded over two mesh axes and that every
// reduction kind of a partial placement round-trips.
// CHECK-LABEL: func.func @annotate_two_axes_one_dim
// CHECK-NEXT: dist.annotate %{{.*}} <@mesh, [shard<0>, shard<0>]> global tensor<16x4xf32> : tensor<2x4xf32>
// CHECK-NEXT: dist.annotate %{{.*}} <@mesh, [partial<avg>, partial<max>]> global tensor<3xf32> : tensor<3xf32>
// CHECK-NEXT: dist.annotate %{{.*}} <@mesh, [partial<min>, replicate]> global tensor<3xf32> : tensor<3xf32>
func.func @annotate_two_axes_one_dim(%x: tensor<2x4xf32>, %y: tensor<3xf32>) {
  %0 = dist.annotate %x <@mesh, [shard<0>, shard<0>]> global tensor<16x4xf32> : tensor<2x4xf32>
  %1 = dist.annotate %y <@mesh, [partial<avg>, partial<max>]> global tensor<3xf32> : tensor<3xf32>
  %2 = dist.annotate %y <@mesh, [partial<min>, replicate]> global tensor<3xf32> : tensor<3xf32>
  return
}

// Tests that the blocking collectives round-trip with their wire and
// accumulation types.
// CHECK-LABEL: func.func @blocking_collectives
// CHECK-SAME: (%[[S:.*]]: tensor<2x16xf32>, %[[G:.*]]: tensor<8x16xbf16>, %[[P:.*]]: tensor<4x16xbf16>)
// CHECK-NEXT: %[[AG:.*]] = dist.all_gather %[[S]] on @mesh axes = ["dp"] gather_dim = 0 wire = bf16 : tensor<2x16xf32> -> tensor<4x16xbf16>
// CHECK-NEXT: %[[RS:.*]] = dist.reduce_scatter %[[G]] on @mesh axes = ["dp"] scatter_dim = 0 reduction = sum wire = bf16 accum = f32 : tensor<8x16xbf16> -> tensor<4x16xf32>
// CHECK-NEXT: %[[AR:.*]] = dist.all_reduce %[[P]] on @mesh axes = ["tp"] reduction = sum wire = bf16 accum = f32 : tensor<4x16xbf16> -> tensor<4x16xf32>
// CHECK-NEXT: %[[A2A:.*]] = dist.all_to_all %[[RS]] on @mesh axes = ["tp"] split_dim = 1 concat_dim = 0 wire = f32 : tensor<4x16xf32> -> tensor<16x4xf32>
// CHECK-NEXT: return %[[AG]], %[[AR]], %[[A2A]]
func.func @blocking_collectives(%s: tensor<2x16xf32>, %g: tensor<8x16xbf16>, %p: tensor<4x16xbf16>)
    -> (tensor<4x16xbf16>, tensor<4x16xf32>, tensor<16x4xf32>) {
  %ag = dist.all_gather %s on @mesh axes = ["dp"] gather_dim = 0 wire = bf16 : tensor<2x16xf32> -> tensor<4x16xbf16>
  %rs = dist.reduce_scatter %g on @mesh axes = ["dp"] scatter_dim = 0 reduction = sum wire = bf16 accum = f32 : tensor<8x16xbf16> -> tensor<4x16xf32>
  %ar = dist.all_reduce %p on @mesh axes = ["tp"] reduction = sum wire = bf16 accum = f32 : tensor<4x16xbf16> -> tensor<4x16xf32>
  %a2a = dist.all_to_all %rs on @mesh axes = ["tp"] split_dim = 1 concat_dim = 0 wire = f32 : tensor<4x16xf32> -> tensor<16x4xf32>
  return %ag, %ar, %a2a : tensor<4x16xbf16>, tensor<4x16xf32>, tensor<16x4xf32>
}

// Tests that collectives over several mesh axes, padded forms, integer
// types and the other reductions round-trip.
// CHECK-LABEL: func.func @collective_variants
// CHECK-NEXT: dist.all_gather %{{.*}} on @mesh axes = ["dp", "tp"] gather_dim = 1 wire = f32 : tensor<3x2xf32> -> tensor<3x16xf32>
// CHECK-NEXT: dist.all_gather %{{.*}} on @mesh axes = ["tp"] gather_dim = 0 padded wire = f32 : tensor<3x2xf32> -> tensor<10x2xf32>
// CHECK-NEXT: dist.reduce_scatter %{{.*}} on @mesh axes = ["tp"] scatter_dim = 0 padded reduction = avg wire = f32 accum = f32 : tensor<10x2xf32> -> tensor<3x2xf32>
// CHECK-NEXT: dist.all_reduce %{{.*}} on @mesh axes = ["tp", "dp"] reduction = max wire = i32 accum = i64 : tensor<5xi32> -> tensor<5xi32>
// CHECK-NEXT: dist.all_reduce %{{.*}} on @single axes = ["d0"] reduction = min wire = i32 accum = i32 : tensor<5xi32> -> tensor<5xi32>
// CHECK-NEXT: dist.all_to_all %{{.*}} on @mesh axes = ["dp"] split_dim = 0 concat_dim = 0 wire = bf16 : tensor<4x2xf32> -> tensor<4x2xbf16>
func.func @collective_variants(%x: tensor<3x2xf32>, %y: tensor<10x2xf32>, %i: tensor<5xi32>, %z: tensor<4x2xf32>) {
  %0 = dist.all_gather %x on @mesh axes = ["dp", "tp"] gather_dim = 1 wire = f32 : tensor<3x2xf32> -> tensor<3x16xf32>
  %1 = dist.all_gather %x on @mesh axes = ["tp"] gather_dim = 0 padded wire = f32 : tensor<3x2xf32> -> tensor<10x2xf32>
  %2 = dist.reduce_scatter %y on @mesh axes = ["tp"] scatter_dim = 0 padded reduction = avg wire = f32 accum = f32 : tensor<10x2xf32> -> tensor<3x2xf32>
  %3 = dist.all_reduce %i on @mesh axes = ["tp", "dp"] reduction = max wire = i32 accum = i64 : tensor<5xi32> -> tensor<5xi32>
  %4 = dist.all_reduce %i on @single axes = ["d0"] reduction = min wire = i32 accum = i32 : tensor<5xi32> -> tensor<5xi32>
  %5 = dist.all_to_all %z on @mesh axes = ["dp"] split_dim = 0 concat_dim = 0 wire = bf16 : tensor<4x2xf32> -> tensor<4x2xbf16>
  return
}

// Tests that every async collective round-trips with its future and wait.
// CHECK-LABEL: func.func @async_collectives
// CHECK-SAME: (%[[S:.*]]: tensor<2x16xf32>, %[[G:.*]]: tensor<8x16xbf16>)
// CHECK-NEXT: %[[F0:.*]] = dist.all_gather_start %[[S]] on @mesh axes = ["dp"] gather_dim = 0 wire = bf16 : tensor<2x16xf32> -> !dist.future<tensor<4x16xbf16>>
// CHECK-NEXT: %[[F1:.*]] = dist.reduce_scatter_start %[[G]] on @mesh axes = ["dp"] scatter_dim = 0 reduction = sum wire = bf16 accum = f32 : tensor<8x16xbf16> -> !dist.future<tensor<4x16xf32>>
// CHECK-NEXT: %[[F2:.*]] = dist.all_reduce_start %[[S]] on @mesh axes = ["tp"] reduction = sum wire = f32 accum = f32 : tensor<2x16xf32> -> !dist.future<tensor<2x16xf32>>
// CHECK-NEXT: %[[F3:.*]] = dist.all_to_all_start %[[S]] on @mesh axes = ["tp"] split_dim = 1 concat_dim = 0 wire = f32 : tensor<2x16xf32> -> !dist.future<tensor<8x4xf32>>
// CHECK-NEXT: %[[W0:.*]] = dist.wait %[[F0]] : !dist.future<tensor<4x16xbf16>>
// CHECK-NEXT: %[[W1:.*]] = dist.wait %[[F1]] : !dist.future<tensor<4x16xf32>>
// CHECK-NEXT: %[[W2:.*]] = dist.wait %[[F2]] : !dist.future<tensor<2x16xf32>>
// CHECK-NEXT: %[[W3:.*]] = dist.wait %[[F3]] : !dist.future<tensor<8x4xf32>>
// CHECK-NEXT: return %[[W0]], %[[W1]], %[[W2]], %[[W3]]
func.func @async_collectives(%s: tensor<2x16xf32>, %g: tensor<8x16xbf16>)
    -> (tensor<4x16xbf16>, tensor<4x16xf32>, tensor<2x16xf32>, tensor<8x4xf32>) {
  %f0 = dist.all_gather_start %s on @mesh axes = ["dp"] gather_dim = 0 wire = bf16 : tensor<2x16xf32> -> !dist.future<tensor<4x16xbf16>>
  %f1 = dist.reduce_scatter_start %g on @mesh axes = ["dp"] scatter_dim = 0 reduction = sum wire = bf16 accum = f32 : tensor<8x16xbf16> -> !dist.future<tensor<4x16xf32>>
  %f2 = dist.all_reduce_start %s on @mesh axes = ["tp"] reduction = sum wire = f32 accum = f32 : tensor<2x16xf32> -> !dist.future<tensor<2x16xf32>>
  %f3 = dist.all_to_all_start %s on @mesh axes = ["tp"] split_dim = 1 concat_dim = 0 wire = f32 : tensor<2x16xf32> -> !dist.future<tensor<8x4xf32>>
  %w0 = dist.wait %f0 : !dist.future<tensor<4x16xbf16>>
  %w1 = dist.wait %f1 : !dist.future<tensor<4x16xf32>>
  %w2 = dist.wait %f2 : !dist.future<tensor<2x16xf32>>
  %w3 = dist.wait %f3 : !dist.future<tensor<8x4xf32>>
  return %w0, %w1, %w2, %w3 : tensor<4x16xbf16>, tensor<4x16xf32>, tensor<2x16xf32>, tensor<8x4xf32>
}

// Tests that dist.slice prints its axes, dim and `padded`, and that gathering
// the slice over the same axes gives back the operand's type.
// CHECK-LABEL: func.func @slice
// CHECK-SAME: (%[[X:.*]]: tensor<8x32xf32>, %[[Y:.*]]: tensor<10x16xbf16>)
// CHECK-NEXT: %[[S:.*]] = dist.slice %[[X]] on @mesh axes = ["tp"] slice_dim = 1 : tensor<8x32xf32> -> tensor<8x8xf32>
// CHECK-NEXT: %[[G:.*]] = dist.all_gather %[[S]] on @mesh axes = ["tp"] gather_dim = 1 wire = f32 : tensor<8x8xf32> -> tensor<8x32xf32>
// CHECK-NEXT: %[[P:.*]] = dist.slice %[[Y]] on @mesh axes = ["tp"] slice_dim = 0 padded : tensor<10x16xbf16> -> tensor<3x16xbf16>
// CHECK-NEXT: %[[T:.*]] = dist.slice %[[X]] on @mesh axes = ["dp", "tp"] slice_dim = 0 : tensor<8x32xf32> -> tensor<1x32xf32>
// CHECK-NEXT: return %[[G]], %[[P]], %[[T]]
func.func @slice(%x: tensor<8x32xf32>, %y: tensor<10x16xbf16>) -> (tensor<8x32xf32>, tensor<3x16xbf16>, tensor<1x32xf32>) {
  %s = dist.slice %x on @mesh axes = ["tp"] slice_dim = 1 : tensor<8x32xf32> -> tensor<8x8xf32>
  %g = dist.all_gather %s on @mesh axes = ["tp"] gather_dim = 1 wire = f32 : tensor<8x8xf32> -> tensor<8x32xf32>
  %p = dist.slice %y on @mesh axes = ["tp"] slice_dim = 0 padded : tensor<10x16xbf16> -> tensor<3x16xbf16>
  %t = dist.slice %x on @mesh axes = ["dp", "tp"] slice_dim = 0 : tensor<8x32xf32> -> tensor<1x32xf32>
  return %g, %p, %t : tensor<8x32xf32>, tensor<3x16xbf16>, tensor<1x32xf32>
}

// Tests the FSDP pattern: gather a bucket of shards, unbucket the whole
// params, free the gathered buffer after the last use.
// CHECK-LABEL: func.func @fsdp_bucket_gather
// CHECK-SAME: (%[[W:.*]]: tensor<2x16xf32>, %[[B:.*]]: tensor<16xf32>)
// CHECK-NEXT: %[[BUCKET:.*]] = dist.bucket %[[W]], %[[B]] offsets = [0, 32] : tensor<2x16xf32>, tensor<16xf32> -> tensor<48xf32>
// CHECK-NEXT: %[[FULL:.*]] = dist.all_gather %[[BUCKET]] on @mesh axes = ["tp"] gather_dim = 0 wire = f32 : tensor<48xf32> -> tensor<192xf32>
// CHECK-NEXT: %[[PARAMS:.*]]:2 = dist.unbucket %[[FULL]] offsets = [0, 32] chunks = 4 : tensor<192xf32> -> tensor<8x16xf32>, tensor<64xf32>
// CHECK-NEXT: dist.free %[[FULL]] : tensor<192xf32>
// CHECK-NEXT: return %[[PARAMS]]#0, %[[PARAMS]]#1
func.func @fsdp_bucket_gather(%w: tensor<2x16xf32>, %b: tensor<16xf32>) -> (tensor<8x16xf32>, tensor<64xf32>) {
  %bucket = dist.bucket %w, %b offsets = [0, 32] : tensor<2x16xf32>, tensor<16xf32> -> tensor<48xf32>
  %full = dist.all_gather %bucket on @mesh axes = ["tp"] gather_dim = 0 wire = f32 : tensor<48xf32> -> tensor<192xf32>
  %w_full, %b_full = dist.unbucket %full offsets = [0, 32] chunks = 4 : tensor<192xf32> -> tensor<8x16xf32>, tensor<64xf32>
  dist.free %full : tensor<192xf32>
  return %w_full, %b_full : tensor<8x16xf32>, tensor<64xf32>
}

// Tests the gradient sum of an accumulating step: one operand, its type.
// CHECK-LABEL: func.func @accumulate
// CHECK-SAME: (%[[G:.*]]: tensor<8x16xbf16>)
// CHECK-NEXT: %[[SUM:.*]] = dist.accumulate %[[G]] : tensor<8x16xbf16>
// CHECK-NEXT: return %[[SUM]]
func.func @accumulate(%g: tensor<8x16xbf16>) -> tensor<8x16xbf16> {
  %sum = dist.accumulate %g : tensor<8x16xbf16>
  return %sum : tensor<8x16xbf16>
}

// Tests fsdp x tp: a row-parallel weight gathered along dim 1 shares the
// bucket, and `split_dims` rebuilds it along dim 1 (and splits its gradient
// the same way).
// CHECK-LABEL: func.func @split_dims_bucket
// CHECK-SAME: (%[[W:.*]]: tensor<2x16xf32>, %[[O:.*]]: tensor<16x2xf32>)
// CHECK-NEXT: %[[BUCKET:.*]] = dist.bucket %[[W]], %[[O]] offsets = [0, 32] : tensor<2x16xf32>, tensor<16x2xf32> -> tensor<64xf32>
// CHECK-NEXT: %[[FULL:.*]] = dist.all_gather %[[BUCKET]] on @mesh axes = ["tp"] gather_dim = 0 wire = f32 : tensor<64xf32> -> tensor<256xf32>
// CHECK-NEXT: %[[PARAMS:.*]]:2 = dist.unbucket %[[FULL]] offsets = [0, 32] chunks = 4 split_dims = [0, 1] : tensor<256xf32> -> tensor<8x16xf32>, tensor<16x8xf32>
// CHECK-NEXT: %[[GRADS:.*]] = dist.bucket %[[PARAMS]]#0, %[[PARAMS]]#1 offsets = [0, 32] chunks = 4 split_dims = [0, 1] : tensor<8x16xf32>, tensor<16x8xf32> -> tensor<256xf32>
// CHECK-NEXT: return %[[GRADS]]
func.func @split_dims_bucket(%w: tensor<2x16xf32>, %o: tensor<16x2xf32>) -> tensor<256xf32> {
  %bucket = dist.bucket %w, %o offsets = [0, 32] : tensor<2x16xf32>, tensor<16x2xf32> -> tensor<64xf32>
  %full = dist.all_gather %bucket on @mesh axes = ["tp"] gather_dim = 0 wire = f32 : tensor<64xf32> -> tensor<256xf32>
  %w_full, %o_full = dist.unbucket %full offsets = [0, 32] chunks = 4 split_dims = [0, 1] : tensor<256xf32> -> tensor<8x16xf32>, tensor<16x8xf32>
  %grads = dist.bucket %w_full, %o_full offsets = [0, 32] chunks = 4 split_dims = [0, 1] : tensor<8x16xf32>, tensor<16x8xf32> -> tensor<256xf32>
  return %grads : tensor<256xf32>
}

// Tests padded entries: a 10-row parameter over 4 ranks has 3-row shards;
// the bucket of shards is gathered, `padded` unbucket drops the padding
// rows, and the gradient side pads 10 rows into 4 parts of 3.
// CHECK-LABEL: func.func @padded_bucket
// CHECK-SAME: (%[[U:.*]]: tensor<3x16xf32>, %[[B:.*]]: tensor<16xf32>)
// CHECK-NEXT: %[[BUCKET:.*]] = dist.bucket %[[U]], %[[B]] offsets = [0, 48] : tensor<3x16xf32>, tensor<16xf32> -> tensor<64xf32>
// CHECK-NEXT: %[[FULL:.*]] = dist.all_gather %[[BUCKET]] on @mesh axes = ["tp"] gather_dim = 0 wire = f32 : tensor<64xf32> -> tensor<256xf32>
// CHECK-NEXT: %[[PARAMS:.*]]:2 = dist.unbucket %[[FULL]] offsets = [0, 48] chunks = 4 padded : tensor<256xf32> -> tensor<10x16xf32>, tensor<64xf32>
// CHECK-NEXT: %[[GRADS:.*]] = dist.bucket %[[PARAMS]]#0, %[[PARAMS]]#1 offsets = [0, 48] chunks = 4 padded : tensor<10x16xf32>, tensor<64xf32> -> tensor<256xf32>
// CHECK-NEXT: return %[[GRADS]]
func.func @padded_bucket(%u: tensor<3x16xf32>, %b: tensor<16xf32>) -> tensor<256xf32> {
  %bucket = dist.bucket %u, %b offsets = [0, 48] : tensor<3x16xf32>, tensor<16xf32> -> tensor<64xf32>
  %full = dist.all_gather %bucket on @mesh axes = ["tp"] gather_dim = 0 wire = f32 : tensor<64xf32> -> tensor<256xf32>
  %u_full, %b_full = dist.unbucket %full offsets = [0, 48] chunks = 4 padded : tensor<256xf32> -> tensor<10x16xf32>, tensor<64xf32>
  %grads = dist.bucket %u_full, %b_full offsets = [0, 48] chunks = 4 padded : tensor<10x16xf32>, tensor<64xf32> -> tensor<256xf32>
  return %grads : tensor<256xf32>
}

// Tests the gradient side: bucket whole grads in 4 chunks (with an alignment
// gap), reduce-scatter, unbucket the shards, and run AdamW on them.
// CHECK-LABEL: func.func @grad_bucket_and_step
// CHECK: %[[BUCKET:.*]] = dist.bucket %{{.*}}, %{{.*}} offsets = [0, 64] chunks = 4 : tensor<8x16xbf16>, tensor<64xbf16> -> tensor<320xbf16>
// CHECK-NEXT: %[[SHARDS:.*]] = dist.reduce_scatter %[[BUCKET]] on @mesh axes = ["tp"] scatter_dim = 0 reduction = avg wire = bf16 accum = f32 : tensor<320xbf16> -> tensor<80xf32>
// CHECK-NEXT: %[[G:.*]]:2 = dist.unbucket %[[SHARDS]] offsets = [0, 64] : tensor<80xf32> -> tensor<2x16xf32>, tensor<16xf32>
// CHECK-NEXT: dist.optimizer_step %{{.*}}, %[[G]]#0, %{{.*}}, %{{.*}} lr = 1.000000e-03 betas = (9.000000e-01, {{[0-9.e+-]+}}) eps = 1.000000e-08 weight_decay = 1.000000e-01 : tensor<2x16xf32>, tensor<2x16xf32>, tensor<2x16xf32>, tensor<2x16xf32>
// CHECK-NEXT: dist.optimizer_step %{{.*}}, %[[G]]#1, %{{.*}}, %{{.*}} lr = 1.000000e-03 betas = (9.000000e-01, {{[0-9.e+-]+}}) eps = 1.000000e-08 weight_decay = 0.000000e+00 : tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>
func.func @grad_bucket_and_step(%gw: tensor<8x16xbf16>, %gb: tensor<64xbf16>,
                                %w: tensor<2x16xf32>, %mw: tensor<2x16xf32>, %vw: tensor<2x16xf32>,
                                %b: tensor<16xf32>, %mb: tensor<16xf32>, %vb: tensor<16xf32>) {
  %bucket = dist.bucket %gw, %gb offsets = [0, 64] chunks = 4 : tensor<8x16xbf16>, tensor<64xbf16> -> tensor<320xbf16>
  %shards = dist.reduce_scatter %bucket on @mesh axes = ["tp"] scatter_dim = 0 reduction = avg wire = bf16 accum = f32 : tensor<320xbf16> -> tensor<80xf32>
  %g:2 = dist.unbucket %shards offsets = [0, 64] : tensor<80xf32> -> tensor<2x16xf32>, tensor<16xf32>
  %w1, %mw1, %vw1 = dist.optimizer_step %w, %g#0, %mw, %vw lr = 1.0e-3 betas = (0.9, 0.95) eps = 1.0e-8 weight_decay = 0.1 : tensor<2x16xf32>, tensor<2x16xf32>, tensor<2x16xf32>, tensor<2x16xf32>
  %b1, %mb1, %vb1 = dist.optimizer_step %b, %g#1, %mb, %vb lr = 1.0e-3 betas = (0.9, 0.95) eps = 1.0e-8 weight_decay = 0.0 : tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>
  return
}

// Tests that the grad may have another float type than the param and its
// states.
// CHECK-LABEL: func.func @mixed_precision_step
// CHECK-NEXT: dist.optimizer_step %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} lr = {{.*}} : tensor<4xf32>, tensor<4xbf16>, tensor<4xf32>, tensor<4xf32>
func.func @mixed_precision_step(%p: tensor<4xf32>, %g: tensor<4xbf16>, %m: tensor<4xf32>, %v: tensor<4xf32>) {
  %p1, %m1, %v1 = dist.optimizer_step %p, %g, %m, %v lr = 1.0e-3 betas = (0.9, 0.999) eps = 1.0e-8 weight_decay = 0.01 : tensor<4xf32>, tensor<4xbf16>, tensor<4xf32>, tensor<4xf32>
  return
}

// Tests that a bf16 param is updated through its f32 master copy, which is
// also a result.
// CHECK-LABEL: func.func @master_step
// CHECK-NEXT: %{{.*}}, %{{.*}}, %{{.*}}, %new_master = dist.optimizer_step %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} master %{{.*}} lr = {{.*}} : tensor<4xbf16>, tensor<4xbf16>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
func.func @master_step(%p: tensor<4xbf16>, %g: tensor<4xbf16>, %m: tensor<4xf32>, %v: tensor<4xf32>, %w: tensor<4xf32>) {
  %p1, %m1, %v1, %w1 = dist.optimizer_step %p, %g, %m, %v master %w lr = 1.0e-3 betas = (0.9, 0.999) eps = 1.0e-8 weight_decay = 0.01 : tensor<4xbf16>, tensor<4xbf16>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
  return
}
