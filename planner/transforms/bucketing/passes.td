// Passes of the bucketing stage: packing the per-parameter FSDP collectives
// of one unit into one flat buffer each way.
#ifndef LOOM_PLANNER_TRANSFORMS_BUCKETING_PASSES_TD_
#define LOOM_PLANNER_TRANSFORMS_BUCKETING_PASSES_TD_

include "mlir/Pass/PassBase.td"

def PlanBucketing : Pass<"plan-bucketing", "::mlir::ModuleOp"> {
  let summary = "packs the parameter all-gathers and gradient "
                "reduce-scatters of each FSDP unit into one flat bucket";
  let description = [{
    Input: the output of `plan-insert-collectives` (blocking collectives,
    per-parameter `dist.free`s, `nn.name` on parameters and `nn.grad_of`
    on gradient results).

    A parameter's unit is its `nn.name` up to and including the first
    all-digit component (`layers.3.attention.wq.weight` -> `layers.3`,
    `transformer.h.3.mlp.c_fc.weight` -> `transformer.h.3`); every other
    parameter (embedding, final norm, head) is in the unit `root`.

    Parameter gathers (operand an `nn.param` argument, any `gather_dim`,
    padded or not) of one unit, one pass (forward or backward: whether the
    gathered copy's users depend on `nn.loss_grad_arg`), and the same
    mesh, axes and wire type become, at the first of them:

    ```mlir
    %b = dist.bucket %wq, %wk offsets = [0, 64] : ... -> tensor<96xf32>
    %g = dist.all_gather %b on @mesh axes = ["fsdp"] gather_dim = 0
        wire = f32 : tensor<96xf32> -> tensor<384xf32>
    dist.free %b : tensor<96xf32>
    %wq_full, %wk_full = dist.unbucket %g offsets = [0, 64] chunks = 4 ...
    ```

    The unbucketed parameters are views of `%g`: their frees become one
    `dist.free %g` where the last of them was. A parameter gathered along
    dim 1 (fsdp x tp's row-parallel weights) shares the bucket: the
    unbucket's `split_dims` gives each entry's gather dim (omitted when all
    are 0). Gradient reduce-scatters (any `scatter_dim`, `split_dims` the
    same way, padded or not, the result returned as a gradient, directly
    or through one `dist.all_reduce` as under HSDP) of one unit
    with the same mesh, axes, reduction and dtypes (wire, accumulation,
    and the gradients' and shards' element types, which differ under
    `grad-reduce-dtype`) become, where the last
    of them was: `dist.bucket` of the whole gradients with `chunks` = the
    group size, one `dist.reduce_scatter` (and one `dist.all_reduce`) of
    the flat buffer, and `dist.unbucket` into the local shards. A group of
    one collective is left as it is. A padded parameter's shard (its
    `ceil(n / g)` rows) divides by construction; the bucket layout is then
    marked `padded`, so the unbucket of gathered shards drops the padding
    rows and the gradient bucket pads each whole gradient into
    `ceil(n / g)`-row parts. Bytes on the wire are unchanged (the buckets
    have no gaps). Under sequence parallelism a norm's weight gradient is
    reduce-scattered on fsdp and its shard all-reduced on tp: it joins
    its unit's bucket like any gradient, and the shards that need that
    second all-reduce are re-packed after the unbucket into one
    `dist.bucket`, all-reduced together and unbucketed again (a single
    shard is all-reduced directly). See docs/planner_schedule.md.
  }];
  let options = [
    Option<"bucketMb", "bucket-mb", "int64_t", /*default=*/"0",
           "largest bucket in MiB of the gathered (whole) buffer; a unit "
           "above it is split into consecutive buckets in program order "
           "(a single parameter above it gets a bucket of its own); 0: one "
           "bucket per unit and pass">,
  ];
  let dependentDialects = ["::loom::planner::dist::DistDialect"];
}

#endif  // LOOM_PLANNER_TRANSFORMS_BUCKETING_PASSES_TD_
