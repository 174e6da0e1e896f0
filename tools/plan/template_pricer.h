// The mesh search's candidates priced from the pipeline's own programs
// (docs/planner_cost.md, "Search on the pipeline's programs"). For each tp
// degree and set of data axes, the pipeline's placement stage places a
// template model on a small mesh; for each knob setting (prefetch,
// reshard, buckets) its program stage plans a copy of that. A zoo or
// config.json model's template has cost::kTemplateBlocks repeated blocks,
// data axes of 2 and one sequence per rank, and cost::repeatBlocks repeats
// its plan to the model's depth once; a graph file's template is the whole
// graph at its own batch. Each candidate then re-sizes the template to its
// data axes, micro-batch and micro-steps (cost::resizePlan) and prices the repeated
// program with those sizes (cost::RepeatedProgram, cost::priceProgram): the
// figures are those of the candidate's full plan, by construction.
#ifndef LOOM_TOOLS_PLAN_TEMPLATE_PRICER_H_
#define LOOM_TOOLS_PLAN_TEMPLATE_PRICER_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <tuple>

#include "absl/status/statusor.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"
#include "plan/plan.h"
#include "planner/cost/cost_model.h"
#include "planner/cost/repeat_blocks.h"
#include "planner/cost/search.h"
#include "planner/models/model_config.h"
#include "tools/plan/plan_pipeline.h"

namespace loom::tools::plan {

// What the templates are built from.
struct TemplateSource {
  // As --model names it: a zoo name, a tiny spec, a config.json or a .mlir
  // graph.
  std::string model;
  // A zoo or config.json model's configuration; none for a graph file,
  // whose IR fixes the shapes.
  std::optional<planner::models::TransformerConfig> config;
  int64_t seq = 0;
  planner::cost::Dtype dtype = planner::cost::Dtype::kBF16;
  // A graph file's batch: the global batch, one micro-step per step.
  int64_t graph_batch = 0;
};

class TemplatePricer final : public planner::cost::StepPricer {
 public:
  // `base` gives the device and the AdamW settings of the plans; `cost`
  // prices (its topology is the search's).
  TemplatePricer(TemplateSource source, PlanRequest base, const planner::cost::CostModel& cost)
      : source_(std::move(source)), base_(std::move(base)), cost_(cost) {
    // One template at a time; a thread pool would only add hand-offs.
    context_.disableMultithreading();
  }

  // A configuration's tp must divide its heads and kv heads; a graph's is
  // allowed when the placement pass places the graph on a tp axis of
  // that size.
  bool tpAllowed(int64_t tp) override;
  std::string tpRule() const override;
  // The resident parameters and optimizer states of the candidate's plan
  // and the activations live at the end of the forward phase.
  int64_t memoryLowerBound(const planner::cost::Strategy& strategy) override;
  absl::StatusOr<planner::cost::StepEstimate> estimate(
      const planner::cost::Strategy& strategy) override;

  // Placement-stage runs (one per template mesh) and program-stage runs
  // (template plans) so far.
  int64_t placements() const { return static_cast<int64_t>(placed_.size()); }
  int64_t templates() const { return static_cast<int64_t>(templates_.size()); }

 private:
  struct Template {
    loom::plan::Plan shorter;
    // The model's program by reference to the template's (the template
    // itself for a plan priced whole).
    planner::cost::Repeated repeated;
    int64_t micro_batch = 1;
  };
  // (dp, fsdp, micro-batch, micro-steps).
  using Sizes = std::tuple<int64_t, int64_t, int64_t, int64_t>;
  // The template's mesh and micro-batch, and sequence parallelism (a
  // placement choice): (tp, dp, fsdp, micro-batch, sp).
  using MeshKey = std::tuple<int64_t, int64_t, int64_t, int64_t, bool>;
  // And the knobs: (prefetch, reshard, bucket-mb, recompute), and between
  // micro-steps (keep-gathered, defer-grad-sync). Every template has two
  // micro-steps, which stand for any number, set when re-sizing.
  using Key = std::tuple<MeshKey, int64_t, bool, int64_t, planner::cost::Recompute, bool, bool>;
  MeshKey meshKeyOf(const planner::cost::Strategy& strategy) const;
  // The template's plan request: its mesh and the candidate's knobs.
  PlanRequest requestFor(const MeshKey& mesh, const planner::cost::Strategy& strategy) const;
  absl::StatusOr<mlir::OwningOpRef<mlir::ModuleOp>> loadTemplate(int64_t batch);
  // The template model placed on the template's mesh, which every knob
  // setting starts from.
  absl::StatusOr<mlir::ModuleOp> placedFor(const planner::cost::Strategy& strategy);
  absl::StatusOr<Template*> templateFor(const planner::cost::Strategy& strategy);
  // The model's program for `strategy`: the template re-sized to it,
  // repeated to the model's depth.
  absl::StatusOr<planner::cost::RepeatedProgram> programFor(
      const planner::cost::Strategy& strategy);

  TemplateSource source_;
  PlanRequest base_;
  const planner::cost::CostModel& cost_;
  mlir::MLIRContext context_;
  std::map<int64_t, bool> graph_tp_allowed_;
  std::map<MeshKey, mlir::OwningOpRef<mlir::ModuleOp>> placed_;
  std::map<Key, Template> templates_;
  // One template's header and buffers re-sized to the candidate last
  // priced (pricing reads the instructions from the template itself): one
  // copy for the search, not one per template.
  const Template* sized_template_ = nullptr;
  Sizes sized_for_{0, 0, 0, 0};
  loom::plan::Plan resized_;
};

}  // namespace loom::tools::plan

#endif  // LOOM_TOOLS_PLAN_TEMPLATE_PRICER_H_
