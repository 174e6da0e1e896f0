// Shard sizes and extents under the zero-padding-at-the-end rule.
#include "mesh/shard_math.h"

#include <algorithm>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

namespace loom::mesh {

int64_t shardSize(int64_t size, int64_t ways) { return (size + ways - 1) / ways; }

absl::StatusOr<ShardExtent> shardExtent(int64_t size, int64_t ways, int64_t index) {
  if (size < 0) {
    return absl::InvalidArgumentError(absl::StrCat("dim size must be non-negative, got: ", size));
  }
  if (ways < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("a dim splits over at least 1 rank, got: ", ways, " ways"));
  }
  if (index < 0 || index >= ways) {
    return absl::InvalidArgumentError(absl::StrCat("shard index ", index, " is out of range for a ",
                                                   ways, "-way split; use an index in [0, ", ways,
                                                   ")"));
  }
  const int64_t rows = shardSize(size, ways);
  const int64_t begin = std::min(index * rows, size);
  return ShardExtent{begin, std::min(rows, size - begin)};
}

}  // namespace loom::mesh
