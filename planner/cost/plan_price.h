// Prices a plan (plan/plan.h) without MLIR: the step's timeline by the cost
// model's rules and cost::simulate, and its peak memory per rank from the
// buffers' lifetimes. The exporter's predicted figures and the mesh search
// both come from here, so a plan and the search's estimate of it are one
// computation on one program (docs/planner_cost.md, "Pricing a plan").
#ifndef LOOM_PLANNER_COST_PLAN_PRICE_H_
#define LOOM_PLANNER_COST_PLAN_PRICE_H_

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "comm/tensor.h"
#include "plan/plan.h"
#include "planner/cost/cost_model.h"
#include "planner/cost/program.h"

namespace loom::planner::cost {

// What the runtime allocates beside a collective because of its dtypes
// (docs/runtime.md, "Mixed precision"), live until its wait: an operand of
// another type than the wire is converted first; a sum or average
// accumulated wider than its wire receives every rank's segments and adds
// them; a reduction whose result is not its wire type lands in a wire-typed
// block first. 0 for an f32 plan.
struct StagingQuery {
  plan::CollectiveKind kind = plan::CollectiveKind::kNone;
  int64_t in_elements = 0;
  int64_t out_elements = 0;
  comm::DType operand = comm::DType::kFloat32;
  comm::DType wire = comm::DType::kFloat32;
  comm::DType result = comm::DType::kFloat32;
  std::optional<comm::DType> accum;
  // The reduction is a sum or an average.
  bool sum = false;
  int64_t group_size = 1;
};
int64_t collectiveStagingBytes(const StagingQuery& query);

// A pipeline stage's program block by block, as one micro-batch runs it:
// what the stage's schedule, which runs the blocks of several micro-batches
// in turn, is priced from (pipeline_price.h).
struct StageBlocks {
  // Per block, in program order: its phase, the seconds its compute-stream
  // instructions take, and the highest live bytes within it (its own
  // buffers and those it inherits from the micro-batch's earlier blocks),
  // where, and by role.
  struct Block {
    std::string name;
    plan::Phase phase = plan::Phase::kForward;
    double compute_s = 0;
    int64_t peak_bytes = 0;
    int64_t peak_order = -1;
    std::array<int64_t, plan::kNumRoles> breakdown{};
  };
  std::vector<Block> blocks;
  // Bytes one micro-batch holds from block `from` until block `to` (indices
  // into `blocks`), by role: saved activations, a gathered copy kept for
  // the backward, a posted receive. Buffers held across micro-batches
  // (gradient sums, kept gathers) and resident ones are in every peak.
  struct Held {
    int32_t from = 0;
    int32_t to = 0;
    std::array<int64_t, plan::kNumRoles> bytes{};
  };
  std::vector<Held> held;
  // The longest point-to-point op: a transfer between stages.
  double transfer_s = 0;
};

struct PlanPrice {
  // Compute (optimizer included), communication, exposed communication and
  // the end of one step, as cost::simulate gives them.
  Timing timing;
  double optimizer_s = 0;
  // Per instruction, by Instruction::order: start and duration (nullopt for
  // instructions without a cost: waits and buffer ops).
  std::vector<std::optional<double>> start_s;
  std::vector<std::optional<double>> duration_s;
  // Live bytes at the peak, where (an order; -1: on entry), and by role.
  int64_t peak_bytes = 0;
  int64_t peak_order = -1;
  std::array<int64_t, plan::kNumRoles> breakdown{};
  // Bytes each rank sends per step (the collectives' `bytes`) and the nn
  // ops' FLOPs, recomputed ops excepted (the model's FLOPs, as MFU counts
  // them; their time is in the step).
  int64_t comm_bytes_per_rank = 0;
  double model_flops = 0;
  // The recomputed ops' FLOPs: with model_flops, all the compute does (what
  // plan-stages balances a pipeline's chunks by).
  double recompute_flops = 0;
  // Busy time of each comm stream (one per set of mesh axes), in order of
  // first use, and of the gathers in the backward phase.
  std::vector<double> stream_s;
  std::vector<std::string> stream_axes;  // "fsdp", "dp,fsdp", ...
  double backward_gather_s = 0;
  // Bytes the backward phase's gathers make in one micro-step (the largest
  // micro-step's): the copies a plan that does not reshard keeps instead.
  int64_t backward_gather_bytes = 0;
  // Time of the memory-bound nn ops (cost::OpClass::kMemoryBound: not
  // GEMMs, attention or views), part of compute_s. Sequence parallelism
  // can shrink these and nothing else of the compute (the search's bound).
  double memory_bound_s = 0;
  // A pipeline stage's program only (PricedProgram::pipelineStage): its
  // blocks' times and memory, the highest over its micro-steps.
  StageBlocks blocks;
  // Offload (docs/planner_offload.md). The copies' busy time and what
  // compute waited for them are timing.copy_s and timing.exposed_copy_s;
  // the host's AdamW steps (part of optimizer_s and compute_s) take
  // host_optimizer_s, and the copies move these bytes each way.
  double host_optimizer_s = 0;
  int64_t to_host_bytes = 0;
  int64_t to_device_bytes = 0;
  // Host memory: the live bytes at its peak, where, and by role; device
  // memory (peak_bytes above) leaves host buffers out.
  int64_t host_peak_bytes = 0;
  int64_t host_peak_order = -1;
  std::array<int64_t, plan::kNumRoles> host_breakdown{};
};

// A program as pricing reads it: a plan's own (pricePlan) or a template's
// repeated to a model's depth without materialising it (repeat_blocks.h),
// so that both are priced by one computation.
class PricedProgram {
 public:
  virtual ~PricedProgram() = default;
  // The plan whose header (source, mesh) applies.
  virtual const plan::Plan& header() const = 0;
  // Instructions in program order (Program::instructions()); `order`
  // indexes them. The instruction gives the op, family and attributes; its
  // operand and result buffers are these.
  virtual int64_t size() const = 0;
  virtual const plan::Instruction& instruction(int64_t order) const = 0;
  virtual std::span<const int64_t> operands(int64_t order) const = 0;
  virtual std::span<const int64_t> results(int64_t order) const = 0;
  // Buffers by id: the plan::Buffer giving the dtype, role, local shape
  // and bytes (its own id and lifetime may be another plan's), and the
  // lifetime over this program.
  virtual int64_t numBuffers() const = 0;
  virtual const plan::Buffer& buffer(int64_t id) const = 0;
  virtual plan::Lifetime live(int64_t id) const = 0;
  // Whether this program holds buffer `id`: a pipeline stage's program
  // holds only its own buffers (parameters included), which are all its
  // memory counts.
  virtual bool holds(int64_t /*id*/) const { return true; }
  virtual int64_t loss() const = 0;
  // A pipeline stage's program, whose blocks the schedule runs for several
  // micro-batches in turn: its price gets PlanPrice::blocks, each block
  // named by blockName (a composed stage renames its chunks' blocks).
  virtual bool pipelineStage() const { return false; }
  // What to add to the layer number in instruction `order`'s scope and in
  // buffer `id`'s name: a repeated program reads its template's.
  virtual int64_t scopeShift(int64_t /*order*/) const { return 0; }
  virtual int64_t nameShift(int64_t /*id*/) const { return 0; }
  virtual std::string_view blockName(int64_t order) const { return instruction(order).block; }
};

// Prices `program` on `model`'s topology, as pricePlan does.
absl::StatusOr<PlanPrice> priceProgram(const PricedProgram& program, const CostModel& model);

// Prices `plan`'s first program on `model`'s topology (whose world must be
// the plan's mesh size). Collective bytes and compute work come from the
// buffers' local shapes, so a plan whose shapes were changed is priced as
// it now stands. Buffers live over their plan lifetimes (buffers[].live),
// except that parameters and optimizer states are resident for the whole
// step and the loss is held to its end (plan-memory-plan's rules).
absl::StatusOr<PlanPrice> pricePlan(const plan::Plan& plan, const CostModel& model);

// Each program of `plan` priced alone, in program order: a pipeline
// stage's compute, its transfers and its own buffers. What a stage waits
// for its peers (the schedule's bubble) is not in these figures.
absl::StatusOr<std::vector<PlanPrice>> priceStages(const plan::Plan& plan,
                                                   const CostModel& model);

// The collectives of one optimizer step by (axes, kind): each
// instruction's count and `bytes` times the micro-steps it runs in.
std::vector<plan::CommVolume> commVolumeOf(const plan::Plan& plan);

// Prices `plan` and records the figures in it: predicted.step_time_s,
// compute_s, comm_s, exposed_comm_s, optimizer_s, peak_bytes, peak_index,
// breakdown, comm_bytes_per_rank, model_flops, the efficiency of large
// GEMMs, the profile's name, predicted.offload when the plan holds host
// buffers, and every instruction's start_s and duration_s. The exporter and the re-pricing with a machine profile use it.
// With pipeline stages every program is priced (priceStages) and their
// block runs simulated in the schedules' order (pricePipeline): the step
// is the stage whose own time plus its wait for its peers (bubble_s) is
// the longest, whose traffic and FLOPs are reported; the memory is the
// stage with the highest peak's, one micro-batch deep.
absl::Status recordPrice(const CostModel& model, plan::Plan& plan);

}  // namespace loom::planner::cost

#endif  // LOOM_PLANNER_COST_PLAN_PRICE_H_
