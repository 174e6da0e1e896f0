// For tests of pipeline plans in the runtime: a tiny language model made by
// hand (a token embedding, a linear head, the cross-entropy loss), as one
// program or cut into two stages on a 2-rank pp mesh. Stage 0 embeds the
// tokens and sends the activation to stage 1, which computes the logits and
// the loss and sends the activation's gradient back; each stage holds and
// steps only its own parameter. Both forms do the same arithmetic, so they
// give the same losses bit for bit. With several micro-batches the stages
// run GPipe or 1F1B order, and stage 0 waits for each activation's send in
// its backward block, so sends of different micro-batches are in flight at
// once under the same handle.
//
// Tied (GPT-2's LM head): the head is the embedding table read transposed.
// Cut in two, both stages hold a replica of it (plan::Buffer::replica_of),
// each accumulates its own part of the gradient over the micro-batches,
// and the optimizer block exchanges the parts and adds them in stage
// order, as plan-sum-tied-grads does. One program adds the parts per
// micro-batch, so with several the sums differ in rounding.
#ifndef LOOM_PLAN_TESTING_TWO_STAGE_H_
#define LOOM_PLAN_TESTING_TWO_STAGE_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "plan/plan.h"

namespace loom::plan::testing {

enum class PipelineOrder { kGPipe, k1F1B };

struct TwoStageOptions {
  int64_t stages = 2;  // 1: one program on one rank
  int64_t micro_batches = 1;
  PipelineOrder order = PipelineOrder::kGPipe;
  int64_t batch = 4;  // rows per micro-batch
  int64_t seq = 4;
  int64_t hidden = 8;
  int64_t vocab = 16;
  bool tied = false;
};

// The plan, checked (checkPlan).
absl::StatusOr<Plan> twoStagePlan(const TwoStageOptions& options);

}  // namespace loom::plan::testing

#endif  // LOOM_PLAN_TESTING_TWO_STAGE_H_
