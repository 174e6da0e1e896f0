// The manifest of one checkpoint (`manifest.json`): which tensors it holds,
// their dtype and global shape, which rank file holds which box of each,
// and the job's metadata. Written last, so its presence marks a complete
// checkpoint.
#ifndef LOOM_RUNTIME_CHECKPOINT_MANIFEST_H_
#define LOOM_RUNTIME_CHECKPOINT_MANIFEST_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "runtime/checkpoint/shard_file.h"

namespace loom::runtime::checkpoint {

inline constexpr int64_t kManifestVersion = 1;

struct StoredShard {
  int64_t rank = 0;
  Box box;
};

struct TensorEntry {
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  // Non-empty, pairwise disjoint boxes that together cover the tensor.
  std::vector<StoredShard> shards;
};

struct Manifest {
  int64_t step = 0;
  int64_t world_size = 0;
  std::string mesh;
  std::map<std::string, TensorEntry> tensors;
  nlohmann::json metadata = nlohmann::json::object();

  // Records that `rank` saved `box` of tensor `name`. InvalidArgument when
  // the dtype or shape disagrees with another rank's shard of that tensor,
  // the box leaves the tensor, or it overlaps a box already recorded (each
  // element must be saved once: save one replica of a replicated tensor).
  // An empty box (a rank holding only padding) records just the tensor.
  absl::Status addShard(const std::string& name, DType dtype, const std::vector<int64_t>& shape,
                        int64_t rank, const Box& box);

  // InvalidArgument naming the tensor when some element is in no box.
  absl::Status checkComplete() const;

  nlohmann::json toJson() const;
  // Parses and validates a manifest (version, shapes, boxes, coverage);
  // DataLoss naming `path` when it is not a valid manifest.
  static absl::StatusOr<Manifest> parse(const std::string& text, const std::string& path);
};

// "rank_<r>.bin", the file of rank r inside a step directory.
std::string rankFileBaseName(int64_t rank);
std::string rankFileName(const std::string& step_dir, int64_t rank);

}  // namespace loom::runtime::checkpoint

#endif  // LOOM_RUNTIME_CHECKPOINT_MANIFEST_H_
