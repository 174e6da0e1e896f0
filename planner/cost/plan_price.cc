// Pricing a plan (see plan_price.h).
#include "planner/cost/plan_price.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "plan/lifetimes.h"
#include "planner/cost/op_work.h"
#include "planner/cost/pipeline_price.h"
#include "planner/cost/stage_program.h"

namespace loom::planner::cost {
namespace {

int64_t bytesOf(comm::DType dtype) { return static_cast<int64_t>(comm::dtypeSize(dtype)); }

Dtype floatType(comm::DType dtype) {
  if (dtype == comm::DType::kBFloat16) return Dtype::kBF16;
  if (dtype == comm::DType::kFloat16) return Dtype::kF16;
  return Dtype::kF32;
}

// The cost model's roles are the plan's, in the same order.
static_assert(kNumRoles == plan::kNumRoles);
static_assert(static_cast<int>(Role::kParam) == static_cast<int>(plan::BufferRole::kParam) &&
              static_cast<int>(Role::kGrad) == static_cast<int>(plan::BufferRole::kGrad) &&
              static_cast<int>(Role::kOptimizerState) ==
                  static_cast<int>(plan::BufferRole::kOptimizerState) &&
              static_cast<int>(Role::kActivation) ==
                  static_cast<int>(plan::BufferRole::kActivation) &&
              static_cast<int>(Role::kGathered) == static_cast<int>(plan::BufferRole::kGathered));
Role roleOf(plan::BufferRole role) { return static_cast<Role>(static_cast<int>(role)); }

CollectiveKind kindOf(plan::CollectiveKind kind) {
  switch (kind) {
    case plan::CollectiveKind::kAllGather:
      return CollectiveKind::kAllGather;
    case plan::CollectiveKind::kReduceScatter:
      return CollectiveKind::kReduceScatter;
    case plan::CollectiveKind::kAllToAll:
      return CollectiveKind::kAllToAll;
    default:
      return CollectiveKind::kAllReduce;
  }
}

// The blocks of `program` with the memory of `buffers` (over its
// instructions, the step's end slot included); `perMicro` says which are
// made for each micro-batch. Times are set by blockTimes.
StageBlocks blockMemory(const PricedProgram& program, const std::vector<Buffer>& buffers,
                        const std::vector<bool>& perMicro) {
  const int32_t size = static_cast<int32_t>(program.size());
  StageBlocks out;
  std::vector<int32_t> starts;
  // Each instruction's block, as an index into out.blocks.
  std::vector<int32_t> blockAt(static_cast<size_t>(size));
  for (int32_t order = 0; order < size; ++order) {
    const std::string_view name = program.blockName(order);
    if (out.blocks.empty() || out.blocks.back().name != name) {
      out.blocks.push_back({.name = std::string(name), .phase = program.instruction(order).phase});
      starts.push_back(order);
    }
    blockAt[order] = static_cast<int32_t>(out.blocks.size()) - 1;
  }
  if (out.blocks.empty()) return out;
  const std::vector<MemoryPeak> peaks = spanPeaks(buffers, size + 1, starts);
  for (size_t k = 0; k < peaks.size(); ++k) {
    out.blocks[k].peak_bytes = peaks[k].peak_bytes;
    out.blocks[k].peak_order = peaks[k].at;
    out.blocks[k].breakdown = peaks[k].breakdown;
  }
  // (from, to) -> index into out.held.
  std::map<std::pair<int32_t, int32_t>, size_t> heldIndex;
  auto optimizer = [&](int32_t block) { return out.blocks[block].phase == plan::Phase::kOptimizer; };
  for (size_t k = 0; k < buffers.size(); ++k) {
    const Buffer& b = buffers[k];
    if (!perMicro[k] || b.first < 0 || b.last >= size) continue;
    const int32_t from = blockAt[b.first];
    const int32_t to = blockAt[b.last];
    if (from == to || optimizer(from) || optimizer(to)) continue;
    auto [it, added] = heldIndex.emplace(std::pair{from, to}, out.held.size());
    if (added) out.held.push_back({.from = from, .to = to});
    out.held[it->second].bytes[static_cast<int>(b.role)] += b.bytes;
  }
  return out;
}

// The higher of two prices' block memory (of one program's micro-steps).
void keepHigherBlocks(StageBlocks& into, const StageBlocks& other) {
  if (into.blocks.size() != other.blocks.size()) return;
  for (size_t k = 0; k < into.blocks.size(); ++k) {
    StageBlocks::Block& block = into.blocks[k];
    const StageBlocks::Block& higher = other.blocks[k];
    if (higher.peak_bytes <= block.peak_bytes) continue;
    block.peak_bytes = higher.peak_bytes;
    block.peak_order = higher.peak_order;
    block.breakdown = higher.breakdown;
  }
}

// Each block's compute time for one micro-batch, and the longest
// point-to-point op, from the priced durations.
void blockTimes(const PricedProgram& program, PlanPrice& price) {
  StageBlocks& stage = price.blocks;
  size_t block = 0;
  for (int64_t order = 0; order < program.size(); ++order) {
    while (block < stage.blocks.size() && stage.blocks[block].name != program.blockName(order)) {
      ++block;
    }
    const plan::Instruction& in = program.instruction(order);
    const double seconds = price.duration_s[order].value_or(0);
    // The transfers between a micro-batch's chunks; the optimizer's (a
    // tied gradient's exchange) is in the stage's own priced time.
    if (in.info->family == plan::OpFamily::kPointToPoint) {
      if (in.phase != plan::Phase::kOptimizer) {
        stage.transfer_s = std::max(stage.transfer_s, seconds);
      }
    } else if (in.info->stream == plan::Stream::kCompute && block < stage.blocks.size()) {
      stage.blocks[block].compute_s += seconds;
    }
  }
}

// Builds the cost::Instruction program of one plan program and keeps what
// the memory count and the per-instruction times need.
class Pricer {
 public:
  // Prices micro-step `micro` of `count` (each runs the instructions of
  // its micro-step; the last, the optimizer too), or with `micro` -1 one
  // step of a program whose micro-steps are all alike.
  Pricer(const PricedProgram& program, const CostModel& model, int64_t micro, int64_t count)
      : program_in_(program), model_(model), micro_(micro), count_(count) {}

  absl::StatusOr<PlanPrice> price();

 private:
  const plan::Buffer& buffer(int64_t id) const { return program_in_.buffer(id); }
  TensorDesc describe(int64_t id) const {
    const plan::Buffer& b = buffer(id);
    return {.shape = b.local_shape, .element_bytes = bytesOf(b.dtype), .dtype = floatType(b.dtype)};
  }
  absl::Status compute(int64_t order);
  absl::Status collective(int64_t order);
  absl::Status pointToPoint(int64_t order);
  // Offload: a copy between device and host memory, and an AdamW step.
  void copy(int64_t order);
  void optimizerStep(int64_t order);
  void wait(int64_t order);
  // Instruction `order` moving `bytes` on `stream` for `seconds`; `handle`
  // is the buffer an async start defines for its wait (-1: none).
  struct Stream;
  void transfer(int64_t order, const Stream& stream, double seconds, int64_t bytes, int64_t handle);
  void memory();

  struct Stream {
    GroupShape group;
    int32_t index = 0;
  };
  absl::StatusOr<Stream> streamOf(const std::vector<std::string>& axes);
  absl::StatusOr<Stream> streamNamed(const std::vector<std::string>& axes);

  const PricedProgram& program_in_;
  const CostModel& model_;
  const int64_t micro_;
  const int64_t count_;
  PlanPrice price_;
  std::vector<Instruction> program_;
  // The plan instruction (order) behind each program entry.
  std::vector<int64_t> orderOf_;
  std::map<std::string, Stream> streams_;
  std::unordered_map<const std::vector<std::string>*, Stream> streamByAxes_;
  // Future buffer -> the program entry of the collective that makes it.
  std::unordered_map<int64_t, int32_t> startOf_;
  // (order, seconds) of each optimizer step.
  std::vector<std::pair<int64_t, double>> optimizer_;
  // Staging buffers: from the collective or copy (order) to its result's
  // last use, or to `last` when known (a copy's wait).
  struct Staging {
    int64_t first;
    int64_t bytes;
    int64_t result;
    int64_t last = -1;
    bool host = false;
  };
  std::vector<Staging> staging_;
  // A converting copy's staging, by the buffer its wait waits on.
  std::unordered_map<int64_t, size_t> stagingOfWait_;
  // Scratch for compute(): the operands and results of one instruction.
  std::vector<TensorDesc> operands_, results_;
};

absl::StatusOr<Pricer::Stream> Pricer::streamOf(const std::vector<std::string>& axes) {
  // A repeated program visits each template instruction's axes once per
  // block: looked up by address first.
  if (auto it = streamByAxes_.find(&axes); it != streamByAxes_.end()) return it->second;
  absl::StatusOr<Stream> stream = streamNamed(axes);
  if (stream.ok()) streamByAxes_.emplace(&axes, *stream);
  return stream;
}

absl::StatusOr<Pricer::Stream> Pricer::streamNamed(const std::vector<std::string>& axes) {
  const std::string key = absl::StrJoin(axes, ",");
  if (auto it = streams_.find(key); it != streams_.end()) return it->second;
  absl::StatusOr<GroupShape> group = model_.groupOf(program_in_.header().mesh, axes);
  if (!group.ok()) return group.status();
  const Stream stream{.group = *group, .index = static_cast<int32_t>(streams_.size())};
  streams_.emplace(key, stream);
  price_.stream_s.push_back(0);
  price_.stream_axes.push_back(key);
  return stream;
}

absl::Status Pricer::compute(int64_t order) {
  const plan::Instruction& in = program_in_.instruction(order);
  // Reused across instructions: the search prices tens of thousands a plan.
  operands_.clear();
  results_.clear();
  for (int64_t id : program_in_.operands(order)) operands_.push_back(describe(id));
  for (int64_t id : program_in_.results(order)) results_.push_back(describe(id));
  const std::optional<ComputeCost> cost = computeCost({.name = in.op,
                                                       .operands = operands_,
                                                       .results = results_,
                                                       .transpose_lhs = in.attrs.transpose_lhs});
  if (!cost) {
    return absl::InvalidArgumentError(
        absl::StrCat(in.where(), ": no cost formula for ", in.op, " (planner/cost/op_work.cc)"));
  }
  // Model FLOPs, as MFU counts them: a recomputed op's are not the model's.
  (in.recompute ? price_.recompute_flops : price_.model_flops) += cost->flops;
  const double seconds = model_.computeSeconds(*cost);
  if (cost->op_class == OpClass::kMemoryBound) price_.memory_bound_s += seconds;
  program_.push_back({.kind = Instruction::Kind::kCompute, .seconds = seconds});
  orderOf_.push_back(order);
  price_.duration_s[order] = seconds;
  return absl::OkStatus();
}

// A send or receive: its transfer on the stream of its axis. What the
// stage waits for its peer is priced by the pipeline schedule's simulation
// (planner/transforms/stages/schedule_order.h), not here.
absl::Status Pricer::pointToPoint(int64_t order) {
  const plan::Instruction& in = program_in_.instruction(order);
  absl::StatusOr<Stream> stream = streamOf(in.attrs.mesh_axes);
  if (!stream.ok()) return stream.status();
  // The moved tensor's own bytes, not the attribute's: a re-sized plan
  // keeps the template's attributes (resize_plan.h).
  const std::span<const int64_t> moved =
      program_in_.operands(order).empty() ? program_in_.results(order) : program_in_.operands(order);
  const int64_t bytes = moved.empty() ? in.attrs.bytes.value_or(0) : buffer(moved[0]).bytes;
  const double seconds = model_.pointToPointSeconds(stream->group, static_cast<double>(bytes));
  const int64_t handle = in.info->async_start ? program_in_.results(order)[0] : -1;
  transfer(order, *stream, seconds, bytes, handle);
  return absl::OkStatus();
}

void Pricer::transfer(int64_t order, const Stream& stream, double seconds, int64_t bytes,
                      int64_t handle) {
  const plan::Instruction& in = program_in_.instruction(order);
  if (handle >= 0) startOf_[handle] = static_cast<int32_t>(program_.size());
  program_.push_back({.kind = Instruction::Kind::kCollective,
                      .seconds = seconds,
                      .async = in.info->async_start,
                      .stream = stream.index});
  orderOf_.push_back(order);
  price_.duration_s[order] = seconds;
  price_.comm_bytes_per_rank += bytes;
  price_.stream_s[stream.index] += seconds;
}

absl::Status Pricer::collective(int64_t order) {
  const plan::Instruction& in = program_in_.instruction(order);
  absl::StatusOr<Stream> stream = streamOf(in.attrs.mesh_axes);
  if (!stream.ok()) return stream.status();
  const int64_t operandId = program_in_.operands(order)[0];
  const int64_t resultId = program_in_.results(order)[0];
  const plan::Buffer& operand = buffer(operandId);
  const plan::Buffer& result = buffer(resultId);
  const comm::DType wire = in.attrs.wire_type.value_or(operand.dtype);
  const int64_t g = stream->group.size;
  const int64_t e = bytesOf(wire);
  const int64_t inElements = operand.numel();
  const int64_t outElements = result.numel();
  int64_t bytes = 0;
  switch (in.info->collective) {
    case plan::CollectiveKind::kAllGather:
      bytes = (g - 1) * inElements * e;
      break;
    case plan::CollectiveKind::kReduceScatter:
      bytes = (g - 1) * outElements * e;
      break;
    case plan::CollectiveKind::kAllReduce:
      bytes = 2 * (g - 1) * ((inElements + g - 1) / g) * e;
      break;
    default:
      bytes = (g - 1) * (inElements / g) * e;
  }
  const double seconds = model_.collectiveSeconds(kindOf(in.info->collective), stream->group,
                                                  static_cast<double>(bytes));
  transfer(order, *stream, seconds, bytes, in.info->async_start ? resultId : -1);
  if (in.phase == plan::Phase::kBackward &&
      in.info->collective == plan::CollectiveKind::kAllGather) {
    price_.backward_gather_s += seconds;
    price_.backward_gather_bytes += result.bytes;
  }
  // Without a wire type nothing is converted (the memory plan's rule).
  if (!in.attrs.wire_type) return absl::OkStatus();
  const std::optional<comm::ReduceOp> reduction = in.attrs.reduction;
  const int64_t staging =
      collectiveStagingBytes({.kind = in.info->collective,
                              .in_elements = inElements,
                              .out_elements = outElements,
                              .operand = operand.dtype,
                              .wire = wire,
                              .result = result.dtype,
                              .accum = in.attrs.accum_type,
                              .sum = reduction && (*reduction == comm::ReduceOp::kSum ||
                                                   *reduction == comm::ReduceOp::kAvg),
                              .group_size = g});
  if (staging > 0) staging_.push_back({.first = order, .bytes = staging, .result = resultId});
  return absl::OkStatus();
}

// A copy between device and host memory: on the copy stream, over the
// host link; one that converts (an f32 master into a bf16 parameter) stages
// the converted tensor on the host until its wait.
void Pricer::copy(int64_t order) {
  const plan::Instruction& in = program_in_.instruction(order);
  const int64_t dest = program_in_.results(order)[0];
  // The destination's size, which checkPlan holds the `bytes` attribute
  // to: a re-sized program (resize_plan.h) re-sizes buffers, not
  // attributes.
  const int64_t bytes = buffer(dest).bytes;
  const double seconds = model_.hostCopySeconds(static_cast<double>(bytes));
  startOf_[dest] = static_cast<int32_t>(program_.size());
  program_.push_back({.kind = Instruction::Kind::kCopy,
                      .seconds = seconds,
                      .async = true,
                      .after_tail = in.phase == plan::Phase::kOptimizer});
  orderOf_.push_back(order);
  price_.duration_s[order] = seconds;
  (buffer(dest).onHost() ? price_.to_host_bytes : price_.to_device_bytes) += bytes;
  const int64_t source = program_in_.operands(order)[0];
  if (buffer(source).dtype != buffer(dest).dtype) {
    stagingOfWait_[dest] = staging_.size();
    staging_.push_back({.first = order, .bytes = buffer(dest).bytes, .result = dest, .host = true});
  }
}

// AdamW streams param, grad (at the grad's own type), both moments and the
// master copy through memory: the device's, as the tail after all
// communication, or the host's for offloaded states, on the host after the
// tail.
void Pricer::optimizerStep(int64_t order) {
  int64_t bytes = buffer(program_in_.operands(order)[1]).bytes;
  for (int64_t id : program_in_.results(order)) bytes += 2 * buffer(id).bytes;
  const bool host = buffer(program_in_.operands(order)[0]).onHost();
  const double seconds = host ? model_.hostStreamSeconds(static_cast<double>(bytes))
                              : model_.streamSeconds(static_cast<double>(bytes));
  price_.optimizer_s += seconds;
  price_.duration_s[order] = seconds;
  if (!host) {
    optimizer_.push_back({order, seconds});
    return;
  }
  price_.host_optimizer_s += seconds;
  program_.push_back({.kind = Instruction::Kind::kCompute, .seconds = seconds, .after_tail = true});
  orderOf_.push_back(order);
}

void Pricer::wait(int64_t order) {
  const plan::Instruction& in = program_in_.instruction(order);
  const int64_t waited = program_in_.operands(order)[0];
  auto it = startOf_.find(waited);
  program_.push_back({.kind = Instruction::Kind::kWait,
                      .start = it == startOf_.end() ? -1 : it->second,
                      .after_tail = in.phase == plan::Phase::kOptimizer &&
                                    it != startOf_.end() &&
                                    program_[it->second].kind == Instruction::Kind::kCopy});
  orderOf_.push_back(-1);
  if (auto staged = stagingOfWait_.find(waited); staged != stagingOfWait_.end()) {
    staging_[staged->second].last = order;
    stagingOfWait_.erase(staged);
  }
}

// The peak over the plan's lifetimes (cost::peakMemory, one slot per
// instruction and one for the step's end, where the loss is handed back);
// host buffers (offload) have a peak of their own.
void Pricer::memory() {
  const int32_t end = static_cast<int32_t>(program_in_.size());
  const int64_t count = program_in_.numBuffers();
  const int64_t loss = program_in_.loss();
  // Between micro-steps: what this micro-step holds (plan/lifetimes.h's
  // microStepLifetime, plan-memory-plan's rule too).
  const int64_t micro_steps = program_in_.header().micro_batches;
  std::vector<bool> carried;
  std::vector<plan::MicroStep> definedIn;
  int64_t lastModelOrder = -1;
  if (micro_steps > 1) {
    carried = plan::carriedBuffers(
        count, program_in_.size(),
        [&](int64_t order) -> const plan::Instruction& { return program_in_.instruction(order); },
        [&](int64_t order) { return program_in_.operands(order); },
        [&](int64_t order) { return program_in_.results(order); });
    definedIn.assign(static_cast<size_t>(count), plan::MicroStep::kEvery);
    std::vector<bool> defined(static_cast<size_t>(count), false);
    for (int64_t order = 0; order < program_in_.size(); ++order) {
      const plan::Instruction& in = program_in_.instruction(order);
      if (in.phase != plan::Phase::kOptimizer) lastModelOrder = order;
      for (int64_t id : program_in_.results(order)) {
        if (!defined[id]) definedIn[id] = in.micro_step;
        defined[id] = true;
      }
    }
  }
  // With one micro-step a dist.accumulate's sum is its operand: one
  // buffer over both lifetimes (the search prices a template of two
  // micro-steps as one this way; the planner makes no such plan).
  std::vector<int64_t> sumOf;
  std::vector<bool> isSum;
  if (micro_steps == 1) {
    for (int64_t order = 0; order < program_in_.size(); ++order) {
      if (!program_in_.instruction(order).info->accumulates) continue;
      if (sumOf.empty()) {
        sumOf.assign(static_cast<size_t>(count), -1);
        isSum.assign(static_cast<size_t>(count), false);
      }
      sumOf[program_in_.operands(order)[0]] = program_in_.results(order)[0];
      isSum[program_in_.results(order)[0]] = true;
    }
  }
  std::vector<Buffer> buffers, host;
  buffers.reserve(static_cast<size_t>(count) + staging_.size());
  // A pipeline stage's: whether each of `buffers` is made anew for every
  // micro-batch (a micro-batch of its own may hold it across blocks).
  const bool stage = program_in_.pipelineStage();
  std::vector<bool> perMicro;
  for (int64_t id = 0; id < count; ++id) {
    if (!program_in_.holds(id)) continue;
    plan::BufferRole role = buffer(id).role;
    plan::Lifetime live = program_in_.live(id);
    if (!sumOf.empty()) {
      if (isSum[id]) continue;  // counted with its operand
      if (const int64_t sum = sumOf[id]; sum >= 0) {
        live.last = std::max(live.last, program_in_.live(sum).last);
        role = buffer(sum).role;
      }
    }
    const plan::Buffer& b = buffer(id);
    const bool resident = plan::persistentRole(role);
    if (!resident && micro_steps > 1) {
      const std::optional<plan::Lifetime> held = plan::microStepLifetime(
          live, definedIn[id], carried[id], micro_, micro_steps, lastModelOrder);
      if (!held) continue;
      live = *held;
    }
    const int64_t last = resident || id == loss ? end : live.last;
    const Buffer entry{.bytes = b.bytes,
                       .role = roleOf(role),
                       .first = static_cast<int32_t>(resident ? -1 : live.first),
                       .last = static_cast<int32_t>(last)};
    if (b.onHost()) {
      host.push_back(entry);
      continue;
    }
    if (stage) {
      perMicro.push_back(!resident && id != loss && live.first >= 0 &&
                         (micro_steps == 1 ||
                          (!carried[id] && definedIn[id] == plan::MicroStep::kEvery)));
    }
    buffers.push_back(entry);
  }
  for (const Staging& s : staging_) {
    const Buffer entry{
        .bytes = s.bytes,
        .role = Role::kActivation,
        .first = static_cast<int32_t>(s.first),
        .last = static_cast<int32_t>(s.last >= 0 ? s.last : program_in_.live(s.result).last)};
    if (s.host) {
      host.push_back(entry);
      continue;
    }
    buffers.push_back(entry);
    if (stage) perMicro.push_back(true);
  }
  const MemoryPeak peak = peakMemory(buffers, end + 1);
  price_.peak_bytes = peak.peak_bytes;
  price_.peak_order = peak.at;
  price_.breakdown = peak.breakdown;
  if (stage) price_.blocks = blockMemory(program_in_, buffers, perMicro);
  if (host.empty()) return;
  const MemoryPeak hostPeak = peakMemory(host, end + 1);
  price_.host_peak_bytes = hostPeak.peak_bytes;
  price_.host_peak_order = hostPeak.at;
  price_.host_breakdown = hostPeak.breakdown;
}

absl::StatusOr<PlanPrice> Pricer::price() {
  const int64_t size = program_in_.size();
  price_.start_s.assign(static_cast<size_t>(size), std::nullopt);
  price_.duration_s.assign(static_cast<size_t>(size), std::nullopt);
  program_.reserve(static_cast<size_t>(size));
  orderOf_.reserve(static_cast<size_t>(size));
  for (int64_t order = 0; order < size; ++order) {
    const plan::Instruction& in = program_in_.instruction(order);
    if (micro_ >= 0) {
      // The optimizer phase (the steps, a tied gradient's exchange before
      // them, offload's copies back to the device) runs once, in the last
      // micro-step.
      const bool optimizer = in.phase == plan::Phase::kOptimizer;
      if (optimizer ? micro_ != count_ - 1 : !plan::runsIn(in.micro_step, micro_, count_)) continue;
    }
    switch (in.info->family) {
      case plan::OpFamily::kCompute:
        if (absl::Status status = compute(order); !status.ok()) return status;
        break;
      case plan::OpFamily::kCollective:
        if (absl::Status status = collective(order); !status.ok()) return status;
        break;
      case plan::OpFamily::kPointToPoint:
        if (absl::Status status = pointToPoint(order); !status.ok()) return status;
        break;
      case plan::OpFamily::kWait:
        wait(order);
        break;
      case plan::OpFamily::kOptimizer:
        optimizerStep(order);
        break;
      case plan::OpFamily::kCopy:
        copy(order);
        break;
      case plan::OpFamily::kBuffer:
        break;
    }
  }
  std::vector<double> starts;
  price_.timing = simulate(program_, price_.optimizer_s - price_.host_optimizer_s, &starts);
  for (size_t i = 0; i < program_.size(); ++i) {
    if (orderOf_[i] >= 0) price_.start_s[orderOf_[i]] = starts[i];
  }
  // The device's optimizer steps run one after another once the rest is
  // done (the host's are in the program).
  double at = price_.host_optimizer_s > 0 ? price_.timing.tail_start_s
                                          : price_.timing.step_time_s - price_.optimizer_s;
  for (const auto& [at_order, seconds] : optimizer_) {
    price_.start_s[at_order] = at;
    at += seconds;
  }
  memory();
  return std::move(price_);
}

// A plan's own program.
class PlanProgram final : public PricedProgram {
 public:
  // A stage of several has its own lifetimes: a buffer of another stage's
  // is not held here.
  PlanProgram(const plan::Plan& plan, const plan::Program& program)
      : plan_(plan),
        order_(program.instructions()),
        stage_live_(plan.programs.size() > 1 ? plan::computeLifetimes(plan, program)
                                             : std::vector<plan::Lifetime>{}) {}
  const plan::Plan& header() const override { return plan_; }
  int64_t size() const override { return static_cast<int64_t>(order_.size()); }
  const plan::Instruction& instruction(int64_t order) const override { return *order_[order]; }
  std::span<const int64_t> operands(int64_t order) const override {
    return order_[order]->operands;
  }
  std::span<const int64_t> results(int64_t order) const override { return order_[order]->results; }
  int64_t numBuffers() const override { return static_cast<int64_t>(plan_.buffers.size()); }
  const plan::Buffer& buffer(int64_t id) const override { return plan_.buffers[id]; }
  plan::Lifetime live(int64_t id) const override {
    return stage_live_.empty() ? plan_.buffers[id].live : stage_live_[id];
  }
  bool holds(int64_t id) const override {
    return stage_live_.empty() || stage_live_[id] != plan::Lifetime{};
  }
  int64_t loss() const override { return plan_.interface.loss; }
  bool pipelineStage() const override { return plan_.programs.size() > 1; }

 private:
  const plan::Plan& plan_;
  const std::vector<const plan::Instruction*> order_;
  const std::vector<plan::Lifetime> stage_live_;
};

// A step of `count` alike micro-steps from one priced with the optimizer:
// the optimizer runs once, the rest `count` times.
PlanPrice repeatMicroStep(PlanPrice one, int64_t count) {
  const double k = static_cast<double>(count);
  const double opt = one.optimizer_s;
  one.timing.step_time_s = (one.timing.step_time_s - opt) * k + opt;
  one.timing.compute_s = (one.timing.compute_s - opt) * k + opt;
  one.timing.comm_s *= k;
  one.timing.exposed_comm_s *= k;
  one.comm_bytes_per_rank *= count;
  one.model_flops *= k;
  one.recompute_flops *= k;
  for (double& busy : one.stream_s) busy *= k;
  one.backward_gather_s *= k;
  one.memory_bound_s *= k;
  return one;
}

// A step from its first, middle (when `count` > 2) and last micro-steps,
// run one after another. An instruction's start is its first run's.
PlanPrice combineMicroSteps(const PricedProgram& program, std::vector<PlanPrice> steps,
                            int64_t count) {
  PlanPrice& first = steps.front();
  const PlanPrice& last = steps.back();
  const double middles = static_cast<double>(count - 2);
  PlanPrice out = first;
  auto add = [&](const PlanPrice& p, double times) {
    out.timing.step_time_s += times * p.timing.step_time_s;
    out.timing.compute_s += times * p.timing.compute_s;
    out.timing.comm_s += times * p.timing.comm_s;
    out.timing.exposed_comm_s += times * p.timing.exposed_comm_s;
    out.comm_bytes_per_rank += static_cast<int64_t>(times) * p.comm_bytes_per_rank;
    out.model_flops += times * p.model_flops;
    out.recompute_flops += times * p.recompute_flops;
    out.backward_gather_s += times * p.backward_gather_s;
    out.memory_bound_s += times * p.memory_bound_s;
    out.timing.copy_s += times * p.timing.copy_s;
    out.timing.exposed_copy_s += times * p.timing.exposed_copy_s;
    out.to_host_bytes += static_cast<int64_t>(times) * p.to_host_bytes;
    out.to_device_bytes += static_cast<int64_t>(times) * p.to_device_bytes;
    for (size_t i = 0; i < p.stream_axes.size(); ++i) {
      auto it = std::find(out.stream_axes.begin(), out.stream_axes.end(), p.stream_axes[i]);
      if (it == out.stream_axes.end()) {
        out.stream_axes.push_back(p.stream_axes[i]);
        out.stream_s.push_back(0);
        it = out.stream_axes.end() - 1;
      }
      out.stream_s[it - out.stream_axes.begin()] += times * p.stream_s[i];
    }
  };
  // The peak of the step: the highest micro-step's.
  for (const PlanPrice& p : steps) {
    if (p.peak_bytes <= out.peak_bytes) continue;
    out.peak_bytes = p.peak_bytes;
    out.peak_order = p.peak_order;
    out.breakdown = p.breakdown;
  }
  for (const PlanPrice& p : steps) {
    out.backward_gather_bytes = std::max(out.backward_gather_bytes, p.backward_gather_bytes);
    keepHigherBlocks(out.blocks, p.blocks);
    if (p.host_peak_bytes <= out.host_peak_bytes) continue;
    out.host_peak_bytes = p.host_peak_bytes;
    out.host_peak_order = p.host_peak_order;
    out.host_breakdown = p.host_breakdown;
  }
  if (steps.size() == 3) add(steps[1], middles);
  const double beforeLast = out.timing.step_time_s;
  add(last, 1);
  out.optimizer_s = last.optimizer_s;
  out.host_optimizer_s = last.host_optimizer_s;
  // What the first micro-step skips (deferred reductions, the optimizer)
  // starts where the last micro-step runs it.
  for (int64_t order = 0; order < program.size(); ++order) {
    if (first.duration_s[order] || !last.duration_s[order]) continue;
    out.duration_s[order] = last.duration_s[order];
    if (last.start_s[order]) out.start_s[order] = beforeLast + *last.start_s[order];
  }
  return out;
}

}  // namespace

namespace {

// One step of `program`: every micro-step, then the optimizer.
absl::StatusOr<PlanPrice> priceMicroSteps(const PricedProgram& program, const CostModel& model) {
  const plan::Plan& header = program.header();
  if (header.mesh.size() != model.topology().worldSize()) {
    return absl::InvalidArgumentError(absl::StrCat(
        header.source, ": the plan's mesh has ", header.mesh.size(), " devices but the topology ",
        model.topology().worldSize(), "; price it on a topology of the mesh's size"));
  }
  const int64_t count = header.micro_batches;
  bool alike = true;
  for (int64_t order = 0; order < program.size() && alike; ++order) {
    alike = program.instruction(order).micro_step == plan::MicroStep::kEvery;
  }
  if (count == 1) return Pricer(program, model, -1, 1).price();
  if (alike) {
    // One micro-step priced with the optimizer, repeated.
    absl::StatusOr<PlanPrice> one = Pricer(program, model, -1, count).price();
    if (!one.ok()) return one.status();
    return repeatMicroStep(*std::move(one), count);
  }
  // The first, a middle (when there is one) and the last micro-step.
  std::vector<int64_t> micros{0};
  if (count > 2) micros.push_back(1);
  micros.push_back(count - 1);
  std::vector<PlanPrice> steps;
  for (int64_t micro : micros) {
    absl::StatusOr<PlanPrice> one = Pricer(program, model, micro, count).price();
    if (!one.ok()) return one.status();
    steps.push_back(*std::move(one));
  }
  return combineMicroSteps(program, std::move(steps), count);
}

}  // namespace

absl::StatusOr<PlanPrice> priceProgram(const PricedProgram& program, const CostModel& model) {
  absl::StatusOr<PlanPrice> price = priceMicroSteps(program, model);
  if (price.ok() && program.pipelineStage()) blockTimes(program, *price);
  return price;
}

int64_t collectiveStagingBytes(const StagingQuery& q) {
  const bool reduceScatter = q.kind == plan::CollectiveKind::kReduceScatter;
  const bool allReduce = q.kind == plan::CollectiveKind::kAllReduce;
  const bool allGather = q.kind == plan::CollectiveKind::kAllGather;
  if (!(reduceScatter || allReduce || allGather)) return 0;
  const int64_t wireBytes = bytesOf(q.wire);
  const int64_t resultBytes = bytesOf(q.result);
  int64_t bytes = 0;
  if (q.operand != q.wire) bytes += q.in_elements * wireBytes;
  if (allGather) return bytes;
  const int64_t g = q.group_size;
  const bool exact = q.sum && g > 1 && q.accum && bytesOf(*q.accum) > wireBytes;
  if (exact && reduceScatter) return bytes + q.in_elements * wireBytes;
  if (exact && allReduce) {
    const int64_t segment = (q.in_elements + g - 1) / g;
    bytes += g * segment * wireBytes + segment * resultBytes;
    if (g * segment != q.in_elements) bytes += g * segment * (wireBytes + resultBytes);
    return bytes;
  }
  if (resultBytes != wireBytes) bytes += q.out_elements * wireBytes;
  return bytes;
}

absl::StatusOr<PlanPrice> pricePlan(const plan::Plan& plan, const CostModel& model) {
  if (plan.programs.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(plan.source, ": the plan has no program"));
  }
  return priceProgram(PlanProgram(plan, plan.programs.front()), model);
}

std::vector<plan::CommVolume> commVolumeOf(const plan::Plan& plan) {
  std::map<std::pair<std::string, plan::CollectiveKind>, plan::CommVolume> entries;
  if (plan.programs.empty()) return {};
  for (const plan::Instruction* in : plan.programs.front().instructions()) {
    if (in->info->family != plan::OpFamily::kCollective) continue;
    const int64_t runs = in->micro_step == plan::MicroStep::kEvery ? plan.micro_batches : 1;
    const std::string axes = absl::StrJoin(in->attrs.mesh_axes, ",");
    plan::CommVolume& entry = entries[{axes, in->info->collective}];
    entry.axes = axes;
    entry.kind = plan::collectiveKindName(in->info->collective);
    entry.count += runs;
    entry.bytes += in->attrs.bytes.value_or(0) * runs;
  }
  std::vector<plan::CommVolume> volume;
  for (auto& [key, entry] : entries) volume.push_back(std::move(entry));
  return volume;
}

absl::StatusOr<std::vector<PlanPrice>> priceStages(const plan::Plan& plan,
                                                   const CostModel& model) {
  if (plan.programs.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(plan.source, ": the plan has no program"));
  }
  std::vector<PlanPrice> prices;
  for (const plan::Program& program : plan.programs) {
    absl::StatusOr<PlanPrice> price = priceProgram(PlanProgram(plan, program), model);
    if (!price.ok()) return price.status();
    prices.push_back(*std::move(price));
  }
  return prices;
}

absl::Status recordPrice(const CostModel& model, plan::Plan& plan) {
  absl::StatusOr<std::vector<PlanPrice>> prices = priceStages(plan, model);
  if (!prices.ok()) return prices.status();
  size_t slowest = 0, fullest = 0;
  for (size_t k = 0; k < prices->size(); ++k) {
    const PlanPrice& price = (*prices)[k];
    for (plan::Block& block : plan.programs[k].blocks) {
      for (plan::Instruction& in : block.instructions) {
        in.start_s = price.start_s[in.order];
        in.duration_s = price.duration_s[in.order];
      }
    }
    if (price.timing.step_time_s > (*prices)[slowest].timing.step_time_s) slowest = k;
  }
  // With stages, each stage also waits for its peers: the step is the
  // stage whose own time plus its bubble is the longest. Its memory holds
  // the micro-batches its schedule keeps in flight.
  std::vector<double> bubble(prices->size(), 0);
  std::vector<int64_t> peaks;
  std::vector<int64_t> peakOrders;
  std::vector<std::array<int64_t, plan::kNumRoles>> breakdowns;
  for (const PlanPrice& price : *prices) {
    peaks.push_back(price.peak_bytes);
    peakOrders.push_back(price.peak_order);
    breakdowns.push_back(price.breakdown);
  }
  if (prices->size() > 1) {
    absl::StatusOr<PipelinePrice> pipeline = pricePipeline(plan, *prices);
    if (!pipeline.ok()) return pipeline.status();
    bubble = pipeline->bubble_s;
    slowest = slowestStage(*prices, *pipeline);
    for (size_t k = 0; k < prices->size(); ++k) {
      peaks[k] = pipeline->memory[k].peak_bytes;
      peakOrders[k] = pipeline->memory[k].order;
      breakdowns[k] = pipeline->memory[k].breakdown;
    }
  }
  for (size_t k = 0; k < peaks.size(); ++k) {
    if (peaks[k] > peaks[fullest]) fullest = k;
  }
  const PlanPrice& time = (*prices)[slowest];
  plan::Predicted& p = plan.predicted;
  p.step_time_s = time.timing.step_time_s + bubble[slowest];
  p.bubble_s = bubble[slowest];
  p.compute_s = time.timing.compute_s;
  p.comm_s = time.timing.comm_s;
  p.exposed_comm_s = time.timing.exposed_comm_s;
  p.optimizer_s = time.optimizer_s;
  p.compute_efficiency = model.efficiency().gemm;
  p.peak_bytes = peaks[fullest];
  p.peak_index = peakOrders[fullest];
  p.stage_peak_bytes = prices->size() > 1 ? peaks : std::vector<int64_t>{};
  for (int r = 0; r < plan::kNumRoles; ++r) {
    p.breakdown[plan::roleName(static_cast<plan::BufferRole>(r))] = breakdowns[fullest][r];
  }
  p.comm_bytes_per_rank = time.comm_bytes_per_rank;
  p.model_flops = time.model_flops;
  p.machine_profile = model.profile() ? model.profile()->name : "";
  p.offload.reset();
  if (std::any_of(plan.buffers.begin(), plan.buffers.end(),
                  [](const plan::Buffer& b) { return b.onHost(); })) {
    plan::OffloadPredicted& o = p.offload.emplace();
    o.copy_s = time.timing.copy_s;
    o.exposed_copy_s = time.timing.exposed_copy_s;
    o.host_optimizer_s = time.host_optimizer_s;
    o.to_host_bytes = time.to_host_bytes;
    o.to_device_bytes = time.to_device_bytes;
    const PlanPrice& host = *std::max_element(
        prices->begin(), prices->end(),
        [](const PlanPrice& a, const PlanPrice& b) { return a.host_peak_bytes < b.host_peak_bytes; });
    o.host_peak_bytes = host.host_peak_bytes;
    o.host_peak_index = host.host_peak_order;
    for (int r = 0; r < plan::kNumRoles; ++r) {
      o.host_breakdown[plan::roleName(static_cast<plan::BufferRole>(r))] = host.host_breakdown[r];
    }
  }
  return absl::OkStatus();
}

}  // namespace loom::planner::cost
