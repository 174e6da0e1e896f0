// mlir-opt-style driver that knows the wiring-test dialect; the lit wiring
// tests run it through FileCheck.
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"
#include "tests/deps/mlir/wiring_dialect.h"

int main(int argc, char** argv) {
  mlir::registerCanonicalizerPass();
  mlir::DialectRegistry registry;
  registry.insert<mlir::func::FuncDialect, loom::wiring::WiringDialect>();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "wiring-test optimizer driver\n", registry));
}
