// Shard boxes (shard_box.h): the mesh axes that shard a dim split it in
// mesh order (the first such axis outermost), as shard_math.h does.
#include "plan/shard_box.h"

#include "mesh/shard_math.h"

namespace loom::plan {

absl::StatusOr<ShardBox> shardBoxOf(const Buffer& buffer, const mesh::DeviceMesh& mesh,
                                    const std::vector<int64_t>& coords) {
  ShardBox box;
  const size_t rank = buffer.global_shape.size();
  box.offsets.assign(rank, 0);
  box.valid = buffer.global_shape;
  for (size_t d = 0; d < rank; ++d) {
    int64_t ways = 1;
    int64_t index = 0;
    for (size_t a = 0; a < buffer.placement.size(); ++a) {
      const AxisPlacement& p = buffer.placement[a];
      if (p.kind != AxisPlacement::Kind::kShard || p.dim != static_cast<int64_t>(d)) continue;
      index = index * mesh.shape()[a] + coords[a];
      ways *= mesh.shape()[a];
    }
    if (ways == 1) continue;
    absl::StatusOr<mesh::ShardExtent> extent =
        mesh::shardExtent(buffer.global_shape[d], ways, index);
    if (!extent.ok()) return extent.status();
    box.offsets[d] = extent->begin;
    box.valid[d] = extent->valid;
  }
  return box;
}

}  // namespace loom::plan
