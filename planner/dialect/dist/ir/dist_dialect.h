// The `dist` dialect class; include dist_ops.h for its ops, attributes and
// types.
#ifndef LOOM_PLANNER_DIALECT_DIST_IR_DIST_DIALECT_H_
#define LOOM_PLANNER_DIALECT_DIST_IR_DIST_DIALECT_H_

#include "mlir/IR/Dialect.h"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#include "planner/dialect/dist/ir/dist_dialect.h.inc"
#pragma GCC diagnostic pop

#endif  // LOOM_PLANNER_DIALECT_DIST_IR_DIST_DIALECT_H_
