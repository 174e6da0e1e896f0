// The model zoo's graph builder: turns a transformer configuration (GPT-2 or
// Llama family, published or tiny) into an `nn` training graph whose
// parameters carry the checkpoints' own names and whose ops carry the module
// path of the layer they belong to.
#ifndef LOOM_PLANNER_MODELS_ZOO_BUILDER_H_
#define LOOM_PLANNER_MODELS_ZOO_BUILDER_H_

#include <string>

#include "absl/status/statusor.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/IR/Types.h"
#include "planner/models/model_config.h"

namespace loom::planner::models {

// The symbol of the model's function: the config name with every character
// that is not alphanumeric replaced by '_' ("llama3-8b" -> "llama3_8b").
std::string modelFunctionName(const TransformerConfig& config);

// Builds a module holding one `func.func @<modelFunctionName>` that computes
// the mean next-token loss of one batch:
//
//   GPT-2: (%input_ids, %labels, %position_ids: tensor<BxSxi32>, params...)
//   Llama: (%tokens, %labels: tensor<BxSxi32>, params...)
//     -> tensor<f32>
//
// Every parameter argument has `{nn.param, nn.name = "<checkpoint name>"}`
// (Hugging Face GPT-2 names; Meta's or Hugging Face's Llama names, as
// `config.names` says) and every op a NameLoc with its module path, e.g.
// "layers.3.attention.wq" or "model.layers.3.self_attn.q_proj": always
// "layers.<N>." inside a layer. Parameters have
// `element_type` (f32, bf16 or f16); the loss is f32. The graph is not
// verified here, so that callers can time building and verifying apart; it
// verifies for every valid config (the tests check the published ones).
// Fails with InvalidArgument for an invalid config, a batch or seq below 1,
// a seq beyond the config's max_seq or its sliding_window, or another
// element type. Loads the func
// and nn dialects into `context`. docs/model_zoo.md describes the graphs.
absl::StatusOr<mlir::OwningOpRef<mlir::ModuleOp>> buildModel(mlir::MLIRContext& context,
                                                             const TransformerConfig& config,
                                                             const BatchShape& shape,
                                                             mlir::Type element_type);

}  // namespace loom::planner::models

#endif  // LOOM_PLANNER_MODELS_ZOO_BUILDER_H_
