// The offload stage's pass: plan-offload moves the optimizer states of a
// per-rank training step to host memory, with the copies that feed and
// follow their AdamW steps there (passes.td, docs/planner_offload.md).
#ifndef LOOM_PLANNER_TRANSFORMS_OFFLOAD_PASSES_H_
#define LOOM_PLANNER_TRANSFORMS_OFFLOAD_PASSES_H_

#include <memory>
#include <string>

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "planner/dialect/dist/ir/dist_dialect.h"

namespace loom::planner::offload {

#define GEN_PASS_DECL
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#include "planner/transforms/offload/passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "planner/transforms/offload/passes.h.inc"
#pragma GCC diagnostic pop

}  // namespace loom::planner::offload

#endif  // LOOM_PLANNER_TRANSFORMS_OFFLOAD_PASSES_H_
