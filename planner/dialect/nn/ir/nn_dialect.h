// The `nn` dialect class (the model graph), generated from nn_base.td.
#ifndef LOOM_PLANNER_DIALECT_NN_IR_NN_DIALECT_H_
#define LOOM_PLANNER_DIALECT_NN_IR_NN_DIALECT_H_

#include "mlir/IR/Dialect.h"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#include "planner/dialect/nn/ir/nn_dialect.h.inc"
#pragma GCC diagnostic pop

#endif  // LOOM_PLANNER_DIALECT_NN_IR_NN_DIALECT_H_
