// The plan of a model with L repeated blocks, made from the plan of the same
// model with fewer (kTemplateBlocks) by repeating its middle block: what
// lets the mesh search run the real pipeline on a short model and price the
// full one (docs/planner_cost.md, "Search on the pipeline's programs").
//
// The repeated blocks are found from the instructions' scopes
// (plan::repeatedBlockOf). Every block of the program (forward, backward,
// optimizer) is cut into a prefix, one segment per repeated block (from
// after the previous block's last op to the block's own last op, so that a
// segment holds the gathers it prefetches and the waits it owes) and a
// suffix. The longer plan is the prefix, segments 0..m, copies of segment
// m, the remaining segments and the suffix, with every layer index in a
// scope or buffer name shifted by the copy's offset. A buffer a copy defines
// is new; one it reads is found at the same distance in layers as in the
// template, so a saved activation pairs its forward and backward copies and
// a prefetched gather its start and wait. Segments around m must be alike
// (steady state): the template has 2 x reach + 3 blocks, reach being how
// many blocks ahead anything is started (prefetch).
#ifndef LOOM_PLANNER_COST_REPEAT_BLOCKS_H_
#define LOOM_PLANNER_COST_REPEAT_BLOCKS_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "plan/plan.h"

namespace loom::planner::cost {

// Blocks in the template plans the search builds.
inline constexpr int64_t kTemplateBlocks = 7;

// The longer plan and, per buffer of it, the template buffer it copies.
struct Repeated {
  plan::Plan plan;
  std::vector<int64_t> source;
};

// The plan of `blocks` repeated blocks from `shorter`'s, which has
// kTemplateBlocks (`blocks` >= that). Predicted figures are not set (price
// the result); lifetimes and async handles are recomputed. Fails when the
// plan has no repeated stack, not kTemplateBlocks of it, or segments that
// cannot be cut (a block whose last ops are out of order).
absl::StatusOr<Repeated> repeatBlocks(const plan::Plan& shorter, int64_t blocks);

// Gives `repeated`'s buffers the shapes and bytes of their template buffers
// in `resized` (the template after resizePlan) and `resized`'s mesh: the
// repeated plan of the re-sized template, without repeating again, since
// the structure does not depend on the sizes.
void copySizes(const plan::Plan& resized, Repeated& repeated);

}  // namespace loom::planner::cost

#endif  // LOOM_PLANNER_COST_REPEAT_BLOCKS_H_
