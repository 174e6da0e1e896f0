// The bucketing stage's passes: plan-bucketing packs each FSDP unit's
// parameter gathers and gradient reduce-scatters into flat buffers.
#ifndef LOOM_PLANNER_TRANSFORMS_BUCKETING_PASSES_H_
#define LOOM_PLANNER_TRANSFORMS_BUCKETING_PASSES_H_

#include <cstdint>
#include <memory>
#include <string>

#include "llvm/ADT/StringRef.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "planner/dialect/dist/ir/dist_dialect.h"

namespace loom::planner::bucketing {

// The FSDP unit of a parameter named `name`: the name up to and including
// its first all-digit component, else "root".
std::string unitOf(llvm::StringRef name);

#define GEN_PASS_DECL
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#include "planner/transforms/bucketing/passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "planner/transforms/bucketing/passes.h.inc"
#pragma GCC diagnostic pop

}  // namespace loom::planner::bucketing

#endif  // LOOM_PLANNER_TRANSFORMS_BUCKETING_PASSES_H_
