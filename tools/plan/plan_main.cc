// plan: the planner's command line. Its first form prints a model's verified
// nn graph and its summary (parameters, FLOPs per token, per-layer table):
//
//   bazel run //tools:plan -- --model=llama3-8b --emit=summary
//   bazel run //tools:plan -- --model=tiny:layers=2 --seq=16 --emit=graph
//   bazel run //tools:plan -- --model=path/to/model.mlir --emit=graph
//
// Flags are llvm::cl options so that multi-word flags keep dashes
// (--device-type, --memory-gb), as the design's command lines spell them.
#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/raw_ostream.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "planner/models/model_config.h"
#include "tools/plan/graph_summary.h"
#include "tools/plan/model_loader.h"

namespace {

namespace cl = ::llvm::cl;

cl::OptionCategory& planCategory() {
  static cl::OptionCategory category("plan options");
  return category;
}

// The description lists the zoo's names; main() sets it from the zoo.
cl::opt<std::string> model_flag("model", cl::value_desc("NAME|tiny:...|FILE.mlir"),
                                cl::cat(planCategory()));
cl::opt<int64_t> batch_flag("batch", cl::desc("sequences per step (zoo models; default 1)"),
                            cl::cat(planCategory()));
cl::opt<int64_t> seq_flag("seq",
                          cl::desc("tokens per sequence (zoo models; default min(max_seq, 2048))"),
                          cl::cat(planCategory()));
cl::opt<std::string> dtype_flag("dtype",
                                cl::desc("parameter type of zoo models: f32 (default), bf16, f16"),
                                cl::cat(planCategory()));
cl::opt<std::string> emit_flag(
    "emit", cl::desc("graph: the verified nn IR, then the summary; summary: the summary only"),
    cl::init("summary"), cl::cat(planCategory()));

int fail(const std::string& message) {
  llvm::errs() << "plan: " << message << "\n";
  return 2;
}

template <typename T>
std::optional<T> ifSet(const cl::opt<T>& flag) {
  if (flag.getNumOccurrences() == 0) return std::nullopt;
  return flag.getValue();
}

}  // namespace

int main(int argc, char** argv) {
  const std::string model_help = absl::StrCat(
      "a published model (", absl::StrJoin(loom::planner::models::publishedConfigNames(), ", "),
      "), tiny[:family=gpt2|llama,layers=..,hidden=..,heads=..,kv_heads=..,ffn=..,vocab=..,"
      "seq=..], or a FILE.mlir");
  model_flag.setDescription(model_help);
  cl::HideUnrelatedOptions(planCategory());
  std::string errors;
  llvm::raw_string_ostream errors_os(errors);
  if (!cl::ParseCommandLineOptions(
          argc, argv, "prints a model's verified nn graph and its summary\n", &errors_os)) {
    return fail(errors + "see plan --help");
  }
  if (model_flag.empty()) {
    return fail(
        "--model is required, e.g. --model=llama3-8b, --model=tiny:layers=2 or "
        "--model=model.mlir");
  }
  if (emit_flag != "graph" && emit_flag != "summary") {
    return fail("--emit='" + emit_flag.getValue() + "' is not an output; use graph or summary");
  }
  mlir::MLIRContext context;
  absl::StatusOr<mlir::OwningOpRef<mlir::ModuleOp>> module =
      loom::tools::plan::loadModel(context, {.model = model_flag,
                                             .batch = ifSet(batch_flag),
                                             .seq = ifSet(seq_flag),
                                             .dtype = ifSet(dtype_flag)});
  if (!module.ok()) return fail(std::string(module.status().message()));
  if (emit_flag == "graph") {
    (*module)->print(llvm::outs());
    llvm::outs() << "\n";
  }
  bool first = true;
  for (mlir::func::FuncOp func : (*module)->getOps<mlir::func::FuncOp>()) {
    absl::StatusOr<loom::tools::plan::GraphSummary> summary =
        loom::tools::plan::summarizeGraph(func);
    if (!summary.ok()) return fail(std::string(summary.status().message()));
    if (!first) llvm::outs() << "\n";
    first = false;
    llvm::outs() << loom::tools::plan::formatSummary(*summary);
  }
  return 0;
}
