// Join: training on uneven inputs, as torch.distributed.algorithms.Join.
// Ranks that run out of inputs early "join": instead of stopping (and
// leaving the others blocked in their next collective) they keep shadowing
// the collectives the remaining ranks still make, through one JoinHook per
// Joinable (the users of collectives, e.g. a gradient all-reduce), until
// every rank has joined.
//
//   Join join({&ddp});                      // every rank, same Joinables
//   for (const Batch& batch : my_batches) {
//     if (absl::Status s = join.notify(); !s.ok()) return s;
//     ddp.step(batch);                      // its collectives
//   }
//   absl::Status done = join.join();        // shadows until all have joined
//
// Per iteration, notify() all-reduces a 1 (this rank still has inputs);
// a joined rank all-reduces a 0 and, while the sum is not 0, runs every
// hook's mainHook() (which must make the same collectives as one iteration
// of its Joinable), then postHook(is_last_joiner) once all have joined.
// With throw_on_early_termination, a second all-reduce per iteration
// carries whether a rank has joined, and every rank then fails at once.
#ifndef LOOM_COMM_JOIN_H_
#define LOOM_COMM_JOIN_H_

#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "comm/process_group.h"

namespace loom::comm {

// What a joined rank runs for one Joinable.
class JoinHook {
 public:
  virtual ~JoinHook() = default;
  // Shadows one iteration of the Joinable's collectives (e.g. all-reduces
  // zeros where the others all-reduce gradients).
  virtual absl::Status mainHook() { return absl::OkStatus(); }
  // Once every rank has joined; `is_last_joiner` is true on the ranks that
  // joined last (they shadowed nothing), e.g. to broadcast final state from
  // one of them.
  virtual absl::Status postHook(bool is_last_joiner) {
    (void)is_last_joiner;
    return absl::OkStatus();
  }
};

// A user of collectives that can take part in a Join.
class Joinable {
 public:
  virtual ~Joinable() = default;
  virtual std::unique_ptr<JoinHook> joinHook() = 0;
  // The group the Join's own all-reduces run on (c10d's
  // join_process_group); every Joinable of one Join must use the same one.
  virtual ProcessGroup& joinProcessGroup() = 0;
};

struct JoinOptions {
  // A disabled Join does nothing: notify() and join() return OK at once.
  bool enable = true;
  // Fail every rank as soon as one has joined, instead of shadowing.
  bool throw_on_early_termination = false;
};

class Join {
 public:
  // Every rank passes its Joinables in the same order. An empty list or
  // Joinables on different groups are reported by notify() and join().
  explicit Join(std::vector<Joinable*> joinables, JoinOptions options = {});

  // Called once per iteration before the Joinables' collectives, while this
  // rank has inputs. With throw_on_early_termination, an error on every rank
  // once any rank has joined.
  absl::Status notify();

  // Called once when this rank is out of inputs: shadows the others'
  // iterations until every rank has joined, then runs the post hooks.
  absl::Status join();

  // How many ranks still had inputs at the last notify() or shadowed
  // iteration (the group's size before the first); for logs and metrics.
  int64_t activeRanks() const { return active_ranks_; }

 private:
  absl::Status check() const;
  // All-reduces `value` (SUM, i64) over the group and returns the sum.
  absl::StatusOr<int64_t> allReduceCount(int64_t value, const char* what);

  std::vector<Joinable*> joinables_;
  JoinOptions options_;
  ProcessGroup* group_ = nullptr;
  bool joined_ = false;
  int64_t active_ranks_ = 0;
};

}  // namespace loom::comm

#endif  // LOOM_COMM_JOIN_H_
