// plan-html: renders a plan.json as a self-contained HTML page (mesh,
// memory, predicted timeline); see docs/visual_report.md.
//
//   bazel run //tools:plan-html -- --plan=/tmp/plan/plan.json --out=/tmp/plan/plan.html
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/status/statusor.h"
#include "plan/plan.h"
#include "planner/export/visual_report.h"

ABSL_FLAG(std::string, plan, "", "the plan.json to draw (//tools:plan --out=DIR writes one)");
ABSL_FLAG(std::string, out, "", "the HTML file to write (default: plan.html next to --plan)");

namespace {

int fail(const std::string& message) {
  std::fprintf(stderr, "plan-html: %s\n", message.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "renders plan.json as an HTML page with inline SVG, e.g.\n"
      "  plan-html --plan=DIR/plan.json --out=DIR/plan.html");
  // --help lists the flags defined in this file; absl's default looks for a
  // file named after the binary, whose name has a hyphen.
  absl::FlagsUsageConfig usage;
  usage.contains_help_flags = [](absl::string_view file) { return file == __FILE__; };
  absl::SetFlagsUsageConfig(usage);
  absl::ParseCommandLine(argc, argv);
  // Under `bazel run`, relative paths mean what they mean in the user's shell.
  if (const char* dir = std::getenv("BUILD_WORKING_DIRECTORY");
      dir != nullptr && ::chdir(dir) != 0) {
    return fail(std::string("cannot change to BUILD_WORKING_DIRECTORY ") + dir);
  }
  const std::string plan_path = absl::GetFlag(FLAGS_plan);
  if (plan_path.empty()) return fail("--plan=PATH/plan.json is required");
  std::string out_path = absl::GetFlag(FLAGS_out);
  if (out_path.empty()) {
    const size_t slash = plan_path.rfind('/');
    out_path =
        (slash == std::string::npos ? std::string() : plan_path.substr(0, slash + 1)) + "plan.html";
  }
  absl::StatusOr<loom::plan::Plan> plan = loom::plan::loadPlan(plan_path);
  if (!plan.ok()) return fail(std::string(plan.status().message()));
  absl::StatusOr<std::string> page = loom::planner::visual::renderPlanPage(*plan);
  if (!page.ok()) return fail(std::string(page.status().message()));
  const std::string tmp = out_path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << *page;
    out.close();
    if (!out) return fail("cannot write '" + tmp + "'; check that its folder exists (--out)");
  }
  if (std::rename(tmp.c_str(), out_path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return fail("cannot move '" + tmp + "' to '" + out_path + "'");
  }
  std::printf("wrote %s (%zu bytes)\n", out_path.c_str(), page->size());
  return 0;
}
