// Passes of the placement stage: where every parameter, activation and
// gradient lives on the device mesh.
#ifndef LOOM_PLANNER_TRANSFORMS_PLACEMENT_PASSES_TD_
#define LOOM_PLANNER_TRANSFORMS_PLACEMENT_PASSES_TD_

include "mlir/Pass/PassBase.td"

def PlanPlacement : Pass<"plan-placement", "::mlir::ModuleOp"> {
  let summary = "assigns a #dist.placement to every parameter, activation "
                "and gradient from a strategy per mesh axis";
  let description = [{
    Input: a module of `func.func`s of nn ops (forward graphs, or training
    steps from `plan-autodiff` whose gradient results carry
    `nn.grad_of = <argument index>`). The mesh comes from `mesh=` or from a
    `dist.mesh` already in the module; the strategy of each mesh axis
    (`fsdp`, `dp`, `tp`; HSDP is one fsdp plus one dp axis) from `axes=` or
    from that mesh's `dist.strategies` attribute. A parameter may carry
    `dist.strategy = "dp"` (not sharded by fsdp) or `"replicate"` (not
    sharded on any axis).

    Output: the module declares the mesh (with `dist.strategies`), and
    * every argument gets `dist.placement`: a parameter its storage
      placement (fsdp: shard<dim>, padded when uneven; tp: the Megatron
      rule), an input its batch split;
    * every nn op gets `dist.operand_placements` (what the op computes on)
      and `dist.result_placements` (what it produces, partial where it
      contracts a sharded factor);
    * every function result gets `dist.placement`, the layout it must be
      returned in: a gradient its parameter's storage placement, the loss
      replicated.
    A mismatch between what a producer (or an argument) gives and what a
    user wants is what collective insertion, the next stage, turns into a collective.

    ```mlir
    func.func @f(%x: tensor<8x16xf32>,
                 %w: tensor<16x32xf32> {nn.param}) -> tensor<8x32xf32>
    // --plan-placement="mesh=fsdp=2,tp=4 axes=fsdp,tp" gives
    dist.mesh @mesh shape = [2, 4] axes = ["fsdp", "tp"]
        {dist.strategies = ["fsdp", "tp"]}
    func.func @f(%x: tensor<8x16xf32>
                     {dist.placement = #dist.placement<@mesh, [shard<0>, replicate]>},
                 %w: tensor<16x32xf32> {nn.param,
                     dist.placement = #dist.placement<@mesh, [shard<0>, shard<1>]>})
      %y = nn.linear %x, %w {dist.operand_placements = [
               #dist.placement<@mesh, [shard<0>, replicate]>,
               #dist.placement<@mesh, [replicate, shard<1>]>],
           dist.result_placements = [
               #dist.placement<@mesh, [shard<0>, shard<1>]>]} : ...
    ```

    Rewrites under tp (then the graph is placed again): an `nn.linear`
    whose bias would be `partial<sum>` (a row-parallel linear) becomes
    `nn.linear` without the bias plus `nn.bias_add`, so the bias is added
    once after the all-reduce; with `vocab-parallel-loss` (the default) an
    `nn.cross_entropy` of vocab-sharded logits becomes `nn.vocab_max`,
    `nn.vocab_stats` and `nn.vocab_cross_entropy`, and its
    `nn.cross_entropy_grad` becomes `nn.vocab_cross_entropy_grad`
    (Megatron's vocab-parallel cross-entropy).

    Refused with a diagnostic: a bad mesh or strategy list, a batch that
    does not divide by the data axes, attention heads that do not divide by
    the tp size, an uneven tp split of a dim a reshape merges, and ops
    without a sharding rule. See docs/planner_placement.md.
  }];
  let options = [
    Option<"mesh", "mesh", "std::string", /*default=*/"\"\"",
           "mesh axes and sizes, e.g. dp=2,tp=4 (DeviceMesh syntax); "
           "empty: use the module's dist.mesh">,
    Option<"axes", "axes", "std::string", /*default=*/"\"\"",
           "one strategy per mesh axis in mesh order (fsdp, dp, tp, pp), e.g. "
           "fsdp,tp; empty: use the mesh's dist.strategies">,
    Option<"devices", "devices", "int64_t", /*default=*/"0",
           "the device count the mesh must have; 0: any">,
    Option<"vocabParallelLoss", "vocab-parallel-loss", "bool",
           /*default=*/"true",
           "under tp, lower a cross-entropy whose logits are vocab-sharded "
           "to the vocab-parallel ops (max and statistics all-reduced, no "
           "gather of the logits); false: gather the logits for "
           "nn.cross_entropy">,
    Option<"sequenceParallel", "sequence-parallel", "bool",
           /*default=*/"false",
           "under tp, shard on the sequence dim what tp would replicate "
           "(norms, residual adds, the embedding's output; Megatron's "
           "sequence parallelism): each tp all-reduce becomes a "
           "reduce-scatter and an all-gather">,
  ];
  let dependentDialects = ["::loom::planner::dist::DistDialect"];
}

#endif  // LOOM_PLANNER_TRANSFORMS_PLACEMENT_PASSES_TD_
