// Loads the model the plan tool works on: from the zoo, a Hugging Face
// config.json or a .mlir file.
#include "tools/plan/model_loader.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Support/FileUtilities.h"
#include "planner/models/hf_config.h"
#include "planner/models/model_config.h"
#include "planner/models/zoo_builder.h"
#include "planner/register.h"

namespace loom::tools::plan {
namespace {

namespace models = ::loom::planner::models;

absl::StatusOr<mlir::OwningOpRef<mlir::ModuleOp>> loadFile(mlir::MLIRContext& context,
                                                           const std::string& path) {
  std::string error;
  std::unique_ptr<llvm::MemoryBuffer> buffer = mlir::openInputFile(path, &error);
  if (!buffer) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot read model file '", path, "': ", error,
                     "; give a readable .mlir file, a published model name or tiny:..."));
  }
  llvm::SourceMgr source_mgr;
  source_mgr.AddNewSourceBuffer(std::move(buffer), llvm::SMLoc());
  std::string diagnostics;
  llvm::raw_string_ostream os(diagnostics);
  // Renders each diagnostic with its file:line:col and the source line.
  mlir::SourceMgrDiagnosticHandler handler(source_mgr, &context, os);
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceFile<mlir::ModuleOp>(source_mgr, &context);
  if (!module) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model file '", path, "' does not parse or verify:\n", diagnostics,
        "fix the IR at the locations above (the nn ops are described in docs/planner_nn.md)"));
  }
  if (module->getOps<mlir::func::FuncOp>().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model file '", path, "' holds no func.func; write the model as a func.func of nn ops"));
  }
  return module;
}

absl::StatusOr<mlir::Type> elementType(mlir::MLIRContext& context, const std::string& dtype) {
  mlir::Builder builder(&context);
  if (dtype == "f32") return builder.getF32Type();
  if (dtype == "bf16") return builder.getBF16Type();
  if (dtype == "f16") return builder.getF16Type();
  return absl::InvalidArgumentError(
      absl::StrCat("--dtype='", dtype, "' is not a parameter type; use f32, bf16 or f16"));
}

// A zoo name or tiny spec, or a Hugging Face config.json.
absl::StatusOr<models::TransformerConfig> configOf(const std::string& model) {
  if (absl::EndsWith(model, ".json")) return models::loadHfConfig(model);
  return models::configFromSpec(model);
}

absl::StatusOr<mlir::OwningOpRef<mlir::ModuleOp>> buildZooModel(mlir::MLIRContext& context,
                                                                const ModelRequest& request) {
  absl::StatusOr<models::TransformerConfig> config = configOf(request.model);
  if (!config.ok()) return config.status();
  if (request.layers) config->num_layers = *request.layers;
  absl::StatusOr<mlir::Type> type = elementType(context, request.dtype.value_or("f32"));
  if (!type.ok()) return type.status();
  const models::BatchShape shape = {.batch = request.batch.value_or(1),
                                    .seq = request.seq.value_or(defaultSeq(*config))};
  absl::StatusOr<mlir::OwningOpRef<mlir::ModuleOp>> module =
      models::buildModel(context, *config, shape, *type);
  if (!module.ok()) return module.status();
  std::string diagnostics;
  llvm::raw_string_ostream os(diagnostics);
  mlir::ScopedDiagnosticHandler handler(&context, [&](mlir::Diagnostic& diagnostic) {
    os << diagnostic.getLocation() << ": " << diagnostic << "\n";
    return mlir::success();
  });
  if (mlir::failed(mlir::verify(**module))) {
    return absl::InternalError(absl::StrCat("the zoo built an invalid graph for ", config->name,
                                            " (a builder bug):\n", diagnostics));
  }
  return module;
}

}  // namespace

int64_t defaultSeq(const models::TransformerConfig& config) {
  const int64_t seq = std::min(config.max_seq, kDefaultSeqCap);
  return config.sliding_window > 0 ? std::min(seq, config.sliding_window) : seq;
}

absl::StatusOr<mlir::OwningOpRef<mlir::ModuleOp>> loadModel(mlir::MLIRContext& context,
                                                            const ModelRequest& request) {
  mlir::DialectRegistry registry;
  planner::registerAllDialects(registry);
  context.appendDialectRegistry(registry);
  context.loadAllAvailableDialects();
  if (!absl::EndsWith(request.model, ".mlir")) return buildZooModel(context, request);
  for (const auto& [flag, set] : {std::pair{"--batch", request.batch.has_value()},
                                  std::pair{"--seq", request.seq.has_value()},
                                  std::pair{"--dtype", request.dtype.has_value()},
                                  std::pair{"a layer count", request.layers.has_value()}}) {
    if (set) {
      return absl::InvalidArgumentError(
          absl::StrCat(flag, " applies to zoo models only; the IR of '", request.model,
                       "' fixes its shapes and types, so drop ", flag, " or edit the file"));
    }
  }
  return loadFile(context, request.model);
}

}  // namespace loom::tools::plan
