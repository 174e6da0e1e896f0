// Future<T>: a value that arrives later, as torch.futures.Future: wait() for
// it (with a timeout), read value(), or chain then(callback) to get a Future
// of the callback's result. Work::getFuture() hands one out for a
// collective's output tensors.
#ifndef LOOM_COMM_FUTURE_H_
#define LOOM_COMM_FUTURE_H_

#include <functional>
#include <memory>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "comm/errors.h"

namespace loom::comm {

template <typename T>
class Future {
 public:
  // `default_timeout` bounds wait() without an argument; futures chained
  // with then() inherit it.
  explicit Future(absl::Duration default_timeout) : default_timeout_(default_timeout) {}

  Future(const Future&) = delete;
  Future& operator=(const Future&) = delete;

  // Completes the future once with a value or an error; later calls are
  // ignored and return false. Callbacks run on the completing thread.
  bool setValue(T value) { return finish(std::move(value)); }
  bool setError(absl::Status error) {
    if (error.ok()) error = absl::InternalError("a future was failed with an OK status");
    return finish(std::move(error));
  }

  bool done() const {
    absl::MutexLock lock(&mu_);
    return result_.has_value();
  }

  // Blocks until the future completes or `timeout` passes (a timeout error;
  // the future itself stays pending). Returns the future's error, or OK.
  absl::Status wait(std::optional<absl::Duration> timeout = std::nullopt) const {
    const absl::Duration limit = timeout.value_or(default_timeout_);
    absl::MutexLock lock(&mu_);
    auto ready = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return result_.has_value(); };
    if (!mu_.AwaitWithTimeout(absl::Condition(&ready), limit)) {
      return timeoutError(
          absl::StrCat("a future did not complete within ", absl::FormatDuration(limit)));
    }
    return result_->status();
  }

  // The value, or the future's error; an error too while it is pending
  // (wait() first), as torch's Future.value() raises.
  absl::StatusOr<T> value() const {
    absl::MutexLock lock(&mu_);
    if (!result_.has_value()) {
      return makeError(ErrorKind::kInvalidArgument, absl::StatusCode::kFailedPrecondition,
                       "the future has not completed; wait() for it before reading value()");
    }
    return *result_;
  }

  // A future of `callback(*this)`, which runs once this one completes (at
  // once if it has), on the completing thread. The callback returns
  // absl::StatusOr<U>; an error it returns fails the new future.
  template <typename Callback>
  auto then(Callback callback) -> std::shared_ptr<
      Future<typename std::invoke_result_t<Callback, const Future&>::value_type>> {
    using U = typename std::invoke_result_t<Callback, const Future&>::value_type;
    auto next = std::make_shared<Future<U>>(default_timeout_);
    addCallback([this, next, callback = std::move(callback)]() mutable {
      absl::StatusOr<U> result = callback(*this);
      if (result.ok()) {
        next->setValue(*std::move(result));
      } else {
        next->setError(result.status());
      }
    });
    return next;
  }

  // Runs `callback` once the future completes (at once if it has).
  void addCallback(std::function<void()> callback) {
    {
      absl::MutexLock lock(&mu_);
      if (!result_.has_value()) {
        callbacks_.push_back(std::move(callback));
        return;
      }
    }
    callback();
  }

 private:
  bool finish(absl::StatusOr<T> result) {
    std::vector<std::function<void()>> callbacks;
    {
      absl::MutexLock lock(&mu_);
      if (result_.has_value()) return false;
      result_ = std::move(result);
      callbacks.swap(callbacks_);
    }
    for (auto& callback : callbacks) callback();
    return true;
  }

  const absl::Duration default_timeout_;
  mutable absl::Mutex mu_;
  std::optional<absl::StatusOr<T>> result_ ABSL_GUARDED_BY(mu_);
  std::vector<std::function<void()>> callbacks_ ABSL_GUARDED_BY(mu_);
};

}  // namespace loom::comm

#endif  // LOOM_COMM_FUTURE_H_
