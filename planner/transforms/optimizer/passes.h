// The optimizer stage's passes: plan-optimizer-step makes each parameter's
// AdamW states and update explicit in the per-rank program.
#ifndef LOOM_PLANNER_TRANSFORMS_OPTIMIZER_PASSES_H_
#define LOOM_PLANNER_TRANSFORMS_OPTIMIZER_PASSES_H_

#include <memory>

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "planner/dialect/dist/ir/dist_dialect.h"

namespace loom::planner::optimizer {

// The argument attribute that marks an AdamW state and names its kind:
// "exp_avg", "exp_avg_sq" or "master".
inline constexpr char kOptimizerStateAttrName[] = "dist.optimizer_state";

// Marks an op that runs in the optimizer phase, once per optimizer step,
// before the dist.optimizer_step ops: the exchange of a tied parameter's
// gradient between the pipeline stages that hold it (plan-sum-tied-grads).
inline constexpr char kOptimizerPhaseAttrName[] = "dist.optimizer_phase";

// Whether `op` runs in the optimizer phase: a dist.optimizer_step, or an
// op marked with kOptimizerPhaseAttrName.
bool inOptimizerPhase(mlir::Operation* op);

#define GEN_PASS_DECL
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#include "planner/transforms/optimizer/passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "planner/transforms/optimizer/passes.h.inc"
#pragma GCC diagnostic pop

// Appends an AdamW state argument of `param` (its `kind`: exp_avg,
// exp_avg_sq or master) to `func`: f32, the parameter's shape, placement
// and global shape, `init` as its nn.init (none when null). Null when the
// signature refuses it. plan-offload adds an f32 parameter's host master
// copy with it.
mlir::Value addState(mlir::func::FuncOp func, mlir::BlockArgument param, llvm::StringRef kind,
                     mlir::Attribute init);

// What plan-optimizer-step does to one function, for passes that price a
// function as it will be after it (plan-schedule's memory budget). Fails
// with a diagnostic at `func` when it already has optimizer steps.
mlir::LogicalResult addOptimizerSteps(mlir::func::FuncOp func,
                                      const PlanOptimizerStepOptions& options);

}  // namespace loom::planner::optimizer

#endif  // LOOM_PLANNER_TRANSFORMS_OPTIMIZER_PASSES_H_
