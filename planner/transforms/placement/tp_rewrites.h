// Graph rewrites plan-placement makes once a first propagation shows where
// tensor parallelism splits a contraction or the vocab: the ops whose
// sharded form needs more than a collective between two ops are split into
// ops that do not. plan-placement places the rewritten graph again. The
// rules are in docs/planner_placement.md ("Rewrites").
#ifndef LOOM_PLANNER_TRANSFORMS_PLACEMENT_TP_REWRITES_H_
#define LOOM_PLANNER_TRANSFORMS_PLACEMENT_TP_REWRITES_H_

#include <cstdint>

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "planner/transforms/placement/propagation.h"

namespace loom::planner::placement {

// Splits every `nn.linear` whose bias `placements` wants partial on some
// mesh axis (a row-parallel linear: its contraction is sharded) into
// `nn.linear` without the bias and `nn.bias_add`, so that the bias is added
// once, to the all-reduced product (Megatron's RowParallelLinear). Returns
// the number of linears split.
int64_t splitPartialBiases(mlir::func::FuncOp func, const FunctionPlacements& placements);

// Lowers every `nn.cross_entropy` whose logits arrive sharded on their last
// (vocab) dim along mesh axis `tpAxis` into Megatron's vocab-parallel
// cross-entropy: `nn.vocab_max`, `nn.vocab_stats` and
// `nn.vocab_cross_entropy`, and each `nn.cross_entropy_grad` of the same
// logits and labels into `nn.vocab_cross_entropy_grad` of the forward's
// statistics. Returns the number of losses lowered.
int64_t lowerVocabParallelLoss(mlir::func::FuncOp func, const FunctionPlacements& placements,
                               int64_t tpAxis);

}  // namespace loom::planner::placement

#endif  // LOOM_PLANNER_TRANSFORMS_PLACEMENT_TP_REWRITES_H_
