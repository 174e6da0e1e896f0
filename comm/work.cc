// Completion, waiting and abort of Work handles.
#include "comm/work.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "comm/errors.h"

namespace loom::comm {

std::string CollectiveInfo::describe() const {
  std::string text =
      absl::StrFormat("%s #%d in group %s (rank %d of %d)", op, seq, group, rank, group_size);
  if (peer >= 0) absl::StrAppend(&text, ", peer rank ", peer);
  return text;
}

Work::Work(CollectiveInfo info, absl::Duration default_timeout)
    : info_(std::move(info)), default_timeout_(default_timeout) {}

bool Work::isCompleted() const {
  absl::MutexLock lock(&mu_);
  return completed_;
}

bool Work::isSuccess() const {
  absl::MutexLock lock(&mu_);
  return completed_ && status_.ok();
}

absl::Status Work::exception() const {
  absl::MutexLock lock(&mu_);
  return status_;
}

absl::Status Work::wait(std::optional<absl::Duration> timeout) {
  const absl::Duration limit = timeout.value_or(default_timeout_);
  {
    absl::MutexLock lock(&mu_);
    if (mu_.AwaitWithTimeout(absl::Condition(&completed_), limit)) return status_;
  }
  if (const absl::Duration grace = timeoutGrace(); grace > absl::ZeroDuration()) {
    absl::MutexLock lock(&mu_);
    if (mu_.AwaitWithTimeout(absl::Condition(&completed_), grace)) return status_;
  }
  const absl::Status timed_out = timeoutError(
      absl::StrCat(info_.describe(), " did not complete within ", absl::FormatDuration(limit),
                   "; another rank of the group is likely missing, slower, or called a different "
                   "collective (run with debug checks to see which)"));
  if (complete(timed_out)) abortEngine();
  return exception();
}

absl::Status Work::synchronize() { return wait(); }

void Work::abort() {
  if (complete(makeError(ErrorKind::kBackend, absl::StatusCode::kAborted,
                         absl::StrCat(info_.describe(), " was aborted")))) {
    abortEngine();
  }
}

bool Work::complete(absl::Status status) {
  std::vector<std::function<void(const absl::Status&)>> callbacks;
  {
    absl::MutexLock lock(&mu_);
    if (completed_) return false;
    completed_ = true;
    status_ = status;
    callbacks.swap(callbacks_);
  }
  for (auto& callback : callbacks) callback(status);
  return true;
}

void Work::onCompletion(std::function<void(const absl::Status&)> callback) {
  {
    absl::MutexLock lock(&mu_);
    if (!completed_) {
      callbacks_.push_back(std::move(callback));
      return;
    }
  }
  callback(exception());
}

absl::StatusOr<std::vector<Tensor>> Work::result() const {
  absl::MutexLock lock(&mu_);
  if (!completed_) {
    return makeError(ErrorKind::kInvalidArgument, absl::StatusCode::kFailedPrecondition,
                     absl::StrCat(info_.describe(),
                                  " has not completed; wait() for it before reading its result"));
  }
  if (!status_.ok()) return status_;
  return outputs_;
}

absl::StatusOr<int> Work::sourceRank() const {
  absl::MutexLock lock(&mu_);
  if (!completed_ || !status_.ok() || !source_rank_.has_value()) {
    return makeError(ErrorKind::kInvalidArgument, absl::StatusCode::kFailedPrecondition,
                     absl::StrCat(info_.describe(),
                                  " has no source rank: only a completed receive has one "
                                  "(on a backend that records it)"));
  }
  return *source_rank_;
}

void Work::setSourceRank(int rank) {
  absl::MutexLock lock(&mu_);
  source_rank_ = rank;
}

void Work::setOutputs(std::vector<Tensor> outputs) {
  absl::MutexLock lock(&mu_);
  outputs_ = std::move(outputs);
}

std::shared_ptr<Future<std::vector<Tensor>>> Work::getFuture() {
  std::shared_ptr<Future<std::vector<Tensor>>> future;
  {
    absl::MutexLock lock(&mu_);
    if (future_ != nullptr) return future_;
    future_ = std::make_shared<Future<std::vector<Tensor>>>(default_timeout_);
    future = future_;
  }
  // Completion callbacks run inside complete(), while the Work exists.
  onCompletion([this, future](const absl::Status& status) {
    if (!status.ok()) {
      future->setError(status);
      return;
    }
    std::vector<Tensor> outputs;
    {
      absl::MutexLock lock(&mu_);
      outputs = outputs_;
    }
    future->setValue(std::move(outputs));
  });
  return future;
}

}  // namespace loom::comm
