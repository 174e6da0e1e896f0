// Cross-rank checks on a thread of their own; see checked_issuer.h.
#include "comm/debug/checked_issuer.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "comm/errors.h"

namespace loom::comm::debug {

void CheckedWork::attach(std::shared_ptr<Work> issued) {
  {
    absl::MutexLock lock(&mu_);
    issued_ = issued;
    checking_ = false;
  }
  std::weak_ptr<CheckedWork> self = weak_from_this();
  issued->onCompletion([self](const absl::Status& status) {
    if (std::shared_ptr<CheckedWork> work = self.lock()) work->complete(status);
  });
  // Cancelled while it was being checked: the backend's call goes too.
  if (isCompleted() && !issued->isCompleted()) issued->abort();
}

void CheckedWork::abortEngine() {
  std::shared_ptr<Work> issued;
  {
    absl::MutexLock lock(&mu_);
    issued = issued_;
    checking_ = false;
  }
  if (issued != nullptr) issued->abort();
}

absl::Duration CheckedWork::timeoutGrace() {
  absl::MutexLock lock(&mu_);
  return checking_ ? absl::Seconds(2) : absl::ZeroDuration();
}

CheckedIssuer::CheckedIssuer(FingerprintChecker& checker, std::string where)
    : checker_(checker), where_(std::move(where)), thread_([this] { loop(); }) {}

CheckedIssuer::~CheckedIssuer() {
  std::deque<Job> dropped;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    dropped.swap(jobs_);
  }
  for (Job& job : dropped) {
    job.work->complete(makeError(
        ErrorKind::kBackend, absl::StatusCode::kCancelled,
        absl::StrCat(job.work->info().describe(),
                     " was not issued: its group was destroyed while the call waited for its "
                     "cross-rank check; wait for every call before destroying the group")));
  }
  thread_.join();
}

void CheckedIssuer::submit(CollectiveFingerprint fingerprint, std::shared_ptr<CheckedWork> work,
                           std::function<absl::StatusOr<std::shared_ptr<Work>>()> issue) {
  absl::MutexLock lock(&mu_);
  jobs_.push_back(Job{std::move(fingerprint), std::move(work), std::move(issue)});
}

void CheckedIssuer::abortAll() {
  std::deque<Job> dropped;
  std::shared_ptr<CheckedWork> checking;
  {
    absl::MutexLock lock(&mu_);
    dropped.swap(jobs_);
    checking = checking_;
  }
  auto aborted = [](const CheckedWork& work) {
    return makeError(ErrorKind::kBackend, absl::StatusCode::kAborted,
                     absl::StrCat(work.info().describe(),
                                  " was aborted: its group was aborted while the call waited for "
                                  "its cross-rank check"));
  };
  if (checking != nullptr) checking->complete(aborted(*checking));
  for (Job& job : dropped) job.work->complete(aborted(*job.work));
}

void CheckedIssuer::loop() {
  while (true) {
    Job job;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(this, &CheckedIssuer::hasJob));
      if (jobs_.empty()) return;
      job = std::move(jobs_.front());
      jobs_.pop_front();
      checking_ = job.work;
    }
    // Every rank checks every call, even one its caller has given up on,
    // so that the ranks' checks stay paired; only the issue is skipped.
    absl::Status verdict = checker_.check(job.fingerprint);
    {
      absl::MutexLock lock(&mu_);
      checking_ = nullptr;
    }
    if (!verdict.ok()) {
      job.work->complete(
          makeError(errorKind(verdict), verdict.code(), absl::StrCat(where_, verdict.message())));
      continue;
    }
    if (job.work->isCompleted()) continue;
    absl::StatusOr<std::shared_ptr<Work>> issued = job.issue();
    if (!issued.ok()) {
      job.work->complete(issued.status());
    } else {
      job.work->attach(*std::move(issued));
    }
  }
}

}  // namespace loom::comm::debug
