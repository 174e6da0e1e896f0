// The memory stage's passes: plan-memory-plan records buffer lifetimes and
// the peak bytes per rank, and refuses a plan over the device memory.
#ifndef LOOM_PLANNER_TRANSFORMS_MEMORY_PASSES_H_
#define LOOM_PLANNER_TRANSFORMS_MEMORY_PASSES_H_

#include <memory>

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace loom::planner::memory {

// The function attributes plan-memory-plan writes.
inline constexpr char kPeakBytesAttrName[] = "plan.peak_bytes";
inline constexpr char kMemoryAttrName[] = "plan.memory";
// With host buffers (offload): the host peak and its breakdown.
inline constexpr char kHostPeakBytesAttrName[] = "plan.host_peak_bytes";
inline constexpr char kHostMemoryAttrName[] = "plan.host_memory";

#define GEN_PASS_DECL
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#include "planner/transforms/memory/passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "planner/transforms/memory/passes.h.inc"
#pragma GCC diagnostic pop

}  // namespace loom::planner::memory

#endif  // LOOM_PLANNER_TRANSFORMS_MEMORY_PASSES_H_
