// The autodiff stage's passes: plan-autodiff turns a forward model graph
// into a training step that returns the loss and every parameter gradient.
#ifndef LOOM_PLANNER_TRANSFORMS_AUTODIFF_PASSES_H_
#define LOOM_PLANNER_TRANSFORMS_AUTODIFF_PASSES_H_

#include <memory>

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/Pass.h"

namespace loom::planner::autodiff {

// The function attribute naming the loss-cotangent argument a differentiated
// function gains, and the result attribute pairing a gradient with the
// argument index of its parameter.
inline constexpr char kLossGradArgAttrName[] = "nn.loss_grad_arg";
inline constexpr char kGradOfAttrName[] = "nn.grad_of";

#define GEN_PASS_DECL
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#include "planner/transforms/autodiff/passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "planner/transforms/autodiff/passes.h.inc"
#pragma GCC diagnostic pop

}  // namespace loom::planner::autodiff

#endif  // LOOM_PLANNER_TRANSFORMS_AUTODIFF_PASSES_H_
