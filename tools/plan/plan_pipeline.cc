// The plan tool's pipeline (see plan_pipeline.h).
#include "tools/plan/plan_pipeline.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "mesh/device_mesh.h"
#include "mesh/device_specs.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Pass/PassManager.h"
#include "planner/export/plan_json.h"
#include "planner/export/timeline.h"
#include "plan/scope.h"
#include "planner/pipeline/plan_pipeline.h"
#include "planner/transforms/memory/memory_plan.h"
#include "planner/transforms/recompute/passes.h"

namespace loom::tools::plan {
namespace {

constexpr double kBytesPerGiB = 1024.0 * 1024.0 * 1024.0;

}  // namespace

absl::StatusOr<std::string> meshSpec(const std::string& mesh, const std::string& axes) {
  if (mesh.find('=') != std::string::npos) {
    absl::StatusOr<loom::mesh::DeviceMesh> parsed = loom::mesh::DeviceMesh::parse(mesh);
    if (!parsed.ok())
      return absl::InvalidArgumentError(absl::StrCat("--mesh: ", parsed.status().message()));
    return mesh;
  }
  std::vector<std::string> sizes = absl::StrSplit(mesh, 'x');
  std::vector<std::string> names = absl::StrSplit(axes, ',', absl::SkipEmpty());
  if (names.size() != sizes.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--mesh=", mesh, " has ", sizes.size(), " axes but --axes='", axes, "' names ",
        names.size(), "; give one strategy per mesh axis, e.g. --mesh=8x8 --axes=fsdp,tp"));
  }
  std::vector<std::string> parts;
  for (size_t i = 0; i < sizes.size(); ++i) {
    int64_t size = 0;
    if (!absl::SimpleAtoi(sizes[i], &size) || size < 1) {
      return absl::InvalidArgumentError(absl::StrCat("--mesh=", mesh, ": axis size '", sizes[i],
                                                     "' is not a positive integer; write sizes "
                                                     "joined by x, e.g. --mesh=8x8"));
    }
    parts.push_back(absl::StrCat(names[i], "=", size));
  }
  const std::string spec = absl::StrJoin(parts, ",");
  absl::StatusOr<loom::mesh::DeviceMesh> parsed = loom::mesh::DeviceMesh::parse(spec);
  if (!parsed.ok())
    return absl::InvalidArgumentError(absl::StrCat("--mesh: ", parsed.status().message()));
  return spec;
}

absl::StatusOr<int64_t> dataParallelSize(const std::string& mesh, const std::string& axes) {
  absl::StatusOr<std::string> spec = meshSpec(mesh, axes);
  if (!spec.ok()) return spec.status();
  absl::StatusOr<loom::mesh::DeviceMesh> parsed = loom::mesh::DeviceMesh::parse(*spec);
  if (!parsed.ok()) return parsed.status();
  std::vector<std::string> strategies = absl::StrSplit(axes, ',', absl::SkipEmpty());
  if (strategies.empty()) strategies = parsed->axisNames();
  int64_t size = 1;
  for (size_t a = 0; a < strategies.size() && a < parsed->shape().size(); ++a) {
    if (strategies[a] == "dp" || strategies[a] == "fsdp") size *= parsed->shape()[a];
  }
  return size;
}

absl::StatusOr<loom::mesh::Topology> topologyFor(const PlanRequest& request, int64_t devices) {
  absl::StatusOr<loom::mesh::DeviceSpec> device = loom::mesh::deviceSpec(request.device);
  if (!device.ok())
    return absl::InvalidArgumentError(absl::StrCat("--device: ", device.status().message()));
  if (request.devices_per_host < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--devices-per-host must be >= 1, got: ", request.devices_per_host));
  }
  int64_t perHost = request.devices_per_host;
  if (devices < perHost) perHost = devices;
  if (devices % perHost != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the mesh has ", devices, " devices, not a multiple of --devices-per-host=", perHost,
        "; change the mesh so its product fills whole hosts"));
  }
  const bool cpu = device->name == "cpu";
  return loom::mesh::Topology::create(
      {.num_hosts = devices / perHost,
       .devices_per_host = perHost,
       .device = *device,
       .intra_host_link =
           cpu ? loom::mesh::LinkClass::kLoopbackTcp : loom::mesh::LinkClass::kNVLink,
       .inter_host_link =
           cpu ? loom::mesh::LinkClass::kLoopbackTcp : loom::mesh::LinkClass::kInfiniBand,
       .host_link = cpu ? loom::mesh::LinkClass::kMemcpy : loom::mesh::LinkClass::kPCIe});
}

absl::StatusOr<std::vector<std::string>> checkMesh(const PlanRequest& request, int64_t devices,
                                                   bool allow_tp_across_hosts) {
  absl::StatusOr<std::string> spec = meshSpec(request.mesh, request.axes);
  if (!spec.ok()) return spec.status();
  absl::StatusOr<loom::mesh::DeviceMesh> mesh = loom::mesh::DeviceMesh::parse(*spec);
  if (!mesh.ok()) return mesh.status();
  if (devices > 0 && mesh->size() != devices) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--mesh=", request.mesh, " has ", absl::StrJoin(mesh->shape(), " x "), " = ", mesh->size(),
        " devices but --devices=", devices,
        "; make the mesh's product equal the device count, or let the planner choose with "
        "--mesh=auto --devices=",
        devices));
  }
  absl::StatusOr<loom::mesh::Topology> topology = topologyFor(request, mesh->size());
  if (!topology.ok()) return topology.status();
  // The strategies name the axes unless --axes gives them.
  std::vector<std::string> strategies = mesh->axisNames();
  if (!request.axes.empty()) strategies = absl::StrSplit(request.axes, ',', absl::SkipEmpty());
  std::vector<std::string> warnings;
  for (size_t i = 0; i < strategies.size() && i < mesh->axisNames().size(); ++i) {
    if (strategies[i] != "tp") continue;
    const std::string& axis = mesh->axisNames()[i];
    absl::StatusOr<loom::mesh::DeviceMesh::Group> group = mesh->groupOf(0, {axis});
    if (!group.ok()) return group.status();
    std::map<int64_t, int> hosts;
    for (int64_t rank : *group) ++hosts[*topology->hostOf(rank)];
    if (hosts.size() <= 1) continue;
    const std::string what = absl::StrCat(
        "the tp axis '", axis, "' (size ", group->size(), ") spans ", hosts.size(), " hosts of ",
        topology->devicesPerHost(), " devices, so its all-reduces cross ",
        std::string(loom::mesh::linkClassName(topology->interHostLink().link_class)), " (",
        topology->interHostLink().spec.bandwidth_bytes_per_s / 1e9, " GB/s per device instead of ",
        topology->intraHostLink().spec.bandwidth_bytes_per_s / 1e9, " GB/s on ",
        std::string(loom::mesh::linkClassName(topology->intraHostLink().link_class)), ")");
    if (!allow_tp_across_hosts) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, "; keep tp inside a host (a size dividing ", topology->devicesPerHost(),
          ", as the last mesh axis) or pass --allow-tp-across-hosts"));
    }
    warnings.push_back(absl::StrCat("warning: ", what));
  }
  return warnings;
}

namespace {

// One run of pipeline stages on `module` with `request`'s options; the
// passes' diagnostics come back as the error.
class StageRunner {
 public:
  // Fails on a bad mesh, device or grad_reduce_dtype.
  static absl::StatusOr<StageRunner> create(const PlanRequest& request) {
    // The runtime reduces and updates gradients in f32 or bf16 only.
    if (!request.grad_reduce_dtype.empty() && request.grad_reduce_dtype != "bf16" &&
        request.grad_reduce_dtype != "f32") {
      return absl::InvalidArgumentError(absl::StrCat(
          "--grad-reduce-dtype='", request.grad_reduce_dtype,
          "' is not a gradient reduction type; use bf16 or f32, or omit it to reduce gradients "
          "in the parameter type"));
    }
    absl::StatusOr<std::string> spec = meshSpec(request.mesh, request.axes);
    if (!spec.ok()) return spec.status();
    absl::StatusOr<loom::mesh::DeviceMesh> mesh = loom::mesh::DeviceMesh::parse(*spec);
    if (!mesh.ok()) return mesh.status();
    absl::StatusOr<loom::mesh::Topology> topology = topologyFor(request, mesh->size());
    if (!topology.ok()) return topology.status();
    return StageRunner(request, *spec, *mesh, *std::move(topology));
  }

  const loom::mesh::Topology& topology() const { return topology_; }

  absl::Status run(mlir::ModuleOp module,
                   void (*addStages)(mlir::OpPassManager&,
                                     const planner::pipeline::PlanPipelineOptions&)) {
    // The pass's own message and notes say what is wrong; the whole
    // function printed after them would bury it.
    module.getContext()->printOpOnDiagnostic(false);
    std::string diagnostics;
    mlir::ScopedDiagnosticHandler handler(module.getContext(), [&](mlir::Diagnostic& diag) {
      std::string text;
      llvm::raw_string_ostream os(text);
      os << diag.getLocation() << ": "
         << (diag.getSeverity() == mlir::DiagnosticSeverity::Note ? "note: " : "error: ") << diag;
      for (const mlir::Diagnostic& note : diag.getNotes()) {
        os << "\n" << note.getLocation() << ": note: " << note;
      }
      if (!diagnostics.empty()) diagnostics += "\n";
      diagnostics += text;
      return mlir::success();
    });
    mlir::PassManager pm(module.getContext());
    pm.enableVerifier(verify_);
    addStages(pm, *options_);
    if (failed(pm.run(module))) {
      return absl::InvalidArgumentError(diagnostics.empty() ? "the plan pipeline failed"
                                                            : diagnostics);
    }
    return absl::OkStatus();
  }

 private:
  StageRunner(const PlanRequest& request, const std::string& spec,
              const loom::mesh::DeviceMesh& mesh, loom::mesh::Topology topology)
      : topology_(std::move(topology)),
        verify_(request.verify_passes),
        options_(std::make_unique<planner::pipeline::PlanPipelineOptions>()) {
    const double memoryGb =
        request.memory_gb > 0 ? request.memory_gb
                              : static_cast<double>(topology_.device().memory_bytes) / kBytesPerGiB;
    const double hostMemoryGb =
        request.host_memory_gb > 0
            ? request.host_memory_gb
            : static_cast<double>(topology_.device().host_memory_bytes) / kBytesPerGiB;
    std::string axes;
    for (const std::string& name : mesh.axisNames()) axes += (axes.empty() ? "" : ",") + name;
    options_->mesh = spec;
    options_->axes = request.axes.empty() ? axes : request.axes;
    options_->devices = mesh.size();
    options_->sequenceParallel = request.sequence_parallel;
    options_->recompute = request.recompute;
    options_->recomputeEvery = request.recompute_every;
    options_->recomputeLayers = request.recompute_layers;
    options_->microSteps = request.micro_steps;
    options_->keepGathered = request.keep_gathered;
    options_->deferGradSync = request.defer_grad_sync;
    options_->virtualStages = request.virtual_stages;
    options_->stageLayers = request.stage_layers;
    options_->schedule = request.schedule;
    options_->reshardAfterForward = request.reshard_after_forward;
    options_->gradReduceDtype = request.grad_reduce_dtype;
    options_->bucketMb = request.bucket_mb;
    options_->prefetch = request.prefetch;
    options_->memoryGb = request.check_memory ? memoryGb : 0;
    options_->hostMemoryGb = request.check_memory ? hostMemoryGb : 0;
    options_->offload = request.offload;
    options_->lr = request.adamw.lr;
    options_->beta1 = request.adamw.beta1;
    options_->beta2 = request.adamw.beta2;
    options_->eps = request.adamw.eps;
    options_->weightDecay = request.adamw.weight_decay;
  }

  loom::mesh::Topology topology_;
  bool verify_;
  // Pass pipeline options cannot be copied or moved.
  std::unique_ptr<planner::pipeline::PlanPipelineOptions> options_;
};

// The most micro-batch chunks `program`'s schedule holds at once: forward
// runs whose backward has not run yet.
int64_t mostInFlight(const loom::plan::Program& program) {
  int64_t held = 0, most = 0;
  for (const loom::plan::ScheduleEntry& entry : program.schedule) {
    const loom::plan::Block* block = program.block(entry.block);
    if (block == nullptr || entry.micro_batch < 0) continue;
    held += block->phase == loom::plan::Phase::kForward ? 1 : -1;
    most = std::max(most, held);
  }
  return most;
}

// A pipeline plan's memory check: each stage holds the activations of the
// micro-batches its schedule keeps in flight, which the per-chunk check of
// plan-memory-plan (one micro-batch deep) cannot see.
absl::Status checkStageMemory(const loom::plan::Plan& plan, const PlanRequest& request,
                              const loom::mesh::Topology& topology) {
  const std::vector<int64_t>& peaks = plan.predicted.stage_peak_bytes;
  const double budgetGb = request.memory_gb > 0 ? request.memory_gb
                                                : static_cast<double>(topology.device().memory_bytes) /
                                                      kBytesPerGiB;
  const auto budget = static_cast<int64_t>(std::floor(budgetGb * kBytesPerGiB));
  const auto fullest = std::max_element(peaks.begin(), peaks.end());
  if (fullest == peaks.end() || *fullest <= budget) return absl::OkStatus();
  const size_t stage = static_cast<size_t>(fullest - peaks.begin());
  planner::memory::MemoryBreakdown breakdown;
  for (const auto& [role, bytes] : plan.predicted.breakdown) {
    absl::StatusOr<loom::plan::BufferRole> r = loom::plan::roleFromName(role);
    if (r.ok()) breakdown[*r] = bytes;
  }
  return absl::ResourceExhaustedError(absl::StrFormat(
      "pipeline stage %d of %d needs %s per rank at its peak, with up to %d micro-batch chunks in "
      "flight as its schedule runs them, over the %g GiB device memory (got: %d > %d bytes): %s; "
      "recompute activations (--recompute=selective, full or auto), keep fewer micro-batches in "
      "flight (--schedule=1f1b rather than gpipe), or cut the model into more stages or add "
      "tensor parallelism (a larger pp or tp axis)",
      plan.programs[stage].stage, plan.programs.size(), planner::memory::formatBytes(*fullest),
      mostInFlight(plan.programs[stage]), budgetGb, *fullest, budget,
      planner::memory::formatBreakdown(breakdown)));
}

absl::StatusOr<PlanResult> exportModule(mlir::ModuleOp module, const PlanRequest& request,
                                        const loom::mesh::Topology& topology) {
  planner::exporter::PlanExportOptions options;
  options.model = request.model_name;
  options.seed = request.seed;
  options.search_template = !request.verify_passes;
  absl::StatusOr<loom::plan::Plan> plan = planner::exporter::exportPlan(module, topology, options);
  if (!plan.ok()) return plan.status();
  if (request.profile && !options.search_template) {
    // exportPlan prices with the datasheet; a profile re-prices the plan.
    if (absl::Status status = planner::exporter::repricePlan(
            topology,
            {.compute_efficiency = options.compute_efficiency, .profile = request.profile}, *plan);
        !status.ok()) {
      return status;
    }
  }
  if (request.check_memory) {
    if (absl::Status status = checkStageMemory(*plan, request, topology); !status.ok()) {
      return status;
    }
  }
  std::string recompute = request.recompute;
  if (request.recompute_every > 1) absl::StrAppend(&recompute, " every ", request.recompute_every);
  if (!request.recompute_layers.empty()) {
    recompute = absl::StrCat(request.recompute_layers, ",", request.recompute, ":rest");
  }
  return PlanResult{.plan = *std::move(plan), .recompute = std::move(recompute)};
}

// The layers of the plan's largest repeated stack (by instruction scopes),
// which plan-recompute numbers its runs by.
int64_t repeatedLayers(const loom::plan::Plan& plan) {
  std::map<std::string, std::set<int64_t>> stacks;
  for (const loom::plan::Instruction* in : plan.programs.front().instructions()) {
    if (std::optional<loom::plan::RepeatedBlock> block = loom::plan::repeatedBlockOf(in->scope)) {
      stacks[block->stack].insert(block->index);
    }
  }
  size_t most = 0;
  for (const auto& [stack, indices] : stacks) most = std::max(most, indices.size());
  return static_cast<int64_t>(most);
}

// --recompute=auto, per layer: places the module once and plans copies
// without the memory check. No recompute, all layers selective and all full
// give each mode's memory saved and time added per layer; the cheapest mix
// of full, selective and none layers whose interpolated peak fits is
// planned, and while its real peak does not fit the interpolation is asked
// for that much more. Full layers come first, then selective ones (in a
// stack of equal layers where they sit changes neither the peak nor the
// time). When even all full does not fit, the module is planned that way
// with the memory check, whose error says by how much.
absl::StatusOr<PlanResult> planWithAutoRecompute(mlir::ModuleOp module,
                                                 const PlanRequest& request) {
  absl::StatusOr<StageRunner> runner = StageRunner::create(request);
  if (!runner.ok()) return runner.status();
  const int64_t budget = request.memory_gb > 0
                             ? static_cast<int64_t>(std::floor(request.memory_gb * kBytesPerGiB))
                             : runner->topology().device().memory_bytes;
  if (absl::Status s = placeModule(module, request); !s.ok()) return s;
  auto trial = [&](const std::string& mode,
                   const std::string& layers) -> absl::StatusOr<PlanResult> {
    PlanRequest r = request;
    r.recompute = mode;
    r.recompute_every = 1;
    r.recompute_layers = layers;
    r.check_memory = false;
    mlir::OwningOpRef<mlir::ModuleOp> copy(module.clone());
    return planPlacedModule(*copy, r);
  };
  auto final = [&](const std::string& mode, const std::string& layers) {
    PlanRequest r = request;
    r.recompute = mode;
    r.recompute_every = 1;
    r.recompute_layers = layers;
    return planPlacedModule(module, r);
  };
  absl::StatusOr<PlanResult> none = trial("none", "");
  if (!none.ok()) return none.status();
  const loom::plan::Predicted& n = none->plan.predicted;
  if (n.peak_bytes <= budget) return final("none", "");
  absl::StatusOr<PlanResult> selective = trial("selective", "");
  if (!selective.ok()) return selective.status();
  absl::StatusOr<PlanResult> full = trial("full", "");
  if (!full.ok()) return full.status();
  const loom::plan::Predicted& s = selective->plan.predicted;
  const loom::plan::Predicted& f = full->plan.predicted;
  if (f.peak_bytes > budget) return final("full", "");
  const int64_t layers = repeatedLayers(full->plan);
  if (layers < 1) return final("full", "");
  const double l = static_cast<double>(layers);
  // Per layer: bytes saved and seconds added by each mode.
  const double savedFull = static_cast<double>(n.peak_bytes - f.peak_bytes) / l;
  const double savedSelective = static_cast<double>(n.peak_bytes - s.peak_bytes) / l;
  const double costFull = (f.step_time_s - n.step_time_s) / l;
  const double costSelective = (s.step_time_s - n.step_time_s) / l;
  double target = static_cast<double>(budget);
  std::string chosen = "full:" + std::to_string(layers);
  for (int attempt = 0; attempt < 8; ++attempt) {
    // The cheapest (full, selective) layer counts whose interpolated peak
    // is within the target.
    int64_t bestFull = layers;
    int64_t bestSelective = 0;
    double bestCost = std::numeric_limits<double>::infinity();
    for (int64_t nf = 0; nf <= layers; ++nf) {
      for (int64_t ns = 0; nf + ns <= layers; ++ns) {
        const double peak = static_cast<double>(n.peak_bytes) - static_cast<double>(nf) * savedFull -
                            static_cast<double>(ns) * savedSelective;
        if (peak > target) continue;
        const double cost = static_cast<double>(nf) * costFull + static_cast<double>(ns) * costSelective;
        if (cost < bestCost) {
          bestCost = cost;
          bestFull = nf;
          bestSelective = ns;
        }
      }
    }
    std::vector<planner::recompute::LayerRun> runs;
    if (bestFull > 0) runs.push_back({planner::recompute::Mode::kFull, bestFull});
    if (bestSelective > 0) runs.push_back({planner::recompute::Mode::kSelective, bestSelective});
    chosen = planner::recompute::layerRunsText(runs);
    if (bestFull == layers) break;  // all full: known to fit
    absl::StatusOr<PlanResult> mixed = trial("none", chosen);
    if (!mixed.ok()) return mixed.status();
    const int64_t peak = mixed->plan.predicted.peak_bytes;
    if (peak <= budget) break;
    target -= static_cast<double>(peak - budget);
  }
  if (chosen == "full:" + std::to_string(layers)) return final("full", "");
  return final("none", chosen);
}

}  // namespace

absl::StatusOr<PlanResult> planModule(mlir::ModuleOp module, const PlanRequest& request) {
  if (request.recompute == "auto") return planWithAutoRecompute(module, request);
  absl::StatusOr<StageRunner> runner = StageRunner::create(request);
  if (!runner.ok()) return runner.status();
  if (absl::Status s = runner->run(module, planner::pipeline::addPlanPipeline); !s.ok()) return s;
  return exportModule(module, request, runner->topology());
}

absl::Status placeModule(mlir::ModuleOp module, const PlanRequest& request) {
  absl::StatusOr<StageRunner> runner = StageRunner::create(request);
  if (!runner.ok()) return runner.status();
  return runner->run(module, planner::pipeline::addPlacementStage);
}

absl::StatusOr<PlanResult> planPlacedModule(mlir::ModuleOp module, const PlanRequest& request) {
  absl::StatusOr<StageRunner> runner = StageRunner::create(request);
  if (!runner.ok()) return runner.status();
  if (absl::Status s = runner->run(module, planner::pipeline::addProgramStage); !s.ok()) return s;
  return exportModule(module, request, runner->topology());
}

}  // namespace loom::tools::plan
