// Self-contained HTML pages (inline SVG and CSS, no script, nothing fetched)
// that show a plan as pictures: the device mesh with its hosts and the
// groups of each axis, memory per role, and the predicted timeline of a
// step; and the mesh search as a chart of step time against peak memory.
// The plan page is made from the typed plan alone (plan/plan.h), like
// report.md; docs/visual_report.md shows both pages.
#ifndef LOOM_PLANNER_EXPORT_VISUAL_REPORT_H_
#define LOOM_PLANNER_EXPORT_VISUAL_REPORT_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "plan/plan.h"

namespace loom::planner::visual {

// One candidate of a mesh search.
struct SearchPoint {
  std::string label;
  double step_time_s = 0;
  double tokens_per_s_per_device = 0;
  double mfu = 0;
  int64_t peak_bytes = 0;
  int64_t memory_limit_bytes = 0;
  double exposed_comm_s = 0;
  bool fits = true;
  bool winner = false;
};

// The plan page. Fails with an invalid-argument error when the mesh has
// more devices than the page draws (65,536).
absl::StatusOr<std::string> renderPlanPage(const plan::Plan& plan);

// The search page: step time against peak memory per candidate, the winner
// highlighted, the memory limit as a line, and a table of every candidate.
std::string renderSearchPage(const std::vector<SearchPoint>& points, std::string_view title);

}  // namespace loom::planner::visual

#endif  // LOOM_PLANNER_EXPORT_VISUAL_REPORT_H_
