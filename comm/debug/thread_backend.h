// An in-process stand-in for the side CPU backend, for the checker's tests
// and benchmark: the ranks of a ThreadGroup are threads of one process, and
// ThreadBackend runs allGather / allGatherIntoTensor over it with a real
// cross-thread exchange and timeouts, asynchronously on one worker thread per
// rank as Gloo does.
#ifndef LOOM_COMM_DEBUG_THREAD_BACKEND_H_
#define LOOM_COMM_DEBUG_THREAD_BACKEND_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "comm/backend.h"
#include "comm/store.h"

namespace loom::comm::debug {

// The meeting point of `size` ranks.
class ThreadGroup {
 public:
  explicit ThreadGroup(int size) : size_(size) {}
  int size() const { return size_; }

  // Rank `rank`'s part of exchange number `round`: waits until every rank
  // has given its part, then returns all parts in rank order. Fails with a
  // timeout error naming the ranks that did not come within `timeout`; once
  // one rank gave up on a round, the others fail at once, as peers of a
  // closed Gloo connection do.
  absl::StatusOr<std::vector<Bytes>> exchange(uint64_t round, int rank, Bytes part,
                                              absl::Duration timeout);

 private:
  struct Round {
    std::vector<std::optional<Bytes>> parts;
    int arrived = 0;
    int left = 0;
    bool abandoned = false;
  };

  const int size_;
  absl::Mutex mu_;
  std::map<uint64_t, Round> rounds_ ABSL_GUARDED_BY(mu_);
};

class ThreadBackend : public Backend {
 public:
  ThreadBackend(std::shared_ptr<ThreadGroup> group, int rank, std::string group_name,
                absl::Duration timeout);
  ~ThreadBackend() override;

  std::string_view name() const override { return "thread"; }

  WorkOr allGather(std::vector<Tensor> outputs, Tensor input, const AllGatherOptions& options,
                   const CollectiveInfo& info) override;
  WorkOr allGatherIntoTensor(Tensor output, Tensor input, const AllGatherOptions& options,
                             const CollectiveInfo& info) override;

 private:
  // Queues an exchange of `input`'s bytes; `deliver` gets every rank's part.
  WorkOr enqueue(Tensor input, const AllGatherOptions& options, const CollectiveInfo& info,
                 std::function<void(const std::vector<Bytes>&)> deliver);
  void run();

  const std::shared_ptr<ThreadGroup> group_;
  const absl::Duration timeout_;
  absl::Mutex mu_;
  std::deque<std::function<void()>> tasks_ ABSL_GUARDED_BY(mu_);
  uint64_t next_round_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread worker_;
};

// One ThreadBackend per rank of a fresh ThreadGroup.
std::vector<std::unique_ptr<Backend>> makeThreadBackends(int size, std::string group_name,
                                                         absl::Duration timeout);

}  // namespace loom::comm::debug

#endif  // LOOM_COMM_DEBUG_THREAD_BACKEND_H_
