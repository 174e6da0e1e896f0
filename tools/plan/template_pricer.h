// The mesh search's candidates priced from the pipeline's own programs
// (docs/planner_cost.md, "Search on the pipeline's programs"): for each tp
// degree, set of data axes and knob setting, the pipeline plans the model
// with cost::kTemplateBlocks repeated blocks at data axes of 2 and one
// sequence per rank, and cost::repeatBlocks repeats it to the model's depth
// once; each candidate then re-sizes the template (cost::resizePlan), copies
// the sizes in (cost::copySizes) and prices the result (cost::pricePlan).
// The figures are those of the candidate's full plan, by construction.
#ifndef LOOM_TOOLS_PLAN_TEMPLATE_PRICER_H_
#define LOOM_TOOLS_PLAN_TEMPLATE_PRICER_H_

#include <cstdint>
#include <map>
#include <string>
#include <tuple>

#include "absl/status/statusor.h"
#include "plan/plan.h"
#include "planner/cost/cost_model.h"
#include "planner/cost/repeat_blocks.h"
#include "planner/cost/search.h"
#include "planner/models/model_config.h"
#include "tools/plan/plan_pipeline.h"

namespace loom::tools::plan {

class TemplatePricer final : public planner::cost::StepPricer {
 public:
  // `model` as --model names it (a zoo name, a tiny spec or a config.json),
  // its configuration, the sequence length and parameter type; `base`
  // gives the device and the AdamW settings of the plans; `cost` prices
  // (its topology is the search's).
  TemplatePricer(std::string model, planner::models::TransformerConfig config, int64_t seq,
                 std::string dtype, PlanRequest base, const planner::cost::CostModel& cost)
      : model_(std::move(model)),
        config_(std::move(config)),
        seq_(seq),
        dtype_(std::move(dtype)),
        base_(std::move(base)),
        cost_(cost) {}

  bool tpAllowed(int64_t tp) const override;
  // The resident parameters and optimizer states of the candidate's plan
  // and the activations live at the end of the forward phase.
  int64_t memoryLowerBound(const planner::cost::Strategy& strategy) override;
  absl::StatusOr<planner::cost::StepEstimate> estimate(
      const planner::cost::Strategy& strategy) override;

  // Pipeline runs so far (templates built).
  int64_t templates() const { return static_cast<int64_t>(templates_.size()); }

 private:
  struct Template {
    loom::plan::Plan shorter;
    planner::cost::Repeated repeated;
    // The template's data axes run at 2 and one sequence per rank; a
    // single-device template is planned at the candidate's micro-batch.
    int64_t micro_batch = 1;
  };
  using Key = std::tuple<int64_t, bool, bool, int64_t, bool, int64_t, int64_t>;
  absl::StatusOr<Template*> templateFor(const planner::cost::Strategy& strategy);
  // The template re-sized to `strategy`, as its full repeated plan.
  absl::StatusOr<const loom::plan::Plan*> planFor(const planner::cost::Strategy& strategy);

  std::string model_;
  planner::models::TransformerConfig config_;
  int64_t seq_;
  std::string dtype_;
  PlanRequest base_;
  const planner::cost::CostModel& cost_;
  std::map<Key, Template> templates_;
};

}  // namespace loom::tools::plan

#endif  // LOOM_TOOLS_PLAN_TEMPLATE_PRICER_H_
