// plan_bench: times the plan tool's whole pipeline (zoo build, autodiff,
// placement, collectives, memory plan, export, report) for Llama 3 8B, 70B
// and 405B on 8, 64 and 1024 devices, and prints a table. Timings are
// recorded in docs/plan_json.md, never asserted.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

#include "absl/status/statusor.h"
#include "mlir/IR/MLIRContext.h"
#include "planner/export/report.h"
#include "tools/plan/model_loader.h"
#include "tools/plan/plan_pipeline.h"

namespace {

struct Case {
  const char* model;
  const char* mesh;
  const char* axes;
  int64_t batch;
};

}  // namespace

int main() {
  constexpr Case kCases[] = {{"llama3-8b", "8", "fsdp", 8},
                             {"llama3-70b", "8x8", "fsdp,tp", 8},
                             {"llama3-405b", "128x8", "fsdp,tp", 128}};
  std::printf("%-12s %8s %-8s %6s %5s %10s %10s %12s %10s\n", "model", "mesh", "axes", "ranks",
              "seq", "build_s", "plan_s", "plan.json_MB", "total_s");
  for (const Case& c : kCases) {
    using Clock = std::chrono::steady_clock;
    const auto start = Clock::now();
    mlir::MLIRContext context;
    auto module = loom::tools::plan::loadModel(
        context, {.model = c.model, .batch = c.batch, .seq = 16, .dtype = std::nullopt});
    if (!module.ok()) {
      std::fprintf(stderr, "plan_bench: %s\n", std::string(module.status().message()).c_str());
      return 1;
    }
    const auto built = Clock::now();
    auto plan = loom::tools::plan::planModule(
        **module, {.model_name = c.model, .mesh = c.mesh, .axes = c.axes, .memory_gb = 1e6});
    if (!plan.ok()) {
      std::fprintf(stderr, "plan_bench: %s\n", std::string(plan.status().message()).c_str());
      return 1;
    }
    const std::string json = loom::plan::writePlan(plan->plan);
    const std::string report = loom::planner::exporter::formatReport(plan->plan);
    const auto done = Clock::now();
    auto seconds = [](auto a, auto b) { return std::chrono::duration<double>(b - a).count(); };
    std::printf("%-12s %8s %-8s %6lld %5d %10.3f %10.3f %12.1f %10.3f\n", c.model, c.mesh, c.axes,
                static_cast<long long>(plan->plan.worldSize()), 16, seconds(start, built),
                seconds(built, done), static_cast<double>(json.size()) / 1e6, seconds(start, done));
  }
  return 0;
}
