// Types of the `dist` dialect: the handle of an in-flight collective.
#ifndef LOOM_PLANNER_DIALECT_DIST_IR_DIST_TYPES_TD_
#define LOOM_PLANNER_DIALECT_DIST_IR_DIST_TYPES_TD_

include "mlir/IR/AttrTypeBase.td"
include "planner/dialect/dist/ir/dist_base.td"

def Dist_FutureType : TypeDef<Dist_Dialect, "Future"> {
  let mnemonic = "future";
  let summary = "the result of an asynchronous collective, not yet available";
  let description = [{
    Returned by a `dist.*_start` collective and consumed by exactly one
    `dist.wait`, which yields the tensor it carries.

    ```mlir
    !dist.future<tensor<8x16xbf16>>
    ```
  }];
  let parameters = (ins "::mlir::RankedTensorType":$value_type);
  let assemblyFormat = "`<` $value_type `>`";
  let genVerifyDecl = 1;
}

#endif  // LOOM_PLANNER_DIALECT_DIST_IR_DIST_TYPES_TD_
