// One training step's measured figures, as the metrics log (JSON lines),
// TensorBoard and the training report all take them: one record, one
// writer per format (docs/runtime.md, "Metrics log").
#ifndef LOOM_TOOLS_TRAIN_STEP_METRICS_H_
#define LOOM_TOOLS_TRAIN_STEP_METRICS_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "tools/train/tfevents_writer.h"

namespace loom::train {

struct StepMetrics {
  int64_t step = 0;
  double loss = 0;
  double lr = 0;
  std::optional<double> grad_norm;  // with clipping on
  double tokens_per_s = 0;
  double step_s = 0;
  // Rank 0's caching allocator: the peak over the step's phases, each
  // phase's peak, and what it holds from the system at the step's end.
  int64_t peak_bytes = 0;
  std::map<std::string, int64_t> phase_peak_bytes;
  int64_t reserved_bytes = 0;
  // Bytes rank 0's collectives moved, and (CPU only) the seconds it sat
  // blocked on them: communication that compute did not hide.
  int64_t comm_bytes = 0;
  std::optional<double> exposed_comm_s;
  // With pipeline stages (CPU only): the seconds rank 0 sat idle waiting
  // for other stages (StepResult::bubble_seconds).
  std::optional<double> bubble_s;
  // After an evaluation: the held-out loss and the seconds it took.
  std::optional<double> eval_loss;
  std::optional<double> eval_s;
  // --uneven_inputs=join: the ranks that still had data this step (the
  // others shadowed it).
  std::optional<int64_t> ranks_with_data;
};

// The metrics log's line (absent optionals are left out).
nlohmann::json toJson(const StepMetrics& m);
// TensorBoard's scalars: "train/loss", "eval/loss", "lr", ...
std::vector<Scalar> toScalars(const StepMetrics& m);

}  // namespace loom::train

#endif  // LOOM_TOOLS_TRAIN_STEP_METRICS_H_
