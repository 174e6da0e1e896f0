// Every op the nn and dist dialects define is either in the runtime's op
// table (runtime/plan/op_table.h), so a plan that contains it loads and
// runs, or listed below as one that never reaches plan.json, with the
// reason. A new op in either dialect fails this test until it has a row or
// a reason.
#include <map>
#include <set>
#include <string>

#include "gtest/gtest.h"
#include "mlir/IR/MLIRContext.h"
#include "planner/dialect/dist/ir/dist_dialect.h"
#include "planner/dialect/nn/ir/nn_dialect.h"
#include "runtime/plan/op_table.h"

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

// Ops the planner can put in a plan that the runtime does not execute yet:
// a plan containing one is refused at load time, naming the op. Issue 16
// ("one op table ...") asks for both; each entry leaves this list when the
// executor runs it.
const std::map<std::string, std::string>& notYetExecuted() {
  static const std::map<std::string, std::string> kOps = {
      {"nn.transpose", "from the torch importer and transpose VJPs; no CPU or CUDA kernel yet"},
      {"dist.all_to_all", "resharding shard(d) -> shard(e); no executor route yet"},
      {"dist.all_to_all_start", "the async form of dist.all_to_all"},
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
    const bool executed = runtime::findOp(op) != nullptr;
    const bool excused = plannerOnly().count(op) || notYetExecuted().count(op);
    EXPECT_TRUE(executed || excused)
        << op << " is neither in runtime/plan/op_table.cc nor listed here with a reason";
    EXPECT_FALSE(executed && excused)
        << op << " is in the runtime's op table; take it off this test's lists";
  }
  // The table names no op the dialects lack (a typo would never match).
  for (const runtime::OpInfo& info : runtime::opTable()) {
    EXPECT_TRUE(seen.count(std::string(info.name)))
        << info.name << " is in the runtime's op table but in neither dialect";
  }
  EXPECT_GT(seen.size(), 40u);
}

}  // namespace
}  // namespace loom::planner
