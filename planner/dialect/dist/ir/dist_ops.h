// Operations of the `dist` dialect (mesh, annotate, collectives and their
// async forms, wait, copies between device and host memory, slice, free,
// bucket, unbucket, optimizer_step).
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

namespace loom::planner::dist {

// The argument attribute that says where a function argument lives:
// "host" (an offloaded optimizer state) or "device" (the default).
inline constexpr char kMemoryAttrName[] = "dist.memory";

// Whether `value` lives in host memory: an argument of a function's body
// with dist.memory = "host", a dist.copy_to_host_start's future and its
// wait, or an optimizer step's result that updates a host tensor. Every
// other value is in device memory (docs/planner_offload.md).
bool onHost(mlir::Value value);

}  // namespace loom::planner::dist

#endif  // LOOM_PLANNER_DIALECT_DIST_IR_DIST_OPS_H_
