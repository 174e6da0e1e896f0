// Pipeline schedules as each stage's order of work, and what that order
// costs: the one description of GPipe, 1F1B and interleaved 1F1B that the
// stage programs and the cost model both read (docs/planner_stages.md).
#ifndef LOOM_PLANNER_TRANSFORMS_STAGES_SCHEDULE_ORDER_H_
#define LOOM_PLANNER_TRANSFORMS_STAGES_SCHEDULE_ORDER_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace loom::planner::stages {

enum class PipelineSchedule {
  kGpipe,          // every forward, then every backward
  k1F1B,           // warm-up forwards, then one forward, one backward
  kInterleaved1F1B,  // 1F1B over several model chunks per stage
};
// "gpipe", "1f1b", "interleaved-1f1b".
const char* scheduleName(PipelineSchedule schedule);
absl::StatusOr<PipelineSchedule> parseSchedule(std::string_view name);

// One piece of a stage's work: the forward or backward of one micro-batch
// through one model chunk (plan-stages' dist.stage; it runs on stage
// chunk mod stages).
struct PipelineAction {
  enum class Kind { kForward, kBackward };
  Kind kind = Kind::kForward;
  int64_t micro_batch = 0;
  int64_t chunk = 0;
  bool operator==(const PipelineAction&) const = default;
};

struct PipelineShape {
  int64_t stages = 1;
  int64_t virtual_stages = 1;  // model chunks per stage; > 1 only interleaved
  int64_t micro_batches = 1;
};

// Each stage's actions in the order it runs them. GPipe and 1F1B take one
// chunk per stage; interleaved 1F1B takes micro-batches in groups of
// `stages` (a multiple of it, as Megatron-LM requires), running each
// group through a stage's chunks in turn. InvalidArgument, naming the
// shape, for anything else.
absl::StatusOr<std::vector<std::vector<PipelineAction>>> scheduleOrder(PipelineSchedule schedule,
                                                                       const PipelineShape& shape);

// The cost of an order: every action starts when its stage is free and
// its input is there (the previous chunk's forward, or the next chunk's
// backward, plus `transfer_s` when that chunk is on another stage; the
// last chunk's backward follows its own forward).
struct PipelineTiming {
  double step_s = 0;
  // Per stage: time spent computing, and the rest of the step (waiting).
  std::vector<double> busy_s;
  std::vector<double> bubble_s;
  // Per stage: the most micro-batch chunks whose forward ran and whose
  // backward has not (each holds that chunk's saved activations).
  std::vector<int64_t> peak_in_flight;
};

// `forward_s[c]` and `backward_s[c]`: one micro-batch through chunk c.
// InvalidArgument for an order that does not run every chunk's forward and
// backward of every micro-batch once, on the chunk's stage; FailedPrecondition,
// naming a stuck stage, for one that deadlocks.
absl::StatusOr<PipelineTiming> simulateOrder(const std::vector<std::vector<PipelineAction>>& order,
                                             const PipelineShape& shape,
                                             const std::vector<double>& forward_s,
                                             const std::vector<double>& backward_s,
                                             double transfer_s);

}  // namespace loom::planner::stages

#endif  // LOOM_PLANNER_TRANSFORMS_STAGES_SCHEDULE_ORDER_H_
