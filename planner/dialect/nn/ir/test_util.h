// Helpers for tests of nn IR: a context with the dialects nn IR uses, and a
// parser that fails the test on invalid input.
#ifndef LOOM_PLANNER_DIALECT_NN_IR_TEST_UTIL_H_
#define LOOM_PLANNER_DIALECT_NN_IR_TEST_UTIL_H_

#include "llvm/ADT/StringRef.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"

namespace loom::planner::nn {

// Loads the func and nn dialects into `context`.
void loadNnDialects(mlir::MLIRContext& context);

// Parses and verifies `source`; adds a test failure (the diagnostics go to
// stderr) and returns null when it is invalid.
mlir::OwningOpRef<mlir::ModuleOp> parseNnModule(mlir::MLIRContext& context, llvm::StringRef source);

// The first op of type OpT in `module`, or null.
template <typename OpT>
OpT firstOp(mlir::ModuleOp module) {
  OpT found;
  module.walk([&](OpT op) {
    if (!found) found = op;
  });
  return found;
}

}  // namespace loom::planner::nn

#endif  // LOOM_PLANNER_DIALECT_NN_IR_TEST_UTIL_H_
