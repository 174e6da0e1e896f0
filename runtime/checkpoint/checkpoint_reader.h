// Loading a sharded checkpoint under any layout: any box of any tensor is
// assembled from whatever boxes the saving ranks wrote, which is resharding
// on load (4 fsdp ranks' rows can fill 2x2 fsdp x tp boxes).
#ifndef LOOM_RUNTIME_CHECKPOINT_CHECKPOINT_READER_H_
#define LOOM_RUNTIME_CHECKPOINT_CHECKPOINT_READER_H_

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "runtime/checkpoint/manifest.h"
#include "runtime/checkpoint/shard_file.h"

namespace loom::runtime::checkpoint {

// The step `DIR/latest` names; NotFound when there is no committed
// checkpoint in `dir`.
absl::StatusOr<int64_t> latestStep(const std::string& dir);

struct TensorInfo {
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
};

class CheckpointReader {
 public:
  // Opens the checkpoint `DIR/latest` names, or step `step` of `dir`. Reads
  // the manifest and every rank file it lists and verifies every record's
  // checksum, so a reader that opened can read any box. NotFound when there
  // is no such checkpoint; DataLoss naming the file (and tensor) when a file
  // is missing, truncated, corrupt or disagrees with the manifest.
  static absl::StatusOr<CheckpointReader> open(const std::string& dir);
  static absl::StatusOr<CheckpointReader> open(const std::string& dir, int64_t step);

  int64_t step() const { return manifest_.step; }
  int64_t worldSize() const { return manifest_.world_size; }
  const std::string& mesh() const { return manifest_.mesh; }
  const nlohmann::json& metadata() const { return manifest_.metadata; }
  const std::string& directory() const { return step_dir_; }
  std::vector<std::string> tensorNames() const;
  // NotFound naming the tensors there are.
  absl::StatusOr<TensorInfo> tensor(const std::string& name) const;

  // Fills `out` (row-major, box.sizes) with `box` of tensor `name`, in global
  // coordinates, from the stored shards that overlap it. NotFound for an
  // unknown tensor, InvalidArgument when the box leaves the tensor or the
  // tensor's dtype is not the buffer's.
  absl::Status readInto(const std::string& name, const Box& box, float* out) const;
  absl::Status readInto(const std::string& name, const Box& box, int32_t* out) const;

 private:
  CheckpointReader(std::string step_dir, Manifest manifest,
                   std::map<std::pair<std::string, int64_t>, int64_t> offsets)
      : step_dir_(std::move(step_dir)),
        manifest_(std::move(manifest)),
        data_offsets_(std::move(offsets)) {}

  absl::Status readBox(const std::string& name, const Box& box, DType dtype, void* out) const;

  std::string step_dir_;
  Manifest manifest_;
  // (tensor, rank) -> byte offset of that shard's data in the rank's file.
  std::map<std::pair<std::string, int64_t>, int64_t> data_offsets_;
};

}  // namespace loom::runtime::checkpoint

#endif  // LOOM_RUNTIME_CHECKPOINT_CHECKPOINT_READER_H_
