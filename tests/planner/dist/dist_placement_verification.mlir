// RUN: plan-opt %s -split-input-file -verify-diagnostics

dist.mesh @mesh shape = [2, 4] axes = ["dp", "tp"]

// Tests that a placement entry must be one of the three kinds.
func.func @unknown_kind(%x: tensor<4xf32>) {
  // expected-error @+1 {{unknown placement 'split'; use replicate, shard<dim> or partial<reduction>}}
  %0 = dist.annotate %x <@mesh, [split<0>, replicate]> global tensor<4xf32> : tensor<4xf32>
  return
}

// -----

dist.mesh @mesh shape = [2, 4] axes = ["dp", "tp"]

// Tests that a placement entry starts with a keyword.
func.func @not_a_keyword(%x: tensor<4xf32>) {
  // expected-error @+1 {{expected a placement: replicate, shard<dim> or partial<reduction>}}
  %0 = dist.annotate %x <@mesh, [0, replicate]> global tensor<4xf32> : tensor<4xf32>
  return
}

// -----

dist.mesh @mesh shape = [2, 4] axes = ["dp", "tp"]

// Tests that partial placements name a known reduction.
func.func @unknown_reduction(%x: tensor<4xf32>) {
  // expected-error @+1 {{unknown reduction 'prod'; use sum, avg, max or min}}
  %0 = dist.annotate %x <@mesh, [partial<prod>, replicate]> global tensor<4xf32> : tensor<4xf32>
  return
}

// -----

dist.mesh @mesh shape = [2, 4] axes = ["dp", "tp"]

// Tests that a shard entry names a non-negative dim.
func.func @negative_dim(%x: tensor<4xf32>) {
  // expected-error @+1 {{placement entry 1 shards dim -1; use a non-negative dim}}
  %0 = dist.annotate %x <@mesh, [replicate, shard<-1>]> global tensor<4xf32> : tensor<4xf32>
  return
}

// -----

// Tests that a future carries a statically shaped tensor.
// expected-error @+1 {{future must carry a statically shaped tensor, got: 'tensor<?x4xf32>'; give every dim a size}}
func.func @dynamic_future(%f: !dist.future<tensor<?x4xf32>>) {
  return
}

// -----

dist.mesh @mesh shape = [2, 4] axes = ["dp", "tp"]

// Tests that a placement changes sizes, never the rank or element type.
func.func @element_type_changes(%x: tensor<4xbf16>) {
  // expected-error @+1 {{'dist.annotate' op local type 'tensor<4xbf16>' must have the rank and element type of global type 'tensor<8xf32>'; a placement changes sizes only}}
  %0 = dist.annotate %x <@mesh, [shard<0>, replicate]> global tensor<8xf32> : tensor<4xbf16>
  return
}

// -----

// Tests that the placement's mesh must exist.
func.func @missing_mesh(%x: tensor<4xf32>) {
  // expected-error @+1 {{'dist.annotate' op @nowhere does not name a dist.mesh; declare it with `dist.mesh @nowhere shape = [...] axes = [...]` in the enclosing module}}
  %0 = dist.annotate %x <@nowhere, [replicate]> global tensor<4xf32> : tensor<4xf32>
  return
}

// -----

// Tests that the placement's mesh symbol must be a dist.mesh, not any symbol.
func.func @not_a_mesh(%x: tensor<4xf32>) {
  // expected-error @+1 {{@not_a_mesh does not name a dist.mesh}}
  %0 = dist.annotate %x <@not_a_mesh, [replicate]> global tensor<4xf32> : tensor<4xf32>
  return
}

// -----

// expected-note @+1 {{mesh @mesh declared here}}
dist.mesh @mesh shape = [2, 4] axes = ["dp", "tp"]

// Tests that a placement has one entry per mesh axis.
func.func @entry_count(%x: tensor<4xf32>) {
  // expected-error @+1 {{'dist.annotate' op placement has 1 entries but @mesh has 2 axes (dp=2, tp=4); give one entry per mesh axis}}
  %0 = dist.annotate %x <@mesh, [replicate]> global tensor<4xf32> : tensor<4xf32>
  return
}

// -----

// expected-note @+1 {{mesh @mesh declared here}}
dist.mesh @mesh shape = [2, 4] axes = ["dp", "tp"]

// Tests that a shard entry names a dim of the tensor.
func.func @dim_out_of_range(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{placement entry for mesh axis "tp" shards dim 2, out of range for a rank-2 tensor; use a dim in [0, 2)}}
  %0 = dist.annotate %x <@mesh, [replicate, shard<2>]> global tensor<4x8xf32> : tensor<4x8xf32>
  return
}

// -----

// expected-note @+1 {{mesh @mesh declared here}}
dist.mesh @mesh shape = [2, 4] axes = ["dp", "tp"]

// Tests that a dim that does not divide must be marked padded, and that the
// message shows the padded local size.
func.func @uneven_without_padding(%x: tensor<3x8xf32>) {
  // expected-error @+1 {{dim 0 of size 10 does not divide by the 4 ranks that shard it (tp=4), got: 10 % 4 = 2; mark its shard entries `padded` (each rank then holds ceil(10 / 4) = 3 rows) or change the dim or the mesh}}
  %0 = dist.annotate %x <@mesh, [replicate, shard<0>]> global tensor<10x8xf32> : tensor<3x8xf32>
  return
}

// -----

// expected-note @+1 {{mesh @mesh declared here}}
dist.mesh @mesh shape = [2, 4] axes = ["dp", "tp"]

// Tests that divisibility is checked against the product of every axis that
// shards the dim.
func.func @uneven_over_two_axes(%x: tensor<1x8xf32>) {
  // expected-error @+1 {{dim 0 of size 12 does not divide by the 8 ranks that shard it (dp=2, tp=4), got: 12 % 8 = 4}}
  %0 = dist.annotate %x <@mesh, [shard<0>, shard<0>]> global tensor<12x8xf32> : tensor<1x8xf32>
  return
}

// -----

// expected-note @+1 {{mesh @mesh declared here}}
dist.mesh @mesh shape = [2, 4] axes = ["dp", "tp"]

// Tests that padding a dim that divides is refused, so each layout has one
// spelling.
func.func @needless_padding(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{dim 0 of size 8 divides by the 4 ranks that shard it (tp=4), so nothing is padded; drop `padded` from its shard entries}}
  %0 = dist.annotate %x <@mesh, [replicate, shard<0, padded>]> global tensor<8x8xf32> : tensor<2x8xf32>
  return
}

// -----

// expected-note @+1 {{mesh @mesh declared here}}
dist.mesh @mesh shape = [2, 4] axes = ["dp", "tp"]

// Tests that the entries sharding one dim agree on padding.
func.func @mixed_padding(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{shard entries of dim 0 disagree on `padded`; mark all of them `padded` or none}}
  %0 = dist.annotate %x <@mesh, [shard<0>, shard<0, padded>]> global tensor<10x8xf32> : tensor<2x8xf32>
  return
}

// -----

dist.mesh @mesh shape = [2, 4] axes = ["dp", "tp"]

// Tests that the local type must be what the placement gives.
func.func @wrong_local_shape(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'dist.annotate' op local shape [4, 8] does not match global type 'tensor<11x8xf32>' under this placement; expected [3, 8]}}
  %0 = dist.annotate %x <@mesh, [replicate, shard<0, padded>]> global tensor<11x8xf32> : tensor<4x8xf32>
  return
}
