// Turns the plan tool's --model/--batch/--seq/--dtype into a verified `nn`
// module: a zoo model or a Hugging Face config.json built at the requested
// shape, or a .mlir file parsed and verified, with MLIR's diagnostics folded
// into the error.
#ifndef LOOM_TOOLS_PLAN_MODEL_LOADER_H_
#define LOOM_TOOLS_PLAN_MODEL_LOADER_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"
#include "planner/models/model_config.h"

namespace loom::tools::plan {

// Zoo models without --seq are built at their max_seq capped to this, a
// common pre-training context that keeps the attention term realistic
// (and, for a sliding-window model, capped to the window too).
inline constexpr int64_t kDefaultSeqCap = 2048;

// The default sequence length of a configuration: max_seq capped to
// kDefaultSeqCap and, where attention is windowed, to the window (beyond it
// the graph would not be exact).
int64_t defaultSeq(const planner::models::TransformerConfig& config);

struct ModelRequest {
  // A published name ("llama3-8b"), a tiny spec ("tiny:layers=2,..."), a
  // path ending in ".json" (a Hugging Face config.json, planner/models/
  // hf_config.h) or a path ending in ".mlir".
  std::string model;
  // Zoo models and config.json files only: the batch (default 1), the
  // sequence length (default min(max_seq, kDefaultSeqCap)) and the
  // parameter type, "f32", "bf16" or "f16" (default f32). A .mlir file's IR
  // fixes these, so setting them is an error.
  std::optional<int64_t> batch = std::nullopt;
  std::optional<int64_t> seq = std::nullopt;
  std::optional<std::string> dtype = std::nullopt;
  // Zoo models only: build this many repeated blocks instead of the
  // configuration's (the mesh search's template plans).
  std::optional<int64_t> layers = std::nullopt;
};

// Loads the planner's dialects into `context` and returns the verified
// module. Fails with InvalidArgument (bad request, unreadable file, a
// config.json the planner cannot honour, IR that does not parse or verify:
// the message holds MLIR's diagnostics with their locations), or NotFound
// for an unknown model name.
absl::StatusOr<mlir::OwningOpRef<mlir::ModuleOp>> loadModel(mlir::MLIRContext& context,
                                                            const ModelRequest& request);

}  // namespace loom::tools::plan

#endif  // LOOM_TOOLS_PLAN_MODEL_LOADER_H_
