// A one-op dialect whose only job is to prove that mlir-tblgen runs under
// Bazel and that its generated C++ compiles against MLIR 22.
#ifndef LOOM_TESTS_DEPS_MLIR_WIRING_DIALECT_TD_
#define LOOM_TESTS_DEPS_MLIR_WIRING_DIALECT_TD_

include "mlir/IR/OpBase.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def Wiring_Dialect : Dialect {
  let name = "wiring";
  let summary = "Dialect used only by the MLIR/tblgen wiring test";
  let cppNamespace = "::loom::wiring";
}

def Wiring_ScaleOp : Op<Wiring_Dialect, "scale", [Pure, SameOperandsAndResultType]> {
  let summary = "multiplies a float tensor by a positive constant factor";
  let description = [{
    Example:

    ```mlir
    %y = wiring.scale %x by 2.0 : tensor<4xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input, F64Attr:$factor);
  let results = (outs AnyRankedTensor:$output);
  let assemblyFormat = "$input `by` $factor attr-dict `:` type($output)";
  let hasVerifier = 1;
}

#endif  // LOOM_TESTS_DEPS_MLIR_WIRING_DIALECT_TD_
