// A float64 interpreter for functions of `nn` ops: the reference that VJPs
// are checked against (by finite differences) and that end-to-end tests
// compare real kernels with. It runs on small sizes only.
#ifndef LOOM_PLANNER_DIALECT_NN_EVAL_EVALUATOR_H_
#define LOOM_PLANNER_DIALECT_NN_EVAL_EVALUATOR_H_

#include <vector>

#include "absl/status/statusor.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "planner/dialect/nn/eval/reference_kernels.h"

namespace loom::planner::nn::eval {

// Runs `func` (a single block of nn ops ending in func.return) on
// `arguments`, one per function argument with the argument's shape, and
// returns the returned values. Element types are ignored: everything is
// computed in float64. Fails with InvalidArgument when an argument does not
// match, an op is not an nn op, or an id or label lies outside the vocab.
absl::StatusOr<std::vector<Tensor>> evaluate(mlir::func::FuncOp func,
                                             const std::vector<Tensor>& arguments);

}  // namespace loom::planner::nn::eval

#endif  // LOOM_PLANNER_DIALECT_NN_EVAL_EVALUATOR_H_
