// Registration of the `dist` dialect's ops, attributes and types, and the
// generated code of its types.
#include "planner/dialect/dist/ir/dist_dialect.h"

#include "llvm/ADT/TypeSwitch.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "planner/dialect/dist/ir/dist_attrs.h"
#include "planner/dialect/dist/ir/dist_ops.h"
#include "planner/dialect/dist/ir/dist_types.h"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#include "planner/dialect/dist/ir/dist_dialect.cpp.inc"
#define GET_TYPEDEF_CLASSES
#include "planner/dialect/dist/ir/dist_types.cpp.inc"
#pragma GCC diagnostic pop

namespace loom::planner::dist {

void DistDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "planner/dialect/dist/ir/dist_ops.cpp.inc"
      >();
  registerAttributes();
  addTypes<
#define GET_TYPEDEF_LIST
#include "planner/dialect/dist/ir/dist_types.cpp.inc"
      >();
}

mlir::LogicalResult DistDialect::verifyRegionArgAttribute(mlir::Operation* op, unsigned,
                                                          unsigned argIndex,
                                                          mlir::NamedAttribute attribute) {
  if (attribute.getName() != kMemoryAttrName) return mlir::success();
  auto memory = llvm::dyn_cast<mlir::StringAttr>(attribute.getValue());
  if (!memory || (memory.getValue() != "host" && memory.getValue() != "device")) {
    return op->emitError() << "argument #" << argIndex << ": " << kMemoryAttrName << " is "
                           << attribute.getValue() << "; it must be \"host\" or \"device\"";
  }
  return mlir::success();
}

mlir::LogicalResult FutureType::verify(llvm::function_ref<mlir::InFlightDiagnostic()> emitError,
                                       mlir::RankedTensorType value_type) {
  if (!value_type.hasStaticShape()) {
    return emitError() << "future must carry a statically shaped tensor, got: " << value_type
                       << "; give every dim a size";
  }
  return mlir::success();
}

}  // namespace loom::planner::dist
