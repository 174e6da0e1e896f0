// Passes of the collective-insertion stage: turning a placed nn graph into
// the per-rank (SPMD) program with the dist collectives its placements need.
#ifndef LOOM_PLANNER_TRANSFORMS_COLLECTIVES_PASSES_TD_
#define LOOM_PLANNER_TRANSFORMS_COLLECTIVES_PASSES_TD_

include "mlir/Pass/PassBase.td"

def PlanInsertCollectives : Pass<"plan-insert-collectives", "::mlir::ModuleOp"> {
  let summary = "inserts the minimal dist collectives between what each value "
                "is and what each user wants, and localizes every type";
  let description = [{
    Input: the output of `plan-placement`: every argument and function
    result carries `dist.placement`, every nn op `dist.operand_placements`
    and `dist.result_placements`, all on one `dist.mesh`.

    Output: the same functions as SPMD programs with local (per-rank)
    types. Every argument and op result has the local shape of its given
    placement (`computeLocalShape`, padded shards rounded up); every
    argument records the global shape it had in `dist.global_shape`
    (`array<i64: ...>`), which the exporter reports. For every
    use whose wanted placement differs from the given one, the pass inserts
    one conversion per (value, wanted placement), in mesh-axis order within
    each kind: `dist.reduce_scatter` (partial -> shard), `dist.all_reduce`
    (partial -> replicate), `dist.all_to_all` (shard<d> -> shard<e>), then
    `dist.all_gather` (shard -> replicate). A conversion for an op is placed
    right before its first user; one for a returned value (a gradient, the
    loss) right after its producer. A parameter's conversion is done again
    before its first backward use (the ops that depend on the loss
    cotangent `nn.loss_grad_arg`) unless `reshard-after-forward=false`
    or its unit is listed in `keep-units` (a unit that no parameter
    belongs to is refused), and its converted buffer gets a `dist.free` after its last use in each
    segment. A mesh axis of one rank takes no part in a conversion: along
    it a tensor is whole and complete whatever its placement says (a shard
    of one, a partial sum of one), so a use that differs from its value only
    on such axes takes the value itself, and the 1-rank plan of any strategy
    (`fsdp=1`) has no collectives. Placement attributes stay: on arguments and results (the
    buffers the exporter sizes) and on nn ops (what each op computes on).

    ```mlir
    // placed, fsdp=2:
    func.func @f(%x: tensor<8x16xf32> {dist.placement = #dist.placement<@mesh, [shard<0>]>},
                 %w: tensor<16x32xf32> {nn.param, dist.placement = #dist.placement<@mesh, [shard<0>]>})
      %y = nn.linear %x, %w {dist.operand_placements = [
          #dist.placement<@mesh, [shard<0>]>, #dist.placement<@mesh, [replicate]>], ...}
    // --plan-insert-collectives gives
    func.func @f(%x: tensor<4x16xf32> {dist.global_shape = array<i64: 8, 16>, ...},
                 %w: tensor<8x32xf32> {dist.global_shape = array<i64: 16, 32>, ...})
      %0 = dist.all_gather %w on @mesh axes = ["fsdp"] gather_dim = 0 wire = f32
          : tensor<8x32xf32> -> tensor<16x32xf32>
      %y = nn.linear %x, %0 {...} : (tensor<4x16xf32>, tensor<16x32xf32>) -> tensor<4x32xf32>
      dist.free %0 : tensor<16x32xf32>
    ```

    Replicate -> shard becomes a `dist.slice` (local, no communication).
    Refused with a diagnostic at the user: anything -> partial (dist has no
    op for it), a change of reduction kind, gathers, scatters and slices
    that would reorder the shards of a dim split by several axes, all-to-all
    on padded dims, and dtype options that give an invalid wire or
    accumulation type.

    `grad-reduce-dtype=T` changes only the reductions of the values the
    function returns with `nn.grad_of`: they travel as T, accumulate in the
    wider of T and `reduce-dtype`, and yield T, so f32 on bf16 gradients
    gives f32 gradient shards (and the function's result types follow).
    See docs/planner_collectives.md.
  }];
  let options = [
    Option<"reshardAfterForward", "reshard-after-forward", "bool",
           /*default=*/"true",
           "gather parameters again for the backward pass and free the "
           "forward copy after its last forward use; false: keep the "
           "forward copy for the backward pass">,
    ListOption<"keepUnits", "keep-units", "std::string",
               "units (as plan-bucketing names them: layers.3, root) whose "
               "parameters are not resharded after forward: their forward "
               "copy is kept for the backward pass">,
    Option<"wireDtype", "wire-dtype", "std::string", /*default=*/"\"\"",
           "wire type of float reductions (bf16, f16, f32, f64); empty: "
           "the tensor's element type">,
    Option<"reduceDtype", "reduce-dtype", "std::string", /*default=*/"\"f32\"",
           "accumulation type of float reductions (bf16, f16, f32, f64)">,
    Option<"gradReduceDtype", "grad-reduce-dtype", "std::string",
           /*default=*/"\"\"",
           "wire and result type of the reductions of parameter gradients "
           "(bf16, f16, f32), accumulated in the wider of it and "
           "reduce-dtype (FSDP2's reduce_dtype); empty: the rules of the "
           "other reductions">,
  ];
  let dependentDialects = ["::loom::planner::dist::DistDialect"];
}

#endif  // LOOM_PLANNER_TRANSFORMS_COLLECTIVES_PASSES_TD_
