// The plan: what the planner hands the runtime, as typed C++ (format in
// docs/plan_json.md, design in docs/plan_library.md). This library is the
// one reader and the one writer of plan.json; the exporter, the runtime,
// report.md, trace.json and the HTML page all go through it. It depends on
// no MLIR: a cluster node links it without LLVM.
#ifndef LOOM_PLAN_PLAN_H_
#define LOOM_PLAN_PLAN_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "comm/reduce_op.h"
#include "comm/tensor.h"
#include "mesh/device_mesh.h"
#include "plan/init_spec.h"
#include "plan/op_table.h"

namespace loom::plan {

// The format version this library reads and writes. Version 1 (one
// instruction list per phase) is refused with a message that says to
// re-plan.
inline constexpr int kFormatVersion = 2;

enum class BufferRole { kParam, kGrad, kOptimizerState, kActivation, kGathered };
inline constexpr int kNumRoles = 5;
// "param", "grad", "optimizer_state", "activation", "gathered".
const char* roleName(BufferRole role);
absl::StatusOr<BufferRole> roleFromName(std::string_view name);
// Parameters and optimizer states live across steps; the rest is made and
// released within a step.
inline bool persistentRole(BufferRole role) {
  return role == BufferRole::kParam || role == BufferRole::kOptimizerState;
}

// Where a buffer lives: the device's memory (the default) or the host's
// (offloaded optimizer states, gradients copied to the host; the runtime's
// host arena, pinned on a GPU machine; docs/planner_offload.md).
enum class MemorySpace { kDevice, kHost };
// "device", "host".
const char* memorySpaceName(MemorySpace space);
absl::StatusOr<MemorySpace> memorySpaceFromName(std::string_view name);

// One mesh axis's entry of a placement (docs/planner_dist.md).
struct AxisPlacement {
  enum class Kind { kReplicate, kShard, kPartial };
  Kind kind = Kind::kReplicate;
  int64_t dim = -1;                                 // kShard
  bool padded = false;                              // kShard
  comm::ReduceOp reduction = comm::ReduceOp::kSum;  // kPartial: sum, avg, max or min
  // "replicate", "shard(1)", "shard(0,padded)", "partial(sum)".
  std::string toString() const;
  static absl::StatusOr<AxisPlacement> parse(std::string_view text);
  bool operator==(const AxisPlacement&) const = default;
};
// One entry per mesh axis.
using Placement = std::vector<AxisPlacement>;

// The first and last position (in the program's instruction order, see
// Program::instructions) at which a buffer is held: defined or read. An
// async start's operands are held until its wait. -1 as `first`: the
// buffer exists on entry (parameters, optimizer states and the inputs the
// runtime feeds).
struct Lifetime {
  int64_t first = -1;
  int64_t last = -1;
  bool operator==(const Lifetime&) const = default;
};

struct Buffer {
  int64_t id = 0;
  std::string name;
  comm::DType dtype = comm::DType::kFloat32;
  std::vector<int64_t> global_shape;
  std::vector<int64_t> local_shape;
  int64_t bytes = 0;  // per rank, padding included
  BufferRole role = BufferRole::kActivation;
  MemorySpace memory = MemorySpace::kDevice;
  Placement placement;
  Lifetime live;
  std::optional<InitSpec> init;  // parameters and optimizer states
  // The buffer this one is a replica of: another pipeline stage's copy,
  // with the same values at every step (a tied parameter's replica, its
  // optimizer states and its summed gradient), on the lowest stage that
  // holds the tensor, which saves, exports and counts it. -1: none.
  int64_t replica_of = -1;
  int64_t numel() const;
  // The buffer whose copy this is, or this one.
  int64_t primaryId() const { return replica_of >= 0 ? replica_of : id; }
  bool onHost() const { return memory == MemorySpace::kHost; }
};

enum class Phase { kForward, kBackward, kOptimizer };
const char* phaseName(Phase phase);

// The micro-steps of an optimizer step an instruction runs in
// (plan-accumulate, docs/planner_accumulate.md): every one, the first only
// (a parameter gather whose copy the later ones keep), or the last only (a
// gradient reduction deferred until the gradients are summed).
enum class MicroStep { kEvery, kFirst, kLast };
// "every", "first", "last".
const char* microStepName(MicroStep when);
absl::StatusOr<MicroStep> microStepFromName(std::string_view name);
// Whether an instruction of `when` runs in micro-step `micro` of `count`.
inline bool runsIn(MicroStep when, int64_t micro, int64_t count) {
  return when == MicroStep::kEvery || (when == MicroStep::kFirst ? micro == 0 : micro == count - 1);
}

// The typed attributes of an instruction. Which ones an op takes, and which
// it must have, is its op-table row (op_table.h); the reader fills them
// once, and nothing reads plan.json by key again. Flags are false unless
// set; optional fields are empty unless the plan gives them.
struct Attrs {
  // nn ops.
  std::optional<double> epsilon;  // rms_norm, layer_norm and their grads
  std::optional<double> theta;    // rope
  bool inverse = false;           // rope: rotate back (its gradient)
  // rope's frequency scaling (plan/rope_frequency.h): the factor alone is
  // linear scaling; with the other three, Llama 3.1's bands.
  std::optional<double> scaling_factor;
  std::optional<double> low_freq_factor;
  std::optional<double> high_freq_factor;
  std::optional<int64_t> original_max_positions;
  bool transpose_lhs = false;  // matmul
  bool transpose_rhs = false;
  std::optional<double> scale;       // cross-entropy family: 1/N of the whole batch
  std::optional<int64_t> vocab;      // vocab-parallel loss: the global vocabulary
  std::vector<int64_t> dims;         // reduce_sum: the reduced dims
  std::vector<int64_t> permutation;  // transpose: result dim i is operand dim permutation[i]
  // Per operand and per result, the placement (layout ops read which rows
  // a shard holds from these).
  std::vector<Placement> operand_placements;
  std::vector<Placement> result_placements;
  // Collectives.
  std::vector<std::string> mesh_axes;     // collectives and dist.slice
  std::optional<comm::DType> wire_type;   // default: the operand's type
  std::optional<comm::DType> accum_type;  // default: the wire type
  std::optional<comm::ReduceOp> reduction;
  bool padded = false;  // reduce_scatter, all_gather, slice, bucket: padded shards
  std::optional<int64_t> gather_dim;
  std::optional<int64_t> scatter_dim;
  std::optional<int64_t> split_dim;   // all_to_all: the dim that becomes sharded
  std::optional<int64_t> concat_dim;  // all_to_all: the dim that stops being sharded
  std::optional<int64_t> group_size;  // the product of mesh_axes' sizes
  std::optional<int64_t> bytes;       // per rank, as the cost model counts them
  std::string async_handle;           // *_start and dist.wait
  // Buffers.
  std::optional<int64_t> chunks;  // bucket, unbucket
  std::vector<int64_t> offsets;
  std::vector<int64_t> split_dims;
  std::optional<int64_t> slice_dim;
  // Point-to-point: the peer's coordinate along mesh_axes[0], and the tag
  // that pairs a send with its receive.
  std::optional<int64_t> peer;
  std::optional<int64_t> tag;
  // Optimizer (AdamW).
  std::optional<double> lr;
  std::optional<double> beta1;
  std::optional<double> beta2;
  std::optional<double> eps;
  std::optional<double> weight_decay;
};

struct Instruction {
  const OpInfo* info = nullptr;  // the op's row; never null in a read plan
  std::string op;
  Phase phase = Phase::kForward;
  std::string block;     // the block it belongs to
  int64_t position = 0;  // in its block, for messages
  int64_t order = 0;     // in Program::instructions(), for lifetimes
  int64_t index = -1;    // the op's index in the planned function (-1: none)
  // The module path of the model op it comes from ("layers.3.attention.wq";
  // empty: none known). Repeated layers share it but for the index.
  std::string scope;
  // A forward op repeated in the backward pass instead of keeping its
  // result (plan-recompute).
  bool recompute = false;
  MicroStep micro_step = MicroStep::kEvery;
  std::vector<int64_t> operands;
  std::vector<int64_t> results;
  Attrs attrs;
  std::optional<double> start_s;  // predicted, from the step's start
  std::optional<double> duration_s;
  bool commStream() const { return info->stream == Stream::kComm; }
  // "blocks.backward[12] (nn.linear)", for error messages.
  std::string where() const;
};

// A named instruction list of one phase. A program's schedule runs its
// blocks, each possibly once per micro-batch.
struct Block {
  std::string name;
  Phase phase = Phase::kForward;
  std::vector<Instruction> instructions;
};

// One run of a block: for a micro-batch (0 .. micro_batches-1), or once
// per optimizer step (micro_batch -1).
struct ScheduleEntry {
  std::string block;
  int64_t micro_batch = -1;
};

// What the ranks of one pipeline stage run. Without a pipeline axis the
// plan has one program, stage 0, that every rank runs.
struct Program {
  int64_t stage = 0;
  std::vector<Block> blocks;
  std::vector<ScheduleEntry> schedule;
  // Every instruction, in schedule order (each block at its first run);
  // Instruction::order indexes this list.
  std::vector<const Instruction*> instructions() const;
  // The indices of `blocks` in that order (each at its first run).
  std::vector<size_t> blockOrder() const;
  // Sets every Instruction::order from the schedule; the reader calls it,
  // and so must code that builds a program.
  void assignOrder();
  const Block* block(std::string_view name) const;
};

struct Link {
  std::string link_class;  // "nvlink", "infiniband", "loopback", ...
  double bandwidth_bytes_per_s = 0;
  double latency_s = 0;
};

struct Topology {
  int64_t hosts = 1;
  int64_t devices_per_host = 1;
  std::string device;
  double peak_flops_bf16 = 0;
  double peak_flops_fp32 = 0;
  int64_t memory_bytes = 0;
  double memory_bandwidth_bytes_per_s = 0;
  // A device's share of its host's memory and memory bandwidth, and its
  // link to that memory (mesh/device_specs.h); 0 in plans made before
  // offload, which hold no host buffers.
  int64_t host_memory_bytes = 0;
  double host_memory_bandwidth_bytes_per_s = 0;
  Link intra_host;
  Link inter_host;
  Link host;
};

// What the runtime feeds and reads, as buffer ids (-1: absent).
struct Interface {
  int64_t ids = -1;
  int64_t labels = -1;
  int64_t loss_grad_seed = -1;
  int64_t loss = -1;
  int64_t positions = -1;  // learned position tables: 0..seq-1 per row
  int64_t vocab = 0;       // rows of the token embedding (0: unknown)
};

struct CommVolume {
  std::string axes;  // "fsdp" or "dp,fsdp"
  std::string kind;  // "all_gather", ...
  int64_t count = 0;
  int64_t bytes = 0;  // per rank
};

// The offload part of a prediction (docs/planner_offload.md): present
// when the plan holds host buffers.
struct OffloadPredicted {
  // Busy time of the copy stream (device <-> host) and the part of it
  // compute waited for; the host AdamW steps' time (in optimizer_s too).
  double copy_s = 0;
  double exposed_copy_s = 0;
  double host_optimizer_s = 0;
  // Bytes copied each way per step.
  int64_t to_host_bytes = 0;
  int64_t to_device_bytes = 0;
  // Host memory per rank: the peak, where, and bytes per role there.
  int64_t host_peak_bytes = 0;
  int64_t host_peak_index = -1;
  std::map<std::string, int64_t> host_breakdown;
};

struct Predicted {
  double step_time_s = 0;
  // With pipeline stages: the time the slowest stage waits for its peers
  // (the schedule's bubble), part of step_time_s. 0 without stages.
  double bubble_s = 0;
  double model_flops = 0;  // of the nn ops, per rank and step
  double compute_s = 0;
  double comm_s = 0;
  double exposed_comm_s = 0;
  double optimizer_s = 0;
  double compute_efficiency = 0;
  int64_t peak_bytes = 0;
  int64_t peak_index = -1;
  // With pipeline stages: each stage's peak (its program's, by program
  // order), with the micro-batches its schedule holds in flight;
  // peak_bytes is the highest. Empty without stages.
  std::vector<int64_t> stage_peak_bytes;
  std::map<std::string, int64_t> breakdown;  // bytes per role at the peak
  std::vector<CommVolume> comm_volume;
  int64_t comm_bytes_per_rank = 0;
  std::string machine_profile;  // empty: the datasheet's figures
  // The device memory figures above leave host buffers out; these count them.
  std::optional<OffloadPredicted> offload;
};

// A one-rank mesh, the placeholder before a plan's mesh is set.
mesh::DeviceMesh singleRankMesh();

struct Plan {
  std::string source;  // the file it was read from (messages only)
  std::string model;
  std::string function;
  mesh::DeviceMesh mesh = singleRankMesh();
  std::vector<std::string> strategies;  // one per mesh axis
  Topology topology;
  std::vector<Buffer> buffers;
  // Micro-batches per optimizer step, the same on every stage: the model
  // blocks run once per micro-batch (each on its own rows, dist.accumulate
  // summing the gradients), the optimizer once.
  int64_t micro_batches = 1;
  std::vector<Program> programs;  // one per pipeline stage
  Interface interface;
  Predicted predicted;
  int64_t worldSize() const { return mesh.size(); }
};

// Reads and checks a plan.json: every field's type, references, arities,
// attributes against the op table, definition before use, async pairing
// and lifetimes. Errors are InvalidArgument (NotFound for a missing file)
// and name the file and the JSON path of the field at fault, with how to
// fix it.
absl::StatusOr<Plan> loadPlan(const std::string& path);
absl::StatusOr<Plan> parsePlan(std::string_view text, std::string_view source);

// plan.json's text: sorted keys, two-space indent, so plans diff well.
// Fills nothing in: a plan to write must pass checkPlan.
std::string writePlan(const Plan& plan);
absl::Status writePlanFile(const Plan& plan, const std::string& path);

// The checks parsePlan makes after reading the fields, for a plan built
// in memory (the exporter's): references, arities and attributes, the
// pairing of async starts and waits, shapes against placements, and each
// buffer's `live` against its instructions.
absl::Status checkPlan(const Plan& plan);

// Checks the plan against the job that is about to run it.
absl::Status checkPlanForJob(const Plan& plan, int64_t world_size);

// The program the rank at `coords` runs (its pipeline stage's).
const Program& programFor(const Plan& plan, const std::vector<int64_t>& coords);

}  // namespace loom::plan

#endif  // LOOM_PLAN_PLAN_H_
