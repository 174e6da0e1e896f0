// Arithmetic of splitting one tensor dim over a group of ranks, with the
// padding rule of #dist.placement. It lives in mesh/ (plain C++, no MLIR) so
// the planner's dialect and the runtime share the exact rule.
#ifndef LOOM_MESH_SHARD_MATH_H_
#define LOOM_MESH_SHARD_MATH_H_

#include <cstdint>

#include "absl/status/statusor.h"

namespace loom::mesh {

// The rows each of `ways` ranks holds of a dim of `size`: size / ways when it
// divides, otherwise ceil(size / ways), the dim being zero-padded at its end to
// shardSize * ways. Requires size >= 0 and ways >= 1.
int64_t shardSize(int64_t size, int64_t ways);

// What rank `index` of a `ways`-way split of a dim of `size` holds: global
// rows [begin, begin + valid), stored at the start of its shardSize rows; the
// shard's last shardSize - valid rows are padding. With padding, the last
// ranks may hold fewer valid rows, or none (begin is then clamped to `size`).
struct ShardExtent {
  int64_t begin = 0;
  int64_t valid = 0;

  friend bool operator==(const ShardExtent&, const ShardExtent&) = default;
};

// Fails with InvalidArgument unless size >= 0, ways >= 1 and
// 0 <= index < ways.
absl::StatusOr<ShardExtent> shardExtent(int64_t size, int64_t ways, int64_t index);

}  // namespace loom::mesh

#endif  // LOOM_MESH_SHARD_MATH_H_
