// The recompute stage's pass: plan-recompute repeats each chosen layer's
// forward ops in the backward pass instead of keeping their results.
#ifndef LOOM_PLANNER_TRANSFORMS_RECOMPUTE_PASSES_H_
#define LOOM_PLANNER_TRANSFORMS_RECOMPUTE_PASSES_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

#include "llvm/ADT/StringRef.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace loom::planner::recompute {

enum class Mode { kNone, kFull, kSelective };

// "none", "full", "selective"; nullopt for anything else.
std::optional<Mode> parseMode(llvm::StringRef text);
const char* modeName(Mode mode);

// One run of layers sharing a mode (plan-recompute's `layers`).
struct LayerRun {
  Mode mode = Mode::kNone;
  int64_t count = 0;
};
// Parses "full:4,selective:10"; the error says which run is wrong.
absl::StatusOr<std::vector<LayerRun>> parseLayerRuns(llvm::StringRef text);
// The runs as `layers` spells them ("" for none).
std::string layerRunsText(const std::vector<LayerRun>& runs);

#define GEN_PASS_DECL
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#include "planner/transforms/recompute/passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "planner/transforms/recompute/passes.h.inc"
#pragma GCC diagnostic pop

}  // namespace loom::planner::recompute

#endif  // LOOM_PLANNER_TRANSFORMS_RECOMPUTE_PASSES_H_
