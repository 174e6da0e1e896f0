// The pieces shared by the checkpoint writer and reader: tensor shards and
// their boxes, the binary rank file (`rank_<r>.bin`) and durable file
// writes (temporary file, fsync, rename, fsync of the directory).
#ifndef LOOM_RUNTIME_CHECKPOINT_SHARD_FILE_H_
#define LOOM_RUNTIME_CHECKPOINT_SHARD_FILE_H_

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace loom::runtime::checkpoint {

// Element types a checkpoint stores; the values are the on-disk codes.
enum class DType : uint32_t { kF32 = 1, kI32 = 2 };

absl::string_view dtypeName(DType dtype);  // "f32", "i32"
absl::StatusOr<DType> parseDType(absl::string_view name);
int64_t dtypeBytes(DType dtype);

// A box of a tensor in global coordinates: [offsets[d], offsets[d] +
// sizes[d]) along every dim d.
struct Box {
  std::vector<int64_t> offsets;
  std::vector<int64_t> sizes;

  friend bool operator==(const Box&, const Box&) = default;
};

// "[0:3, 2:6]" (half-open ranges), for messages.
std::string describeBox(const Box& box);
std::string describeShape(std::span<const int64_t> shape);
int64_t numElements(std::span<const int64_t> sizes);

// InvalidArgument unless `box` has the rank of `shape`, non-negative sizes
// and lies inside it; `what` names the box's owner in the message.
absl::Status checkBoxInside(const Box& box, std::span<const int64_t> shape, absl::string_view what);

// A rank's shard of one tensor in memory. `data` is row-major over
// `local_shape` and holds the valid box at its start; what lies past the box
// along any dim is padding (the ceil(n/k) rule) and is not saved. An empty
// `local_shape` means the buffer is exactly the box.
struct ShardView {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> global_shape;
  Box box;
  std::vector<int64_t> local_shape;
  const void* data = nullptr;
};

// One split of a tensor dim over a mesh axis: rank `index` of `ways`.
struct DimSplit {
  int64_t dim = 0;
  int64_t ways = 1;
  int64_t index = 0;
};

// What a rank holds under the planner's padding rule
// (mesh/shard_math.h): the valid box and the padded
// local shape of its buffer.
struct PaddedShard {
  Box box;
  std::vector<int64_t> local_shape;
};

// The padded shard of `global_shape` for one or more dim splits (e.g. fsdp on
// dim 0 and tp on dim 1). InvalidArgument on a bad dim, ways or index, or a
// dim split twice.
absl::StatusOr<PaddedShard> padShard(std::span<const int64_t> global_shape,
                                     std::span<const DimSplit> splits);

// Where one shard record sits in a rank file, as the reader found it.
struct ShardRecord {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> global_shape;
  Box box;
  int64_t data_offset = 0;  // byte offset of the raw data in the file
};

struct RankFileHeader {
  int64_t rank = 0;
  int64_t world_size = 0;
  int64_t step = 0;
};

// Called as a rank file streams out: (bytes written so far, total bytes).
using ProgressFn = std::function<void(int64_t, int64_t)>;

// Writes `shards` to `path` (format in docs/runtime_checkpoint.md) and makes
// it durable: the bytes go to `path` + ".tmp", which is fsynced and renamed
// over `path`, and the directory is fsynced. A crash at any point leaves
// `path` either absent, its old content, or complete. Shards with no valid
// elements (all padding) are skipped.
absl::Status writeRankFile(const std::string& path, const RankFileHeader& header,
                           std::span<const ShardView> shards, const ProgressFn& progress);

// Reads the header and every record of the rank file at `path`, verifying
// each record's CRC-32C; DataLoss naming the file (and tensor) when it is
// truncated, malformed or corrupt.
absl::StatusOr<std::vector<ShardRecord>> readRankFile(const std::string& path,
                                                      RankFileHeader* header);

// Validates one shard for saving: name, rank, box inside the tensor, a
// buffer large enough, data present.
absl::Status checkShardView(const ShardView& shard);

// Writes `content` to `path` durably and atomically (temporary file, fsync,
// rename, fsync of the directory).
absl::Status writeFileAtomically(const std::string& path, absl::string_view content);

// Reads a whole small file (manifest, `latest`).
absl::StatusOr<std::string> readSmallFile(const std::string& path);

}  // namespace loom::runtime::checkpoint

#endif  // LOOM_RUNTIME_CHECKPOINT_SHARD_FILE_H_
