// Operations of the `dist` dialect (mesh, annotate, collectives and their
// async forms, wait, slice, free, bucket, unbucket, optimizer_step).
#ifndef LOOM_PLANNER_DIALECT_DIST_IR_DIST_OPS_H_
#define LOOM_PLANNER_DIALECT_DIST_IR_DIST_OPS_H_

#include <cstdint>
#include <optional>
#include <string>

// The generated code assumes these are already included.
#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "planner/dialect/dist/ir/dist_attrs.h"
#include "planner/dialect/dist/ir/dist_dialect.h"
#include "planner/dialect/dist/ir/dist_interfaces.h"
#include "planner/dialect/dist/ir/dist_types.h"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#define GET_OP_CLASSES
#include "planner/dialect/dist/ir/dist_ops.h.inc"
#pragma GCC diagnostic pop

#endif  // LOOM_PLANNER_DIALECT_DIST_IR_DIST_OPS_H_
