// --uneven_inputs: what the ranks of a training job do when a finite data
// feed (--data=epoch:FILES) runs out on some ranks before others.
//   even   every rank must have the same number of steps; checked before the
//          first step, and refused on every rank alike, naming the ranks.
//   join   comm::Join (torch.distributed.algorithms.Join): a rank out of data
//          joins, and shadows each step the others still take by running
//          the same plan on a batch of ignored labels, so that its
//          collectives match theirs and its gradient contribution is 0.
//   throw  Join with throw_on_early_termination: every rank stops with an
//          error at the first step some rank has no data for.
// The semantics are in docs/runtime_data.md, "Uneven inputs".
#ifndef LOOM_TOOLS_TRAIN_UNEVEN_INPUTS_H_
#define LOOM_TOOLS_TRAIN_UNEVEN_INPUTS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "comm/join.h"
#include "comm/process_group.h"
#include "runtime/data/token_feed.h"

namespace loom::train {

enum class UnevenInputs { kEven, kJoin, kThrow };

// "even", "join" or "throw"; InvalidArgument naming the choices otherwise.
absl::StatusOr<UnevenInputs> parseUnevenInputs(absl::string_view flag);

// Whether any of `rows` (this rank's rows of the step batch, one range per
// micro-batch) has data at `step`.
bool hasInputs(const runtime::data::DataFeed& feed,
               const std::vector<runtime::data::RowRange>& rows, int64_t step);

// The last step in [first, last] that this rank has data for (first - 1 when
// none; `last` for a feed without end).
int64_t lastStepWithInputs(const runtime::data::DataFeed& feed,
                           const std::vector<runtime::data::RowRange>& rows, int64_t first,
                           int64_t last);

// --uneven_inputs=even: all-gathers every rank's last step over `world` and
// fails on every rank with the same message when they differ.
absl::Status checkEvenInputs(comm::ProcessGroup& world, int64_t last_step, absl::Duration timeout);

// The training loop as a comm::Joinable: once this rank has joined, each of
// the others' steps is shadowed by `shadow_step` (the next step on ignored
// labels). The Join's own all-reduces run on `world`.
class ShadowSteps final : public comm::Joinable {
 public:
  ShadowSteps(comm::ProcessGroup& world, std::function<absl::Status()> shadow_step)
      : world_(world), shadow_step_(std::move(shadow_step)) {}
  std::unique_ptr<comm::JoinHook> joinHook() override;
  comm::ProcessGroup& joinProcessGroup() override { return world_; }

 private:
  comm::ProcessGroup& world_;
  std::function<absl::Status()> shadow_step_;
};

}  // namespace loom::train

#endif  // LOOM_TOOLS_TRAIN_UNEVEN_INPUTS_H_
