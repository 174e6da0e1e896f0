// The plan of a model with L repeated blocks, made from the plan of the same
// model with fewer (kTemplateBlocks) by repeating its middle block: what
// lets the mesh search run the real pipeline on a short model and price the
// full one (docs/planner_cost.md, "Search on the pipeline's programs").
//
// The repeated blocks are found from the instructions' scopes
// (plan::repeatedBlockOf). Every block of the program (forward, backward,
// optimizer) is cut into a prefix, one segment per repeated block (from
// after the previous block's last op to the block's own last op, so that a
// segment holds the gathers it prefetches and the waits it owes) and a
// suffix. The longer plan is the prefix, segments 0..m, copies of segment
// m, the remaining segments and the suffix, with every layer index in a
// scope or buffer name shifted by the copy's offset. A buffer a copy defines
// is new; one it reads is found at the same distance in layers as in the
// template, so a saved activation pairs its forward and backward copies and
// a prefetched gather its start and wait. Segments around m must be alike
// (steady state): the template has 2 x reach + 3 blocks, reach being how
// many blocks ahead anything is started (prefetch).
#ifndef LOOM_PLANNER_COST_REPEAT_BLOCKS_H_
#define LOOM_PLANNER_COST_REPEAT_BLOCKS_H_

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "plan/plan.h"
#include "planner/cost/plan_price.h"

namespace loom::planner::cost {

// Blocks in the template plans the search builds: 2 x reach + 3 (above).
// Offload's copies reach further: a gradient goes to the host once it is
// reduced, and its copy is waited for a group later, which under HSDP with
// micro-steps lands four blocks after the block that made it; 11 blocks
// price those plans exactly where 7 do not (template_pricer_test).
inline constexpr int64_t kTemplateBlocks = 7;
inline constexpr int64_t kOffloadTemplateBlocks = 11;

// The longer plan by reference to the template: what the search prices
// (RepeatedProgram) without materialising thousands of instructions and
// buffers per template, and what materialize() turns into the full plan.
struct Repeated {
  // The numbered stack ("layers") whose blocks are repeated; empty for a
  // plan taken whole (wholePlan).
  std::string stack;
  // One instruction of the longer program, in program order
  // (Program::instructions()): the template instruction it copies, the
  // shift of the layer index in its scope, and where its operand and then
  // result buffers start in `ids`.
  struct Step {
    int32_t block = 0;
    int32_t position = 0;
    int32_t delta = 0;
    int32_t args = 0;
  };
  std::vector<Step> steps;
  std::vector<int64_t> ids;
  // Per buffer of the longer plan: the template buffer it copies, the
  // shift of the layer index in its name, and its lifetime over `steps`
  // (plan::computeLifetimes's rule).
  std::vector<int64_t> source;
  std::vector<int32_t> shift;
  std::vector<plan::Lifetime> live;
  plan::Interface interface;
  // A pipeline stage's program (stagePlan): it holds only the buffers it
  // uses, and the interface's inputs and loss only where it uses them
  // (-1 elsewhere).
  bool stage = false;
};

// `plan` with only its program `program`: a pipeline stage's, for
// repeatBlocks and wholePlan (its layers need not start at 0).
plan::Plan stagePlan(const plan::Plan& plan, size_t program);

// The plan of `blocks` repeated blocks from `shorter`'s, which has
// kTemplateBlocks or more (`blocks` >= that); a stage's (stagePlan) has
// such a run, numbered from any layer. Fails when the plan has no repeated
// stack, fewer than kTemplateBlocks of it, or segments that cannot be cut
// (a block whose last ops are out of order).
absl::StatusOr<Repeated> repeatBlocks(const plan::Plan& shorter, int64_t blocks);

// `plan` itself as a Repeated: for a plan priced whole.
Repeated wholePlan(const plan::Plan& plan);

// The longer plan in full, from the template it was made from: names,
// scopes, instruction indices and async handles included; predicted
// figures are not set (price it).
plan::Plan materialize(const plan::Plan& shorter, const Repeated& repeated);

// The longer program as pricing reads it: the instructions of `program`
// (the template) repeated, its header and buffers `sized`'s (the template
// itself, or its header and buffers re-sized by resizePlanInto to a
// candidate's data axes and micro-batch, which keeps buffer ids), since the
// structure does not depend on the sizes. All three are borrowed.
class RepeatedProgram final : public PricedProgram {
 public:
  RepeatedProgram(const plan::Plan& program, const plan::Plan& sized, const Repeated& repeated)
      : program_(program), resized_(sized), repeated_(repeated) {}
  const plan::Plan& header() const override { return resized_; }
  int64_t size() const override { return static_cast<int64_t>(repeated_.steps.size()); }
  const plan::Instruction& instruction(int64_t order) const override {
    const Repeated::Step& s = repeated_.steps[order];
    return program_.programs.front().blocks[s.block].instructions[s.position];
  }
  std::span<const int64_t> operands(int64_t order) const override {
    return {repeated_.ids.data() + repeated_.steps[order].args, instruction(order).operands.size()};
  }
  std::span<const int64_t> results(int64_t order) const override {
    const plan::Instruction& in = instruction(order);
    return {repeated_.ids.data() + repeated_.steps[order].args + in.operands.size(),
            in.results.size()};
  }
  int64_t numBuffers() const override { return static_cast<int64_t>(repeated_.source.size()); }
  const plan::Buffer& buffer(int64_t id) const override {
    return resized_.buffers[repeated_.source[id]];
  }
  plan::Lifetime live(int64_t id) const override { return repeated_.live[id]; }
  bool holds(int64_t id) const override {
    return !repeated_.stage || repeated_.live[id] != plan::Lifetime{};
  }
  int64_t loss() const override { return repeated_.interface.loss; }
  bool pipelineStage() const override { return repeated_.stage; }
  int64_t scopeShift(int64_t order) const override { return repeated_.steps[order].delta; }
  int64_t nameShift(int64_t id) const override { return repeated_.shift[id]; }

 private:
  const plan::Plan& program_;
  const plan::Plan& resized_;
  const Repeated& repeated_;
};

}  // namespace loom::planner::cost

#endif  // LOOM_PLANNER_COST_REPEAT_BLOCKS_H_
