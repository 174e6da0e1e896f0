// zoo_bench: how long the zoo takes to emit and verify each published model's
// graph (the target: Llama 3 405B in under 1 s). Prints one row per model:
// nn ops, arguments, parameters (summed over the nn.param arguments) and the
// median build and verify times over a few runs.
//
//   bazel run -c opt //planner/models:zoo_bench [-- --seq=2048 --runs=5]
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
#include "planner/dialect/nn/ir/nn_dialect.h"
#include "planner/models/model_config.h"
#include "planner/models/zoo_builder.h"

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

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const int runs = std::max(1, absl::GetFlag(FLAGS_runs));
  std::printf("%-12s %6s %6s %8s %17s %10s %10s\n", "model", "seq", "ops", "args", "params",
              "build ms", "verify ms");
  for (const std::string& name : models::publishedConfigNames()) {
    const models::TransformerConfig config = *models::publishedConfig(name);
    const models::BatchShape shape = {.batch = absl::GetFlag(FLAGS_batch),
                                      .seq = std::min(absl::GetFlag(FLAGS_seq), config.max_seq)};
    std::vector<double> build_ms;
    std::vector<double> verify_ms;
    int64_t ops = 0;
    int64_t args = 0;
    int64_t params = 0;
    for (int run = 0; run < runs; ++run) {
      // A fresh context per run, as the plan tool has; loading the dialects
      // is a one-off cost outside the timed region.
      mlir::MLIRContext context;
      context.loadDialect<mlir::func::FuncDialect, loom::planner::nn::NnDialect>();
      const Clock::time_point start = Clock::now();
      absl::StatusOr<mlir::OwningOpRef<mlir::ModuleOp>> module =
          models::buildModel(context, config, shape, mlir::BFloat16Type::get(&context));
      const Clock::time_point built = Clock::now();
      if (!module.ok()) {
        std::fprintf(stderr, "zoo_bench: %s\n", std::string(module.status().message()).c_str());
        return 1;
      }
      if (mlir::failed(mlir::verify(**module))) {
        std::fprintf(stderr, "zoo_bench: the %s graph does not verify\n", name.c_str());
        return 1;
      }
      build_ms.push_back(millis(built - start));
      verify_ms.push_back(millis(Clock::now() - built));
      mlir::func::FuncOp func = *(*module)->getOps<mlir::func::FuncOp>().begin();
      // Every op of the body but func.return.
      ops = static_cast<int64_t>(func.getBody().front().getOperations().size()) - 1;
      args = func.getNumArguments();
      params = 0;
      for (mlir::BlockArgument arg : func.getArguments()) {
        if (func.getArgAttr(arg.getArgNumber(), loom::planner::nn::NnDialect::kParamAttrName)) {
          params += llvm::cast<mlir::RankedTensorType>(arg.getType()).getNumElements();
        }
      }
    }
    std::printf("%-12s %6lld %6lld %8lld %17lld %10.1f %10.1f\n", name.c_str(),
                static_cast<long long>(shape.seq), static_cast<long long>(ops),
                static_cast<long long>(args), static_cast<long long>(params), median(build_ms),
                median(verify_ms));
  }
  return 0;
}
