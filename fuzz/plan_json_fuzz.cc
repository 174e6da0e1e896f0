// libFuzzer target: the runtime's plan.json loader. Any bytes are parsed as
// JSON (without exceptions) and handed to runtime::parsePlan; a plan that
// loads is checked against its own job and every buffer's shard box is
// computed for every rank, as Executor::create would. Nothing may crash,
// throw, or read out of bounds: a bad plan must come back as an error.
#include <cstddef>
#include <cstdint>

#include "nlohmann/json.hpp"
#include "runtime/plan/plan.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const nlohmann::json root = nlohmann::json::parse(data, data + size, nullptr,
                                                    /*allow_exceptions=*/false);
  if (root.is_discarded()) return 0;
  absl::StatusOr<loom::runtime::Plan> plan = loom::runtime::parsePlan(root, "fuzz");
  if (!plan.ok()) return 0;
  (void)loom::runtime::checkPlanForJob(*plan, plan->worldSize());
  // Small meshes only: the shard boxes of every buffer on every rank.
  if (plan->worldSize() > 64) return 0;
  for (int64_t rank = 0; rank < plan->worldSize(); ++rank) {
    absl::StatusOr<std::vector<int64_t>> coords = plan->mesh.coordinateOf(rank);
    if (!coords.ok()) continue;
    for (const loom::runtime::BufferSpec& buffer : plan->buffers) {
      (void)loom::runtime::shardBoxOf(buffer, plan->mesh, *coords);
    }
  }
  return 0;
}
