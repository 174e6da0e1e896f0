#include "tools/train/pipeline_bubbles.h"

#include <algorithm>
#include <map>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "comm/tensor.h"

namespace loom::train {

using json = nlohmann::json;

double medianAfterFirst(const std::vector<double>& per_step) {
  if (per_step.empty()) return 0;
  std::vector<double> warm(per_step.size() > 1 ? per_step.begin() + 1 : per_step.begin(),
                           per_step.end());
  std::sort(warm.begin(), warm.end());
  return warm[warm.size() / 2];
}

json bubbleReport(const std::vector<RankBubble>& ranks, const plan::Predicted& predicted) {
  std::map<int64_t, std::vector<const RankBubble*>> byStage;
  for (const RankBubble& r : ranks) byStage[r.stage].push_back(&r);
  json stages = json::array();
  for (const auto& [stage, members] : byStage) {
    double bubble = 0, step = 0;
    std::vector<int64_t> ids;
    for (const RankBubble* r : members) {
      bubble += r->bubble_s / static_cast<double>(members.size());
      step += r->step_s / static_cast<double>(members.size());
      ids.push_back(r->rank);
    }
    stages.push_back({{"stage", stage}, {"ranks", ids}, {"bubble_s", bubble}, {"step_s", step}});
  }
  return {{"predicted_bubble_s", predicted.bubble_s},
          {"predicted_step_s", predicted.step_time_s},
          {"stages", stages}};
}

std::string bubbleTable(const json& report) {
  const double predicted = report["predicted_bubble_s"].get<double>();
  const double predictedStep = report["predicted_step_s"].get<double>();
  std::string out = absl::StrFormat(
      "\npipeline bubble per step (median of the steps after the first; planner: %.4g ms of a "
      "%.4g ms step, %.1f %%, for the stage that sets the step)\n"
      "| stage | ranks | bubble ms | share of step | vs plan |\n"
      "| ---: | --- | ---: | ---: | ---: |\n",
      predicted * 1e3, predictedStep * 1e3,
      predictedStep > 0 ? 100.0 * predicted / predictedStep : 0.0);
  for (const json& s : report["stages"]) {
    const double bubble = s["bubble_s"].get<double>(), step = s["step_s"].get<double>();
    // A ratio, not a difference: the CPU's device model is far off in
    // absolute times, so the two differ by orders of magnitude there.
    absl::StrAppendFormat(&out, "| %d | %s | %.3f | %.1f %% | %s |\n", s["stage"].get<int>(),
                          absl::StrJoin(s["ranks"].get<std::vector<int64_t>>(), ","), bubble * 1e3,
                          step > 0 ? 100.0 * bubble / step : 0.0,
                          predicted > 0 ? absl::StrFormat("%.3gx", bubble / predicted) : "-");
  }
  return out;
}

absl::StatusOr<json> gatherBubbles(comm::ProcessGroup& world, int64_t stage,
                                   const std::vector<double>& bubble_s,
                                   const std::vector<double>& step_s,
                                   const plan::Predicted& predicted) {
  constexpr int64_t kFields = 3;
  double mine[kFields] = {static_cast<double>(stage), medianAfterFirst(bubble_s),
                          medianAfterFirst(step_s)};
  std::vector<double> all(kFields * world.size());
  absl::StatusOr<std::shared_ptr<comm::Work>> work = world.allGatherIntoTensor(
      comm::Tensor(all.data(), comm::DType::kFloat64, {static_cast<int64_t>(all.size())}),
      comm::Tensor(mine, comm::DType::kFloat64, {kFields}));
  if (!work.ok()) return work.status();
  if (absl::Status s = (*work)->wait(); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat("gathering the pipeline bubbles: ", s.message()));
  }
  if (world.rank() != 0) return json::object();
  std::vector<RankBubble> ranks;
  for (int r = 0; r < world.size(); ++r) {
    ranks.push_back({.rank = r,
                     .stage = static_cast<int64_t>(all[kFields * r]),
                     .bubble_s = all[kFields * r + 1],
                     .step_s = all[kFields * r + 2]});
  }
  return bubbleReport(ranks, predicted);
}

}  // namespace loom::train
