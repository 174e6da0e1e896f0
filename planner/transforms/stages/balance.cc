#include "planner/transforms/stages/balance.h"

#include <algorithm>
#include <limits>
#include <string>

#include "absl/strings/str_cat.h"

namespace loom::planner::stages {
namespace {

constexpr int64_t kInfinite = std::numeric_limits<int64_t>::max();

// The cost of layers [begin, end) as one run.
class RunCost {
 public:
  RunCost(std::span<const int64_t> costs, int64_t first_extra, int64_t last_extra)
      : prefix_(costs.size() + 1, 0), first_extra_(first_extra), last_extra_(last_extra) {
    for (size_t i = 0; i < costs.size(); ++i) prefix_[i + 1] = prefix_[i] + costs[i];
  }
  int64_t operator()(size_t begin, size_t end) const {
    return prefix_[end] - prefix_[begin] + (begin == 0 ? first_extra_ : 0) +
           (end + 1 == prefix_.size() ? last_extra_ : 0);
  }

 private:
  std::vector<int64_t> prefix_;
  int64_t first_extra_;
  int64_t last_extra_;
};

}  // namespace

absl::StatusOr<std::vector<int64_t>> balancedRuns(std::span<const int64_t> costs, int64_t parts,
                                                  int64_t first_extra, int64_t last_extra) {
  const int64_t layers = static_cast<int64_t>(costs.size());
  if (parts < 1 || parts > layers) {
    return absl::InvalidArgumentError(absl::StrCat("cannot cut ", layers, " layers into ", parts,
                                                   " runs of at least one layer each"));
  }
  if (std::any_of(costs.begin(), costs.end(), [](int64_t c) { return c < 0; }) ||
      first_extra < 0 || last_extra < 0) {
    return absl::InvalidArgumentError("layer costs must be >= 0");
  }
  const RunCost cost(costs, first_extra, last_extra);
  // least[k][j]: the least largest run when layers [j, layers) are cut
  // into k runs (kInfinite where they cannot be).
  std::vector<std::vector<int64_t>> least(parts + 1, std::vector<int64_t>(layers + 1, kInfinite));
  for (int64_t j = 0; j < layers; ++j) least[1][j] = cost(j, layers);
  for (int64_t k = 2; k <= parts; ++k) {
    for (int64_t j = 0; j + k <= layers; ++j) {
      for (int64_t end = j + 1; end + k - 1 <= layers; ++end) {
        const int64_t rest = least[k - 1][end];
        if (rest == kInfinite) continue;
        least[k][j] = std::min(least[k][j], std::max(cost(j, end), rest));
      }
    }
  }
  const int64_t best = least[parts][0];
  // Among the splits whose largest run is `best`, the most even: the least
  // sum of squared run costs (exact in 128 bits). spread[k][j] is that sum
  // for layers [j, layers) in k runs.
  using Wide = unsigned __int128;
  constexpr Wide kNone = ~Wide{0};
  auto square = [](int64_t c) { return static_cast<Wide>(c) * static_cast<Wide>(c); };
  std::vector<std::vector<Wide>> spread(parts + 1, std::vector<Wide>(layers + 1, kNone));
  for (int64_t j = 0; j < layers; ++j) {
    if (cost(j, layers) <= best) spread[1][j] = square(cost(j, layers));
  }
  for (int64_t k = 2; k <= parts; ++k) {
    for (int64_t j = 0; j + k <= layers; ++j) {
      for (int64_t end = j + 1; end + k - 1 <= layers; ++end) {
        if (cost(j, end) > best || spread[k - 1][end] == kNone) continue;
        spread[k][j] = std::min(spread[k][j], square(cost(j, end)) + spread[k - 1][end]);
      }
    }
  }
  // Each run ends at the first layer that keeps the rest on such a split.
  std::vector<int64_t> counts;
  int64_t begin = 0;
  for (int64_t k = parts; k > 1; --k) {
    int64_t end = begin + 1;
    while (cost(begin, end) > best || spread[k - 1][end] == kNone ||
           square(cost(begin, end)) + spread[k - 1][end] != spread[k][begin]) {
      ++end;
    }
    counts.push_back(end - begin);
    begin = end;
  }
  counts.push_back(layers - begin);
  return counts;
}

std::vector<int64_t> runCosts(std::span<const int64_t> costs, std::span<const int64_t> counts,
                              int64_t first_extra, int64_t last_extra) {
  const RunCost cost(costs, first_extra, last_extra);
  std::vector<int64_t> out;
  size_t begin = 0;
  for (int64_t count : counts) {
    out.push_back(cost(begin, begin + static_cast<size_t>(count)));
    begin += static_cast<size_t>(count);
  }
  return out;
}

}  // namespace loom::planner::stages
