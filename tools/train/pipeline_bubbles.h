// Each pipeline stage's measured bubble (the time its ranks sat idle waiting
// for other stages, StepResult::bubble_seconds) beside the planner's
// predicted one (plan.json predicted.bubble_s): gathered over the job at
// the end of a run, printed by rank 0 and drawn in the training report
// (docs/runtime.md, "Pipeline bubbles").
#ifndef LOOM_TOOLS_TRAIN_PIPELINE_BUBBLES_H_
#define LOOM_TOOLS_TRAIN_PIPELINE_BUBBLES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "comm/process_group.h"
#include "nlohmann/json.hpp"
#include "plan/plan.h"

namespace loom::train {

// The median of a run's per-step figures over the steps after the first
// (which pays for cold caches and allocations); the only step's figure
// when there is one, 0 when there is none.
double medianAfterFirst(const std::vector<double>& per_step);

// One rank's run: its stage and the medians of its bubble and its step.
struct RankBubble {
  int64_t rank = 0;
  int64_t stage = 0;
  double bubble_s = 0;
  double step_s = 0;
};

// Per stage, the mean over its ranks of their medians, beside the plan's
// prediction:
//   {"predicted_bubble_s", "predicted_step_s",
//    "stages": [{"stage", "ranks": [...], "bubble_s", "step_s"}, ...]}
nlohmann::json bubbleReport(const std::vector<RankBubble>& ranks, const plan::Predicted& predicted);

// The report as the table rank 0 prints.
std::string bubbleTable(const nlohmann::json& report);

// Gathers every rank's stage and medians of `bubble_s` and `step_s` (its
// per-step figures) over `world`, a collective; rank 0 gets the report,
// the other ranks an empty object.
absl::StatusOr<nlohmann::json> gatherBubbles(comm::ProcessGroup& world, int64_t stage,
                                             const std::vector<double>& bubble_s,
                                             const std::vector<double>& step_s,
                                             const plan::Predicted& predicted);

}  // namespace loom::train

#endif  // LOOM_TOOLS_TRAIN_PIPELINE_BUBBLES_H_
