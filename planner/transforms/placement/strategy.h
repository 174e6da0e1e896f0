// The parallelism strategy of each mesh axis and of single parameters, as
// plan-placement takes them from its options or from the input IR: parsing
// and validation, without MLIR.
#ifndef LOOM_PLANNER_TRANSFORMS_PLACEMENT_STRATEGY_H_
#define LOOM_PLANNER_TRANSFORMS_PLACEMENT_STRATEGY_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace loom::planner::placement {

// What one mesh axis is used for. HSDP is one `fsdp` axis (shard within)
// plus one `dp` axis (replicate across), so it needs no name of its own.
enum class AxisStrategy {
  kDp,    // the batch is split; parameters are replicated, grads all-reduced
  kFsdp,  // the batch is split; parameters, grads (and optimizer states) are
          // sharded (ZeRO-3) and gathered for compute
  kTp,    // Megatron tensor parallelism (column/row pairs, heads, vocab)
  kPp,    // pipeline stages: every tensor is whole along it; plan-stages and
          // plan-split-stages give each coordinate its own chunks of layers
};

// "dp", "fsdp", "tp" or "pp".
std::string_view axisStrategyName(AxisStrategy strategy);

// Whether the axis splits the batch (dp and fsdp do).
bool splitsBatch(AxisStrategy strategy);

// Parses "fsdp,tp": one strategy per mesh axis, in mesh order, whitespace
// allowed around names. `axis_names` are the mesh's axes, for the messages.
// Fails with InvalidArgument for an empty spec, an unknown name, a count
// other than the number of axes, or more than one tp or pp axis.
absl::StatusOr<std::vector<AxisStrategy>> parseAxisStrategies(
    std::string_view spec, const std::vector<std::string>& axis_names);

// Per-parameter override of the mesh-wide strategies (the argument attribute
// `dist.strategy`).
enum class ParamStrategy {
  kDefault,    // as the mesh axes say
  kDp,         // replicated on fsdp axes (grads all-reduced), tp as usual
  kReplicate,  // replicated on every axis: not split by fsdp nor by tp
};

// Parses "dp" or "replicate" (the values `dist.strategy` may take).
absl::StatusOr<ParamStrategy> parseParamStrategy(std::string_view name);

}  // namespace loom::planner::placement

#endif  // LOOM_PLANNER_TRANSFORMS_PLACEMENT_STRATEGY_H_
