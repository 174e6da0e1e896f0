// The module path an nn op is located at ("layers.3.attention.wq"): the zoo
// and the PyTorch importer name every op's location after the module that
// made it, and autodiff gives a backward op its forward op's location. Plan
// scopes (plan::Instruction::scope) and per-layer passes read it here.
#ifndef LOOM_PLANNER_DIALECT_NN_IR_MODULE_PATH_H_
#define LOOM_PLANNER_DIALECT_NN_IR_MODULE_PATH_H_

#include <string>

#include "mlir/IR/Location.h"

namespace loom::planner::nn {

// A NameLoc's name, looked for through fused and call-site locations; ""
// when the location names none.
std::string modulePathOf(mlir::Location loc);

}  // namespace loom::planner::nn

#endif  // LOOM_PLANNER_DIALECT_NN_IR_MODULE_PATH_H_
