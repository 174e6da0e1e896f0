// The summary `plan --emit=graph|summary` prints for an `nn` model graph:
// parameter counts, forward FLOPs per token from the ops' CostOpInterface,
// and a per-layer table whose layers come from the ops' locations and the
// parameters' checkpoint names.
#ifndef LOOM_TOOLS_PLAN_GRAPH_SUMMARY_H_
#define LOOM_TOOLS_PLAN_GRAPH_SUMMARY_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace loom::tools::plan {

// One row of the per-layer table: the ops and parameters of one module,
// e.g. "layers.3" (a numbered block) or "tok_embeddings".
struct LayerSummary {
  std::string name;
  int64_t ops = 0;
  int64_t parameters = 0;
  // Forward FLOPs of the whole batch (CostOpInterface::getFlops).
  int64_t flops = 0;
  // Bytes of every op result: what the forward pass produces, an upper
  // bound on the activations the backward pass keeps.
  int64_t activation_bytes = 0;
};

struct GraphSummary {
  std::string function;
  // Token positions per step: the element count of the ids of the first
  // nn.embedding (else of the labels of nn.cross_entropy); 0 when the graph
  // reads neither, and then per-token figures are not given.
  int64_t tokens = 0;
  int64_t ops = 0;
  int64_t parameters = 0;
  int64_t parameter_bytes = 0;
  // Tables read by nn.embedding (token and position embeddings).
  int64_t embedding_parameters = 0;
  // Parameters of the numbered blocks ("layers.N", "transformer.h.N").
  int64_t block_parameters = 0;
  int64_t num_blocks = 0;
  int64_t forward_flops = 0;
  int64_t activation_bytes = 0;
  // In order of first use in the function body.
  std::vector<LayerSummary> layers;
};

// The row a module path belongs to: the path up to and including its last
// all-digit component ("layers.3.attention.wq" -> "layers.3"), else the
// whole path ("tok_embeddings").
std::string layerOf(std::string_view module_path);

// Summarizes `func`. A parameter (an argument with `nn.param`) belongs to the
// row of its `nn.name` minus the tensor name ("layers.3.ffn_norm.weight" ->
// "layers.3"), or, unnamed, to the row of its first user; an op to the row of
// the first NameLoc in its location, else to "(unnamed)". Fails when an nn op
// lacks the cost interface.
absl::StatusOr<GraphSummary> summarizeGraph(mlir::func::FuncOp func);

// The printed form: totals, FLOPs per token (forward and forward + backward
// as 3x forward) and the per-layer table.
std::string formatSummary(const GraphSummary& summary);

}  // namespace loom::tools::plan

#endif  // LOOM_TOOLS_PLAN_GRAPH_SUMMARY_H_
