// Work: the handle of one asynchronous collective or point-to-point call, as
// c10d's Work. Every call returns one; its identity (group, rank, op,
// sequence number) is what every error about the call names.
#ifndef LOOM_COMM_WORK_H_
#define LOOM_COMM_WORK_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "comm/future.h"
#include "comm/tensor.h"

namespace loom::comm {

// Who called what: the part of a collective every rank agrees on (group,
// op, sequence number) plus the caller's rank.
struct CollectiveInfo {
  std::string group;  // the group's name, e.g. "default" or "mesh/tp/1"
  int rank = 0;       // the caller's rank within the group
  int group_size = 0;
  uint64_t seq = 0;  // 1-based, per group, the same on every rank
  std::string op;    // "all_reduce", "send", ...
  int peer = -1;     // the other rank of a send/recv, else -1

  // "all_reduce #7 in group mesh/tp/1 (rank 1 of 4)"; send/recv add the peer.
  std::string describe() const;
};

class Work {
 public:
  Work(CollectiveInfo info, absl::Duration default_timeout);
  virtual ~Work() = default;

  Work(const Work&) = delete;
  Work& operator=(const Work&) = delete;

  const CollectiveInfo& info() const { return info_; }

  bool isCompleted() const;
  // Completed without error.
  bool isSuccess() const;
  // Why the call failed; OK while it runs or when it succeeded.
  absl::Status exception() const;

  // Blocks until the call completes or `timeout` passes. A timeout fails the
  // Work with a timeout error that names info() and aborts it, as c10d does:
  // a collective that one rank gave up on cannot complete correctly.
  absl::Status wait(std::optional<absl::Duration> timeout = std::nullopt);

  // Orders the caller after the call. CPU backends block like wait(); CUDA
  // backends make the caller's stream wait on the call's event instead.
  virtual absl::Status synchronize();

  // Gives up on the call: completes it with an aborted error (if not done)
  // and asks the backend to release what the call holds.
  void abort();

  // Backend side: completes the Work once with `status`. Later calls are
  // ignored, so a racing abort and a finishing engine cannot both win.
  // Returns whether this call completed it.
  bool complete(absl::Status status);

  // Runs `callback` once the Work completes (at once if it has), on the
  // completing thread. Used by the front end to keep the flight recorder's
  // state current.
  void onCompletion(std::function<void(const absl::Status&)> callback);

  // The call's output tensors (c10d's Work.result()): the tensor an
  // all_reduce, broadcast or recv wrote, an all_gather's outputs, nothing
  // for a barrier. An error while the call runs, or if it failed.
  absl::StatusOr<std::vector<Tensor>> result() const;

  // A future that completes with result() when the call does (c10d's
  // Work.get_future()); chain then() on it. The same future on every call.
  std::shared_ptr<Future<std::vector<Tensor>>> getFuture();

  // Front end side: what result() returns; set before the Work is handed
  // to the caller.
  void setOutputs(std::vector<Tensor> outputs);

  // The rank a receive got its data from (c10d's Work.source_rank()), once
  // it completed: the sender of a receive from any source, the peer of
  // another receive (on gloo; backends that do not record it answer with an
  // error, as for calls that receive nothing, or before completion).
  absl::StatusOr<int> sourceRank() const;
  // Backend side: records the sender before completing the Work.
  void setSourceRank(int rank);

 protected:
  // Backend-specific cancellation (close a Gloo context, ncclCommAbort).
  virtual void abortEngine() {}
  // How much longer wait() keeps waiting after its timeout before it fails
  // the Work, for a completion known to be on its way with a better error.
  virtual absl::Duration timeoutGrace() { return absl::ZeroDuration(); }

 private:
  const CollectiveInfo info_;
  const absl::Duration default_timeout_;
  mutable absl::Mutex mu_;
  bool completed_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status status_ ABSL_GUARDED_BY(mu_);
  std::vector<std::function<void(const absl::Status&)>> callbacks_ ABSL_GUARDED_BY(mu_);
  std::vector<Tensor> outputs_ ABSL_GUARDED_BY(mu_);
  std::optional<int> source_rank_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<Future<std::vector<Tensor>>> future_ ABSL_GUARDED_BY(mu_);
};

}  // namespace loom::comm

#endif  // LOOM_COMM_WORK_H_
