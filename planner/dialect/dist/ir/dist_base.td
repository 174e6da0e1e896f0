// The `dist` dialect, its enums and the base class of its ops: the vocabulary
// in which the planner writes a distribution plan (mesh, placements,
// collectives, buffer lifetimes, buckets, optimizer steps).
#ifndef LOOM_PLANNER_DIALECT_DIST_IR_DIST_BASE_TD_
#define LOOM_PLANNER_DIALECT_DIST_IR_DIST_BASE_TD_

include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"
include "mlir/IR/OpBase.td"

def Dist_Dialect : Dialect {
  let name = "dist";
  let summary = "distribution plans: mesh, placements, collectives, buffers";
  let description = [{
    A plan is SPMD: every rank runs the same program on its local shards.
    Tensor types in `dist` ops are per-rank (local) types; `dist.annotate`
    ties a local value to its global shape and its placement on a
    `dist.mesh`. Collectives move data along named mesh axes, in a blocking
    form or as a `*_start` / `dist.wait` pair. `dist.free`, `dist.bucket`,
    `dist.unbucket` and `dist.optimizer_step` describe buffer lifetimes,
    flat communication buffers and the AdamW update on local shards;
    `dist.copy_to_host_start` and `dist.copy_into_device_start` move
    tensors between device and host memory (`dist.memory = "host"` on an
    argument: offloaded optimizer states).
    See docs/planner_dist.md.
  }];
  let cppNamespace = "::loom::planner::dist";
  let useDefaultAttributePrinterParser = 1;
  let useDefaultTypePrinterParser = 1;
  // Attributes are registered where their storage classes are defined.
  let extraClassDeclaration = [{
    void registerAttributes();
  }];
  // `dist.memory` on a function argument says where it lives.
  let hasRegionArgAttrVerify = 1;
}

def Dist_ReductionKind : I32EnumAttr<"ReductionKind",
    "how a collective or a partial placement combines values across ranks", [
  I32EnumAttrCase<"Sum", 0, "sum">,
  I32EnumAttrCase<"Avg", 1, "avg">,
  I32EnumAttrCase<"Max", 2, "max">,
  I32EnumAttrCase<"Min", 3, "min">,
]> {
  let cppNamespace = "::loom::planner::dist";
}

class Dist_Op<string mnemonic, list<Trait> traits = []>
    : Op<Dist_Dialect, mnemonic, traits>;

#endif  // LOOM_PLANNER_DIALECT_DIST_IR_DIST_BASE_TD_
