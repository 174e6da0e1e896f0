// Join's protocol: one SUM all-reduce of "still has inputs" per iteration
// (plus one of "has joined" with throw_on_early_termination), matched by
// the joined ranks' shadow loop.
#include "comm/join.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "comm/errors.h"

namespace loom::comm {

Join::Join(std::vector<Joinable*> joinables, JoinOptions options)
    : joinables_(std::move(joinables)), options_(options) {
  if (!joinables_.empty() && joinables_[0] != nullptr) {
    group_ = &joinables_[0]->joinProcessGroup();
    active_ranks_ = group_->size();
  }
}

absl::Status Join::check() const {
  if (group_ == nullptr) {
    return invalidArgumentError("join: pass at least one Joinable (none, or a null one, given)");
  }
  for (size_t i = 0; i < joinables_.size(); ++i) {
    if (joinables_[i] == nullptr || &joinables_[i]->joinProcessGroup() != group_) {
      return invalidArgumentError(
          absl::StrCat("join: Joinable ", i,
                       " is null or uses another process group than Joinable 0; "
                       "every Joinable of a Join must use the same group"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> Join::allReduceCount(int64_t value, const char* what) {
  std::vector<int64_t> count = {value};
  if (absl::Status s = group_->allReduceSync(Tensor::of(count)); !s.ok()) {
    return makeError(errorKind(s), s.code(), absl::StrCat("join (", what, "): ", s.message()));
  }
  return count[0];
}

absl::Status Join::notify() {
  if (!options_.enable) return absl::OkStatus();
  if (absl::Status s = check(); !s.ok()) return s;
  if (joined_) {
    return invalidArgumentError("join: notify() after join(); a joined rank has no inputs left");
  }
  absl::StatusOr<int64_t> active = allReduceCount(1, "ranks with inputs");
  if (!active.ok()) return active.status();
  active_ranks_ = *active;
  if (!options_.throw_on_early_termination) return absl::OkStatus();
  absl::StatusOr<int64_t> joined = allReduceCount(0, "ranks that joined");
  if (!joined.ok()) return joined.status();
  if (*joined > 0) {
    return makeError(ErrorKind::kInvalidArgument, absl::StatusCode::kAborted,
                     absl::StrCat("join in group ", group_->name(), " (rank ", group_->rank(),
                                  " of ", group_->size(),
                                  "): a rank ran out of inputs and throw_on_early_termination "
                                  "is set; stopping every rank"));
  }
  return absl::OkStatus();
}

absl::Status Join::join() {
  if (!options_.enable) return absl::OkStatus();
  if (absl::Status s = check(); !s.ok()) return s;
  if (joined_) return invalidArgumentError("join: join() called twice");
  joined_ = true;
  std::vector<std::unique_ptr<JoinHook>> hooks;
  for (Joinable* joinable : joinables_) hooks.push_back(joinable->joinHook());
  bool is_last_joiner = true;
  while (true) {
    absl::StatusOr<int64_t> active = allReduceCount(0, "ranks with inputs");
    if (!active.ok()) return active.status();
    active_ranks_ = *active;
    if (*active == 0) break;
    if (options_.throw_on_early_termination) {
      if (absl::StatusOr<int64_t> told = allReduceCount(1, "ranks that joined"); !told.ok()) {
        return told.status();
      }
      return makeError(
          ErrorKind::kInvalidArgument, absl::StatusCode::kAborted,
          absl::StrCat("join in group ", group_->name(), " (rank ", group_->rank(), " of ",
                       group_->size(), "): this rank ran out of inputs with ", *active,
                       " rank(s) still running and throw_on_early_termination set"));
    }
    for (size_t i = 0; i < hooks.size(); ++i) {
      if (absl::Status s = hooks[i]->mainHook(); !s.ok()) {
        return makeError(errorKind(s), s.code(),
                         absl::StrCat("join: the main hook of Joinable ", i, ": ", s.message()));
      }
    }
    is_last_joiner = false;
  }
  for (size_t i = 0; i < hooks.size(); ++i) {
    if (absl::Status s = hooks[i]->postHook(is_last_joiner); !s.ok()) {
      return makeError(errorKind(s), s.code(),
                       absl::StrCat("join: the post hook of Joinable ", i, ": ", s.message()));
    }
  }
  return absl::OkStatus();
}

}  // namespace loom::comm
