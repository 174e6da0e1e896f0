// Lifetimes (lifetimes.h).
#include "plan/lifetimes.h"

#include <algorithm>
#include <map>
#include <string>

namespace loom::plan {

bool onEntry(const Plan& plan, int64_t id) {
  const Interface& io = plan.interface;
  return persistentRole(plan.buffers[id].role) || id == io.ids || id == io.labels ||
         id == io.loss_grad_seed || id == io.positions;
}

std::vector<Lifetime> computeLifetimes(const Plan& plan, const Program& program) {
  const std::vector<const Instruction*> order = program.instructions();
  std::map<std::string, int64_t> waitAt;
  for (int64_t i = 0; i < static_cast<int64_t>(order.size()); ++i) {
    if (order[i]->info->family == OpFamily::kWait) waitAt[order[i]->attrs.async_handle] = i;
  }
  std::vector<Lifetime> live(plan.buffers.size());
  std::vector<bool> defined(plan.buffers.size(), false);
  for (size_t id = 0; id < plan.buffers.size(); ++id) defined[id] = onEntry(plan, id);
  for (int64_t i = 0; i < static_cast<int64_t>(order.size()); ++i) {
    const Instruction& in = *order[i];
    int64_t until = i;
    if (in.info->async_start) {
      auto it = waitAt.find(in.attrs.async_handle);
      if (it != waitAt.end()) until = it->second;
    }
    for (int64_t id : in.operands) live[id].last = std::max(live[id].last, until);
    for (int64_t id : in.results) {
      if (!defined[id]) {
        defined[id] = true;
        live[id].first = i;
      }
      live[id].last = std::max(live[id].last, i);
    }
  }
  return live;
}

std::vector<bool> carriedBuffers(const Plan& plan, const Program& program) {
  const std::vector<const Instruction*> order = program.instructions();
  return carriedBuffers(
      static_cast<int64_t>(plan.buffers.size()), static_cast<int64_t>(order.size()),
      [&](int64_t i) -> const Instruction& { return *order[i]; },
      [&](int64_t i) -> const std::vector<int64_t>& { return order[i]->operands; },
      [&](int64_t i) -> const std::vector<int64_t>& { return order[i]->results; });
}

}  // namespace loom::plan
