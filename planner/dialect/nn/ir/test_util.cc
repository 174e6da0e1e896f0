// Helpers for tests of nn IR.
#include "planner/dialect/nn/ir/test_util.h"

#include "gtest/gtest.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Parser/Parser.h"
#include "planner/dialect/nn/ir/nn_dialect.h"

namespace loom::planner::nn {

void loadNnDialects(mlir::MLIRContext& context) {
  context.loadDialect<mlir::func::FuncDialect, NnDialect>();
}

mlir::OwningOpRef<mlir::ModuleOp> parseNnModule(mlir::MLIRContext& context,
                                                llvm::StringRef source) {
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceString<mlir::ModuleOp>(source, &context);
  if (!module) ADD_FAILURE() << "invalid nn IR (see stderr):\n" << source.str();
  return module;
}

}  // namespace loom::planner::nn
