// The placement stage's passes: plan-placement assigns a #dist.placement to
// every parameter, activation and gradient of nn graphs.
#ifndef LOOM_PLANNER_TRANSFORMS_PLACEMENT_PASSES_H_
#define LOOM_PLANNER_TRANSFORMS_PLACEMENT_PASSES_H_

#include <cstdint>
#include <memory>
#include <string>

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "planner/dialect/dist/ir/dist_dialect.h"

namespace loom::planner::placement {

// The attributes plan-placement reads and writes (docs/planner_placement.md).
// On the dist.mesh: the strategy of each axis, an array of strings.
inline constexpr char kStrategiesAttrName[] = "dist.strategies";
// On an argument (storage or input placement) and a function result (the
// placement it must be returned in).
inline constexpr char kPlacementAttrName[] = "dist.placement";
// On a parameter argument: "dp" or "replicate", overriding the axes.
inline constexpr char kParamStrategyAttrName[] = "dist.strategy";
// On every nn op: one #dist.placement per operand (what the op computes on)
// and per result (what it produces).
inline constexpr char kOperandPlacementsAttrName[] = "dist.operand_placements";
inline constexpr char kResultPlacementsAttrName[] = "dist.result_placements";
// The symbol of the mesh the pass declares.
inline constexpr char kMeshSymbolName[] = "mesh";

#define GEN_PASS_DECL
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#include "planner/transforms/placement/passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "planner/transforms/placement/passes.h.inc"
#pragma GCC diagnostic pop

}  // namespace loom::planner::placement

#endif  // LOOM_PLANNER_TRANSFORMS_PLACEMENT_PASSES_H_
