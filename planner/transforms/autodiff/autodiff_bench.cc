// autodiff_bench: how long plan-autodiff takes on each published model's
// graph, and how large the training step it builds is. Prints one row per
// model: forward and backward op counts and the median times of the pass
// and of verifying its result over a few runs.
//
//   bazel run -c opt //planner/transforms/autodiff:autodiff_bench [-- --seq=2048 --runs=5]
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/statusor.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"
#include "planner/dialect/nn/ir/nn_dialect.h"
#include "planner/models/model_config.h"
#include "planner/models/zoo_builder.h"
#include "planner/transforms/autodiff/passes.h"

ABSL_FLAG(int64_t, seq, 2048, "tokens per sequence (capped at each model's max_seq)");
ABSL_FLAG(int64_t, batch, 1, "sequences per step");
ABSL_FLAG(int, runs, 5, "runs per model; the table shows the median");

namespace {

using Clock = std::chrono::steady_clock;
namespace models = ::loom::planner::models;

double millis(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

int64_t bodyOps(mlir::ModuleOp module) {
  mlir::func::FuncOp func = *module.getOps<mlir::func::FuncOp>().begin();
  // Every op of the body but func.return.
  return static_cast<int64_t>(func.getBody().front().getOperations().size()) - 1;
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const int runs = std::max(1, absl::GetFlag(FLAGS_runs));
  std::printf("%-12s %6s %8s %8s %12s %10s\n", "model", "seq", "fwd ops", "bwd ops", "autodiff ms",
              "verify ms");
  for (const std::string& name : models::publishedConfigNames()) {
    const models::TransformerConfig config = *models::publishedConfig(name);
    const models::BatchShape shape = {.batch = absl::GetFlag(FLAGS_batch),
                                      .seq = std::min(absl::GetFlag(FLAGS_seq), config.max_seq)};
    std::vector<double> autodiff_ms;
    std::vector<double> verify_ms;
    int64_t forward_ops = 0;
    int64_t backward_ops = 0;
    for (int run = 0; run < runs; ++run) {
      mlir::MLIRContext context;
      absl::StatusOr<mlir::OwningOpRef<mlir::ModuleOp>> module =
          models::buildModel(context, config, shape, mlir::BFloat16Type::get(&context));
      if (!module.ok()) {
        std::fprintf(stderr, "autodiff_bench: %s\n",
                     std::string(module.status().message()).c_str());
        return 1;
      }
      forward_ops = bodyOps(**module);
      // Verification off: the pass alone is timed, its result verified apart.
      mlir::PassManager pm(&context);
      pm.enableVerifier(false);
      pm.addNestedPass<mlir::func::FuncOp>(loom::planner::autodiff::createPlanAutodiff());
      const Clock::time_point start = Clock::now();
      if (mlir::failed(pm.run(**module))) {
        std::fprintf(stderr, "autodiff_bench: plan-autodiff failed on %s\n", name.c_str());
        return 1;
      }
      const Clock::time_point differentiated = Clock::now();
      if (mlir::failed(mlir::verify(**module))) {
        std::fprintf(stderr, "autodiff_bench: the %s training step does not verify\n",
                     name.c_str());
        return 1;
      }
      autodiff_ms.push_back(millis(differentiated - start));
      verify_ms.push_back(millis(Clock::now() - differentiated));
      backward_ops = bodyOps(**module) - forward_ops;
    }
    std::printf("%-12s %6lld %8lld %8lld %12.1f %10.1f\n", name.c_str(),
                static_cast<long long>(shape.seq), static_cast<long long>(forward_ops),
                static_cast<long long>(backward_ops), median(autodiff_ms), median(verify_ms));
  }
  return 0;
}
