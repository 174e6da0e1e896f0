// The schedule stage's passes: plan-schedule makes collectives asynchronous
// with prefetch and overlap; plan-verify-spmd checks the SPMD invariants.
#ifndef LOOM_PLANNER_TRANSFORMS_SCHEDULE_PASSES_H_
#define LOOM_PLANNER_TRANSFORMS_SCHEDULE_PASSES_H_

#include <cstdint>
#include <memory>

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "planner/dialect/dist/ir/dist_dialect.h"

namespace loom::planner::schedule {

// The function attribute that records the prefetch depth k.
inline constexpr char kPrefetchAttrName[] = "plan.prefetch";

#define GEN_PASS_DECL
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#include "planner/transforms/schedule/passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "planner/transforms/schedule/passes.h.inc"
#pragma GCC diagnostic pop

}  // namespace loom::planner::schedule

#endif  // LOOM_PLANNER_TRANSFORMS_SCHEDULE_PASSES_H_
