// The pipeline axis of a module's mesh (see pipeline_axis.h).
#include "planner/transforms/stages/pipeline_axis.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "planner/dialect/dist/ir/dist_ops.h"
#include "planner/transforms/placement/passes.h"

namespace loom::planner::stages {

std::optional<PipelineAxis> findPipelineAxis(mlir::ModuleOp module) {
  for (auto mesh : module.getOps<dist::MeshOp>()) {
    auto strategies = mesh->getAttrOfType<mlir::ArrayAttr>(placement::kStrategiesAttrName);
    if (!strategies) return std::nullopt;
    for (auto [i, strategy] : llvm::enumerate(strategies.getAsValueRange<mlir::StringAttr>())) {
      if (strategy != "pp" || i >= mesh.getAxes().size()) continue;
      return PipelineAxis{llvm::cast<mlir::StringAttr>(mesh.getAxes()[i]).getValue().str(),
                          mesh.getShape()[i], mesh.getSymName().str()};
    }
    return std::nullopt;
  }
  return std::nullopt;
}

}  // namespace loom::planner::stages
