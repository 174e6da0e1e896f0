// The bubble of a pipeline plan (see pipeline_price.h).
#include "planner/cost/pipeline_price.h"

#include <algorithm>
#include <map>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "planner/transforms/stages/schedule_order.h"

namespace loom::planner::cost {
namespace {

// The chunk a model block runs: "forward" on stage s (one chunk per
// stage) is chunk s, "forward.c" chunk c.
absl::StatusOr<int64_t> chunkOf(const plan::Program& program, const plan::Block& block) {
  const size_t dot = block.name.find('.');
  if (dot == std::string::npos) return program.stage;
  int64_t chunk = 0;
  if (!absl::SimpleAtoi(block.name.substr(dot + 1), &chunk) || chunk < 0) {
    return absl::InvalidArgumentError(absl::StrCat("stage ", program.stage, "'s block '",
                                                   block.name, "' names no model chunk"));
  }
  return chunk;
}

using RoleBytes = std::array<int64_t, plan::kNumRoles>;

void addBytes(RoleBytes& into, const RoleBytes& bytes, int64_t sign) {
  for (int r = 0; r < plan::kNumRoles; ++r) into[r] += sign * bytes[r];
}

}  // namespace

absl::StatusOr<PipelinePrice::StageMemory> scheduleMemory(
    const std::vector<plan::ScheduleEntry>& schedule, const BlockMemory& blocks,
    int64_t micro_batches) {
  const int64_t n = static_cast<int64_t>(schedule.size());
  // Each entry's block (an index into blocks.peaks), and the entry of each
  // (block, micro-batch).
  std::vector<int32_t> blockOf(n);
  std::vector<std::vector<int64_t>> entryOf(blocks.peaks.size(),
                                            std::vector<int64_t>(micro_batches, -1));
  for (int64_t i = 0; i < n; ++i) {
    const plan::ScheduleEntry& entry = schedule[i];
    auto it = std::find_if(blocks.peaks.begin(), blocks.peaks.end(),
                           [&](const BlockMemory::Peak& p) { return p.block == entry.block; });
    if (it == blocks.peaks.end() || entry.micro_batch >= micro_batches) {
      return absl::InvalidArgumentError(absl::StrCat(
          "schedule entry ", i, " runs block '", entry.block, "' for micro-batch ",
          entry.micro_batch, ", which the stage's price (", blocks.peaks.size(), " blocks, ",
          micro_batches, " micro-batches) does not have"));
    }
    blockOf[i] = static_cast<int32_t>(it - blocks.peaks.begin());
    if (entry.micro_batch >= 0) entryOf[blockOf[i]][entry.micro_batch] = i;
  }
  // What a micro-batch holds strictly between the entries of its two block
  // runs, summed over micro-batches (a difference array over entries).
  std::vector<RoleBytes> delta(static_cast<size_t>(n) + 1, RoleBytes{});
  auto span = [&](const BlockMemory::Held& h, int64_t micro) {
    return std::pair{entryOf[h.from][micro], entryOf[h.to][micro]};
  };
  for (const BlockMemory::Held& h : blocks.held) {
    for (int64_t m = 0; m < micro_batches; ++m) {
      const auto [from, to] = span(h, m);
      if (from < 0 || to <= from + 1) continue;
      addBytes(delta[from + 1], h.bytes, 1);
      addBytes(delta[to], h.bytes, -1);
    }
  }
  PipelinePrice::StageMemory out;
  out.peak_bytes = -1;
  RoleBytes held{};
  for (int64_t i = 0; i < n; ++i) {
    addBytes(held, delta[i], 1);
    // The running micro-batch's own held bytes are in its block's peak.
    RoleBytes others = held;
    if (const int64_t m = schedule[i].micro_batch; m >= 0) {
      for (const BlockMemory::Held& h : blocks.held) {
        const auto [from, to] = span(h, m);
        if (from >= 0 && from < i && i < to) addBytes(others, h.bytes, -1);
      }
    }
    const BlockMemory::Peak& peak = blocks.peaks[blockOf[i]];
    RoleBytes breakdown = peak.breakdown;
    addBytes(breakdown, others, 1);
    int64_t total = 0;
    for (int64_t bytes : breakdown) total += bytes;
    if (total <= out.peak_bytes) continue;
    out = {.peak_bytes = total,
           .block = peak.block,
           .micro_batch = schedule[i].micro_batch,
           .order = peak.order,
           .breakdown = breakdown};
  }
  return out;
}

absl::StatusOr<PipelinePrice> pricePipeline(const plan::Plan& plan,
                                            const std::vector<PlanPrice>& stages) {
  const int64_t count = static_cast<int64_t>(plan.programs.size());
  if (static_cast<int64_t>(stages.size()) != count) {
    return absl::InvalidArgumentError(
        absl::StrCat(stages.size(), " stage prices for ", count, " programs"));
  }
  // Chunk -> its forward and backward time, and the order of each stage.
  std::map<int64_t, double> forward, backward;
  std::vector<std::vector<stages::PipelineAction>> order(count);
  double transfer_s = 0;
  for (int64_t s = 0; s < count; ++s) {
    const plan::Program& program = plan.programs[s];
    std::map<std::string, double, std::less<>> compute;
    for (const plan::Instruction* in : program.instructions()) {
      const double duration = stages[s].duration_s[in->order].value_or(0);
      if (in->info->family == plan::OpFamily::kPointToPoint) {
        transfer_s = std::max(transfer_s, duration);
      } else if (in->info->stream == plan::Stream::kCompute) {
        compute[in->block] += duration;
      }
    }
    for (const plan::Block& block : program.blocks) {
      if (block.phase == plan::Phase::kOptimizer) continue;
      absl::StatusOr<int64_t> chunk = chunkOf(program, block);
      if (!chunk.ok()) return chunk.status();
      (block.phase == plan::Phase::kForward ? forward : backward)[*chunk] = compute[block.name];
    }
    for (const plan::ScheduleEntry& entry : program.schedule) {
      if (entry.micro_batch < 0) continue;
      const plan::Block* block = program.block(entry.block);
      absl::StatusOr<int64_t> chunk = chunkOf(program, *block);
      if (!chunk.ok()) return chunk.status();
      order[s].push_back({block->phase == plan::Phase::kForward
                              ? stages::PipelineAction::Kind::kForward
                              : stages::PipelineAction::Kind::kBackward,
                          entry.micro_batch, *chunk});
    }
  }
  const int64_t chunks = static_cast<int64_t>(forward.size());
  std::vector<double> forward_s(chunks, 0), backward_s(chunks, 0);
  for (int64_t c = 0; c < chunks; ++c) {
    if (!forward.count(c) || !backward.count(c)) {
      return absl::InvalidArgumentError(
          absl::StrCat(plan.source, ": chunk ", c, " of ", chunks, " has no forward or backward"));
    }
    forward_s[c] = forward[c];
    backward_s[c] = backward[c];
  }
  const stages::PipelineShape shape{count, chunks / count, plan.micro_batches};
  absl::StatusOr<stages::PipelineTiming> timing =
      stages::simulateOrder(order, shape, forward_s, backward_s, transfer_s);
  if (!timing.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(plan.source, ": ", timing.status().message()));
  }
  PipelinePrice out{.pipeline_s = timing->step_s,
                    .bubble_s = timing->bubble_s,
                    .peak_in_flight = timing->peak_in_flight,
                    .memory = {}};
  for (int64_t s = 0; s < count; ++s) {
    absl::StatusOr<PipelinePrice::StageMemory> memory =
        scheduleMemory(plan.programs[s].schedule, stages[s].blocks, plan.micro_batches);
    if (!memory.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(plan.source, ": stage ", s, ": ", memory.status().message()));
    }
    out.memory.push_back(*std::move(memory));
  }
  return out;
}

}  // namespace loom::planner::cost
