// Parsing and validation of the per-axis and per-parameter strategies.
#include "planner/transforms/placement/strategy.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace loom::planner::placement {

std::string_view axisStrategyName(AxisStrategy strategy) {
  switch (strategy) {
    case AxisStrategy::kDp:
      return "dp";
    case AxisStrategy::kFsdp:
      return "fsdp";
    case AxisStrategy::kTp:
      return "tp";
    case AxisStrategy::kPp:
      return "pp";
  }
  return "unknown";
}

bool splitsBatch(AxisStrategy strategy) {
  return strategy == AxisStrategy::kDp || strategy == AxisStrategy::kFsdp;
}

absl::StatusOr<std::vector<AxisStrategy>> parseAxisStrategies(
    std::string_view spec, const std::vector<std::string>& axis_names) {
  const std::string mesh_axes = absl::StrJoin(axis_names, ", ");
  if (absl::StripAsciiWhitespace(absl::string_view(spec.data(), spec.size())).empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("no axis strategies given for mesh axes [", mesh_axes,
                     "]; give one of fsdp, dp, tp, pp per axis, e.g. axes=fsdp,tp"));
  }
  std::vector<AxisStrategy> strategies;
  int64_t tp_axes = 0;
  int64_t pp_axes = 0;
  const std::vector<absl::string_view> names =
      absl::StrSplit(absl::string_view(spec.data(), spec.size()), ',');
  if (names.size() != axis_names.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("got ", names.size(), " axis strategies ('", std::string(spec), "') for ",
                     axis_names.size(), " mesh axes [", mesh_axes,
                     "]; give exactly one strategy per mesh axis, in mesh order"));
  }
  for (size_t i = 0; i < names.size(); ++i) {
    const absl::string_view name = absl::StripAsciiWhitespace(names[i]);
    if (name == "dp") {
      strategies.push_back(AxisStrategy::kDp);
    } else if (name == "fsdp") {
      strategies.push_back(AxisStrategy::kFsdp);
    } else if (name == "tp") {
      strategies.push_back(AxisStrategy::kTp);
      ++tp_axes;
    } else if (name == "pp") {
      strategies.push_back(AxisStrategy::kPp);
      ++pp_axes;
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown strategy '", name, "' for mesh axis '", axis_names[i],
                       "'; expected fsdp, dp, tp or pp (HSDP is one fsdp and one dp axis)"));
    }
  }
  if (tp_axes > 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("got ", tp_axes, " tp axes in '", std::string(spec),
                     "'; tensor parallelism uses one mesh axis, merge them into one"));
  }
  if (pp_axes > 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("got ", pp_axes, " pp axes in '", std::string(spec),
                     "'; pipeline stages use one mesh axis, merge them into one"));
  }
  return strategies;
}

absl::StatusOr<ParamStrategy> parseParamStrategy(std::string_view name) {
  if (name == "dp") return ParamStrategy::kDp;
  if (name == "replicate") return ParamStrategy::kReplicate;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown parameter strategy '", std::string(name),
                   "'; expected dp (not sharded by fsdp) or replicate (not "
                   "sharded on any axis)"));
}

}  // namespace loom::planner::placement
