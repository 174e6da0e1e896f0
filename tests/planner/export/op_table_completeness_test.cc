// Every op the nn and dist dialects define is either in the plan op table
// (plan/op_table.h), so a plan that contains it loads (and, by
// runtime/executor:executor_test, every row has a binder, so it runs), or
// listed below as one that never reaches plan.json, with the reason. A new
// op in either dialect fails this test until it has a row or a reason.
#include <map>
#include <set>
#include <string>

#include "gtest/gtest.h"
#include "mlir/IR/MLIRContext.h"
#include "planner/dialect/dist/ir/dist_dialect.h"
#include "planner/dialect/nn/ir/nn_dialect.h"
#include "plan/op_table.h"

namespace loom::planner {
namespace {

// Ops of the dialects that are not instructions of a plan.json.
const std::map<std::string, std::string>& plannerOnly() {
  static const std::map<std::string, std::string> kOps = {
      {"dist.mesh", "a symbol: the exporter writes it as plan.json's `mesh`"},
      {"dist.annotate",
       "a layout assertion in hand-written IR; no pass creates it and the passes read placements "
       "from attributes"},
  };
  return kOps;
}

TEST(OpTableCompletenessTest, EveryDialectOpIsExecutedOrHasAReason) {
  mlir::MLIRContext context;
  context.loadDialect<nn::NnDialect, dist::DistDialect>();
  std::set<std::string> seen;
  for (mlir::RegisteredOperationName name : context.getRegisteredOperations()) {
    const std::string dialect = name.getDialectNamespace().str();
    if (dialect != "nn" && dialect != "dist") continue;
    const std::string op = name.getStringRef().str();
    seen.insert(op);
    const bool inTable = plan::findOp(op) != nullptr;
    const bool excused = plannerOnly().count(op) > 0;
    EXPECT_TRUE(inTable || excused)
        << op << " is neither in plan/op_table.cc nor listed here with a reason";
    EXPECT_FALSE(inTable && excused)
        << op << " is in the plan op table; take it off this test's list";
  }
  // The table names no op the dialects lack (a typo would never match).
  for (const plan::OpInfo& info : plan::opTable()) {
    EXPECT_TRUE(seen.count(std::string(info.name)))
        << info.name << " is in the plan op table but in neither dialect";
  }
  EXPECT_GT(seen.size(), 40u);
}

}  // namespace
}  // namespace loom::planner
