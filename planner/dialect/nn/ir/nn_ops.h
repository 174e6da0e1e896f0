// Ops of the `nn` dialect, generated from nn_ops.td, and the trait that
// checks their inferred result types.
#ifndef LOOM_PLANNER_DIALECT_NN_IR_NN_OPS_H_
#define LOOM_PLANNER_DIALECT_NN_IR_NN_OPS_H_

// Besides what this header uses itself, the generated op classes need
// BytecodeOpInterface, OpImplementation and the interfaces their ops declare
// to be included first.
#include <cstddef>
#include <cstdint>
#include <optional>

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "plan/rope_frequency.h"
#include "planner/dialect/nn/ir/nn_dialect.h"
#include "planner/dialect/nn/ir/nn_interfaces.h"

namespace loom::planner::nn {

// How a reshape splits and merges dims: the common refinement of its two
// shapes into one list of factors (row-major, so each dim is a run of
// consecutive factors). Dims of size 1 get no factor.
struct ReshapeRefinement {
  // The smallest dim ranges of equal product that do not refine, for the
  // diagnostic: input dims [inputBegin, inputEnd), result dims likewise.
  struct Mismatch {
    size_t inputBegin, inputEnd, resultBegin, resultEnd;
    int64_t product;
  };

  llvm::SmallVector<int64_t> factorSizes;
  TensorFactors input;
  TensorFactors result;
  std::optional<Mismatch> mismatch;
};

// Refines two shapes of equal element count (e.g. [4, 6] and [2, 12] into
// factors [2, 2, 6]); sets `mismatch` when a group such as [2, 3] -> [3, 2]
// has no common refinement.
ReshapeRefinement refineReshape(llvm::ArrayRef<int64_t> input, llvm::ArrayRef<int64_t> result);

// Infers `op`'s result types (which reports invalid operands) and checks
// that they equal the declared ones.
mlir::LogicalResult verifyInferredTypes(mlir::Operation* op);

namespace OpTrait {

// Runs before the upstream InferTypeOpInterface verifier so that a mismatch
// is reported once, with a diagnostic that says how to fix it.
template <typename ConcreteType>
class VerifyInferredTypes : public mlir::OpTrait::TraitBase<ConcreteType, VerifyInferredTypes> {
 public:
  static mlir::LogicalResult verifyTrait(mlir::Operation* op) { return verifyInferredTypes(op); }
};

}  // namespace OpTrait
}  // namespace loom::planner::nn

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#define GET_OP_CLASSES
#include "planner/dialect/nn/ir/nn_ops.h.inc"
#pragma GCC diagnostic pop

#endif  // LOOM_PLANNER_DIALECT_NN_IR_NN_OPS_H_
