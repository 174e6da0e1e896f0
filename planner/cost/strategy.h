// The mesh search's vocabulary: a candidate strategy (mesh and knobs), the
// workload it plans and the estimate a pricer gives it (search.h).
#ifndef LOOM_PLANNER_COST_STRATEGY_H_
#define LOOM_PLANNER_COST_STRATEGY_H_

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "planner/cost/cost_model.h"
#include "planner/cost/program.h"
#include "planner/transforms/stages/schedule_order.h"

namespace loom::planner::cost {

// Activation recompute (plan-recompute's modes), in order of the memory
// they save and the compute they add.
enum class Recompute { kNone, kSelective, kFull };
// "none", "selective", "full".
const char* recomputeName(Recompute recompute);

// One candidate of the search: the mesh (axes pp, dp, fsdp, tp in that
// order, pp outermost and tp innermost; an axis of degree 1 is left out)
// and the knobs of the plan. dp alone is DDP, fsdp alone ZeRO-3, dp x fsdp
// HSDP (shard within fsdp, replicate across dp); pp cuts the model into
// stages of whole layers, each with the dp, fsdp and tp axes inside.
struct Strategy {
  // Pipeline stages, model chunks per stage, and the schedule that orders
  // their micro-batches (the `accumulation` micro-steps); pp 1: none.
  int64_t pp = 1;
  int64_t virtual_stages = 1;
  stages::PipelineSchedule schedule = stages::PipelineSchedule::k1F1B;
  int64_t dp = 1;
  int64_t fsdp = 1;
  int64_t tp = 1;
  // Parameter-gather steps that run ahead of the one in use (plan-schedule's
  // prefetch).
  int64_t prefetch = 1;
  // Gather parameters again for the backward pass (false: keep the forward
  // copy; plan-insert-collectives' reshard-after-forward).
  bool reshard_after_forward = true;
  // Largest gathered bucket in MiB; 0: one bucket per unit (plan-bucketing).
  int64_t bucket_mb = 0;
  // Sequences per data-parallel rank in one micro-step, and micro-steps per
  // optimizer step (gradient accumulation).
  int64_t micro_batch = 1;
  int64_t accumulation = 1;
  // What the backward makes again instead of keeping (plan-recompute).
  Recompute recompute = Recompute::kNone;
  // Megatron sequence parallelism on the tp axis (plan-placement's
  // sequence-parallel); only with tp > 1.
  bool sequence_parallel = false;
  // Between micro-steps (plan-accumulate; only with accumulation > 1):
  // gather parameters in the first only and keep them (with fsdp > 1; no
  // resharding after forward), and reduce gradients in the last only
  // (with a data axis).
  bool keep_gathered = false;
  bool defer_grad_sync = false;
  // The AdamW states and f32 master copies in host memory, stepped there
  // (plan-offload's mode optimizer; docs/planner_offload.md).
  bool offload_optimizer = false;

  bool operator==(const Strategy&) const = default;
  int64_t devices() const { return pp * dp * fsdp * tp; }
  // Sequences per step over all ranks.
  int64_t globalBatch() const { return dp * fsdp * micro_batch * accumulation; }
  // "pp=4,dp=2,fsdp=64,tp=8": the axes of degree > 1 ("dp=1" for one
  // device).
  std::string meshSpec() const;
  // "pp,dp,fsdp,tp": their strategies, in the same order.
  std::string axes() const;
  // "pp 4 interleaved x2 + hsdp 2x64 + tp 8": for tables.
  std::string parallelism() const;
  // "prefetch 1, reshard, bucket unit, micro-batch 2 x 4, keep gathered,
  // defer sync, sp, recompute full, offload optimizer".
  std::string knobs() const;
};

// What the search plans: the model as --model names it, the sequence
// length and the parameter type (gradients travel in it too).
struct Workload {
  std::string model;
  int64_t seq = 2048;
  Dtype dtype = Dtype::kBF16;
};

struct StepEstimate {
  // One optimizer step: `accumulation` micro-steps, then the optimizer
  // (the plan's whole-step price).
  double step_time_s = 0;
  double compute_s = 0;
  double comm_s = 0;
  double exposed_comm_s = 0;
  double optimizer_s = 0;
  // Per rank, as plan-memory-plan counts it: the highest micro-step's.
  int64_t peak_bytes = 0;
  std::array<int64_t, kNumRoles> breakdown{};
  // With offload: the host memory per rank at its peak, the host's AdamW
  // steps (part of optimizer_s) and the copies compute waited for (part of
  // step_time_s, apart from exposed_comm_s).
  int64_t host_peak_bytes = 0;
  double host_optimizer_s = 0;
  double exposed_copy_s = 0;
  // Bytes each rank moves per step (comm_volume.h's formulas).
  int64_t comm_bytes_per_rank = 0;
  // Model FLOPs per step and device: 3 x the forward's (backward = 2 x
  // forward, as MFU is conventionally counted), over the global batch.
  double model_flops_per_device = 0;
  int64_t tokens_per_step = 0;
  double tokens_per_s_per_device = 0;
  // model_flops_per_device / (step time x peak of the dtype).
  double mfu = 0;
  // For the search's bounds, per step: the busy time of the fsdp stream,
  // of the busiest other comm stream, and of the backward gathers.
  double fsdp_stream_s = 0;
  double other_stream_s = 0;
  double backward_gather_s = 0;
  // The bytes one micro-step's backward gathers make (the largest
  // micro-step's): what a variant that keeps the forward's copies instead
  // holds at the end of the forward beyond the mesh's memory bound.
  int64_t backward_gather_bytes = 0;
  // The part of compute_s that is memory-bound ops (PlanPrice::memory_bound_s).
  double memory_bound_s = 0;
  // With pipeline stages: the time the step's stage waits for its peers
  // (part of step_time_s), and the layers of each model chunk as the
  // pricer cut them (what the winner's plan is cut by).
  double bubble_s = 0;
  std::vector<int64_t> chunk_layers;
};

}  // namespace loom::planner::cost

#endif  // LOOM_PLANNER_COST_STRATEGY_H_
