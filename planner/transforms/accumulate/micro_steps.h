// What plan-accumulate writes on a program, as every later pass and the
// exporter read it: which micro-steps an op runs in, how many micro-steps
// a step has, and which values live from one micro-step to the next.
#ifndef LOOM_PLANNER_TRANSFORMS_ACCUMULATE_MICRO_STEPS_H_
#define LOOM_PLANNER_TRANSFORMS_ACCUMULATE_MICRO_STEPS_H_

#include <cstdint>

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Operation.h"
#include "mlir/IR/Value.h"
#include "plan/plan.h"

namespace loom::planner::accumulate {

// On an op: "first" or "last", the one micro-step it runs in (absent:
// every one).
inline constexpr char kMicroStepAttrName[] = "dist.micro_step";
// On the function: the micro-steps of one optimizer step (absent: 1).
inline constexpr char kMicroStepsAttrName[] = "dist.micro_steps";

// The plan format's enum (plan/plan.h), read from kMicroStepAttrName.
plan::MicroStep microStepOf(mlir::Operation* op);
int64_t microStepsOf(mlir::func::FuncOp func);

// Whether `value` is held from one micro-step to the next: a
// dist.accumulate's sum, or a first-micro-step value read by an op of the
// other micro-steps (plan::carriedBuffers is the plan's form of this rule).
bool isCarried(mlir::Value value);

}  // namespace loom::planner::accumulate

#endif  // LOOM_PLANNER_TRANSFORMS_ACCUMULATE_MICRO_STEPS_H_
