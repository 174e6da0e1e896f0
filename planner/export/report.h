// The human report (report.md) and the Chrome/Perfetto trace (trace.json) of
// an exported plan, both made from the typed plan (plan/plan.h) alone, so
// that they show exactly what the runtime will be given.
#ifndef LOOM_PLANNER_EXPORT_REPORT_H_
#define LOOM_PLANNER_EXPORT_REPORT_H_

#include <string>

#include "nlohmann/json.hpp"
#include "plan/plan.h"

namespace loom::planner::exporter {

struct ReportOptions {
  // One placements row for a parameter that every repeated layer has alike
  // ("layers.{0..31}.attention.wq.weight (x32)"): what a terminal shows;
  // report.md lists every parameter.
  bool group_layers = false;
};

// Markdown: the plan's mesh and prediction, a placements table of the
// parameters, the collectives per step with bytes per rank per axis, the
// memory breakdown at the peak and the schedule (instructions per phase and
// stream).
std::string formatReport(const plan::Plan& plan, const ReportOptions& options = {});

// Chrome trace-event JSON of the predicted step: one complete ("X") event
// per timed instruction, compute and communication on separate tracks
// (tid 1 and 2), microseconds.
nlohmann::json chromeTrace(const plan::Plan& plan);

}  // namespace loom::planner::exporter

#endif  // LOOM_PLANNER_EXPORT_REPORT_H_
