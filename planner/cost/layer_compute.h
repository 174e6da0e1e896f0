// A model's compute and resident state layer by layer, read off its program
// without pipeline stages: what a pipeline of its layers is balanced by
// (FLOPs, as plan-stages balances them), and what bounds a pipeline's step
// time and memory before its stages are planned (the mesh search prices a
// pipeline candidate only where these bounds let it win).
#ifndef LOOM_PLANNER_COST_LAYER_COMPUTE_H_
#define LOOM_PLANNER_COST_LAYER_COMPUTE_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "planner/cost/cost_model.h"
#include "planner/cost/plan_price.h"
#include "planner/transforms/stages/schedule_order.h"

namespace loom::planner::cost {

struct LayerCompute {
  // One micro-batch's compute ops, forward and backward (recomputed ones
  // included), its blocking collectives (which hold the compute stream:
  // tp's all-reduces), the parameters and optimizer states it owns, its
  // parameters' gradients the optimizer reads, and the activations one
  // micro-batch keeps from its forward to its backward (those its own
  // backward alone reads: wherever the chunk boundaries fall, the chunk
  // that runs that backward holds them from its forward until then).
  struct Part {
    int64_t flops = 0;
    double forward_s = 0;
    double backward_s = 0;
    double blocking_s = 0;
    int64_t resident_bytes = 0;
    int64_t optimizer_bytes = 0;  // of resident_bytes, the optimizer states'
    int64_t grad_bytes = 0;
    int64_t saved_bytes = 0;
  };
  // Per block of the repeated stack, and the ops before it (the first
  // chunk's: the embedding) and after it (the last chunk's: the head and
  // the loss). A parameter outside the stack (and its optimizer states)
  // belongs to the part whose ops alone read it: a tied embedding, read
  // before and after, belongs to neither.
  std::vector<Part> layers;
  Part before;
  Part after;
};

// Reads `program` (a step without pipeline stages) and `price`, its
// priceProgram; with no price, every time is 0 (FLOPs and bytes alone:
// what the memory bound needs, without pricing). InvalidArgument when it
// has no repeated stack or an op has no FLOPs formula.
absl::StatusOr<LayerCompute> layerCompute(const PricedProgram& program, const PlanPrice* price);

// `compute` of a template of kTemplateBlocks layers (repeat_blocks.h) for
// a model of `layers`: its middle layer repeated, as repeatBlocks repeats
// the template's program. Exact, since repeated layers do the same work.
LayerCompute repeatLayers(const LayerCompute& compute, int64_t layers);

// The layers of each of `chunks` chunks, as plan-stages balances them.
absl::StatusOr<std::vector<int64_t>> balanceChunks(const LayerCompute& compute, int64_t chunks);

// What no pipeline of chunks of `counts` layers undercuts under `schedule`:
// the makespan of its compute alone (no transfer time), plus the most
// blocking collectives one stage runs in a step (a stage's step is its
// own time, blocking collectives included, plus its wait on the compute
// schedule; pipeline_price.h).
absl::StatusOr<double> pipelineStepBound(const LayerCompute& compute,
                                         const std::vector<int64_t>& counts,
                                         stages::PipelineSchedule schedule,
                                         const stages::PipelineShape& shape);

// The least the fullest stage of that pipeline holds at once: its
// parameters and optimizer states, with either the gradients its optimizer
// reads or the saved activations of every micro-batch chunk whose forward
// has run and whose backward has not, at the point of its schedule where
// they are most. `compute`'s parameter, state and gradient bytes are
// divided by `state_shards`: read once without an fsdp axis, they bound
// every fsdp size (a rank holds at least its share of each buffer).
absl::StatusOr<int64_t> pipelineMemoryBound(const LayerCompute& compute,
                                            const std::vector<int64_t>& counts,
                                            stages::PipelineSchedule schedule,
                                            const stages::PipelineShape& shape,
                                            int64_t state_shards);

// The least one rank of a plan without stages holds at once, read the
// same way: every part's parameters and optimizer states (divided by
// `state_shards`), with the larger of the gradients the optimizer reads or
// one micro-batch's saved activations; with the optimizer on the host, its
// states and the gradients it reads are left out. Looser than the plan's
// own bound, but it needs no template of the candidate's mesh: the search
// asks it first.
int64_t stackMemoryBound(const LayerCompute& compute, int64_t state_shards,
                         bool optimizer_on_host);

}  // namespace loom::planner::cost

#endif  // LOOM_PLANNER_COST_LAYER_COMPUTE_H_
