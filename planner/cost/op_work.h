// The work of one `nn` op from its shapes alone, without MLIR: FLOPs, bytes
// moved, and the ComputeCost the cost model prices. The nn dialect's
// CostOpInterface (planner/dialect/nn/ir/nn_cost.cc) and the pricing of a
// plan (plan_price.h) both call these, so an op costs the same whether it is
// an MLIR op or a plan instruction. The per-element constants count the
// arithmetic of each op's documented formula; the table is in
// docs/planner_nn.md.
#ifndef LOOM_PLANNER_COST_OP_WORK_H_
#define LOOM_PLANNER_COST_OP_WORK_H_

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "planner/cost/compute_cost.h"

namespace loom::planner::cost {

// A tensor as the formulas see it.
struct TensorDesc {
  std::span<const int64_t> shape;
  // Storage bytes per element.
  int64_t element_bytes = 4;
  // The floating-point type (integer tensors: kF32, unused).
  Dtype dtype = Dtype::kF32;
  int64_t numElements() const;
  int64_t bytes() const { return numElements() * element_bytes; }
};

// One op: its name ("nn.linear"), operands and results in the dialect's
// order, and the flags that change its work.
struct OpDesc {
  std::string_view name;
  std::span<const TensorDesc> operands;
  std::span<const TensorDesc> results;
  bool transpose_lhs = false;
};

// FLOPs of one execution (2 per multiply-add); nullopt for a name that is
// not an nn op.
std::optional<int64_t> opFlops(const OpDesc& op);

// Bytes read and written by one execution: every operand and result once,
// except the embedding and its gradient, which touch only the looked-up rows.
int64_t opBytesMoved(const OpDesc& op);

// The op as the cost model prices it: nn.linear and nn.matmul are GEMMs
// (n: the result's last dim, m: the rest, k from the FLOPs), nn.attention and
// its gradient attention, nn.reshape a view, the rest memory-bound; the dtype
// is the first result's. nullopt for a name that is not an nn op.
std::optional<ComputeCost> computeCost(const OpDesc& op);

}  // namespace loom::planner::cost

#endif  // LOOM_PLANNER_COST_OP_WORK_H_
