// The pipeline axis of a placed module's mesh: the one axis whose
// dist.strategies entry is "pp" (placement allows at most one).
#ifndef LOOM_PLANNER_TRANSFORMS_STAGES_PIPELINE_AXIS_H_
#define LOOM_PLANNER_TRANSFORMS_STAGES_PIPELINE_AXIS_H_

#include <cstdint>
#include <optional>
#include <string>

#include "mlir/IR/BuiltinOps.h"

namespace loom::planner::stages {

struct PipelineAxis {
  std::string name;
  int64_t size = 0;
  std::string mesh;  // the dist.mesh's symbol
};

// nullopt when the module has no dist.mesh, or its mesh has no pp axis.
std::optional<PipelineAxis> findPipelineAxis(mlir::ModuleOp module);

}  // namespace loom::planner::stages

#endif  // LOOM_PLANNER_TRANSFORMS_STAGES_PIPELINE_AXIS_H_
