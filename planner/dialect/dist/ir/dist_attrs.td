// Attributes of the `dist` dialect: the placement of a tensor on a mesh.
#ifndef LOOM_PLANNER_DIALECT_DIST_IR_DIST_ATTRS_TD_
#define LOOM_PLANNER_DIALECT_DIST_IR_DIST_ATTRS_TD_

include "mlir/IR/AttrTypeBase.td"
include "planner/dialect/dist/ir/dist_base.td"

def Dist_PlacementAttr : AttrDef<Dist_Dialect, "Placement"> {
  let mnemonic = "placement";
  let summary = "how a tensor is laid out on a mesh, one entry per mesh axis";
  let description = [{
    The mesh symbol, then one entry per mesh axis, in mesh order (the model
    of PyTorch's DTensor placements):

    * `replicate`: every rank along the axis holds the same values;
    * `shard<D>`: tensor dim `D` is split evenly along the axis;
    * `shard<D, padded>`: dim `D` does not divide by the ranks that shard it,
      so it is zero-padded at its end up to the next multiple and then split
      evenly (every rank holds `ceil(size / ranks)` rows);
    * `partial<sum|avg|max|min>`: every rank holds a partial value; the full
      value is the reduction over the axis.

    Several axes may shard the same dim; they then split it in mesh-axis
    order (the first listed mesh axis is the outermost), and their entries
    must agree on `padded`.

    ```mlir
    #dist.placement<@mesh, [shard<0>, replicate]>
    #dist.placement<@mesh, [shard<0, padded>, partial<sum>]>
    ```
  }];
  let parameters = (ins
    "::mlir::FlatSymbolRefAttr":$mesh,
    ArrayRefParameter<"::loom::planner::dist::AxisPlacement",
                      "one placement per mesh axis">:$axes
  );
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
}

#endif  // LOOM_PLANNER_DIALECT_DIST_IR_DIST_ATTRS_TD_
