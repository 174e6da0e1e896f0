#include "tools/train/uneven_inputs.h"

#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "comm/tensor.h"

namespace loom::train {

absl::StatusOr<UnevenInputs> parseUnevenInputs(absl::string_view flag) {
  if (flag == "even") return UnevenInputs::kEven;
  if (flag == "join") return UnevenInputs::kJoin;
  if (flag == "throw") return UnevenInputs::kThrow;
  return absl::InvalidArgumentError(
      absl::StrCat("--uneven_inputs=", flag, " is not one of even, join, throw"));
}

bool hasInputs(const runtime::data::DataFeed& feed,
               const std::vector<runtime::data::RowRange>& rows, int64_t step) {
  for (const runtime::data::RowRange& range : rows) {
    if (!feed.exhausted(step, range.begin, range.count)) return true;
  }
  return false;
}

int64_t lastStepWithInputs(const runtime::data::DataFeed& feed,
                           const std::vector<runtime::data::RowRange>& rows, int64_t first,
                           int64_t last) {
  if (!feed.finite()) return last;
  // A finite feed only runs out, so the steps with inputs are a prefix.
  int64_t step = first;
  while (step <= last && hasInputs(feed, rows, step)) ++step;
  return step - 1;
}

absl::Status checkEvenInputs(comm::ProcessGroup& world, int64_t last_step, absl::Duration timeout) {
  std::vector<int64_t> mine = {last_step};
  std::vector<int64_t> all(static_cast<size_t>(world.size()));
  absl::StatusOr<std::shared_ptr<comm::Work>> work =
      world.allGatherIntoTensor(comm::Tensor::of(all), comm::Tensor::of(mine));
  if (!work.ok()) return work.status();
  if (absl::Status s = (*work)->wait(timeout); !s.ok()) return s;
  const int64_t least = *std::min_element(all.begin(), all.end());
  const int64_t most = *std::max_element(all.begin(), all.end());
  if (least == most) return absl::OkStatus();
  std::vector<std::string> first;
  for (size_t r = 0; r < all.size(); ++r) {
    if (all[r] == least) first.push_back(std::to_string(r));
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "the data ends at different steps on different ranks: rank(s) ", absl::StrJoin(first, ", "),
      " have data up to step ", least, ", the longest up to step ", most,
      " (per rank: ", absl::StrJoin(all, ", "),
      "); pass --uneven_inputs=join to let the ranks that finish early shadow the others' steps "
      "(docs/runtime_data.md), or --steps=",
      least, " to stop where every rank has data"));
}

namespace {

class ShadowHook final : public comm::JoinHook {
 public:
  explicit ShadowHook(const std::function<absl::Status()>& step) : step_(step) {}
  absl::Status mainHook() override { return step_(); }

 private:
  const std::function<absl::Status()>& step_;
};

}  // namespace

std::unique_ptr<comm::JoinHook> ShadowSteps::joinHook() {
  return std::make_unique<ShadowHook>(shadow_step_);
}

}  // namespace loom::train
