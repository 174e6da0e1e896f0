// libFuzzer target: the plan library's reader (plan/plan.h). Any bytes are
// handed to plan::parsePlan; a plan that loads is checked against its own
// job, written back and read again (the writer and reader must agree), and
// every buffer's shard box is computed for every rank, as Executor::create
// would. Nothing may crash, throw, or read out of bounds: a bad plan must
// come back as an error.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "plan/plan.h"
#include "plan/shard_box.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<loom::plan::Plan> plan = loom::plan::parsePlan(text, "fuzz");
  if (!plan.ok()) return 0;
  (void)loom::plan::checkPlanForJob(*plan, plan->worldSize());
  if (!loom::plan::parsePlan(loom::plan::writePlan(*plan), "fuzz-again").ok()) std::abort();
  // Small meshes only: the shard boxes of every buffer on every rank.
  if (plan->worldSize() > 64) return 0;
  for (int64_t rank = 0; rank < plan->worldSize(); ++rank) {
    absl::StatusOr<std::vector<int64_t>> coords = plan->mesh.coordinateOf(rank);
    if (!coords.ok()) continue;
    for (const loom::plan::Buffer& buffer : plan->buffers) {
      (void)loom::plan::shardBoxOf(buffer, plan->mesh, *coords);
    }
  }
  return 0;
}
