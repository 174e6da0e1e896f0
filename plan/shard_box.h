// Which part of a buffer's global tensor a rank holds, from its placement.
#ifndef LOOM_PLAN_SHARD_BOX_H_
#define LOOM_PLAN_SHARD_BOX_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "mesh/device_mesh.h"
#include "plan/plan.h"

namespace loom::plan {

// Where the local piece of `buffer` of the rank at `coords` starts in the
// global tensor, per dim, and how many of its rows along each dim are real
// (not padding).
struct ShardBox {
  std::vector<int64_t> offsets;
  std::vector<int64_t> valid;  // valid <= local extent
};
absl::StatusOr<ShardBox> shardBoxOf(const Buffer& buffer, const mesh::DeviceMesh& mesh,
                                    const std::vector<int64_t>& coords);

}  // namespace loom::plan

#endif  // LOOM_PLAN_SHARD_BOX_H_
