// Registration and the one verifier of the wiring-test dialect.
#include "tests/deps/mlir/wiring_dialect.h"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#include "tests/deps/mlir/wiring_dialect.cpp.inc"

#define GET_OP_CLASSES
#include "tests/deps/mlir/wiring_ops.cpp.inc"
#pragma GCC diagnostic pop

namespace loom::wiring {

void WiringDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "tests/deps/mlir/wiring_ops.cpp.inc"
      >();
}

mlir::LogicalResult ScaleOp::verify() {
  const double factor = getFactor().convertToDouble();
  if (factor <= 0.0) {
    return emitOpError() << "factor must be positive, got: " << factor << "; use a factor > 0";
  }
  return mlir::success();
}

}  // namespace loom::wiring
