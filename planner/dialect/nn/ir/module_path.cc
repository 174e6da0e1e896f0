// Module paths of op locations (see module_path.h).
#include "planner/dialect/nn/ir/module_path.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Location.h"

namespace loom::planner::nn {

std::string modulePathOf(mlir::Location loc) {
  if (auto name = llvm::dyn_cast<mlir::NameLoc>(loc)) return name.getName().str();
  if (auto fused = llvm::dyn_cast<mlir::FusedLoc>(loc)) {
    for (mlir::Location inner : fused.getLocations()) {
      if (std::string path = modulePathOf(inner); !path.empty()) return path;
    }
  }
  if (auto site = llvm::dyn_cast<mlir::CallSiteLoc>(loc)) return modulePathOf(site.getCallee());
  return "";
}

}  // namespace loom::planner::nn
