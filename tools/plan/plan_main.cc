// plan: the planner's command line. It plans a model on a mesh and prints
// the report (writing plan.json, plan.mlir, report.md and trace.json with
// --out), or prints a model's verified nn graph and its summary:
//
//   bazel run //tools:plan    # llama3-8b, fsdp=8 on one 8-GPU H100 host
//   bazel run //tools:plan -- --model=llama3-70b --mesh=8x8 --axes=fsdp,tp
//       --device=h100 --devices-per-host=8 --memory-gb=80 --out=/tmp/plan
//   bazel run //tools:plan -- --model=llama3-8b --emit=summary
//   bazel run //tools:plan -- --model=tiny:layers=2 --seq=16 --emit=graph
//   bazel run //tools:plan -- --model=path/to/model.mlir --emit=graph
//
// Flags are llvm::cl options so that multi-word flags keep dashes
// (--device-type, --memory-gb), as the design's command lines spell them.
#include <cstdint>
#include <filesystem>
#include <fstream>
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
#include "planner/export/report.h"
#include "planner/models/model_config.h"
#include "tools/plan/graph_summary.h"
#include "tools/plan/model_loader.h"
#include "tools/plan/plan_pipeline.h"

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
    "emit",
    cl::desc("plan: plan on --mesh and print the report (the default with --mesh or no "
             "flags); graph: the verified nn IR, then the summary; summary: the summary only"),
    cl::cat(planCategory()));
cl::opt<std::string> mesh_flag("mesh", cl::desc("mesh sizes, e.g. 8x8 (named by --axes), or fsdp=8,tp=8"),
                               cl::cat(planCategory()));
cl::opt<std::string> axes_flag("axes",
                               cl::desc("one strategy per mesh axis: fsdp, dp or tp, e.g. fsdp,tp"),
                               cl::cat(planCategory()));
cl::opt<std::string> device_flag("device", cl::desc("device kind: h100 (default), h200, a100-80gb, a100-40gb, cpu"),
                                 cl::init("h100"), cl::cat(planCategory()));
cl::opt<int64_t> devices_per_host_flag("devices-per-host", cl::desc("devices per host (default 8)"),
                                       cl::init(8), cl::cat(planCategory()));
cl::opt<double> memory_gb_flag("memory-gb",
                               cl::desc("device memory in GiB (default: the device's)"),
                               cl::init(0), cl::cat(planCategory()));
cl::opt<std::string> out_flag("out", cl::desc("directory for plan.json, plan.mlir, report.md, trace.json"),
                              cl::cat(planCategory()));
cl::opt<uint64_t> seed_flag("seed", cl::desc("seed of the parameters' init specs (default 0)"),
                            cl::init(0), cl::cat(planCategory()));

int fail(const std::string& message) {
  llvm::errs() << "plan: " << message << "\n";
  return 2;
}

template <typename T>
std::optional<T> ifSet(const cl::opt<T>& flag) {
  if (flag.getNumOccurrences() == 0) return std::nullopt;
  return flag.getValue();
}

bool writeFile(const std::filesystem::path& path, const std::string& text) {
  std::ofstream file(path);
  file << text;
  return static_cast<bool>(file);
}

// Plans the module and prints the report; with --out, writes the plan's
// four files.
int plan(mlir::ModuleOp module) {
  absl::StatusOr<loom::tools::plan::PlanResult> result = loom::tools::plan::planModule(
      module, {.model_name = model_flag,
               .mesh = mesh_flag,
               .axes = axes_flag,
               .device = device_flag,
               .devices_per_host = devices_per_host_flag,
               .memory_gb = memory_gb_flag,
               .seed = seed_flag});
  if (!result.ok()) return fail(std::string(result.status().message()));
  const std::string report = loom::planner::exporter::formatReport(result->plan);
  llvm::outs() << report;
  if (out_flag.empty()) return 0;
  std::error_code error;
  const std::filesystem::path dir(out_flag.getValue());
  std::filesystem::create_directories(dir, error);
  if (error) return fail("cannot create --out directory '" + out_flag + "': " + error.message());
  std::string mlir;
  llvm::raw_string_ostream mlir_os(mlir);
  module.print(mlir_os);
  if (!writeFile(dir / "plan.json", result->plan.dump(2) + "\n") ||
      !writeFile(dir / "plan.mlir", mlir + "\n") || !writeFile(dir / "report.md", report) ||
      !writeFile(dir / "trace.json",
                 loom::planner::exporter::chromeTrace(result->plan).dump(1) + "\n")) {
    return fail("cannot write the plan files into '" + out_flag + "'");
  }
  llvm::errs() << "plan: wrote plan.json, plan.mlir, report.md, trace.json to " << out_flag
               << "\n";
  return 0;
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
          argc, argv,
          "plans a model on a device mesh and prints the report, or prints its nn graph and "
          "summary\n",
          &errors_os)) {
    return fail(errors + "see plan --help");
  }
  // No flags: the built-in default, Llama 3 8B under fsdp on one 8-GPU
  // H100 host.
  std::optional<int64_t> batch = ifSet(batch_flag);
  std::optional<int64_t> seq = ifSet(seq_flag);
  if (argc == 1) {
    model_flag = "llama3-8b";
    mesh_flag = "8";
    axes_flag = "fsdp";
    batch = 8;
  }
  if (emit_flag.empty()) emit_flag = mesh_flag.empty() ? "summary" : "plan";
  if (emit_flag != "graph" && emit_flag != "summary" && emit_flag != "plan") {
    return fail("--emit='" + emit_flag.getValue() +
                "' is not an output; use plan, graph or summary");
  }
  if (model_flag.empty()) {
    return fail(
        "--model is required, e.g. --model=llama3-8b, --model=tiny:layers=2 or "
        "--model=model.mlir");
  }
  if (emit_flag == "plan" && mesh_flag.empty()) {
    return fail("--emit=plan needs --mesh, e.g. --mesh=8 --axes=fsdp");
  }
  mlir::MLIRContext context;
  absl::StatusOr<mlir::OwningOpRef<mlir::ModuleOp>> module =
      loom::tools::plan::loadModel(context, {.model = model_flag,
                                             .batch = batch,
                                             .seq = seq,
                                             .dtype = ifSet(dtype_flag)});
  if (!module.ok()) return fail(std::string(module.status().message()));
  if (emit_flag == "plan") return plan(**module);
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
