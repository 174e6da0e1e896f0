// The plan executor: runs a plan.json's SPMD instruction stream on this
// rank. Compute runs on the calling thread with the CPU kernels; every
// collective is handed to its mesh-axis process group, whose worker thread
// runs it while compute goes on, and the executor blocks only at the
// dist.wait the plan names. Buffers come from a caching allocator and are
// released at the plan's dist.free or after their last use.
#ifndef LOOM_RUNTIME_EXECUTOR_EXECUTOR_H_
#define LOOM_RUNTIME_EXECUTOR_EXECUTOR_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "comm/mesh_groups.h"
#include "comm/process_group.h"
#include "runtime/checkpoint/checkpoint_reader.h"
#include "runtime/checkpoint/shard_file.h"
#include "runtime/data/token_feed.h"
#include "runtime/executor/caching_allocator.h"
#include "runtime/executor/trace_recorder.h"
#include "runtime/plan/plan.h"

namespace loom::runtime {

struct ExecutorOptions {
  // Every wait on a collective gives up after this long, naming the group,
  // rank, op and sequence number.
  absl::Duration timeout = absl::Minutes(5);
  // Clip gradients to this global L2 norm before the optimizer (0: off). The
  // norm is computed across all shards, each element counted once.
  double max_grad_norm = 0;
  // Overrides of the plan's AdamW learning rate (<= 0: the plan's).
  double learning_rate = 0;
  // Record a trace of every instruction.
  bool trace = false;
  // false: wait for every collective right after issuing it, as a runtime
  // without prefetch or async communication would (for the overlap bench).
  bool overlap = true;
  // Deterministic mode (docs/runtime.md): every sum over batch rows is kept
  // per global row until all rows are present and then summed in global
  // row order, and GEMMs run one sequence at a time, so fsdp, dp and hsdp
  // plans give bit-identical results to the 1-rank plan. It all-gathers
  // per-row gradient contributions instead of reduce-scattering sums:
  // for debugging and parity, not for speed. Refused for tp plans.
  bool deterministic = false;
  // Called with this rank's gradient shards (one replica, as checkpoints
  // hold them) before every optimizer phase; for the parity dumps.
  std::function<void(int64_t step, const std::vector<checkpoint::ShardView>&)> on_gradients;
};

// Peak bytes handed out per phase of the last step (and of a checkpoint
// save, which the caller brackets with beginPhase("checkpoint")).
struct PhaseMemory {
  std::string phase;
  int64_t peak_bytes = 0;
};

struct StepResult {
  double loss = 0;     // the plan's loss, the same on every rank
  double grad_norm = 0;  // global norm before clipping (when clipping is on)
  double seconds = 0;
};

class Executor {
 public:
  // Checks the plan against the job and this rank, builds one process group
  // per set of mesh axes the plan's collectives use (a collective over
  // `world`), binds every instruction to its kernel with verified shapes,
  // and initialises parameters and optimizer states from their init specs.
  static absl::StatusOr<std::unique_ptr<Executor>> create(
      const Plan& plan, std::shared_ptr<comm::ProcessGroup> world, ExecutorOptions options = {});
  ~Executor();

  const Plan& plan() const { return plan_; }
  int64_t rank() const { return rank_; }

  // The rows of the global batch this rank feeds (its data-parallel share).
  data::RowRange batchRows() const { return rows_; }
  int64_t seqLength() const { return seq_; }
  // Token ids lie in [0, vocab()): the embedding table's rows.
  int64_t vocab() const { return vocab_; }

  // Runs one training step (forward, backward, optimizer) on this rank's
  // rows; `ids` and `labels` hold batchRows().count x seqLength() tokens.
  // `step` counts from 1 and drives AdamW's bias correction.
  absl::StatusOr<StepResult> step(int64_t step, const int32_t* ids, const int32_t* labels);

  // The parameter and optimizer-state shards this rank saves: one replica
  // of everything, each element by exactly one rank, padding excluded.
  std::vector<checkpoint::ShardView> checkpointShards() const;
  // Loads parameters and optimizer states from a checkpoint saved under any
  // mesh (resharding on load); returns the optimizer step it holds.
  absl::Status loadCheckpoint(const checkpoint::CheckpointReader& reader);
  // Copies this rank's local shard of a buffer (for tests and parity checks).
  absl::StatusOr<std::vector<float>> localValues(const std::string& buffer_name) const;

  const AllocatorStats& allocatorStats() const { return allocator_.stats(); }
  const std::vector<PhaseMemory>& phaseMemory() const { return phase_memory_; }
  // Opens a measured phase outside the step (e.g. "checkpoint").
  void beginPhase(const std::string& name);
  void endPhase();

  TraceRecorder& trace() { return trace_; }
  const comm::MeshGroups& groups() const { return *groups_; }

 private:
  struct Bound;     // an instruction bound to its kernel
  struct Pending;   // an async collective between its start and its wait
  Executor(const Plan& plan, std::shared_ptr<comm::ProcessGroup> world, ExecutorOptions options);

  absl::Status bind();
  absl::Status initialise();
  absl::Status run(const Bound& bound, int64_t step);
  void* bufferData(int64_t id) const;
  // Per-row partial sums in deterministic mode: `rows` copies of the
  // buffer, row r holding the contribution of global batch row index[r].
  struct Stack {
    int64_t rows = 0;  // 0: an ordinary buffer
    std::vector<int64_t> index;
    bool mean = false;  // finalised by the mean of the rows, not the sum
  };
  absl::Status define(int64_t id);
  absl::Status defineStacked(int64_t id, Stack stack);
  absl::Status defineLike(int64_t id, int64_t of);
  // Sums a stack over all global rows in row order into an ordinary buffer.
  absl::Status finalize(int64_t id);
  std::vector<checkpoint::ShardView> shardViews(const std::vector<int64_t>& ids) const;
  void alias(int64_t id, int64_t of);
  void releaseBuffer(int64_t id);
  absl::Status clipGradients(StepResult& result);

  Plan plan_;
  std::shared_ptr<comm::ProcessGroup> world_;
  ExecutorOptions options_;
  int64_t rank_ = 0;
  std::vector<int64_t> coords_;
  std::unique_ptr<comm::MeshGroups> groups_;
  data::RowRange rows_;
  int64_t seq_ = 0;
  int64_t vocab_ = 0;

  CachingAllocator allocator_;
  // Storage blocks, reference counted so that views (reshape, wait) share.
  struct Block {
    void* data = nullptr;
    int refs = 0;
  };
  std::vector<Block> blocks_;
  std::vector<int64_t> block_of_;  // buffer id -> block index, -1 when dead
  std::vector<bool> persistent_;   // params and optimizer states
  std::vector<Stack> stacks_;      // deterministic mode
  int64_t global_batch_ = 0;
  std::vector<std::unique_ptr<Bound>> bound_;
  std::map<std::string, std::shared_ptr<Pending>> pending_;
  std::atomic<int> callbacks_outstanding_{0};
  std::vector<PhaseMemory> phase_memory_;
  std::string current_phase_;
  TraceRecorder trace_;
};

}  // namespace loom::runtime

#endif  // LOOM_RUNTIME_EXECUTOR_EXECUTOR_H_
