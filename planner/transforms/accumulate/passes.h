// The accumulation stage's pass: plan-accumulate makes the per-rank program
// one micro-step of an optimizer step that accumulates gradients over
// several (passes.td, docs/planner_accumulate.md).
#ifndef LOOM_PLANNER_TRANSFORMS_ACCUMULATE_PASSES_H_
#define LOOM_PLANNER_TRANSFORMS_ACCUMULATE_PASSES_H_

#include <cstdint>
#include <memory>

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "planner/transforms/accumulate/micro_steps.h"

namespace loom::planner::accumulate {

#define GEN_PASS_DECL
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#include "planner/transforms/accumulate/passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "planner/transforms/accumulate/passes.h.inc"
#pragma GCC diagnostic pop

}  // namespace loom::planner::accumulate

#endif  // LOOM_PLANNER_TRANSFORMS_ACCUMULATE_PASSES_H_
