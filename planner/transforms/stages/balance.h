// Balanced contiguous partition of layer costs into pipeline chunks: the
// arithmetic of plan-stages, apart from the IR so it is tested alone.
#ifndef LOOM_PLANNER_TRANSFORMS_STAGES_BALANCE_H_
#define LOOM_PLANNER_TRANSFORMS_STAGES_BALANCE_H_

#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/statusor.h"

namespace loom::planner::stages {

// Splits `costs` (one per layer, in order) into `parts` runs of consecutive
// layers, each at least one, so that the largest run's cost is the least
// it can be, where the first run also carries `first_extra` and the last
// `last_extra` (what comes before and after the layers). Returns each
// run's layer count. Among splits with the same largest run the most even
// wins (the least sum of squared run costs), and among those the one whose
// runs end earliest, run by run: the same costs always give the same
// split. Costs are integers (FLOPs), so the result is exact.
absl::StatusOr<std::vector<int64_t>> balancedRuns(std::span<const int64_t> costs, int64_t parts,
                                                  int64_t first_extra, int64_t last_extra);

// The cost of each run of `counts` over `costs`, the extras included.
std::vector<int64_t> runCosts(std::span<const int64_t> costs, std::span<const int64_t> counts,
                              int64_t first_extra, int64_t last_extra);

}  // namespace loom::planner::stages

#endif  // LOOM_PLANNER_TRANSFORMS_STAGES_BALANCE_H_
