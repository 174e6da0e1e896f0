// The plan executor: runs a plan.json's SPMD instruction stream on this
// rank, on the host with the CPU kernels or on one GPU with the CUDA kernels
// (a KernelSet). Every collective is handed to its mesh-axis process group,
// which runs it while compute goes on (a Gloo/MPI worker thread, or an NCCL
// stream); at the dist.wait the plan names the CPU blocks and a GPU's
// compute stream waits on the collective's event. Buffers come from a
// caching allocator and are released at the plan's dist.free or after their
// last use.
#ifndef LOOM_RUNTIME_EXECUTOR_EXECUTOR_H_
#define LOOM_RUNTIME_EXECUTOR_EXECUTOR_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <utility>
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
#include "runtime/executor/kernel_set.h"
#include "runtime/optim/host_adamw.h"
#include "runtime/optim/lr_schedule.h"
#include "runtime/executor/trace_recorder.h"
#include "plan/plan.h"
#include "plan/shard_box.h"

namespace loom::runtime {

enum class ExecutorDevice { kCpu, kCuda };

struct ExecutorOptions {
  // Where buffers live and kernels run. kCuda: GPU `cuda_device` (-1: the
  // environment's LOCAL_RANK, else 0); collectives then take CUDA tensors,
  // which the process groups' cuda_backend (nccl) runs.
  ExecutorDevice device = ExecutorDevice::kCpu;
  int cuda_device = -1;
  // Every wait on a collective gives up after this long, naming the group,
  // rank, op and sequence number.
  absl::Duration timeout = absl::Minutes(5);
  // Clip gradients to this global L2 norm before the optimizer (0: off). The
  // norm is computed across all shards, each element counted once.
  double max_grad_norm = 0;
  // Overrides of the plan's AdamW learning rate (<= 0: the plan's).
  double learning_rate = 0;
  // The rate's multiplier per optimizer step (default: 1 throughout).
  optim::LrSchedule lr_schedule = {};
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
  // for debugging and parity, not for speed. Refused for tp plans and on
  // CUDA.
  bool deterministic = false;
  // Threads of the host AdamW that steps offloaded optimizer states
  // (docs/planner_offload.md; 0: the cores the process may use, at most 8).
  // The thread count does not change the bits.
  int host_threads = 0;
  // Called with this rank's gradient shards (one replica, as checkpoints
  // hold them) before every optimizer phase; for the parity dumps.
  std::function<void(int64_t step, const std::vector<checkpoint::ShardView>&)> on_gradients;
};

// Peak bytes handed out per phase of the last step (and of a checkpoint
// save, which the caller brackets with beginPhase("checkpoint")).
struct PhaseMemory {
  std::string phase;
  int64_t peak_bytes = 0;
  // The host arena's (offloaded buffers; 0 without them), counted apart.
  int64_t host_peak_bytes = 0;
};

struct StepResult {
  double loss = 0;       // the plan's loss, the same on every rank
  double grad_norm = 0;  // global norm before clipping (when clipping is on)
  double seconds = 0;
  double learning_rate = 0;  // AdamW's rate this step, the schedule applied
  // Seconds the host spent blocked waiting for collectives (the plan's
  // dist.waits and blocking collectives): on the CPU, the communication
  // compute did not hide. On a GPU the waits are stream waits and the host
  // does not block, so it says little there.
  double comm_wait_seconds = 0;
  // Bytes this rank's collectives moved this step (each collective's
  // per-rank wire bytes, as the plan states them).
  int64_t comm_bytes = 0;
  // Seconds the host sat idle waiting for another pipeline stage: at the
  // waits of point-to-point transfers (a receive not yet arrived, a send
  // not yet taken) and, at the step's end, for the stages still running
  // (the gradient norm's all-reduce with clipping, else the loss's over
  // the pp axis). 0 without stages. Like comm_wait_seconds, a host figure:
  // on a GPU the transfers' waits are stream waits.
  double bubble_seconds = 0;
  // Offload: seconds the host waited for copies between device and host
  // memory (the plan's dist.waits of them), and the bytes they moved.
  double copy_wait_seconds = 0;
  int64_t copy_bytes = 0;
};

// A forward-only pass over one batch (Executor::evaluate).
struct EvalResult {
  double loss = 0;  // the plan's loss, the same on every rank
  double seconds = 0;
};

class Executor {
 public:
  // Checks the plan against the job and this rank, builds one process group
  // per set of mesh axes the plan's collectives use (a collective over
  // `world`), binds every instruction to its kernel with verified shapes,
  // and initialises parameters and optimizer states from their init specs.
  static absl::StatusOr<std::unique_ptr<Executor>> create(const plan::Plan& plan,
                                                          std::shared_ptr<comm::ProcessGroup> world,
                                                          ExecutorOptions options = {});
  ~Executor();

  const plan::Plan& plan() const { return plan_; }
  int64_t rank() const { return rank_; }
  // The pipeline stage whose program this rank runs (0 without stages).
  int64_t stage() const { return program_->stage; }

  // The rows of one micro-batch's global batch this rank feeds (its
  // data-parallel share).
  data::RowRange batchRows() const { return rows_; }
  // Micro-batches per optimizer step (the plan's), and the rows of the
  // step's global batch that micro-batch `micro` of this rank reads: the
  // step's batch is the micro-batches' global batches one after another.
  int64_t microBatches() const { return plan_.micro_batches; }
  data::RowRange microBatchRows(int64_t micro) const {
    return {micro * global_batch_ + rows_.begin, rows_.count};
  }
  // Rows per optimizer step over all ranks.
  int64_t stepBatch() const { return global_batch_ * plan_.micro_batches; }
  int64_t seqLength() const { return seq_; }
  // Token ids lie in [0, vocab()): the embedding table's rows.
  int64_t vocab() const { return vocab_; }

  // Runs one training step (its program's schedule: each micro-batch's
  // forward and backward, in any interleaving, then the optimizer) on this
  // rank's rows; `ids` and `labels` hold microBatches() x batchRows().count
  // x seqLength() tokens, micro-batch after micro-batch (microBatchRows).
  // The loss is the step's: the mean of the micro-batches', on every rank
  // (a pipeline's last stage computes it and shares it over the pp axis).
  // `step` counts from 1 and drives AdamW's bias correction.
  absl::StatusOr<StepResult> step(int64_t step, const int32_t* ids, const int32_t* labels);
  // The loss of one batch (laid out as step()'s) without training on it:
  // only the instructions the loss depends on run (the forward's compute
  // and collectives), no backward and no optimizer, so parameters,
  // optimizer states and the step counter stay as they are, bit for bit.
  // Every rank of the job must call it together (its collectives are the
  // plan's). Measured as phase "eval", not traced. `step` is the training
  // step it follows, for messages.
  absl::StatusOr<EvalResult> evaluate(int64_t step, const int32_t* ids, const int32_t* labels);

  // The parameter and optimizer-state shards this rank saves: one replica
  // of everything, each element by exactly one rank, padding excluded. The
  // views point at host memory: the buffers themselves on the CPU, a host
  // copy on a GPU, valid until the next checkpointShards() or step().
  absl::StatusOr<std::vector<checkpoint::ShardView>> checkpointShards() const;
  // Loads parameters and optimizer states from a checkpoint saved under any
  // mesh (resharding on load); returns the optimizer step it holds.
  absl::Status loadCheckpoint(const checkpoint::CheckpointReader& reader);
  // Fills `out` (row-major over box.sizes) with `box` of parameter `param`
  // in global coordinates.
  using ParameterFill = std::function<absl::Status(
      const plan::Buffer& param, const checkpoint::Box& box, std::span<float> out)>;
  // Sets every parameter, and a bf16 parameter's f32 master copy, from
  // `fill` (weights from elsewhere, e.g. Hugging Face files); AdamW's
  // moments keep their init. Each rank asks only for its own shards.
  absl::Status loadParameters(const ParameterFill& fill);
  // Copies this rank's local shard of a buffer (for tests and parity checks).
  absl::StatusOr<std::vector<float>> localValues(const std::string& buffer_name) const;

  // Bytes of the device's memory (host or GPU) handed out to buffers.
  const AllocatorStats& allocatorStats() const { return allocator_->stats(); }
  // Bytes of the host arena (the plan's host buffers: offloaded states,
  // gradients copied to the host, copy staging) handed out, apart.
  const AllocatorStats& hostAllocatorStats() const { return host_allocator_->stats(); }
  const std::vector<PhaseMemory>& phaseMemory() const { return phase_memory_; }
  // Opens a measured phase outside the step (e.g. "checkpoint").
  void beginPhase(const std::string& name);
  void endPhase();
  // Adds the compute stream's wait [t0_us, t1_us] to the step's blocked
  // time (StepResult::comm_wait_seconds) and, with tracing on, records it for
  // collective `collective` (its op index `index`, over `axes`) at `in`.
  void traceWait(const plan::Instruction& in, int64_t step, int64_t index,
                 const std::string& collective, const std::string& axes, double t0_us,
                 double t1_us);

  // With tracing on, records [t0_us, now] as span `name` of `in` (op index
  // `index`) on `track`, moving `bytes`.
  void traceSpan(const plan::Instruction& in, int64_t step, std::string name, std::string track,
                 int64_t index, double t0_us, int64_t bytes = 0);

  TraceRecorder& trace() { return trace_; }
  const comm::MeshGroups& groups() const { return *groups_; }

  // Whether the executor has a binder for `op` (every row of the op table,
  // plan/op_table.h; executor_test checks it).
  static bool binds(std::string_view op);

 private:
  struct Bound;    // an instruction bound to its kernel
  struct Pending;  // an async collective between its start and its wait
  class RowOrder;  // deterministic mode's strategy (executor_internal.h)
  Executor(const plan::Plan& plan, std::shared_ptr<comm::ProcessGroup> world,
           ExecutorOptions options);

  // One instruction being bound: where it is, what it binds into, and the
  // checks every binder shares (their errors name the plan, the
  // instruction and its op index).
  struct Site {
    const plan::Instruction& in;
    int64_t position;
    Bound& bound;
    const plan::Plan& plan;
    // The instruction's operand and result buffer ids.
    std::pair<const std::vector<int64_t>&, const std::vector<int64_t>&> io() const {
      return {in.operands, in.results};
    }
    absl::Status fail(const std::string& what) const;
    // Exactly `operands` operands and `results` results.
    absl::Status need(size_t operands, size_t results) const;
    // Buffers the kernels take as float*.
    absl::Status needF32(
        std::initializer_list<int64_t> ids,
        const char* why = "losses, the dloss seed and vocab max/statistics are f32") const;
  };
  // Checks one instruction and sets its Bound's body.
  using Binder = absl::Status (Executor::*)(Site& site);
  // The binder of each op name.
  static const std::map<std::string_view, Binder>& binders();
  // Compute ops (executor_compute.cc).
  absl::Status bindEmbedding(Site& site);
  absl::Status bindEmbeddingGrad(Site& site);
  absl::Status bindLinear(Site& site);
  absl::Status bindMatmul(Site& site);
  absl::Status bindNorm(Site& site);
  absl::Status bindNormGrad(Site& site);
  absl::Status bindRope(Site& site);
  absl::Status bindAttention(Site& site);
  absl::Status bindActivation(Site& site);
  absl::Status bindActivationGrad(Site& site);
  absl::Status bindElementwise(Site& site);
  absl::Status bindSoftmax(Site& site);
  absl::Status bindReshape(Site& site);
  absl::Status bindTranspose(Site& site);
  absl::Status bindReduceSum(Site& site);
  absl::Status bindCrossEntropy(Site& site);
  absl::Status bindBiasAdd(Site& site);
  absl::Status bindVocab(Site& site);
  // Buffers and the optimizer (executor_buffers.cc).
  absl::Status bindBucket(Site& site);
  absl::Status bindSlice(Site& site);
  absl::Status bindFree(Site& site);
  absl::Status bindAccumulate(Site& site);
  absl::Status bindOptimizerStep(Site& site);
  // Offload (executor_offload.cc): copies between device memory and the
  // host arena, their waits, and AdamW on host buffers.
  absl::Status bindCopy(Site& site);
  absl::Status bindCopyWait(Site& site);
  absl::Status bindHostOptimizerStep(Site& site, const optim::AdamWConfig& config);
  // The clip coefficient where the host steps read it (1: no clipping).
  absl::Status fetchHostClip();
  // Collectives and their waits (executor_collectives.cc).
  struct CollectiveCall;  // a collective as bound (executor_internal.h)
  struct CollectiveRun;   // one issue of it
  // One way of running a collective: issues it and says how the wait
  // finishes it.
  using Launch = absl::StatusOr<std::shared_ptr<comm::Work>> (Executor::*)(CollectiveRun& run);
  absl::Status bindWait(Site& site);
  absl::Status bindCollective(Site& site);
  // Point-to-point between pipeline stages (executor_p2p.cc).
  absl::Status bindPointToPoint(Site& site);
  absl::StatusOr<CollectiveCall> parseCollective(Site& site);
  absl::Status checkCollectiveShapes(Site& site, CollectiveCall& call);
  absl::Status issueCollective(const CollectiveCall& call, Launch launch, int64_t step);
  void traceCollective(const CollectiveCall& call, Pending& pending, int64_t step);
  // The span of a collective or point-to-point transfer (`pending`'s kind
  // and axes) on `track`, from issue to completion.
  void traceTransfer(const plan::Instruction& in, Pending& pending, int64_t step,
                     const std::string& track, int64_t bytes);
  // The micro-batch `in` runs for: the running one, or -1 in the
  // optimizer's run.
  int64_t microBatchOf(const plan::Instruction& in) const {
    return in.phase == plan::Phase::kOptimizer ? -1 : micro_;
  }
  // Adds [t0_us, t1_us], the compute thread idle waiting for another
  // pipeline stage, to the step's bubble (StepResult::bubble_seconds) and,
  // with tracing on, records it as `name` on the bubble track, in schedule
  // entry `block` (empty: after the schedule) of the running micro-batch.
  void traceBubble(int64_t step, const std::string& name, const std::string& block, double t0_us,
                   double t1_us);
  // The wait [t0_us, t1_us] at `in` for point-to-point transfer `pending`:
  // a bubble named by the block, micro-batch, direction and peer stage.
  void traceTransferBubble(const plan::Instruction& in, const Pending& pending, int64_t step,
                           double t0_us, double t1_us);
  absl::StatusOr<std::shared_ptr<comm::Work>> launchStacked(CollectiveRun& run);
  absl::StatusOr<std::shared_ptr<comm::Work>> launchExactAllReduce(CollectiveRun& run);
  absl::StatusOr<std::shared_ptr<comm::Work>> launchAllReduce(CollectiveRun& run);
  absl::StatusOr<std::shared_ptr<comm::Work>> launchAllGather(CollectiveRun& run);
  absl::StatusOr<std::shared_ptr<comm::Work>> launchAllToAll(CollectiveRun& run);
  absl::StatusOr<std::shared_ptr<comm::Work>> launchReduceScatter(CollectiveRun& run);
  absl::StatusOr<std::shared_ptr<comm::Work>> launchExactReduceScatter(CollectiveRun& run);
  // Staging of `count` elements of type t, released at the wait.
  absl::StatusOr<Ref> stage(CollectiveRun& run, comm::DType t, int64_t count);
  // Where the engine writes a reduction's result: the result itself, or a
  // wire-typed block converted into it at the wait.
  absl::StatusOr<Ref> engineResult(CollectiveRun& run);
  absl::StatusOr<Ref> scatterSegments(CollectiveRun& run);

  // A buffer's local shape and element count, and its memory (valid while
  // the buffer is defined).
  const std::vector<int64_t>& shape(int64_t id) const { return plan_.buffers[id].local_shape; }
  int64_t numel(int64_t id) const { return plan_.buffers[id].numel(); }
  Ref ref(int64_t id) const { return Ref{bufferData(id), plan_.buffers[id].dtype}; }
  float* f32(int64_t id) const { return static_cast<float*>(bufferData(id)); }
  int32_t* i32(int64_t id) const { return static_cast<int32_t*>(bufferData(id)); }

  absl::Status bind();
  absl::Status initialise();
  absl::Status run(const Bound& bound, int64_t step);
  // Defines and uploads micro-batch `micro`'s token ids, labels, positions
  // and loss seed: those of them the program reads.
  absl::Status feed(int64_t micro, const int32_t* ids, const int32_t* labels);
  // What this rank's stage program touches: the buffers it holds, the
  // inputs it feeds, whether it computes the loss (executor_schedule.cc).
  absl::Status planStages();
  // Checks what the runtime needs of the schedule's order and notes each
  // entry's place in its micro-batch (executor_schedule.cc).
  absl::Status planSchedule();
  // Runs the schedule's block runs (without the optimizer's, and only what
  // the loss needs, when `eval`); returns the sum of the micro-batches'
  // losses this rank computed (0 on a stage without the loss).
  absl::StatusOr<double> runSchedule(int64_t step, const int32_t* ids, const int32_t* labels,
                                     bool eval);
  // Parks the running micro-batch's buffers and async handles and restores
  // micro-batch `micro`'s.
  void switchMicroBatch(int64_t micro);
  // After a micro-batch's last block run: its loss (0 where the program
  // does not compute it), its inputs released, no handle of it pending.
  absl::StatusOr<double> finishMicroBatch(int64_t step);
  // Releases every buffer a step or evaluation defines, parked ones too.
  void releaseTransient();
  // Every async handle not yet waited, parked ones too.
  std::vector<std::pair<std::string, const Pending*>> pendingHandles() const;
  // The step's loss on every rank: the sum over the pp axis of each
  // stage's (the last stage's, 0 elsewhere; exact). `loss` without a pipeline.
  absl::StatusOr<double> shareLoss(double loss, int64_t step);
  // Runs a block's instructions for micro-batch `micro` (-1: the
  // optimizer's run), skipping those of other micro-steps.
  absl::Status runBlock(const plan::Block& block, int64_t micro, int64_t step);
  // Forward-only evaluation (executor_eval.cc): marks the instructions the
  // loss depends on, and runs a block's marked ones.
  void planEvaluation();
  absl::Status runEvalBlock(const plan::Block& block, int64_t micro, int64_t step);
  // Releases what `bound` ends, keeping carried buffers until the last
  // micro-step.
  void releaseAfter(const Bound& bound);
  absl::Status beginOptimizer(int64_t step);
  absl::StatusOr<float> readLoss(int64_t step);
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
  absl::StatusOr<std::vector<checkpoint::ShardView>> shardViews(
      const std::vector<int64_t>& ids) const;
  // Writes a param or state's valid box `dense` into its padded buffer.
  // A float buffer's local values (padding included) as f32 on the host.
  absl::StatusOr<std::vector<float>> hostValues(const plan::Buffer& b) const;
  absl::Status uploadShard(const plan::Buffer& b, const std::vector<float>& dense,
                           const std::vector<int64_t>& valid);
  absl::Status outOfMemory(size_t bytes, const std::string& what, bool host = false) const;
  // The allocator of buffer `id`'s memory: the host arena for a host buffer.
  CachingAllocator& allocatorOf(int64_t id) const {
    return plan_.buffers[id].onHost() ? *host_allocator_ : *allocator_;
  }
  // Copies between a buffer (device or host memory) and host memory.
  absl::Status writeBuffer(int64_t id, const void* host, size_t bytes);
  absl::Status readBuffer(void* host, int64_t id, size_t bytes) const;
  void alias(int64_t id, int64_t of);
  void releaseBuffer(int64_t id);
  absl::Status clipGradients(int64_t step);

  plan::Plan plan_;
  // This rank's program (its pipeline stage's); its instructions in order.
  const plan::Program* program_ = nullptr;
  std::vector<const plan::Instruction*> instructions_;
  // Each block's first instruction in instructions_ (and bound_), and the
  // first dist.optimizer_step's (-1: none).
  std::map<std::string, int64_t, std::less<>> block_begin_;
  int64_t first_step_ = -1;
  // Buffers held from one micro-step to the next (plan::carriedBuffers).
  std::vector<bool> carried_;
  // Per schedule entry: the first and the last run of its micro-batch.
  std::vector<bool> entry_first_, entry_last_;
  // The buffers this program reads or defines; the interface inputs among
  // them, and whether it defines the loss.
  std::vector<bool> used_;
  std::vector<int64_t> feeds_;
  bool defines_loss_ = false;
  // The highest stage whose program defines the loss: the one that reports it.
  int64_t loss_stage_ = 0;
  // The pp axis and its group (-1 and null without one or with one
  // program), and per buffer the lowest stage whose program uses it or a
  // replica of it (-1: none; the stage that saves it) and how many stages'
  // programs do.
  std::shared_ptr<comm::ProcessGroup> pp_group_;
  int64_t pp_axis_ = -1;
  std::vector<int64_t> saving_stage_;
  std::vector<int64_t> holders_;
  // The micro-batch running, and the loss cotangent's seed: 1 / micro-batches,
  // so that the summed gradients are the step's mean.
  int64_t micro_ = 0;
  float loss_grad_seed_ = 1.0f;
  std::shared_ptr<comm::ProcessGroup> world_;
  ExecutorOptions options_;
  int64_t rank_ = 0;
  std::vector<int64_t> coords_;
  std::unique_ptr<comm::MeshGroups> groups_;
  data::RowRange rows_;
  int64_t seq_ = 0;
  int64_t vocab_ = 0;

  // Declared before the allocator, which returns its blocks to the
  // device's memory first.
  std::unique_ptr<KernelSet> kernels_;
  std::unique_ptr<CachingAllocator> allocator_;
  // Offload: the host arena, apart from the device's memory, and the host
  // AdamW (created when the plan holds host buffers).
  std::unique_ptr<CachingAllocator> host_allocator_;
  std::unique_ptr<optim::HostAdamW> host_adamw_;
  // The async handles copies start (their waits bind to bindCopyWait).
  std::set<std::string, std::less<>> copy_handles_;
  float host_clip_ = 1.0f;
  // The clip coefficient in the kernels' scalars (null without clipping).
  float* clip_coefficient_ = nullptr;
  // The plan's (or the options') AdamW rate, and the schedule's multiplier
  // for the step being run.
  double base_lr_ = 0;
  double lr_factor_ = 1;
  // This step's collectives (where issued), checked once the step's work
  // has run.
  std::vector<std::pair<std::string, std::shared_ptr<comm::Work>>> step_works_;
  // This step's host time blocked on collectives, of it the time waiting
  // for other pipeline stages, and bytes issued; the same for offload's
  // copies.
  double wait_us_ = 0;
  double bubble_us_ = 0;
  int64_t comm_bytes_ = 0;
  double copy_wait_us_ = 0;
  int64_t copy_bytes_ = 0;
  // Host copies behind checkpointShards()'s views on a GPU.
  mutable std::vector<std::vector<float>> host_staging_;
  // Storage blocks, reference counted so that views (reshape, wait) share.
  struct Block {
    void* data = nullptr;
    int refs = 0;
    bool host = false;  // from the host arena
  };
  std::vector<Block> blocks_;
  std::vector<int64_t> block_of_;  // buffer id -> block index, -1 when dead
  std::vector<bool> persistent_;   // params and optimizer states
  std::vector<Stack> stacks_;      // deterministic mode
  // Interleaved schedules (docs/runtime.md, "Schedules and stage
  // programs"): the buffers that exist once per micro-batch in flight (a
  // model block's results and the fed inputs, unless persistent, carried or
  // read by the optimizer), and the handles started and waited within
  // model blocks. While another micro-batch runs, a micro-batch's storage
  // of them is parked in its slots; the allocator still holds it, so the
  // measured peak counts every micro-batch in flight.
  struct MicroSlots {
    std::vector<std::pair<int64_t, int64_t>> blocks;  // buffer id, storage block
    std::vector<std::pair<int64_t, Stack>> stacks;
    std::map<std::string, std::shared_ptr<Pending>> pending;
  };
  std::vector<int64_t> micro_buffers_;
  std::set<std::string, std::less<>> micro_handles_;
  std::vector<MicroSlots> parked_;  // per micro-batch
  int64_t global_batch_ = 0;
  std::unique_ptr<RowOrder> order_;  // deterministic mode or not
  std::vector<std::unique_ptr<Bound>> bound_;
  std::vector<bool> eval_needed_;  // per bound_ entry: evaluation runs it
  std::map<std::string, std::shared_ptr<Pending>> pending_;
  std::atomic<int> callbacks_outstanding_{0};
  std::vector<PhaseMemory> phase_memory_;
  std::string current_phase_;
  TraceRecorder trace_;
};

}  // namespace loom::runtime

#endif  // LOOM_RUNTIME_EXECUTOR_EXECUTOR_H_
