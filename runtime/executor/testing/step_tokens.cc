#include "runtime/executor/testing/step_tokens.h"

#include <utility>

namespace loom::runtime::testing {

absl::StatusOr<StepTokens> StepTokens::create(const Executor& executor, uint64_t seed) {
  absl::StatusOr<std::unique_ptr<data::SyntheticTokens>> feed =
      data::SyntheticTokens::create({.seed = seed,
                                     .vocab = executor.vocab(),
                                     .seq = executor.seqLength(),
                                     .global_batch = executor.stepBatch()});
  if (!feed.ok()) return feed.status();
  return StepTokens(executor, *std::move(feed));
}

StepTokens::StepTokens(const Executor& executor, std::unique_ptr<data::SyntheticTokens> feed)
    : executor_(&executor),
      feed_(std::move(feed)),
      tokens_per_micro_batch_(executor.batchRows().count * executor.seqLength()),
      ids_(static_cast<size_t>(executor.microBatches() * tokens_per_micro_batch_)),
      labels_(ids_.size()) {}

absl::Status StepTokens::fill(int64_t index) {
  for (int64_t m = 0; m < executor_->microBatches(); ++m) {
    const data::RowRange rows = executor_->microBatchRows(m);
    const size_t at = static_cast<size_t>(m * tokens_per_micro_batch_);
    if (absl::Status s =
            feed_->batch(index, rows.begin, rows.count, ids_.data() + at, labels_.data() + at);
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

}  // namespace loom::runtime::testing
