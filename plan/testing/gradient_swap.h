// For tests of point-to-point transfers in a plan and in the runtime: a
// two-stage pipeline made by hand from a planned layout. Axis 0 of `base`'s
// mesh (2 ranks) becomes the pp axis and both stages run `base`'s program,
// except that at the end of the backward block each stage sends its
// gradient of `param` to the other (dist.send_start, dist.recv_start, two
// dist.waits) and its optimizer step uses the received one. So stage s
// steps `param` with stage 1 - s's gradient shard, which a test can see
// through ExecutorOptions::on_gradients. Lifetimes are recomputed; the plan
// is not checked (checkPlan is the caller's, so a test can corrupt it).
#ifndef LOOM_PLAN_TESTING_GRADIENT_SWAP_H_
#define LOOM_PLAN_TESTING_GRADIENT_SWAP_H_

#include <string>

#include "absl/status/statusor.h"
#include "plan/plan.h"

namespace loom::plan::testing {

absl::StatusOr<Plan> gradientSwapPlan(const Plan& base, const std::string& param);

// The names of the buffers gradientSwapPlan adds: the received gradient.
inline constexpr char kReceivedGradient[] = "received:grad";

// Recomputes every buffer's `live` from program 0 (a plan whose programs
// differ only in what they exchange has the same intervals in each).
void recomputeLifetimes(Plan& plan);

}  // namespace loom::plan::testing

#endif  // LOOM_PLAN_TESTING_GRADIENT_SWAP_H_
