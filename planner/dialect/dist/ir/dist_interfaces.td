// Op interfaces of the `dist` dialect: how an op's result is laid out over
// the mesh, given how its operand is.
#ifndef LOOM_PLANNER_DIALECT_DIST_IR_DIST_INTERFACES_TD_
#define LOOM_PLANNER_DIALECT_DIST_IR_DIST_INTERFACES_TD_

include "mlir/IR/OpBase.td"

def Dist_PlacementTransferOpInterface
    : OpInterface<"PlacementTransferOpInterface"> {
  let description = [{
    The placement of a result (one entry per mesh axis) from the placement
    of the op's first operand: what the op does to the layout along the
    axes it works on. A gather or all-reduce leaves its axes replicated, a
    reduce-scatter or slice shards them along its dim (padded when the op
    is), an all-to-all shards them along its split dim, a bucket flattens
    every shard to dim 0 of the flat buffer. Ops that keep the layout
    (`dist.wait`, `dist.unbucket`) use the default, which returns the
    operand's placement. The exporter describes every buffer by it
    (docs/plan_json.md).
  }];
  let cppNamespace = "::loom::planner::dist";
  let methods = [
    InterfaceMethod<
      [{The placement of result `result` when operand 0 has `operand` (one
        entry per axis of `meshAxes`, the axes of the op's dist.mesh in
        order).}],
      "::llvm::SmallVector<::loom::planner::dist::AxisPlacement>",
      "getResultPlacement",
      (ins "unsigned":$result,
           "::llvm::ArrayRef<::loom::planner::dist::AxisPlacement>":$operand,
           "::mlir::ArrayAttr":$meshAxes),
      [{}],
      [{ return {operand.begin(), operand.end()}; }]>,
  ];
}

#endif  // LOOM_PLANNER_DIALECT_DIST_IR_DIST_INTERFACES_TD_
