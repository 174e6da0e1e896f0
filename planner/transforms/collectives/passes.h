// The collective-insertion stage's passes: plan-insert-collectives turns a
// placed nn graph into the per-rank program with its dist collectives.
#ifndef LOOM_PLANNER_TRANSFORMS_COLLECTIVES_PASSES_H_
#define LOOM_PLANNER_TRANSFORMS_COLLECTIVES_PASSES_H_

#include <memory>
#include <string>

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "planner/dialect/dist/ir/dist_dialect.h"

namespace loom::planner::collectives {

// The argument attribute plan-insert-collectives records the global shape
// of every argument in (a dense i64 array) before it localizes the type.
inline constexpr char kGlobalShapeAttrName[] = "dist.global_shape";

#define GEN_PASS_DECL
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#include "planner/transforms/collectives/passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "planner/transforms/collectives/passes.h.inc"
#pragma GCC diagnostic pop

}  // namespace loom::planner::collectives

#endif  // LOOM_PLANNER_TRANSFORMS_COLLECTIVES_PASSES_H_
