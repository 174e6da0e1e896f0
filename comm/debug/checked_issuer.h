// Cross-rank checks off the caller's thread. With checks on, every CPU
// collective must agree with the other ranks' before it reaches its backend
// (fingerprint.h); doing that on the calling thread makes each call wait
// for a round trip to every peer, which doubled the step time of a small
// model. The issuer runs the checks, in call order, on a thread of its own
// and hands each call to its backend as soon as its check passes. The
// caller gets a CheckedWork at once: it completes with the backend call's
// result, or with the check's verdict, so a mismatch still never reaches
// the engine, and the check of call k+1 overlaps the transfer of call k.
#ifndef LOOM_COMM_DEBUG_CHECKED_ISSUER_H_
#define LOOM_COMM_DEBUG_CHECKED_ISSUER_H_

#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "comm/debug/fingerprint.h"
#include "comm/work.h"

namespace loom::comm::debug {

// The caller's handle of a call that waits for its check. Before the call
// reaches its backend, abort() (or a timed-out wait()) just cancels it;
// afterwards it aborts the backend's Work.
class CheckedWork : public Work, public std::enable_shared_from_this<CheckedWork> {
 public:
  using Work::Work;

  // The backend took the call: this Work completes when `issued` does.
  void attach(std::shared_ptr<Work> issued);

 protected:
  void abortEngine() override;
  // A timed-out wait would race the check's own verdict, which names the
  // ranks at fault and is bounded by the same timeout (started earlier, at
  // the call); so a wait that times out while the call is still being
  // checked gives the verdict a little longer to arrive.
  absl::Duration timeoutGrace() override;

 private:
  absl::Mutex mu_;
  std::shared_ptr<Work> issued_ ABSL_GUARDED_BY(mu_);
  bool checking_ ABSL_GUARDED_BY(mu_) = true;
};

class CheckedIssuer {
 public:
  // `checker` must outlive the issuer. `where` starts a verdict's message
  // ("rank 1 of 4: "), as the checks on the caller's thread did.
  CheckedIssuer(FingerprintChecker& checker, std::string where);
  // Fails the calls still queued ("the group was destroyed before ..."),
  // lets a check in progress finish, and joins the thread.
  ~CheckedIssuer();

  CheckedIssuer(const CheckedIssuer&) = delete;
  CheckedIssuer& operator=(const CheckedIssuer&) = delete;

  // Queues `issue` (which hands the call to its backend) behind the calls
  // before it, to run once `fingerprint` has passed the check.
  void submit(CollectiveFingerprint fingerprint, std::shared_ptr<CheckedWork> work,
              std::function<absl::StatusOr<std::shared_ptr<Work>>()> issue);

  // The group is being aborted: fails the call being checked and every call
  // queued, so that none of them is issued and their waits end now.
  void abortAll();

 private:
  struct Job {
    CollectiveFingerprint fingerprint;
    std::shared_ptr<CheckedWork> work;
    std::function<absl::StatusOr<std::shared_ptr<Work>>()> issue;
  };
  void loop();
  bool hasJob() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !jobs_.empty() || stopping_; }

  FingerprintChecker& checker_;
  const std::string where_;
  absl::Mutex mu_;
  std::deque<Job> jobs_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<CheckedWork> checking_ ABSL_GUARDED_BY(mu_);  // the call in its check
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace loom::comm::debug

#endif  // LOOM_COMM_DEBUG_CHECKED_ISSUER_H_
