// Test helper: an instruction for a hand-made plan, at the end of `block`.
#ifndef LOOM_PLAN_TESTING_INSTRUCTION_H_
#define LOOM_PLAN_TESTING_INSTRUCTION_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "plan/op_table.h"
#include "plan/plan.h"

namespace loom::plan::testing {

// `op`'s row, `block`'s phase and name, the next position in it; the caller
// appends it (and sets the attributes its op needs).
inline Instruction instruction(const std::string& op, const Block& block,
                               std::vector<int64_t> operands, std::vector<int64_t> results) {
  Instruction in;
  in.info = findOp(op);
  in.op = op;
  in.phase = block.phase;
  in.block = block.name;
  in.position = static_cast<int64_t>(block.instructions.size());
  in.operands = std::move(operands);
  in.results = std::move(results);
  return in;
}

}  // namespace loom::plan::testing

#endif  // LOOM_PLAN_TESTING_INSTRUCTION_H_
