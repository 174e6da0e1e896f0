// A pipeline plan's price beyond its stages' own: the bubble (each stage's
// block runs in its schedule's order, each taking the compute time its
// stage's pricing gave its instructions, simulated by stages::simulateOrder,
// the one description of the schedules the stage programs were made from)
// and each stage's memory with every micro-batch it holds in flight.
#ifndef LOOM_PLANNER_COST_PIPELINE_PRICE_H_
#define LOOM_PLANNER_COST_PIPELINE_PRICE_H_

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "plan/plan.h"
#include "planner/cost/plan_price.h"

namespace loom::planner::cost {

struct PipelinePrice {
  // The model blocks' makespan over all stages (no optimizer).
  double pipeline_s = 0;
  // Per stage: its time waiting for its peers within that makespan.
  std::vector<double> bubble_s;
  // Per stage: the most micro-batch chunks whose forward ran and whose
  // backward has not.
  std::vector<int64_t> peak_in_flight;
  // Per stage: the highest live bytes over its schedule, where (the block
  // run and the instruction order in it) and by role.
  struct StageMemory {
    int64_t peak_bytes = 0;
    std::string block;
    int64_t micro_batch = -1;
    int64_t order = -1;
    std::array<int64_t, plan::kNumRoles> breakdown{};
  };
  std::vector<StageMemory> memory;
};

// A stage's memory over its `schedule`: each block run holds what the
// block's one-micro-batch peak holds (`blocks`) plus what every other
// micro-batch holds between two of its block runs that enclose this one
// (StageBlocks::held). InvalidArgument for a schedule entry that names a
// block the price does not have.
absl::StatusOr<PipelinePrice::StageMemory> scheduleMemory(
    const std::vector<plan::ScheduleEntry>& schedule, const StageBlocks& blocks,
    int64_t micro_batches);

// One stage as the pipeline's price reads it: its program's blocks, with
// their times and memory (PlanPrice::blocks), and the order its schedule
// runs them. Block "forward" of stage s (one chunk per stage) runs chunk
// s, "forward.c" chunk c.
struct StageRuns {
  int64_t stage = 0;
  const StageBlocks* blocks = nullptr;
  const std::vector<plan::ScheduleEntry>* schedule = nullptr;
};

// The pipeline whose stages run `stages` (one per stage, in stage order)
// for `micro_batches`: each block takes its compute time for one
// micro-batch, a transfer between stages the longest point-to-point op,
// and stages::simulateOrder does the rest. InvalidArgument for schedules
// that are not a pipeline order (a block that names no chunk, a chunk on
// the wrong stage, a chunk without a forward or backward).
absl::StatusOr<PipelinePrice> priceSchedules(const std::vector<StageRuns>& stages,
                                             int64_t micro_batches);

// `prices[k]` prices plan.programs[k] (priceStages): priceSchedules over the
// plan's programs, each error prefixed with the plan's source.
absl::StatusOr<PipelinePrice> pricePipeline(const plan::Plan& plan,
                                            const std::vector<PlanPrice>& prices);

}  // namespace loom::planner::cost

#endif  // LOOM_PLANNER_COST_PIPELINE_PRICE_H_
