// Op interfaces of the `dist` dialect (generated from dist_interfaces.td).
#ifndef LOOM_PLANNER_DIALECT_DIST_IR_DIST_INTERFACES_H_
#define LOOM_PLANNER_DIALECT_DIST_IR_DIST_INTERFACES_H_

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/OpDefinition.h"
#include "planner/dialect/dist/ir/dist_attrs.h"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#include "planner/dialect/dist/ir/dist_interfaces.h.inc"
#pragma GCC diagnostic pop

#endif  // LOOM_PLANNER_DIALECT_DIST_IR_DIST_INTERFACES_H_
