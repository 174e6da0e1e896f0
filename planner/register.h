// Registration of everything the planner defines: its dialects (with the
// upstream ones they build on) and its passes, for plan-opt and the tools.
#ifndef LOOM_PLANNER_REGISTER_H_
#define LOOM_PLANNER_REGISTER_H_

#include "mlir/IR/DialectRegistry.h"

namespace loom::planner {

// Inserts the dialects planner IR is written in into `registry`.
void registerAllDialects(mlir::DialectRegistry& registry);

// Registers every planner pass, the plan pipeline (`plan-pipeline`) and
// the upstream clean-up passes planner pipelines use, with the global pass
// registry.
void registerAllPasses();

}  // namespace loom::planner

#endif  // LOOM_PLANNER_REGISTER_H_
