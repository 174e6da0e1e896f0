// RUN: plan-opt %s -split-input-file -verify-diagnostics --plan-insert-collectives

dist.mesh @mesh shape = [2] axes = ["tp"]

// Tests that a replicated value wanted sharded (a local slice) is refused: dist has
// no slice op.
func.func @slice(%x: tensor<8x16xf32> {dist.placement = #dist.placement<@mesh, [replicate]>})
    -> (tensor<8x16xf32> {dist.placement = #dist.placement<@mesh, [shard<1>]>}) {
  // expected-error @+1 {{'nn.silu' op cannot convert [replicate] to [shard<1>] on mesh axis "tp" (replicate -> shard<1>): this needs a local slice, which dist has no op for; produce the value sharded (or let the user take it replicated)}}
  %y = nn.silu %x {dist.operand_placements = [#dist.placement<@mesh, [shard<1>]>], dist.result_placements = [#dist.placement<@mesh, [shard<1>]>]} : (tensor<8x16xf32>) -> tensor<8x16xf32>
  return %y : tensor<8x16xf32>
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
