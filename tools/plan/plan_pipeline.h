// The plan tool's pipeline: from a verified nn module and the mesh,
// strategy and device flags to the per-rank plan and its plan.json, running
// the registered plan pipeline (planner/pipeline/plan_pipeline.h), then
// exporting and pricing it with the cost model (a machine profile when
// given). Pass diagnostics come back as the error, with locations.
#ifndef LOOM_TOOLS_PLAN_PLAN_PIPELINE_H_
#define LOOM_TOOLS_PLAN_PLAN_PIPELINE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "mesh/topology.h"
#include "mlir/IR/BuiltinOps.h"
#include "plan/plan.h"
#include "planner/cost/machine_profile.h"

namespace loom::tools::plan {

struct PlanRequest {
  std::string model_name = "";
  // "8x8" (sizes, named by `axes`) or "fsdp=8,tp=8".
  std::string mesh = "";
  // One strategy per mesh axis, in order: "fsdp,tp".
  std::string axes = "";
  std::string device = "h100";
  int64_t devices_per_host = 8;
  // GiB per device; 0: the device's memory.
  double memory_gb = 0;
  // plan-offload's mode (docs/planner_offload.md): "none", or "optimizer"
  // (the AdamW states in host memory, stepped on the host). The mesh
  // search turns it on by setting it on the candidates it prices.
  std::string offload = "none";
  // Host memory per rank for offloaded buffers, in GiB; 0: the device's
  // host share (mesh::DeviceSpec::host_memory_bytes).
  double host_memory_gb = 0;
  // Refuse a plan over memory_gb (off: the mesh search's template plans,
  // whose data axes are smaller than the candidates').
  bool check_memory = true;
  // Verify the IR after every pass and export the whole plan (off: the
  // mesh search's template plans, made by the same passes on the same model
  // as the verified plan of the winner, many times over, and exported as
  // search templates: exportPlan's search_template).
  bool verify_passes = true;
  uint64_t seed = 0;
  // plan-schedule's prefetch, plan-insert-collectives'
  // reshard-after-forward, plan-bucketing's bucket-mb.
  int64_t prefetch = 1;
  bool reshard_after_forward = true;
  int64_t bucket_mb = 0;
  // plan-placement's sequence-parallel: Megatron sequence parallelism on
  // the tp axis.
  bool sequence_parallel = false;
  // plan-recompute's mode (none, full, selective), every-k-th layer, and
  // per-layer modes ("full:4,selective:10", the later layers taking
  // `recompute`); "auto": per layer, the least recompute whose plan fits the
  // memory budget (planModule only; docs/planner_recompute.md, "auto").
  std::string recompute = "none";
  int64_t recompute_every = 1;
  std::string recompute_layers = "";
  // plan-accumulate: micro-steps per optimizer step, and what is kept
  // (the gathered parameters) or deferred (the gradient reductions)
  // between them.
  int64_t micro_steps = 1;
  bool keep_gathered = false;
  bool defer_grad_sync = false;
  // With a pp mesh axis (docs/planner_stages.md): model chunks per stage,
  // layers per chunk by hand ("3,5,5,3"; empty: balanced by FLOPs), and
  // the schedule (gpipe, 1f1b, interleaved-1f1b; empty: 1f1b, interleaved
  // with several chunks per stage). The micro-steps are the micro-batches
  // the schedule pipelines.
  int64_t virtual_stages = 1;
  std::string stage_layers = "";
  std::string schedule = "";
  // plan-insert-collectives' grad-reduce-dtype: the type gradients are
  // reduced in and kept as (bf16 or f32); empty: the parameter's type.
  std::string grad_reduce_dtype = "";
  // plan-optimizer-step's AdamW hyperparameters.
  struct AdamW {
    double lr = 1e-3;
    double beta1 = 0.9;
    double beta2 = 0.999;
    double eps = 1e-8;
    double weight_decay = 0.01;
  } adamw = {};
  // Measured figures for the predicted timeline; borrowed, may be null.
  const planner::cost::MachineProfile* profile = nullptr;
};

// The topology the request's mesh runs on: ceil(devices / devices_per_host)
// hosts of `device` (NVLink within a GPU host, InfiniBand between, PCIe to
// host memory; loopback TCP and memcpy for cpu). Fails on an unknown device, a mesh that does not fill its
// hosts, or a bad --mesh.
absl::StatusOr<mesh::Topology> topologyFor(const PlanRequest& request, int64_t devices);

// Parses --mesh and --axes into the placement pass's "name=size,..." spec.
absl::StatusOr<std::string> meshSpec(const std::string& mesh, const std::string& axes);

// The product of the mesh's data-parallel (dp and fsdp) axes, each axis's
// strategy from --axes or else its name: an explicit mesh's default
// batch, one sequence per data-parallel rank (as --mesh=auto's default is
// one per device).
absl::StatusOr<int64_t> dataParallelSize(const std::string& mesh, const std::string& axes);

// Checks a user-supplied mesh before planning and returns the warnings to
// print. With `devices` > 0 (--devices) the mesh's product must equal it. A
// tp axis whose groups span hosts is refused unless
// `allow_tp_across_hosts`, then it is a warning; both say how many hosts
// and which links its all-reduces would cross.
absl::StatusOr<std::vector<std::string>> checkMesh(const PlanRequest& request, int64_t devices,
                                                   bool allow_tp_across_hosts);

struct PlanResult {
  loom::plan::Plan plan;
  // The recompute planned, as "mode", "mode every k" or the per-layer runs
  // "full:4,selective:10,none:66" (--recompute=auto's choice).
  std::string recompute = "none";
};

// Plans `module` in place (it ends as the per-rank program with the memory
// attributes) and exports it. Fails on a grad_reduce_dtype other than
// bf16, f32 or empty.
absl::StatusOr<PlanResult> planModule(mlir::ModuleOp module, const PlanRequest& request);

// planModule in two steps, for the mesh search (planner/pipeline's two
// stages): placeModule runs autodiff and placement, which depend on the
// model and mesh only; planPlacedModule runs the rest with the request's
// knobs (reshard, buckets, prefetch) on a placed module, usually a clone,
// and exports. The two in turn equal planModule with the same request.
absl::Status placeModule(mlir::ModuleOp module, const PlanRequest& request);
absl::StatusOr<PlanResult> planPlacedModule(mlir::ModuleOp module, const PlanRequest& request);

}  // namespace loom::tools::plan

#endif  // LOOM_TOOLS_PLAN_PLAN_PIPELINE_H_
