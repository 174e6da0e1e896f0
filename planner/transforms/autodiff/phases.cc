// The passes of a training step (see phases.h).
#include "planner/transforms/autodiff/phases.h"

#include <cstdint>

#include "mlir/IR/BuiltinAttributes.h"
#include "planner/transforms/autodiff/passes.h"

namespace loom::planner::autodiff {

llvm::DenseSet<mlir::Operation*> backwardOps(mlir::func::FuncOp func) {
  llvm::DenseSet<mlir::Operation*> backward;
  auto seed = func->getAttrOfType<mlir::IntegerAttr>(kLossGradArgAttrName);
  mlir::Value cotangent;
  if (seed && seed.getInt() >= 0 && seed.getInt() < static_cast<int64_t>(func.getNumArguments())) {
    cotangent = func.getArgument(seed.getInt());
  }
  for (mlir::Operation& op : func.front().without_terminator()) {
    if (op.hasAttr(kRecomputeAttrName) || op.hasAttr(kBackwardRootAttrName)) {
      backward.insert(&op);
      continue;
    }
    for (mlir::Value operand : op.getOperands()) {
      mlir::Operation* producer = operand.getDefiningOp();
      if ((cotangent && operand == cotangent) || (producer && backward.contains(producer))) {
        backward.insert(&op);
        break;
      }
    }
  }
  return backward;
}

mlir::Operation* firstBackwardOp(mlir::func::FuncOp func) {
  const llvm::DenseSet<mlir::Operation*> backward = backwardOps(func);
  for (mlir::Operation& op : func.front().without_terminator()) {
    if (backward.contains(&op)) return &op;
  }
  return nullptr;
}

}  // namespace loom::planner::autodiff
