// The bubble of a pipeline plan: each stage's block runs in its schedule's
// order, each taking the compute time its stage's pricing gave its
// instructions, simulated by stages::simulateOrder (the one description of
// the schedules the stage programs were made from).
#ifndef LOOM_PLANNER_COST_PIPELINE_PRICE_H_
#define LOOM_PLANNER_COST_PIPELINE_PRICE_H_

#include <cstdint>
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
};

// `stages[k]` prices plan.programs[k] (priceStages). Each block's time is
// its compute instructions' priced durations for one micro-batch; a
// transfer between stages takes the longest priced point-to-point op.
// InvalidArgument for a plan whose schedules are not a pipeline order
// (a block name that names no chunk, a chunk on the wrong stage).
absl::StatusOr<PipelinePrice> pricePipeline(const plan::Plan& plan,
                                            const std::vector<PlanPrice>& stages);

}  // namespace loom::planner::cost

#endif  // LOOM_PLANNER_COST_PIPELINE_PRICE_H_
