#include "tools/train/step_metrics.h"

namespace loom::train {

nlohmann::json toJson(const StepMetrics& m) {
  nlohmann::json line = {{"step", m.step},
                         {"loss", m.loss},
                         {"lr", m.lr},
                         {"tokens_per_s", m.tokens_per_s},
                         {"step_s", m.step_s},
                         {"peak_bytes", m.peak_bytes},
                         {"phase_peak_bytes", m.phase_peak_bytes},
                         {"reserved_bytes", m.reserved_bytes},
                         {"comm_bytes", m.comm_bytes}};
  if (m.grad_norm) line["grad_norm"] = *m.grad_norm;
  if (m.exposed_comm_s) line["exposed_comm_s"] = *m.exposed_comm_s;
  if (m.bubble_s) line["bubble_s"] = *m.bubble_s;
  if (m.eval_loss) line["eval_loss"] = *m.eval_loss;
  if (m.eval_s) line["eval_s"] = *m.eval_s;
  if (m.ranks_with_data) line["ranks_with_data"] = *m.ranks_with_data;
  return line;
}

std::vector<Scalar> toScalars(const StepMetrics& m) {
  std::vector<Scalar> scalars = {{"train/loss", m.loss},
                                 {"train/lr", m.lr},
                                 {"perf/tokens_per_s", m.tokens_per_s},
                                 {"perf/step_s", m.step_s},
                                 {"memory/peak_bytes", static_cast<double>(m.peak_bytes)},
                                 {"comm/bytes", static_cast<double>(m.comm_bytes)}};
  if (m.grad_norm) scalars.emplace_back("train/grad_norm", *m.grad_norm);
  if (m.exposed_comm_s) scalars.emplace_back("comm/exposed_s", *m.exposed_comm_s);
  if (m.bubble_s) scalars.emplace_back("pipeline/bubble_s", *m.bubble_s);
  if (m.eval_loss) scalars.emplace_back("eval/loss", *m.eval_loss);
  return scalars;
}

}  // namespace loom::train
