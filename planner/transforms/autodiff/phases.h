// The forward and backward passes of a training step from plan-autodiff, as
// every later pass reads them: one definition, so collective insertion,
// bucketing and the schedule agree on which gathers serve which pass.
#ifndef LOOM_PLANNER_TRANSFORMS_AUTODIFF_PHASES_H_
#define LOOM_PLANNER_TRANSFORMS_AUTODIFF_PHASES_H_

#include "llvm/ADT/DenseSet.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Operation.h"

namespace loom::planner::autodiff {

// Marks a forward op that plan-recompute repeated in the backward pass,
// where it belongs: it runs there, reads the backward gathers and is
// counted with the backward's memory.
inline constexpr char kRecomputeAttrName[] = "nn.recompute";

// Marks an op that starts a backward pass without the loss cotangent: in a
// pipeline chunk other than the last, the receive of a gradient from the
// next chunk (plan-split-stages).
inline constexpr char kBackwardRootAttrName[] = "nn.backward_root";

// The backward pass: the ops that depend on the loss cotangent
// (nn.loss_grad_arg) or on a backward root (nn.backward_root), those roots,
// and the recomputed forward ops (nn.recompute). Empty for a forward graph.
llvm::DenseSet<mlir::Operation*> backwardOps(mlir::func::FuncOp func);

// The first op of the backward pass in program order, or null.
mlir::Operation* firstBackwardOp(mlir::func::FuncOp func);

}  // namespace loom::planner::autodiff

#endif  // LOOM_PLANNER_TRANSFORMS_AUTODIFF_PHASES_H_
