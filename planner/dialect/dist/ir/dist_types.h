// Types of the `dist` dialect: !dist.future, the handle of a started
// collective.
#ifndef LOOM_PLANNER_DIALECT_DIST_IR_DIST_TYPES_H_
#define LOOM_PLANNER_DIALECT_DIST_IR_DIST_TYPES_H_

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/Types.h"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#define GET_TYPEDEF_CLASSES
#include "planner/dialect/dist/ir/dist_types.h.inc"
#pragma GCC diagnostic pop

#endif  // LOOM_PLANNER_DIALECT_DIST_IR_DIST_TYPES_H_
