// Candidates priced from template plans (see template_pricer.h).
#include "tools/plan/template_pricer.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "planner/cost/plan_price.h"
#include "planner/cost/resize_plan.h"
#include "tools/plan/model_loader.h"

namespace loom::tools::plan {
namespace cost = ::loom::planner::cost;

bool TemplatePricer::tpAllowed(int64_t tp) {
  if (source_.config) {
    return source_.config->num_heads % tp == 0 && source_.config->num_kv_heads % tp == 0;
  }
  if (tp == 1) return true;
  if (auto it = graph_tp_allowed_.find(tp); it != graph_tp_allowed_.end()) return it->second;
  absl::StatusOr<mlir::OwningOpRef<mlir::ModuleOp>> module = loadTemplate(0, 0);
  PlanRequest request = base_;
  request.mesh = absl::StrCat("tp=", tp);
  request.axes = "";
  const bool placed = module.ok() && placeModule(**module, request).ok();
  return graph_tp_allowed_[tp] = placed;
}

std::string TemplatePricer::tpRule() const {
  if (source_.config) {
    return absl::StrCat("tp must divide the ", source_.config->num_heads, " heads and the ",
                        source_.config->num_kv_heads, " kv heads");
  }
  return absl::StrCat("tp must be a degree the placement pass can split '", source_.model, "' by");
}

TemplatePricer::MeshKey TemplatePricer::meshKeyOf(const cost::Strategy& s) const {
  // A configuration's template has data axes of 2 and one sequence per
  // rank (a single device: the candidate's micro-batch, nothing to
  // re-size). A graph's fixes its batch: data axes of 2 when the batch
  // splits that way, else the candidate's own.
  const bool graph = !source_.config;
  const bool halves = !graph || source_.graph_batch % 2 == 0;
  const int64_t dp = s.dp == 1 ? 1 : halves ? 2 : s.dp;
  const int64_t fsdp = s.fsdp == 1 ? 1 : halves ? 2 : s.fsdp;
  const int64_t micro = graph                      ? source_.graph_batch / (dp * fsdp)
                        : s.dp == 1 && s.fsdp == 1 ? s.micro_batch
                                                   : 1;
  return {s.tp, dp, fsdp, micro, s.sequence_parallel};
}

PlanRequest TemplatePricer::requestFor(const MeshKey& mesh, const cost::Strategy& s) const {
  const auto& [tp, dp, fsdp, micro, sp] = mesh;
  std::vector<std::string> axes;
  if (dp > 1) axes.push_back(absl::StrCat("dp=", dp));
  if (fsdp > 1) axes.push_back(absl::StrCat("fsdp=", fsdp));
  if (tp > 1) axes.push_back(absl::StrCat("tp=", tp));
  if (axes.empty()) axes.push_back("dp=1");
  PlanRequest request = base_;
  request.mesh = absl::StrJoin(axes, ",");
  request.axes = "";
  request.prefetch = s.prefetch;
  request.reshard_after_forward = s.reshard_after_forward;
  request.bucket_mb = s.bucket_mb;
  request.recompute = cost::recomputeName(s.recompute);
  request.sequence_parallel = sp;
  // Two micro-steps stand for any number, one included (the pricer takes
  // a sum for its operand then), but for an offloaded step of one.
  request.micro_steps = templateMicroSteps(s);
  request.keep_gathered = s.keep_gathered;
  request.defer_grad_sync = s.defer_grad_sync;
  request.offload = s.offload_optimizer ? "optimizer" : "none";
  // Templates are smaller than the candidates; the search checks memory.
  request.check_memory = false;
  request.verify_passes = false;
  return request;
}

absl::StatusOr<mlir::OwningOpRef<mlir::ModuleOp>> TemplatePricer::loadTemplate(int64_t batch,
                                                                               int64_t layers) {
  if (!source_.config) return loadModel(context_, {.model = source_.model});
  return loadModel(context_, {.model = source_.model,
                              .batch = batch,
                              .seq = source_.seq,
                              .dtype = std::string(cost::dtypeName(source_.dtype)),
                              .layers = layers});
}

int64_t TemplatePricer::templateLayers(const cost::Strategy& s) const {
  if (!source_.config) return 0;
  const int64_t depth = s.offload_optimizer ? cost::kOffloadTemplateBlocks : cost::kTemplateBlocks;
  return std::min(source_.config->num_layers, depth);
}

absl::StatusOr<mlir::ModuleOp> TemplatePricer::placedFor(const cost::Strategy& s) {
  const MeshKey key = meshKeyOf(s);
  const int64_t layers = templateLayers(s);
  if (auto it = placed_.find({key, layers}); it != placed_.end()) return it->second.get();
  const auto& [tp, dp, fsdp, micro, sp] = key;
  absl::StatusOr<mlir::OwningOpRef<mlir::ModuleOp>> module =
      loadTemplate(micro * dp * fsdp, layers);
  if (!module.ok()) return module.status();
  if (absl::Status placed = placeModule(**module, requestFor(key, s)); !placed.ok()) return placed;
  return placed_.emplace(std::pair{key, layers}, *std::move(module)).first->second.get();
}

absl::StatusOr<TemplatePricer::Template*> TemplatePricer::templateFor(const cost::Strategy& s) {
  const MeshKey mesh = meshKeyOf(s);
  const Key key{mesh,        s.prefetch,      s.reshard_after_forward, s.bucket_mb,
                s.recompute, s.keep_gathered, s.defer_grad_sync, s.offload_optimizer,
                templateMicroSteps(s)};
  if (auto it = templates_.find(key); it != templates_.end()) return &it->second;
  absl::StatusOr<mlir::ModuleOp> placed = placedFor(s);
  if (!placed.ok()) return placed.status();
  mlir::OwningOpRef<mlir::ModuleOp> copy(placed->clone());
  absl::StatusOr<PlanResult> planned = planPlacedModule(*copy, requestFor(mesh, s));
  if (!planned.ok()) return planned.status();
  Template made{
      .shorter = std::move(planned->plan), .repeated = {}, .micro_batch = std::get<3>(mesh)};
  if (source_.config && source_.config->num_layers > templateLayers(s)) {
    absl::StatusOr<cost::Repeated> repeated =
        cost::repeatBlocks(made.shorter, source_.config->num_layers);
    if (!repeated.ok()) return repeated.status();
    made.repeated = *std::move(repeated);
  } else {
    // Nothing to repeat: a model no deeper than the template, or a graph,
    // priced whole.
    made.repeated = cost::wholePlan(made.shorter);
  }
  return &templates_.emplace(key, std::move(made)).first->second;
}

absl::StatusOr<cost::RepeatedProgram> TemplatePricer::programFor(const cost::Strategy& s) {
  absl::StatusOr<Template*> t = templateFor(s);
  if (!t.ok()) return t.status();
  // The search asks for a group's memory bound, then prices its base: the
  // same sizes twice in a row.
  Template& made = **t;
  const Sizes sizes{s.dp, s.fsdp, s.micro_batch, s.accumulation};
  if (sized_template_ == &made && sized_for_ == sizes) {
    return cost::RepeatedProgram(made.shorter, resized_, made.repeated);
  }
  if (sized_template_ != &made) {
    // The header and buffers only: the scratch never holds instructions.
    std::vector<loom::plan::Program> programs = std::move(made.shorter.programs);
    resized_ = made.shorter;
    made.shorter.programs = std::move(programs);
    sized_template_ = &made;
  }
  cost::Resize resize{
      .axis_sizes = {}, .template_micro_batch = (*t)->micro_batch, .micro_batch = s.micro_batch};
  if (s.dp > 1) resize.axis_sizes["dp"] = s.dp;
  if (s.fsdp > 1) resize.axis_sizes["fsdp"] = s.fsdp;
  sized_for_ = {0, 0, 0, 0};
  if (absl::Status status = cost::resizePlanInto(made.shorter, resize, resized_); !status.ok()) {
    return status;
  }
  // The template's two micro-steps stand for the candidate's.
  resized_.micro_batches = s.accumulation;
  sized_for_ = sizes;
  return cost::RepeatedProgram(made.shorter, resized_, made.repeated);
}

// What every variant of the mesh and micro-batch holds at the end of the
// forward phase: the resident parameters and optimizer states, and the
// activations live there (the saved ones; prefetch, resharding and buckets
// change only gathered copies and gradients).
int64_t TemplatePricer::memoryLowerBound(const cost::Strategy& strategy) {
  if (strategy.pp > 1) {
    return pipelineMemoryBound(strategy);
  }
  absl::StatusOr<cost::RepeatedProgram> program = programFor(strategy);
  if (!program.ok()) return 0;  // estimate() reports the error
  // The end of the forward phase: every activation the backward reads is
  // live there.
  int64_t at = -2;
  for (int64_t order = 0; order < program->size(); ++order) {
    if (program->instruction(order).phase == loom::plan::Phase::kForward) at = order;
  }
  int64_t bytes = 0;
  for (int64_t id = 0; id < program->numBuffers(); ++id) {
    const loom::plan::Buffer& b = program->buffer(id);
    // Offloaded states are host memory, capped apart.
    if (b.onHost()) continue;
    const loom::plan::Lifetime live = program->live(id);
    const bool saved =
        b.role == loom::plan::BufferRole::kActivation && live.first <= at && at <= live.last;
    if (loom::plan::persistentRole(b.role) || saved) bytes += b.bytes;
  }
  return bytes;
}

absl::StatusOr<cost::StepEstimate> TemplatePricer::estimate(const cost::Strategy& s) {
  if (s.pp > 1) return estimateStaged(s);
  absl::StatusOr<cost::RepeatedProgram> program = programFor(s);
  if (!program.ok()) return program.status();
  absl::StatusOr<cost::PlanPrice> price = cost::priceProgram(*program, cost_);
  if (!price.ok()) return price.status();
  // The whole step: every micro-step, then the optimizer.
  cost::StepEstimate e;
  e.optimizer_s = price->optimizer_s;
  e.step_time_s = price->timing.step_time_s;
  e.compute_s = price->timing.compute_s;
  e.comm_s = price->timing.comm_s;
  e.exposed_comm_s = price->timing.exposed_comm_s;
  e.peak_bytes = price->peak_bytes;
  e.breakdown = price->breakdown;
  e.host_peak_bytes = price->host_peak_bytes;
  e.host_optimizer_s = price->host_optimizer_s;
  e.exposed_copy_s = price->timing.exposed_copy_s;
  e.comm_bytes_per_rank = price->comm_bytes_per_rank;
  e.tokens_per_step = s.globalBatch() * source_.seq;
  // The graph's FLOPs (forward and backward as planned) per device.
  e.model_flops_per_device = price->model_flops;
  e.tokens_per_s_per_device =
      static_cast<double>(e.tokens_per_step) / e.step_time_s / static_cast<double>(s.devices());
  e.mfu = e.model_flops_per_device / (e.step_time_s * cost_.peakFlops(source_.dtype));
  for (size_t i = 0; i < price->stream_s.size(); ++i) {
    if (price->stream_axes[i] == "fsdp") {
      e.fsdp_stream_s = price->stream_s[i];
    } else {
      e.other_stream_s = std::max(e.other_stream_s, price->stream_s[i]);
    }
  }
  e.backward_gather_s = price->backward_gather_s;
  e.backward_gather_bytes = price->backward_gather_bytes;
  e.memory_bound_s = price->memory_bound_s;
  return e;
}

}  // namespace loom::tools::plan
