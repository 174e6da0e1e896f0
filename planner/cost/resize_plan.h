// The plan of the same model and strategy on data-parallel axes of other
// sizes and another micro-batch, made from a plan without re-planning: what
// lets the mesh search run the pipeline once per choice of tp and knobs and
// price every fsdp and dp degree and micro-batch from that one plan
// (docs/planner_cost.md, "Search on the pipeline's programs").
//
// Only sizes change; the program is the same, since which collectives run
// and how parameters are bucketed (by whole-tensor bytes) do not depend on
// the data-parallel degrees. Every buffer's local shape is recomputed:
//   * a batch buffer (an input, a compute op's result, or a collective's,
//     wait's or buffer op's made from one) keeps its per-sequence extent and
//     scales its data-sharded dims by the micro-batch ratio;
//   * any other (parameters, their shards, gathered copies, gradients,
//     optimizer states) keeps its global shape, its dims split over the new
//     sizes as ceil(global / ways), padding included;
//   * a bucket is the sum of its members' parts (dist.bucket's layout), a
//     gathered bucket g times its input, a scattered one 1/g, an all-reduce
//     or a wait the size of what it reads.
// The result is for pricing (cost::pricePlan): attributes that restate
// sizes (bytes, group_size, offsets, chunks) keep the template's values.
#ifndef LOOM_PLANNER_COST_RESIZE_PLAN_H_
#define LOOM_PLANNER_COST_RESIZE_PLAN_H_

#include <cstdint>
#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "plan/plan.h"

namespace loom::planner::cost {

struct Resize {
  // New sizes of data-parallel axes (strategy dp or fsdp) and of the
  // pipeline axis (pp: a stage's program is the same for any stage count),
  // by axis name; axes not named keep theirs.
  std::map<std::string, int64_t> axis_sizes;
  // Sequences per data-parallel rank in the template and wanted.
  int64_t template_micro_batch = 1;
  int64_t micro_batch = 1;
};

// Fails when an axis is unknown or neither data-parallel nor pp, a size is below 1, or
// a batch dim does not hold a whole number of the template's sequences.
absl::StatusOr<plan::Plan> resizePlan(const plan::Plan& plan, const Resize& resize);

// resizePlan into `out`, a copy of `plan`'s header and buffers (resized
// before or not; its programs are neither read nor written, and may be
// left out): only the mesh, the buffers' sizes and the predicted figures
// are written. The search re-sizes a template this way per candidate
// without copying the plan's instructions.
absl::Status resizePlanInto(const plan::Plan& plan, const Resize& resize, plan::Plan& out);

}  // namespace loom::planner::cost

#endif  // LOOM_PLANNER_COST_RESIZE_PLAN_H_
