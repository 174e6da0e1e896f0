// plan-opt: the mlir-opt of the planner. It parses, verifies and prints
// planner IR and runs planner passes; the lit tests drive it.
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "planner/register.h"

int main(int argc, char** argv) {
  loom::planner::registerAllPasses();
  mlir::DialectRegistry registry;
  loom::planner::registerAllDialects(registry);
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "Loom planner optimizer driver\n", registry));
}
