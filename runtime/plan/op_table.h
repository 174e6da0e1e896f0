// The ops a plan.json instruction may name, one row each: what family
// executes it, how many operands and results it takes, and whether it is the
// start of an async collective or the wait that ends one. The loader checks
// every instruction against this table; the planner's completeness test
// (tests/planner/export:op_table_completeness_test) checks that every op the
// planner can put in a plan has a row (docs/plan_json.md, "Ops").
#ifndef LOOM_RUNTIME_PLAN_OP_TABLE_H_
#define LOOM_RUNTIME_PLAN_OP_TABLE_H_

#include <string_view>
#include <vector>

namespace loom::runtime {

enum class OpFamily {
  kCompute,     // nn.*: a kernel on local shards
  kCollective,  // dist.all_gather, ...: a collective over mesh axes
  kWait,        // dist.wait: completes an async collective
  kBuffer,      // dist.bucket, dist.unbucket, dist.slice, dist.free
  kOptimizer,   // dist.optimizer_step: updates a parameter in place
};

struct OpInfo {
  std::string_view name;
  OpFamily family;
  int min_operands;
  int max_operands;  // -1: any number from min_operands up
  int min_results;
  int max_results;   // -1: any number from min_results up
  bool async_start = false;  // *_start: names a handle that one dist.wait ends
  // Whether the results are the operands updated in place (defined again).
  bool in_place = false;
};

// Every op the runtime executes, in no particular order.
const std::vector<OpInfo>& opTable();

// The row of `name`, or null.
const OpInfo* findOp(std::string_view name);

// "nn.add, nn.attention, ...": every name, sorted, for messages.
std::string_view opNames();

}  // namespace loom::runtime

#endif  // LOOM_RUNTIME_PLAN_OP_TABLE_H_
