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
  // tp's all-reduces), and the parameters and optimizer states it owns.
  struct Part {
    int64_t flops = 0;
    double forward_s = 0;
    double backward_s = 0;
    double blocking_s = 0;
    int64_t resident_bytes = 0;
  };
  // Per block of the repeated stack, and the ops before it (the first
  // chunk's: the embedding) and after it (the last chunk's: the head and
  // the loss). Resident buffers outside the stack are in neither.
  std::vector<Part> layers;
  Part before;
  Part after;
};

// Reads `program` (a step without pipeline stages) and `price`, its
// priceProgram. InvalidArgument when it has no repeated stack or an op has
// no FLOPs formula.
absl::StatusOr<LayerCompute> layerCompute(const PricedProgram& program, const PlanPrice& price);

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
// schedule; pipeline_price.h), and the most parameter and optimizer-state
// bytes of the stack's layers one stage holds.
struct PipelineBound {
  double step_s = 0;
  int64_t stage_state_bytes = 0;
};
absl::StatusOr<PipelineBound> pipelineBound(const LayerCompute& compute,
                                            const std::vector<int64_t>& counts,
                                            stages::PipelineSchedule schedule,
                                            const stages::PipelineShape& shape);

}  // namespace loom::planner::cost

#endif  // LOOM_PLANNER_COST_LAYER_COMPUTE_H_
