// Passes of the recompute stage: repeating a layer's forward ops in the
// backward pass instead of keeping their results (activation checkpointing).
#ifndef LOOM_PLANNER_TRANSFORMS_RECOMPUTE_PASSES_TD_
#define LOOM_PLANNER_TRANSFORMS_RECOMPUTE_PASSES_TD_

include "mlir/Pass/PassBase.td"

def PlanRecompute : Pass<"plan-recompute", "::mlir::ModuleOp"> {
  let summary = "recomputes each repeated layer's activations in the "
                "backward pass instead of keeping them from the forward";
  let description = [{
    Input: a training step from `plan-autodiff`, placed or not
    (`plan-placement`), before `plan-insert-collectives`: the clones are
    ordinary nn ops with their placements, so collective insertion gives
    them the gathers and tensor-parallel collectives of the backward pass.

    The layers are the blocks of the function's repeated stack, read from
    the ops' locations (module paths such as `layers.3.attention.wq` or
    `transformer.h.3.mlp.c_fc`; the stack with the most ops). A layer's
    boundary values (read from outside it, or read outside it) are kept:
    the layer's input is its checkpoint. Of the values the backward pass
    reads from inside a chosen layer:

    * `mode=full`: every one is recomputed from the layer's checkpoint and
      the parameters;
    * `mode=selective`: the results of `nn.linear`, `nn.matmul` and
      `nn.attention` (the FLOPs) are kept; the others (norms, rope,
      activations, elementwise ops) are recomputed from them;
    * `mode=none`: nothing changes.

    The forward ops that make them are cloned, in forward order, just before
    the first backward op that reads any of them; the backward ops read the
    clones, so the forward results die at their last forward use. Each clone
    keeps its op's attributes and location and gains the unit attribute
    `nn.recompute`, which puts it in the backward pass for every later
    pass (`autodiff::backwardOps`). `every=k` recomputes layers 0, k, 2k,
    ... only.

    `layers` gives each layer its own mode instead: runs of `mode:count`
    in layer order, e.g. `layers=full:4,selective:10` recomputes layers
    0-3 in full and 4-13 selectively; the layers after the runs take
    `mode` (none by default). It cannot go with `every`.

    A function without repeated layers, or one that already has dist
    collectives, is refused with the reason.
  }];
  let options = [
    Option<"mode", "mode", "std::string", /*default=*/"\"none\"",
           "none, full or selective">,
    Option<"every", "every", "int64_t", /*default=*/"1",
           "recompute every k-th layer (layer index divisible by k)">,
    Option<"layers", "layers", "std::string", /*default=*/"\"\"",
           "per-layer modes as mode:count runs in layer order, e.g. "
           "full:4,selective:10; the later layers take `mode`">,
  ];
}

#endif  // LOOM_PLANNER_TRANSFORMS_RECOMPUTE_PASSES_TD_
