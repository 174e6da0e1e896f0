// Saving a sharded checkpoint: every rank writes its shards to its own file,
// and rank 0 commits the step with a manifest once all ranks have written.
#ifndef LOOM_RUNTIME_CHECKPOINT_CHECKPOINT_WRITER_H_
#define LOOM_RUNTIME_CHECKPOINT_CHECKPOINT_WRITER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "comm/store.h"
#include "nlohmann/json.hpp"
#include "runtime/checkpoint/shard_file.h"

namespace loom::runtime::checkpoint {

struct WriterOptions {
  // The mesh the job runs on ("fsdp=4", "2x2 fsdp,tp", ...), recorded in the
  // manifest for people; loading does not depend on it.
  std::string mesh;
  // Called as this rank's file streams out, e.g. to show progress.
  ProgressFn progress;
};

// One per rank, living as long as the job: every rank must call save() for
// the same steps in the same order, because the n-th save of every rank
// meets under the store keys of save n.
class CheckpointWriter {
 public:
  explicit CheckpointWriter(std::string dir, WriterOptions options = {});

  // Saves `shards` (this rank's part of every tensor; each element of a
  // tensor must be saved by exactly one rank) as DIR/step_<step>/, then
  // points DIR/latest at it. Rank 0 records `metadata` (a JSON object: data
  // position, RNG state, optimizer step, ...) in the manifest; other ranks'
  // metadata is ignored.
  //
  // Rank 0 waits up to `timeout` for every rank's file; the others wait up
  // to twice that for rank 0's verdict, since rank 0 may itself wait the
  // full timeout. On any failure no manifest is written and `latest` keeps
  // naming the previous checkpoint; the error names the ranks that did not
  // finish or the rank that failed and why. FailedPrecondition when step
  // <step> is already committed.
  absl::Status save(int64_t step, const std::vector<ShardView>& shards,
                    const nlohmann::json& metadata, comm::Store& store, int64_t rank,
                    int64_t world_size, absl::Duration timeout);

  const std::string& dir() const { return dir_; }

 private:
  absl::Status commit(int64_t step, const std::string& step_dir, const nlohmann::json& metadata,
                      comm::Store& store, const std::string& prefix, int64_t world_size,
                      absl::Duration timeout);

  std::string dir_;
  WriterOptions options_;
  int64_t saves_ = 0;
};

// "DIR/step_<step>", the directory of one checkpoint.
std::string stepDirectory(const std::string& dir, int64_t step);

}  // namespace loom::runtime::checkpoint

#endif  // LOOM_RUNTIME_CHECKPOINT_CHECKPOINT_WRITER_H_
