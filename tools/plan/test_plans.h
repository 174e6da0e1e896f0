// For the tests of the mesh search's pieces, which compare what they make
// with what the whole pipeline makes: a model planned through the pipeline,
// and the cost model of a plan's mesh.
#ifndef LOOM_TOOLS_PLAN_TEST_PLANS_H_
#define LOOM_TOOLS_PLAN_TEST_PLANS_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "plan/plan.h"
#include "planner/cost/cost_model.h"
#include "tools/plan/plan_pipeline.h"

namespace loom::tools::plan {

// Loads `model` (as --model names it) at `batch` sequences of `dtype`
// parameters and plans it with `request` (its mesh, axes and knobs).
absl::StatusOr<loom::plan::Plan> planThroughPipeline(const std::string& model, int64_t batch,
                                                     const std::string& dtype,
                                                     const PlanRequest& request);

// The datasheet cost model of `plan`'s mesh on H100 hosts of 8.
absl::StatusOr<planner::cost::CostModel> costModelOf(const loom::plan::Plan& plan);

}  // namespace loom::tools::plan

#endif  // LOOM_TOOLS_PLAN_TEST_PLANS_H_
