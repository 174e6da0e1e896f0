// Test helper: a rank's token ids and labels for one step of an executor,
// drawn from a synthetic feed, in the layout Executor::step reads.
#ifndef LOOM_RUNTIME_EXECUTOR_TESTING_STEP_TOKENS_H_
#define LOOM_RUNTIME_EXECUTOR_TESTING_STEP_TOKENS_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/data/token_feed.h"
#include "runtime/executor/executor.h"

namespace loom::runtime::testing {

class StepTokens {
 public:
  // A feed over the executor's vocabulary, sequence and step batch.
  static absl::StatusOr<StepTokens> create(const Executor& executor, uint64_t seed = 7);

  // Batch `index` of the feed: every micro-batch's rows of this rank,
  // micro-batch after micro-batch (Executor::microBatchRows).
  absl::Status fill(int64_t index);

  const int32_t* ids() const { return ids_.data(); }
  const int32_t* labels() const { return labels_.data(); }

 private:
  StepTokens(const Executor& executor, std::unique_ptr<data::SyntheticTokens> feed);

  const Executor* executor_;
  std::unique_ptr<data::SyntheticTokens> feed_;
  int64_t tokens_per_micro_batch_;
  std::vector<int32_t> ids_;
  std::vector<int32_t> labels_;
};

}  // namespace loom::runtime::testing

#endif  // LOOM_RUNTIME_EXECUTOR_TESTING_STEP_TOKENS_H_
