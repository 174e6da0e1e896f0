// The training report: one self-contained HTML page (inline SVG and CSS,
// nothing fetched) that rank 0 writes after a run with --report_dir: loss
// and eval curves, learning rate, throughput, the measured timeline of a
// step beside the plan's predicted one, memory per phase and a pipeline's
// bubble per stage against the plan. Drawn with the plan page's pieces (tools/html/svg_page.h), so the
// two look alike; docs/runtime.md, "Training report", shows it.
#ifndef LOOM_TOOLS_TRAIN_TRAIN_REPORT_H_
#define LOOM_TOOLS_TRAIN_TRAIN_REPORT_H_

#include <optional>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "plan/plan.h"
#include "tools/train/step_metrics.h"

namespace loom::train {

struct ReportInput {
  const plan::Plan* plan = nullptr;  // the predicted timeline and peak
  std::string title;                 // "tiny on mesh<fsdp=4>, 4 ranks, cpu, gloo"
  std::vector<StepMetrics> steps;    // rank 0's, in order
  // Every rank's peak bytes per phase: memoryReport's JSON
  // ({"predicted_peak_bytes", "ranks": [{"rank", "forward", ...}]}).
  nlohmann::json memory;
  // With pipeline stages (CPU): each stage's measured bubble beside the
  // plan's, pipeline_bubbles.h's bubbleReport; null without.
  nlohmann::json bubbles;
  // The merged measured trace (TraceRecorder::merge), when --trace was on.
  std::optional<nlohmann::json> trace;
};

std::string renderTrainReport(const ReportInput& input);

}  // namespace loom::train

#endif  // LOOM_TOOLS_TRAIN_TRAIN_REPORT_H_
