// `plan --mesh=auto` (see auto_plan.h).
#include "tools/plan/auto_plan.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>
#include <filesystem>
#include <optional>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "planner/dialect/nn/ir/nn_dialect.h"
#include "planner/models/hf_config.h"
#include "planner/models/model_config.h"
#include "tools/plan/model_loader.h"
#include "tools/plan/template_pricer.h"

namespace loom::tools::plan {
namespace {

namespace cost = ::loom::planner::cost;

constexpr double kBytesPerGiB = 1024.0 * 1024.0 * 1024.0;

double since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// What a graph file fixes: its batch and sequence (dims 0 and 1 of its
// first input that is not a parameter) and its parameter type.
struct GraphShape {
  int64_t batch = 0;
  int64_t seq = 1;
  std::string dtype = "f32";
};

absl::StatusOr<GraphShape> graphShapeOf(mlir::ModuleOp module, const std::string& path) {
  auto funcs = module.getOps<mlir::func::FuncOp>();
  mlir::func::FuncOp func = *funcs.begin();
  GraphShape shape;
  bool input = false;
  bool param = false;
  for (mlir::BlockArgument arg : func.getArguments()) {
    auto type = mlir::dyn_cast<mlir::RankedTensorType>(arg.getType());
    if (!type) continue;
    if (func.getArgAttr(arg.getArgNumber(), planner::nn::NnDialect::kParamAttrName)) {
      if (param) continue;
      param = true;
      mlir::Type element = type.getElementType();
      shape.dtype = element.isBF16() ? "bf16" : element.isF16() ? "f16" : "f32";
    } else if (!input && type.getRank() >= 1) {
      input = true;
      shape.batch = type.getDimSize(0);
      shape.seq = type.getRank() >= 2 ? type.getDimSize(1) : 1;
    }
  }
  if (!input || shape.batch < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--mesh=auto: '", path,
        "' has no input argument with a batch dim (dim 0 of the first "
        "argument without nn.param), so the search cannot split it over data-parallel ranks; "
        "give --mesh and --axes for this graph"));
  }
  return shape;
}

}  // namespace

absl::StatusOr<AutoResult> planAuto(mlir::MLIRContext& context, const AutoRequest& request) {
  if (request.devices < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--mesh=auto needs --devices=N, the device count to plan for (got ",
                     request.devices, "), e.g. --mesh=auto --devices=256"));
  }
  PlanRequest base{.model_name = request.model,
                   .device = request.device,
                   .devices_per_host = request.devices_per_host,
                   .memory_gb = request.memory_gb,
                   .seed = request.seed,
                   .recompute_every = request.recompute_every,
                   .grad_reduce_dtype = request.grad_reduce_dtype,
                   .adamw = request.adamw,
                   .profile = request.profile};
  absl::StatusOr<mesh::Topology> topology = topologyFor(base, request.devices);
  if (!topology.ok()) return topology.status();
  const bool cpu = topology->device().name == "cpu";
  AutoResult result;
  TemplateSource source{.model = request.model,
                        .config = std::nullopt,
                        .seq = 0,
                        .dtype = cost::Dtype::kBF16,
                        .graph_batch = 0};
  std::string dtype;
  int64_t globalBatch = request.batch.value_or(request.devices);
  if (absl::EndsWith(request.model, ".mlir")) {
    // The graph fixes its batch, sequence and type; the search splits its
    // batch over the data-parallel ranks, one micro-step per step.
    absl::StatusOr<mlir::OwningOpRef<mlir::ModuleOp>> module =
        loadModel(context, {.model = request.model});
    if (!module.ok()) return module.status();
    absl::StatusOr<GraphShape> shape = graphShapeOf(**module, request.model);
    if (!shape.ok()) return shape.status();
    for (const auto& [flag, set] : {std::pair{"--batch", request.batch.has_value()},
                                    std::pair{"--seq", request.seq.has_value()},
                                    std::pair{"--dtype", request.dtype.has_value()}}) {
      if (set) {
        return absl::InvalidArgumentError(absl::StrCat(
            flag, " applies to zoo models only; the IR of '", request.model, "' fixes its batch (",
            shape->batch, "), sequence and types, so drop ", flag));
      }
    }
    source.seq = shape->seq;
    dtype = shape->dtype;
    source.graph_batch = shape->batch;
    globalBatch = shape->batch;
    result.workload.model = std::filesystem::path(request.model).filename().string();
  } else {
    absl::StatusOr<planner::models::TransformerConfig> config =
        absl::EndsWith(request.model, ".json") ? planner::models::loadHfConfig(request.model)
                                               : planner::models::configFromSpec(request.model);
    if (!config.ok()) return config.status();
    source.seq = request.seq.value_or(defaultSeq(*config));
    dtype = request.dtype.value_or(cpu ? "f32" : "bf16");
    if (source.seq < 1 || source.seq > config->max_seq) {
      return absl::InvalidArgumentError(absl::StrCat("model ", config->name, ": seq ", source.seq,
                                                     " is outside 1..", config->max_seq));
    }
    result.workload.model = config->name;
    source.config = *std::move(config);
  }
  if (dtype != "f32" && dtype != "bf16" && dtype != "f16") {
    return absl::InvalidArgumentError(
        absl::StrCat("--dtype='", dtype, "' is not a parameter type; use f32, bf16 or f16"));
  }
  source.dtype = dtype == "f32"   ? cost::Dtype::kF32
                 : dtype == "f16" ? cost::Dtype::kF16
                                  : cost::Dtype::kBF16;
  result.workload.seq = source.seq;
  result.workload.dtype = source.dtype;
  result.graph = !source.config;
  absl::StatusOr<cost::CostModel> model = cost::CostModel::create(*topology, {}, request.profile);
  if (!model.ok()) return model.status();

  cost::Pins pins = request.pins;
  // "auto" is what the search does anyway: choose per candidate.
  if (request.recompute && *request.recompute != "auto") {
    absl::Status pinned = cost::parsePin("recompute=" + *request.recompute, pins);
    if (!pinned.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--recompute='", *request.recompute,
                                                     "' is not none, selective, full or auto"));
    }
  }
  const auto searchStart = std::chrono::steady_clock::now();
  cost::SearchOptions options{
      .global_batch = globalBatch,
      .fixed_batch = result.graph,
      .pins = pins,
      .max_tp = request.max_tp,
      .allow_tp_across_hosts = request.allow_tp_across_hosts,
      .memory_cap_bytes =
          request.memory_gb > 0 ? static_cast<int64_t>(request.memory_gb * kBytesPerGiB) : 0,
      .host_memory_cap_bytes = request.host_memory_gb > 0
                                   ? static_cast<int64_t>(request.host_memory_gb * kBytesPerGiB)
                                   : 0,
      .progress = request.progress};
  TemplatePricer pricer(std::move(source), base, *model);
  absl::StatusOr<cost::SearchResult> search = cost::searchMesh(*model, pricer, options);
  if (!search.ok()) return search.status();
  result.search = *std::move(search);
  result.placements = pricer.placements();
  result.templates = pricer.templates();
  result.search_s = since(searchStart);
  result.candidates = cost::candidatesJson(result.search, result.workload, *model);
  if (!result.search.found()) {
    const bool offloadOff = !pins.offload_optimizer.value_or(true);
    return absl::ResourceExhaustedError(absl::StrCat(
        cost::explainWinner(result.search),
        result.graph ? " Plan on more devices or raise --memory-gb (the graph fixes its batch)"
                     : " Lower --batch (fewer sequences per rank, more accumulation) or --seq, "
                       "raise --memory-gb or --host-memory-gb, or plan on more devices",
        offloadOff ? "; without --offload=none the search may offload the optimizer states."
                   : "."));
  }

  // The winner through the real pipeline: the whole step's program.
  const auto planStart = std::chrono::steady_clock::now();
  const cost::Strategy& s = result.search.ranked.front().strategy;
  result.winner = base;
  result.winner.mesh = s.meshSpec();
  result.winner.axes = s.axes();
  result.winner.memory_gb = static_cast<double>(result.search.memory_cap_bytes) / kBytesPerGiB;
  result.winner.prefetch = s.prefetch;
  result.winner.reshard_after_forward = s.reshard_after_forward;
  result.winner.bucket_mb = s.bucket_mb;
  result.winner.recompute = planner::cost::recomputeName(s.recompute);
  result.winner.sequence_parallel = s.sequence_parallel;
  result.winner.micro_steps = s.accumulation;
  result.winner.keep_gathered = s.keep_gathered;
  result.winner.defer_grad_sync = s.defer_grad_sync;
  result.winner.offload = s.offload_optimizer ? "optimizer" : "none";
  result.winner.host_memory_gb =
      static_cast<double>(result.search.host_memory_cap_bytes) / kBytesPerGiB;
  if (s.pp > 1) {
    // Cut where the search cut it, so the plan is the candidate priced.
    result.winner.virtual_stages = s.virtual_stages;
    result.winner.schedule = planner::stages::scheduleName(s.schedule);
    result.winner.stage_layers =
        absl::StrJoin(result.search.ranked.front().estimate.chunk_layers, ",");
  }
  result.winner_batch = s.micro_batch * s.dp * s.fsdp;
  ModelRequest load{.model = request.model};
  if (!result.graph) {
    load.batch = result.winner_batch;
    load.seq = result.workload.seq;
    load.dtype = std::string(cost::dtypeName(result.workload.dtype));
  }
  absl::StatusOr<mlir::OwningOpRef<mlir::ModuleOp>> module = loadModel(context, load);
  if (!module.ok()) return module.status();
  absl::StatusOr<PlanResult> plan = planModule(**module, result.winner);
  if (!plan.ok()) return plan.status();
  result.plan = *std::move(plan);
  result.module = *std::move(module);
  result.plan_s = since(planStart);
  return result;
}

std::string formatSearch(const AutoResult& result, int64_t rows) {
  const cost::SearchResult& search = result.search;
  const nlohmann::json& c = result.candidates;
  const cost::Candidate& winner = search.ranked.front();
  const cost::Strategy& s = winner.strategy;
  const cost::StepEstimate& e = winner.estimate;
  std::string out =
      absl::StrFormat("# Mesh search: %s on %d x %s (%d hosts x %d)\n\n", result.workload.model,
                      c["devices"].get<int64_t>(), c["device"].get<std::string>(),
                      c["hosts"].get<int64_t>(), c["devices_per_host"].get<int64_t>());
  absl::StrAppend(
      &out,
      absl::StrFormat("- workload: %d sequences of %d tokens per step, %s; memory cap %.1f GiB "
                      "per device; %s\n",
                      s.globalBatch(), result.workload.seq,
                      std::string(cost::dtypeName(result.workload.dtype)),
                      static_cast<double>(search.memory_cap_bytes) / kBytesPerGiB,
                      c["machine_profile"].get<std::string>().empty()
                          ? std::string("datasheet figures")
                          : "machine profile " + c["machine_profile"].get<std::string>()),
      absl::StrFormat("- candidates: %d enumerated, %d evaluated, %d pruned over memory, %d "
                      "pruned by the step-time bound, %d with recompute not tried (they fit "
                      "with less), %d with offload not tried (they fit without); search "
                      "%.3f s\n",
                      search.enumerated, search.evaluated, search.pruned_memory,
                      search.pruned_bound, search.pruned_recompute, search.pruned_offload,
                      result.search_s),
      absl::StrFormat("- priced from the pipeline's own programs: %d placements, %d template "
                      "plans, %s and re-sized per candidate\n",
                      result.placements, result.templates,
                      result.graph ? "each the whole graph" : "repeated to the model's depth"),
      absl::StrFormat("- winner: %s | %s: step %.3f s, %.0f tokens/s per device, MFU %.1f%%, "
                      "peak %.1f GiB%s, exposed communication %.3f s\n",
                      s.parallelism(), s.knobs(), e.step_time_s, e.tokens_per_s_per_device,
                      100 * e.mfu, static_cast<double>(e.peak_bytes) / kBytesPerGiB,
                      s.offload_optimizer
                          ? absl::StrFormat(" (host %.1f GiB)",
                                            static_cast<double>(e.host_peak_bytes) / kBytesPerGiB)
                          : "",
                      e.exposed_comm_s),
      absl::StrFormat("- the plan below is the whole step: --mesh=%s --axes=%s --batch=%d "
                      "--micro-steps=%d%s%s%s%s (micro-batch %d per data-parallel rank)\n\n",
                      s.meshSpec(), s.axes(), s.globalBatch(), s.accumulation,
                      s.keep_gathered ? " --keep-gathered" : "",
                      s.defer_grad_sync ? " --defer-grad-sync" : "",
                      s.offload_optimizer ? " --offload=optimizer" : "",
                      s.pp > 1 ? absl::StrCat(" --schedule=", planner::stages::scheduleName(s.schedule),
                                              s.virtual_stages > 1
                                                  ? absl::StrCat(" --virtual-stages=",
                                                                 s.virtual_stages)
                                                  : "",
                                              " --stages=", absl::StrJoin(e.chunk_layers, ","))
                               : "",
                      s.micro_batch),
      cost::formatRanking(search, rows), "\n", cost::explainWinner(search), "\n");
  return out;
}

std::vector<planner::visual::SearchPoint> searchPoints(const planner::cost::SearchResult& result) {
  std::vector<planner::visual::SearchPoint> points;
  for (size_t i = 0; i < result.ranked.size(); ++i) {
    const planner::cost::Candidate& c = result.ranked[i];
    points.push_back({.label = c.label(),
                      .step_time_s = c.estimate.step_time_s,
                      .tokens_per_s_per_device = c.estimate.tokens_per_s_per_device,
                      .mfu = c.estimate.mfu,
                      .peak_bytes = c.estimate.peak_bytes,
                      .memory_limit_bytes = result.memory_cap_bytes,
                      .exposed_comm_s = c.estimate.exposed_comm_s,
                      .fits = c.fits,
                      .winner = i == 0 && c.fits});
  }
  return points;
}

}  // namespace loom::tools::plan
