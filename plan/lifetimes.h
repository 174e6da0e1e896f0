// Buffer lifetimes over a program's instruction order: the one definition
// the exporter writes into buffers[].live, the reader checks and the
// executor frees by (docs/plan_library.md, "Lifetimes").
#ifndef LOOM_PLAN_LIFETIMES_H_
#define LOOM_PLAN_LIFETIMES_H_

#include <cstdint>
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

}  // namespace loom::plan

#endif  // LOOM_PLAN_LIFETIMES_H_
