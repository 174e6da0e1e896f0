// RUN: plan-opt %s -split-input-file -verify-diagnostics --plan-insert-collectives

dist.mesh @mesh shape = [2, 2] axes = ["a", "b"]

// Tests that a slice on an earlier mesh axis than one that already shards the
// dim is refused (its shards would sit inside those of the later axis), with
// a note at the producer.
func.func @slice_inside_later_axis(%x: tensor<8x16xf32> {dist.placement = #dist.placement<@mesh, [replicate, shard<0>]>})
    -> (tensor<8x16xf32> {dist.placement = #dist.placement<@mesh, [shard<0>, shard<0>]>}) {
  // expected-note @+1 {{the value is produced here}}
  %a = nn.silu %x {dist.operand_placements = [#dist.placement<@mesh, [replicate, shard<0>]>], dist.result_placements = [#dist.placement<@mesh, [replicate, shard<0>]>]} : (tensor<8x16xf32>) -> tensor<8x16xf32>
  // expected-error @+1 {{'nn.gelu' op cannot convert [replicate, shard<0>] to [shard<0>, shard<0>] on mesh axis "a" (replicate -> shard<0>): a slice would put its shards inside those of a later mesh axis; shard the dim on the earlier mesh axis first}}
  %y = nn.gelu %a {dist.operand_placements = [#dist.placement<@mesh, [shard<0>, shard<0>]>], dist.result_placements = [#dist.placement<@mesh, [shard<0>, shard<0>]>]} : (tensor<8x16xf32>) -> tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

// -----

dist.mesh @mesh shape = [2, 2] axes = ["a", "b"]

// Tests that slicing a shard of a dim that only pads over all its axes is
// refused: 6 rows split evenly over "a", but not over "a" and "b".
func.func @padded_slice_of_shard(%x: tensor<6x16xf32> {dist.placement = #dist.placement<@mesh, [shard<0>, replicate]>})
    -> (tensor<6x16xf32> {dist.placement = #dist.placement<@mesh, [shard<0>, replicate]>}) {
  // expected-error @+1 {{'nn.silu' op cannot convert [shard<0>, replicate] to [shard<0, padded>, shard<0, padded>] on mesh axis "b" (replicate -> shard<0, padded>): a padded dim must be sliced over all its axes at once; shard it on these axes only}}
  %y = nn.silu %x {dist.operand_placements = [#dist.placement<@mesh, [shard<0, padded>, shard<0, padded>]>], dist.result_placements = [#dist.placement<@mesh, [shard<0>, replicate]>]} : (tensor<6x16xf32>) -> tensor<6x16xf32>
  return %y : tensor<6x16xf32>
}

// -----

dist.mesh @mesh shape = [2] axes = ["tp"]

// Tests that a replicated value wanted partial is refused, with a note at its
// producer.
func.func @partial(%x: tensor<8x16xf32> {dist.placement = #dist.placement<@mesh, [replicate]>})
    -> (tensor<8x16xf32> {dist.placement = #dist.placement<@mesh, [replicate]>}) {
  // expected-note @+1 {{the value is produced here}}
  %a = nn.silu %x {dist.operand_placements = [#dist.placement<@mesh, [replicate]>], dist.result_placements = [#dist.placement<@mesh, [replicate]>]} : (tensor<8x16xf32>) -> tensor<8x16xf32>
  // expected-error @+1 {{'nn.gelu' op cannot convert [replicate] to [partial<sum>] on mesh axis "tp" (replicate -> partial<sum>): dist has no op that makes a partial value (one rank keeping it, the others zero); give the user a replicated operand}}
  %y = nn.gelu %a {dist.operand_placements = [#dist.placement<@mesh, [partial<sum>]>], dist.result_placements = [#dist.placement<@mesh, [replicate]>]} : (tensor<8x16xf32>) -> tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

// -----

dist.mesh @mesh shape = [2, 2] axes = ["a", "b"]

// Tests that gathering the outer axis of a dim split by two axes while the inner
// one keeps it is refused (the shards would come out of order).
func.func @outer_gather(%x: tensor<8x16xf32> {dist.placement = #dist.placement<@mesh, [shard<0>, shard<0>]>})
    -> (tensor<8x16xf32> {dist.placement = #dist.placement<@mesh, [replicate, replicate]>}) {
  // expected-error @+1 {{'nn.silu' op cannot convert [shard<0>, shard<0>] to [replicate, shard<0>] on mesh axis "a" (shard<0> -> replicate): an all-gather over an outer mesh axis while an inner one still shards the dim would reorder the shards; gather the inner axis too}}
  %y = nn.silu %x {dist.operand_placements = [#dist.placement<@mesh, [replicate, shard<0>]>], dist.result_placements = [#dist.placement<@mesh, [replicate, replicate]>]} : (tensor<8x16xf32>) -> tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

// -----

dist.mesh @mesh shape = [2] axes = ["tp"]

// Tests that an op without placements is refused: plan-placement must run first.
func.func @unplaced(%x: tensor<8x16xf32> {dist.placement = #dist.placement<@mesh, [replicate]>})
    -> (tensor<8x16xf32> {dist.placement = #dist.placement<@mesh, [replicate]>}) {
  // expected-error @+1 {{'nn.silu' op needs dist.operand_placements and dist.result_placements with one #dist.placement per operand and result; run --plan-placement before --plan-insert-collectives}}
  %y = nn.silu %x : (tensor<8x16xf32>) -> tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

// -----

dist.mesh @mesh shape = [2] axes = ["tp"]

// Tests that an argument without a placement is refused.
// expected-error @+1 {{'func.func' op has no #dist.placement for argument 0; run --plan-placement before --plan-insert-collectives}}
func.func @unplaced_arg(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  return %x : tensor<8x16xf32>
}
