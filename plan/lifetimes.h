// Buffer lifetimes over a program's instruction order: the one definition
// the exporter writes into buffers[].live, the reader checks and the
// executor frees by (docs/plan_library.md, "Lifetimes").
#ifndef LOOM_PLAN_LIFETIMES_H_
#define LOOM_PLAN_LIFETIMES_H_

#include <algorithm>
#include <cstdint>
#include <optional>
#include <vector>

#include "plan/plan.h"

namespace loom::plan {

// Whether buffer `id` exists before the program's first instruction:
// parameters and optimizer states, and the inputs the runtime feeds (token
// ids, labels, positions, the loss's cotangent seed).
bool onEntry(const Plan& plan, int64_t id);

// Every buffer's held interval over `program.instructions()`: from -1 (on
// entry) or the position that first defines it, to the last position that
// reads or defines it. An async start's operands are held until its wait,
// because the collective reads them meanwhile. A buffer the program never
// touches is {-1, -1}.
std::vector<Lifetime> computeLifetimes(const Plan& plan, const Program& program);

// Whether each buffer is held from one micro-step of an optimizer step to
// the next (docs/planner_accumulate.md): a dist.accumulate's sum, or a
// result of a first-micro-step instruction that an instruction of the
// other micro-steps reads (a dist.free does not read). The runtime releases them in the last
// micro-step only; memory counts them live over the whole program.
// `instruction(order)`, `operands(order)` and `results(order)` give the
// program's instructions in order (a plan's, or a repeated template's with
// its own buffer ids).
template <typename InstructionAt, typename OperandsAt, typename ResultsAt>
std::vector<bool> carriedBuffers(int64_t num_buffers, int64_t size, InstructionAt instruction,
                                 OperandsAt operands, ResultsAt results) {
  std::vector<bool> carried(static_cast<size_t>(num_buffers), false);
  std::vector<bool> firstOnly(static_cast<size_t>(num_buffers), false);
  for (int64_t order = 0; order < size; ++order) {
    const Instruction& in = instruction(order);
    // A dist.free ends a buffer; it does not read it.
    if (in.micro_step != MicroStep::kFirst && !in.info->ends_buffer) {
      for (int64_t id : operands(order)) {
        if (firstOnly[id]) carried[id] = true;
      }
    }
    for (int64_t id : results(order)) {
      if (in.micro_step == MicroStep::kFirst) firstOnly[id] = true;
      if (in.info->accumulates) carried[id] = true;
    }
  }
  return carried;
}
std::vector<bool> carriedBuffers(const Plan& plan, const Program& program);

// A buffer's held interval in micro-step `micro` of `count` (-1: one of
// the middle ones, whose peak bounds the others' when no instruction is
// kept to the first or last micro-step), from its interval `live` in the
// program, the micro-step of the instruction that defines it (kEvery for
// one on entry) and whether it is carried. Carried buffers are held from
// the start in every micro-step but the first and to `end_model` (the
// last forward or backward instruction) in every one but the last; a
// buffer whose defining instruction does not run is not held (nullopt).
// The memory plan and the pricer both count by it.
inline std::optional<Lifetime> microStepLifetime(Lifetime live, MicroStep defined_in, bool carried,
                                                 int64_t micro, int64_t count, int64_t end_model) {
  if (carried) {
    return Lifetime{.first = micro == 0 ? live.first : -1,
                    .last = micro == count - 1 ? live.last : std::max(live.last, end_model)};
  }
  if (micro >= 0 && !runsIn(defined_in, micro, count)) return std::nullopt;
  return live;
}

}  // namespace loom::plan

#endif  // LOOM_PLAN_LIFETIMES_H_
