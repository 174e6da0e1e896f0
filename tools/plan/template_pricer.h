// The mesh search's candidates priced from the pipeline's own programs
// (docs/planner_cost.md, "Search on the pipeline's programs"). For each tp
// degree and set of data axes, the pipeline's placement stage places a
// template model on a small mesh; for each knob setting (prefetch,
// reshard, buckets) its program stage plans a copy of that. A zoo or
// config.json model's template has cost::kTemplateBlocks repeated blocks
// (kOffloadTemplateBlocks with the optimizer offloaded),
// data axes of 2 and one sequence per rank, and cost::repeatBlocks repeats
// its plan to the model's depth once; a graph file's template is the whole
// graph at its own batch. Each candidate then re-sizes the template to its
// data axes, micro-batch and micro-steps (cost::resizePlan) and prices the repeated
// program with those sizes (cost::RepeatedProgram, cost::priceProgram): the
// figures are those of the candidate's full plan, by construction.
//
// A candidate with pipeline stages is priced from a template cut into
// three chunks (the model's first, a middle and its last) of up to
// kTemplateBlocks layers on a pp axis of 3: each chunk of the candidate is
// the template's chunk of its kind repeated to its layer count, the stages
// are composed of their chunks and the pipeline priced over the schedule
// (cost::priceChunks; template_pricer_pipeline.cc). The chunks' layers are
// the balance plan-stages would strike, from the template's FLOPs, and the
// winner's plan is cut by them.
#ifndef LOOM_TOOLS_PLAN_TEMPLATE_PRICER_H_
#define LOOM_TOOLS_PLAN_TEMPLATE_PRICER_H_

#include <cstdint>
#include <array>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"
#include "plan/plan.h"
#include "planner/cost/cost_model.h"
#include "planner/cost/layer_compute.h"
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
  // A configuration's layers (a tied embedding and head get a replica on
  // each end stage); a graph file is not cut.
  int64_t pipelineLayers() const override;
  // The compute of the candidate's chunks alone, run in its schedule
  // (cost::pipelineStepBound), from the model's program without stages.
  double pipelineBound(const planner::cost::Strategy& strategy) override;
  // The resident parameters and optimizer states of the candidate's plan
  // in device memory and the activations live at the end of the forward
  // phase.
  int64_t memoryLowerBound(const planner::cost::Strategy& strategy) override;
  // Without stages, cost::stackMemoryBound from the layer table that
  // pipelines are bounded by (one template per tp, sequence parallelism,
  // recompute and micro-batch, shared by every mesh); 0 for pipelines
  // (their memoryLowerBound is as cheap) and for graphs without a stack.
  int64_t quickMemoryBound(const planner::cost::Strategy& strategy) override;
  absl::StatusOr<planner::cost::StepEstimate> estimate(
      const planner::cost::Strategy& strategy) override;

  // Placement-stage runs (one per template mesh) and program-stage runs
  // (template plans) so far.
  int64_t placements() const {
    return static_cast<int64_t>(placed_.size() + placed_staged_.size());
  }
  int64_t templates() const { return static_cast<int64_t>(templates_.size() + staged_.size()); }

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
  // And the knobs: (prefetch, reshard, bucket-mb, recompute), between
  // micro-steps (keep-gathered, defer-grad-sync), optimizer offload, and
  // the template's micro-steps (templateMicroSteps).
  using Key = std::tuple<MeshKey, int64_t, bool, int64_t, planner::cost::Recompute, bool, bool,
                         bool, int64_t>;
  // Two micro-steps stand for any number, set when re-sizing, except for an
  // offloaded step of one: its gradients go to the host as the backward
  // makes them, where with more micro-steps they go after the last one.
  static int64_t templateMicroSteps(const planner::cost::Strategy& strategy) {
    return strategy.offload_optimizer && strategy.accumulation == 1 ? 1 : 2;
  }
  MeshKey meshKeyOf(const planner::cost::Strategy& strategy) const;
  // The template's plan request: its mesh and the candidate's knobs.
  PlanRequest requestFor(const MeshKey& mesh, const planner::cost::Strategy& strategy) const;
  // The template model: `layers` of a configuration's, a graph whole.
  absl::StatusOr<mlir::OwningOpRef<mlir::ModuleOp>> loadTemplate(int64_t batch, int64_t layers);
  // The layers of `strategy`'s template: cost::kTemplateBlocks, or
  // cost::kOffloadTemplateBlocks for an offloaded step (repeat_blocks.h).
  int64_t templateLayers(const planner::cost::Strategy& strategy) const;
  // The template model placed on the template's mesh, which every knob
  // setting starts from.
  absl::StatusOr<mlir::ModuleOp> placedFor(const planner::cost::Strategy& strategy);
  absl::StatusOr<Template*> templateFor(const planner::cost::Strategy& strategy);
  // The model's program for `strategy`: the template re-sized to it,
  // repeated to the model's depth.
  absl::StatusOr<planner::cost::RepeatedProgram> programFor(
      const planner::cost::Strategy& strategy);

  // Pipeline candidates (template_pricer_pipeline.cc).
  struct StagedTemplate {
    // Three chunks of `layers` layers on a pp axis of 3, and each chunk
    // alone (cost::stagePlan): the first, a middle and the last.
    loom::plan::Plan plan;
    std::array<loom::plan::Plan, 3> kinds;
    int64_t layers = 0;
    int64_t micro_batch = 1;
    // (kind, layers) -> the kind's chunk repeated to that many layers.
    std::map<std::pair<int, int64_t>, planner::cost::Repeated> repeated;
    // The header and buffers re-sized to the candidate last priced:
    // (pp, dp, fsdp, micro-batch, micro-steps).
    loom::plan::Plan resized;
    std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t> sized_for{0, 0, 0, 0, 0};
  };
  using StagedKey = std::tuple<Key, int64_t>;
  absl::StatusOr<StagedTemplate*> stagedTemplateFor(const planner::cost::Strategy& strategy,
                                                    int64_t layers);
  absl::Status sizeFor(StagedTemplate& t, const planner::cost::Strategy& strategy);
  // The model's compute layer by layer at the candidate's tp and
  // micro-batch without an fsdp axis, from its program without stages;
  // untimed, its FLOPs and bytes alone (no pricing: what the memory bound
  // and the balance need).
  absl::StatusOr<const planner::cost::LayerCompute*> layerComputeFor(
      const planner::cost::Strategy& strategy, bool timed);
  // The cost model of `devices` devices of the search's kind, hosts and
  // links: for programs smaller than the search's mesh.
  absl::StatusOr<const planner::cost::CostModel*> modelOf(int64_t devices);
  // memoryLowerBound for a pipeline candidate (cost::pipelineMemoryBound),
  // from the model's program without stages and without pricing: the
  // search asks it of every pipeline group, and it prunes most of them.
  int64_t pipelineMemoryBound(const planner::cost::Strategy& strategy);
  // The candidate's layer table (layerComputeFor) and its chunks'
  // layers (chunkLayers): what its pipeline bounds read.
  struct ChunkedLayers {
    const planner::cost::LayerCompute* compute = nullptr;
    std::vector<int64_t> counts;
  };
  absl::StatusOr<ChunkedLayers> chunkedLayers(const planner::cost::Strategy& strategy,
                                              bool timed);
  // The layers of each of the candidate's chunks, balanced as plan-stages
  // balances them.
  absl::StatusOr<std::vector<int64_t>> chunkLayers(const planner::cost::Strategy& strategy);
  absl::StatusOr<planner::cost::StepEstimate> estimateStaged(
      const planner::cost::Strategy& strategy);

  TemplateSource source_;
  PlanRequest base_;
  const planner::cost::CostModel& cost_;
  mlir::MLIRContext context_;
  std::map<int64_t, bool> graph_tp_allowed_;
  // (template mesh, layers) -> the placed template.
  std::map<std::pair<MeshKey, int64_t>, mlir::OwningOpRef<mlir::ModuleOp>> placed_;
  std::map<Key, Template> templates_;
  std::map<std::pair<MeshKey, int64_t>, mlir::OwningOpRef<mlir::ModuleOp>> placed_staged_;
  std::map<StagedKey, StagedTemplate> staged_;
  // (tp, sequence parallelism, recompute, micro-batch, timed) -> the
  // model's compute and state layer by layer there, without an fsdp axis.
  std::map<std::tuple<int64_t, bool, planner::cost::Recompute, int64_t, bool>,
           planner::cost::LayerCompute>
      layer_compute_;
  // (tp, sequence parallelism, recompute, chunks) -> layers per chunk.
  std::map<std::tuple<int64_t, bool, planner::cost::Recompute, int64_t>, std::vector<int64_t>>
      chunk_layers_;
  std::map<int64_t, planner::cost::CostModel> sub_models_;
  // The last pipeline candidate estimated: the search asks for a group's
  // memory bound, then its base's estimate.
  std::optional<std::pair<planner::cost::Strategy, planner::cost::StepEstimate>> last_staged_;
  // One template's header and buffers re-sized to the candidate last
  // priced (pricing reads the instructions from the template itself): one
  // copy for the search, not one per template.
  const Template* sized_template_ = nullptr;
  Sizes sized_for_{0, 0, 0, 0};
  loom::plan::Plan resized_;
};

}  // namespace loom::tools::plan

#endif  // LOOM_TOOLS_PLAN_TEMPLATE_PRICER_H_
