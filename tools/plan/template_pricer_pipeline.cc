// Pipeline candidates priced from a three-chunk template (see
// template_pricer.h).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "planner/cost/plan_price.h"
#include "planner/cost/resize_plan.h"
#include "planner/cost/stage_program.h"
#include "tools/plan/model_loader.h"
#include "tools/plan/template_pricer.h"

namespace loom::tools::plan {
namespace cost = ::loom::planner::cost;

namespace {

// The template's chunk kinds.
constexpr int kFirst = 0;
constexpr int kMiddle = 1;
constexpr int kLast = 2;

}  // namespace

int64_t TemplatePricer::pipelineLayers() const {
  return source_.config ? source_.config->num_layers : 0;
}

absl::StatusOr<TemplatePricer::StagedTemplate*> TemplatePricer::stagedTemplateFor(
    const cost::Strategy& s, int64_t layers) {
  const MeshKey mesh = meshKeyOf(s);
  const StagedKey key{Key{mesh, s.prefetch, s.reshard_after_forward, s.bucket_mb, s.recompute,
                          s.keep_gathered, s.defer_grad_sync, s.offload_optimizer,
                          templateMicroSteps(s)},
                      layers};
  if (auto it = staged_.find(key); it != staged_.end()) return &it->second;
  PlanRequest request = requestFor(mesh, s);
  request.mesh = absl::StrCat("pp=3,", request.mesh == "dp=1" ? "" : request.mesh);
  if (request.mesh.back() == ',') request.mesh.pop_back();
  request.stage_layers = absl::StrCat(layers, ",", layers, ",", layers);
  request.schedule = "1f1b";
  request.virtual_stages = 1;
  // Three stages need not fill hosts: the template is one host (its plan
  // is priced on the candidate's topology, not its own).
  const auto& [tp, dp, fsdp, micro, sp] = mesh;
  request.devices_per_host = 3 * tp * dp * fsdp;
  // The template model: three chunks' worth of layers, placed once per
  // mesh and chunk size.
  auto [placed, fresh] = placed_staged_.try_emplace({mesh, layers});
  if (fresh) {
    absl::StatusOr<mlir::OwningOpRef<mlir::ModuleOp>> module =
        loadModel(context_, {.model = source_.model,
                             .batch = micro * dp * fsdp,
                             .seq = source_.seq,
                             .dtype = std::string(cost::dtypeName(source_.dtype)),
                             .layers = 3 * layers});
    absl::Status status = module.ok() ? placeModule(**module, request) : module.status();
    if (!status.ok()) {
      placed_staged_.erase(placed);
      return status;
    }
    placed->second = *std::move(module);
  }
  mlir::OwningOpRef<mlir::ModuleOp> copy(placed->second->clone());
  absl::StatusOr<PlanResult> planned = planPlacedModule(*copy, request);
  if (!planned.ok()) return planned.status();
  StagedTemplate made;
  made.plan = std::move(planned->plan);
  made.layers = layers;
  made.micro_batch = std::get<3>(mesh);
  for (int kind : {kFirst, kMiddle, kLast}) {
    made.kinds[kind] = cost::stagePlan(made.plan, kind);
    made.repeated[{kind, layers}] = cost::wholePlan(made.kinds[kind]);
  }
  made.resized = made.plan;
  made.resized.programs.clear();
  return &staged_.emplace(key, std::move(made)).first->second;
}

absl::Status TemplatePricer::sizeFor(StagedTemplate& t, const cost::Strategy& s) {
  const std::tuple sizes{s.pp, s.dp, s.fsdp, s.micro_batch, s.accumulation};
  if (t.sized_for == sizes) return absl::OkStatus();
  cost::Resize resize{.axis_sizes = {{"pp", s.pp}},
                      .template_micro_batch = t.micro_batch,
                      .micro_batch = s.micro_batch};
  if (s.dp > 1) resize.axis_sizes["dp"] = s.dp;
  if (s.fsdp > 1) resize.axis_sizes["fsdp"] = s.fsdp;
  if (absl::Status status = cost::resizePlanInto(t.plan, resize, t.resized); !status.ok()) {
    return status;
  }
  t.resized.micro_batches = s.accumulation;
  t.sized_for = sizes;
  return absl::OkStatus();
}

absl::StatusOr<const cost::LayerCompute*> TemplatePricer::layerComputeFor(const cost::Strategy& s,
                                                                          bool timed) {
  const std::tuple key{s.tp, s.sequence_parallel, s.recompute, s.micro_batch, timed};
  if (auto it = layer_compute_.find(key); it != layer_compute_.end()) return &it->second;
  // A rank's compute depends on its tp, sequence parallelism, recompute and
  // micro-batch, and its parameter state on its fsdp and tp. It is read
  // without an fsdp axis, so that it bounds every fsdp size: a gather only
  // adds time, and pipelineMemoryBound divides the state by the
  // candidate's fsdp. One template with an fsdp axis and the pipeline's
  // default knobs serves every mesh, re-sized to fsdp 1 and the
  // candidate's micro-batch.
  const cost::Strategy unstaged{.fsdp = 2,
                                .tp = s.tp,
                                .micro_batch = s.micro_batch,
                                .recompute = s.recompute,
                                .sequence_parallel = s.sequence_parallel};
  absl::StatusOr<Template*> t = templateFor(unstaged);
  if (!t.ok()) return t.status();
  // The header and buffers only.
  std::vector<loom::plan::Program> programs = std::move((*t)->shorter.programs);
  loom::plan::Plan sized = (*t)->shorter;
  (*t)->shorter.programs = std::move(programs);
  const cost::Resize resize{.axis_sizes = {{"fsdp", 1}},
                            .template_micro_batch = (*t)->micro_batch,
                            .micro_batch = s.micro_batch};
  if (absl::Status status = cost::resizePlanInto((*t)->shorter, resize, sized); !status.ok()) {
    return status;
  }
  // The template's layers priced on a topology of its mesh's size (the
  // same devices and links), then repeated to the model's: every layer
  // does the same work.
  const cost::Repeated whole = cost::wholePlan((*t)->shorter);
  const cost::RepeatedProgram program((*t)->shorter, sized, whole);
  std::optional<cost::PlanPrice> price;
  if (timed) {
    absl::StatusOr<const cost::CostModel*> model = modelOf(sized.mesh.size());
    if (!model.ok()) return model.status();
    absl::StatusOr<cost::PlanPrice> priced = cost::priceProgram(program, **model);
    if (!priced.ok()) return priced.status();
    price = *std::move(priced);
  }
  absl::StatusOr<cost::LayerCompute> compute =
      cost::layerCompute(program, price ? &*price : nullptr);
  if (!compute.ok()) return compute.status();
  return &layer_compute_.emplace(key, cost::repeatLayers(*compute, pipelineLayers()))
              .first->second;
}

absl::StatusOr<const cost::CostModel*> TemplatePricer::modelOf(int64_t devices) {
  if (devices == cost_.topology().worldSize()) return &cost_;
  if (auto it = sub_models_.find(devices); it != sub_models_.end()) return &it->second;
  const mesh::Topology& all = cost_.topology();
  const int64_t perHost = std::min(all.devicesPerHost(), devices);
  absl::StatusOr<mesh::Topology> topology = mesh::Topology::create(
      {.num_hosts = (devices + perHost - 1) / perHost,
       .devices_per_host = perHost,
       .device = all.device(),
       .intra_host_link = all.intraHostLink().link_class,
       .inter_host_link = all.interHostLink().link_class,
       .intra_host_spec = all.intraHostLink().spec,
       .inter_host_spec = all.interHostLink().spec});
  if (!topology.ok()) return topology.status();
  absl::StatusOr<cost::CostModel> model =
      cost::CostModel::create(*topology, cost_.efficiency(), cost_.profile());
  if (!model.ok()) return model.status();
  return &sub_models_.emplace(devices, *std::move(model)).first->second;
}

absl::StatusOr<TemplatePricer::ChunkedLayers> TemplatePricer::chunkedLayers(
    const cost::Strategy& s, bool timed) {
  absl::StatusOr<const cost::LayerCompute*> compute = layerComputeFor(s, timed);
  if (!compute.ok()) return compute.status();
  absl::StatusOr<std::vector<int64_t>> counts = chunkLayers(s);
  if (!counts.ok()) return counts.status();
  return ChunkedLayers{*compute, *std::move(counts)};
}

double TemplatePricer::pipelineBound(const cost::Strategy& s) {
  absl::StatusOr<ChunkedLayers> layers = chunkedLayers(s, /*timed=*/true);
  if (!layers.ok()) return 0;  // estimate() reports the error
  absl::StatusOr<double> bound = cost::pipelineStepBound(
      *layers->compute, layers->counts, s.schedule, {s.pp, s.virtual_stages, s.accumulation});
  return bound.ok() ? *bound : 0;
}

int64_t TemplatePricer::quickMemoryBound(const cost::Strategy& s) {
  if (s.pp > 1 || pipelineLayers() == 0) return 0;
  absl::StatusOr<const cost::LayerCompute*> compute = layerComputeFor(s, /*timed=*/false);
  // An error here is the full bound's and estimate()'s to report.
  return compute.ok() ? cost::stackMemoryBound(**compute, s.fsdp, s.offload_optimizer) : 0;
}

int64_t TemplatePricer::pipelineMemoryBound(const cost::Strategy& s) {
  absl::StatusOr<ChunkedLayers> layers = chunkedLayers(s, /*timed=*/false);
  if (!layers.ok()) return 0;  // estimate() reports the error
  absl::StatusOr<int64_t> bound =
      cost::pipelineMemoryBound(*layers->compute, layers->counts, s.schedule,
                                {s.pp, s.virtual_stages, s.accumulation}, s.fsdp);
  return bound.ok() ? *bound : 0;
}

absl::StatusOr<std::vector<int64_t>> TemplatePricer::chunkLayers(const cost::Strategy& s) {
  const int64_t chunks = s.pp * s.virtual_stages;
  if (pipelineLayers() < chunks) {
    return absl::InvalidArgumentError(absl::StrCat("cannot cut ", pipelineLayers(),
                                                   " layers into ", chunks,
                                                   " pipeline chunks of at least one"));
  }
  // FLOPs scale with the micro-batch and do not depend on the data axes:
  // one balance per tp, sequence parallelism and recompute, read at one
  // sequence per rank.
  auto [it, fresh] =
      chunk_layers_.try_emplace({s.tp, s.sequence_parallel, s.recompute, chunks});
  if (fresh) {
    cost::Strategy unit = s;
    unit.micro_batch = 1;
    absl::StatusOr<const cost::LayerCompute*> compute = layerComputeFor(unit, /*timed=*/false);
    absl::StatusOr<std::vector<int64_t>> counts =
        compute.ok() ? cost::balanceChunks(**compute, chunks)
                     : absl::StatusOr<std::vector<int64_t>>(compute.status());
    if (!counts.ok()) {
      chunk_layers_.erase(it);
      return counts.status();
    }
    it->second = *std::move(counts);
  }
  return it->second;
}

absl::StatusOr<cost::StepEstimate> TemplatePricer::estimateStaged(const cost::Strategy& s) {
  if (last_staged_ && last_staged_->first == s) return last_staged_->second;
  absl::StatusOr<std::vector<int64_t>> counts = chunkLayers(s);
  if (!counts.ok()) return counts.status();
  const int64_t chunks = static_cast<int64_t>(counts->size());
  // One program per (template, kind, layers): equal chunks share it, so
  // stages of equal chunks are priced once.
  std::map<std::tuple<StagedTemplate*, int, int64_t>, std::unique_ptr<cost::RepeatedProgram>>
      programs;
  std::vector<const cost::PricedProgram*> order;
  for (int64_t c = 0; c < chunks; ++c) {
    const int kind = c == 0 ? kFirst : c == chunks - 1 ? kLast : kMiddle;
    const int64_t layers = (*counts)[c];
    absl::StatusOr<StagedTemplate*> found =
        stagedTemplateFor(s, std::min(cost::kTemplateBlocks, layers));
    if (!found.ok()) return found.status();
    StagedTemplate& t = **found;
    auto& program = programs[{&t, kind, layers}];
    if (!program) {
      auto [repeated, fresh] = t.repeated.try_emplace({kind, layers});
      if (fresh) {
        absl::StatusOr<cost::Repeated> made =
            layers > t.layers ? cost::repeatBlocks(t.kinds[kind], layers)
                              : absl::StatusOr<cost::Repeated>(cost::wholePlan(t.kinds[kind]));
        if (!made.ok()) {
          t.repeated.erase(repeated);
          return made.status();
        }
        repeated->second = *std::move(made);
      }
      if (absl::Status status = sizeFor(t, s); !status.ok()) return status;
      program =
          std::make_unique<cost::RepeatedProgram>(t.kinds[kind], t.resized, repeated->second);
    }
    order.push_back(program.get());
  }
  absl::StatusOr<cost::StagedPrice> staged =
      cost::priceChunks(order, s.schedule, {s.pp, s.virtual_stages, s.accumulation}, cost_);
  if (!staged.ok()) return staged.status();
  const cost::PlanPrice& slow = staged->stages[staged->slowest];
  const cost::PipelinePrice::StageMemory& full = staged->pipeline.memory[staged->fullest];
  cost::StepEstimate e;
  e.bubble_s = staged->pipeline.bubble_s[staged->slowest];
  e.step_time_s = slow.timing.step_time_s + e.bubble_s;
  e.compute_s = slow.timing.compute_s;
  e.comm_s = slow.timing.comm_s;
  e.exposed_comm_s = slow.timing.exposed_comm_s;
  e.optimizer_s = slow.optimizer_s;
  e.peak_bytes = full.peak_bytes;
  e.breakdown = full.breakdown;
  e.comm_bytes_per_rank = slow.comm_bytes_per_rank;
  // Each device runs its stage's share of the model.
  for (const cost::PlanPrice& stage : staged->stages) e.model_flops_per_device += stage.model_flops;
  e.model_flops_per_device /= static_cast<double>(s.pp);
  e.tokens_per_step = s.globalBatch() * source_.seq;
  e.tokens_per_s_per_device =
      static_cast<double>(e.tokens_per_step) / e.step_time_s / static_cast<double>(s.devices());
  e.mfu = e.model_flops_per_device / (e.step_time_s * cost_.peakFlops(source_.dtype));
  for (size_t i = 0; i < slow.stream_s.size(); ++i) {
    if (slow.stream_axes[i] == "fsdp") {
      e.fsdp_stream_s = slow.stream_s[i];
    } else {
      e.other_stream_s = std::max(e.other_stream_s, slow.stream_s[i]);
    }
  }
  e.backward_gather_s = slow.backward_gather_s;
  e.backward_gather_bytes = slow.backward_gather_bytes;
  e.memory_bound_s = slow.memory_bound_s;
  e.chunk_layers = *std::move(counts);
  last_staged_ = {s, e};
  return e;
}

}  // namespace loom::tools::plan
