// Op interfaces of the `nn` dialect: cost, sharding rule and vector-Jacobian
// product. Shape inference uses the upstream InferTypeOpInterface.
#ifndef LOOM_PLANNER_DIALECT_NN_IR_NN_INTERFACES_TD_
#define LOOM_PLANNER_DIALECT_NN_IR_NN_INTERFACES_TD_

include "mlir/IR/OpBase.td"

def Nn_CostOpInterface : OpInterface<"CostOpInterface"> {
  let description = [{
    The work one execution of the op does on the shapes it carries: the
    floating-point operations and the bytes it reads and writes. The counting
    conventions are in docs/planner_nn.md.
  }];
  let cppNamespace = "::loom::planner::nn";
  let methods = [
    InterfaceMethod<
      "floating-point operations of one execution (2 per multiply-add)",
      "int64_t", "getFlops">,
    InterfaceMethod<
      "bytes read from and written to memory by one execution",
      "int64_t", "getBytesMoved", (ins), [{}],
      [{ return ::loom::planner::nn::operandAndResultBytes($_op.getOperation()); }]>,
  ];
}

def Nn_ShardingRuleOpInterface : OpInterface<"ShardingRuleOpInterface"> {
  let description = [{
    The op's sharding rule: einsum-like factors (name, kind, size) and, for
    every dimension of every operand and result, the factors it is made of.
    The placements a sharded factor implies for each operand and result are
    derived from it (OpShardingRule::placementsFor).
  }];
  let cppNamespace = "::loom::planner::nn";
  let methods = [
    InterfaceMethod<"the op's sharding rule",
      "::loom::planner::nn::OpShardingRule", "getShardingRule">,
  ];
}

def Nn_VjpOpInterface : OpInterface<"VjpOpInterface"> {
  let description = [{
    Vector-Jacobian product: given one cotangent per result, builds `nn` ops
    at the builder's insertion point that compute one cotangent per operand.
  }];
  let cppNamespace = "::loom::planner::nn";
  let methods = [
    InterfaceMethod<[{
        Emits the backward ops and returns one cotangent per operand, in
        operand order; the entry is null for an operand that is not
        differentiable (token ids, labels). Fails, with a diagnostic on the
        op, when a cotangent is missing or does not have its result's type.
      }],
      "::mlir::FailureOr<::llvm::SmallVector<::mlir::Value>>", "buildVjp",
      (ins "::mlir::OpBuilder &":$builder,
           "::mlir::ValueRange":$resultCotangents)>,
  ];
}

#endif  // LOOM_PLANNER_DIALECT_NN_IR_NN_INTERFACES_TD_
