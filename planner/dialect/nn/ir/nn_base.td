// The `nn` dialect (the model graph): the dialect, the base class of its ops
// and the type constraints they share.
#ifndef LOOM_PLANNER_DIALECT_NN_IR_NN_BASE_TD_
#define LOOM_PLANNER_DIALECT_NN_IR_NN_BASE_TD_

include "mlir/IR/OpBase.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "planner/dialect/nn/ir/nn_interfaces.td"

def Nn_Dialect : Dialect {
  let name = "nn";
  let summary = "coarse neural-network ops with exact math: the model graph";
  let description = [{
    A model is a `func.func` of `nn` ops on statically shaped tensors. Function
    arguments are inputs (token ids, labels) or parameters, marked with the
    argument attribute `nn.param` and optionally named with `nn.name`.
    A parameter's initial values are `nn.init` (`{kind = "normal", mean =
    0.0, std = 0.02}`, or kind "zeros" or "ones").
    Every op declares its shape inference, cost, sharding rule and (for the
    forward ops) its vector-Jacobian product; see docs/planner_nn.md.
  }];
  let cppNamespace = "::loom::planner::nn";
  let hasRegionArgAttrVerify = 1;
  let extraClassDeclaration = [{
    // Argument attribute that marks a function argument as a parameter.
    static constexpr ::llvm::StringLiteral kParamAttrName = "nn.param";
    // Argument attribute naming a parameter, e.g. "layers.0.attn.wq".
    static constexpr ::llvm::StringLiteral kNameAttrName = "nn.name";
    // Argument attribute giving the values a parameter (or another float
    // argument the runtime allocates, such as an optimizer state) starts
    // from: {kind = "normal" | "zeros" | "ones", mean = f64, std = f64}.
    static constexpr ::llvm::StringLiteral kInitAttrName = "nn.init";
  }];
}

// Tensors with static, non-zero sizes: the planner works on known sizes and
// no model has an empty dim.
def Nn_NonZeroDimsPred : CPred<[{::llvm::all_of(
    ::llvm::cast<::mlir::ShapedType>($_self).getShape(),
    [](int64_t size) { return size > 0; })}]>;
class Nn_TensorOf<list<Type> allowedTypes>
    : RankedTensorOf<allowedTypes, [HasStaticShapePred, Nn_NonZeroDimsPred],
                     "statically shaped tensor with non-zero dims">;

// Float activations and parameters.
def Nn_FloatTensor : Nn_TensorOf<[F32, BF16, F16]>;
// Token ids and labels.
def Nn_IntTensor : Nn_TensorOf<[I32, I64]>;
// The scalar loss and its cotangent.
def Nn_ScalarF32Tensor : 0DTensorOf<[F32]>;

// Checks, before the upstream InferTypeOpInterface verifier runs, that the
// operands are valid and the declared result types equal the inferred ones,
// with diagnostics that say how to fix the IR.
def Nn_VerifyInferredTypes : NativeOpTrait<"VerifyInferredTypes"> {
  let cppNamespace = "::loom::planner::nn::OpTrait";
}

// Every nn op is pure and reports its cost and sharding rule. Ops whose
// bytes moved are not "read every operand, write every result" list
// "getBytesMoved" in `costOverrides`.
class Nn_Op<string mnemonic, list<Trait> traits = [],
            list<string> costOverrides = []>
    : Op<Nn_Dialect, mnemonic, !listconcat([
        Pure,
        DeclareOpInterfaceMethods<Nn_CostOpInterface, costOverrides>,
        DeclareOpInterfaceMethods<Nn_ShardingRuleOpInterface>], traits)>;

// An op whose result types follow from its operands and attributes.
class Nn_InferredOp<string mnemonic, list<Trait> traits = [],
                    list<string> costOverrides = []>
    : Nn_Op<mnemonic, !listconcat([Nn_VerifyInferredTypes, InferTypeOpAdaptor],
                                  traits), costOverrides> {
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
}

// A forward op that also builds its vector-Jacobian product.
class Nn_DifferentiableOp<string mnemonic, list<Trait> traits = [],
                          list<string> costOverrides = []>
    : Nn_InferredOp<mnemonic, !listconcat([
        DeclareOpInterfaceMethods<Nn_VjpOpInterface>], traits), costOverrides>;

#endif  // LOOM_PLANNER_DIALECT_NN_IR_NN_BASE_TD_
