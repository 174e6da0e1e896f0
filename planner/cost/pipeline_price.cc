// A pipeline plan's price beyond its stages' own (see pipeline_price.h).
#include "planner/cost/pipeline_price.h"

#include <algorithm>
#include <map>
#include <string>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "planner/transforms/stages/schedule_order.h"

namespace loom::planner::cost {
namespace {

// The chunk a model block of stage `stage` runs: "forward" (one chunk per
// stage) chunk `stage`, "forward.c" chunk c.
absl::StatusOr<int64_t> chunkOf(int64_t stage, const std::string& block) {
  const size_t dot = block.find('.');
  if (dot == std::string::npos) return stage;
  int64_t chunk = 0;
  if (!absl::SimpleAtoi(block.substr(dot + 1), &chunk) || chunk < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("stage ", stage, "'s block '", block, "' names no model chunk"));
  }
  return chunk;
}

using RoleBytes = std::array<int64_t, plan::kNumRoles>;

void addBytes(RoleBytes& into, const RoleBytes& bytes, int64_t sign) {
  for (int r = 0; r < plan::kNumRoles; ++r) into[r] += sign * bytes[r];
}

}  // namespace

absl::StatusOr<PipelinePrice::StageMemory> scheduleMemory(
    const std::vector<plan::ScheduleEntry>& schedule, const StageBlocks& blocks,
    int64_t micro_batches) {
  const int64_t n = static_cast<int64_t>(schedule.size());
  // Each entry's block (an index into blocks.blocks), and the entry of each
  // (block, micro-batch).
  std::vector<int32_t> blockOf(n);
  std::vector<std::vector<int64_t>> entryOf(blocks.blocks.size(),
                                            std::vector<int64_t>(micro_batches, -1));
  for (int64_t i = 0; i < n; ++i) {
    const plan::ScheduleEntry& entry = schedule[i];
    auto it = std::find_if(blocks.blocks.begin(), blocks.blocks.end(),
                           [&](const StageBlocks::Block& p) { return p.name == entry.block; });
    if (it == blocks.blocks.end() || entry.micro_batch >= micro_batches) {
      return absl::InvalidArgumentError(absl::StrCat(
          "schedule entry ", i, " runs block '", entry.block, "' for micro-batch ",
          entry.micro_batch, ", which the stage's price (", blocks.blocks.size(), " blocks, ",
          micro_batches, " micro-batches) does not have"));
    }
    blockOf[i] = static_cast<int32_t>(it - blocks.blocks.begin());
    if (entry.micro_batch >= 0) entryOf[blockOf[i]][entry.micro_batch] = i;
  }
  // What a micro-batch holds strictly between the entries of its two block
  // runs, summed over micro-batches (a difference array over entries).
  std::vector<RoleBytes> delta(static_cast<size_t>(n) + 1, RoleBytes{});
  auto span = [&](const StageBlocks::Held& h, int64_t micro) {
    return std::pair{entryOf[h.from][micro], entryOf[h.to][micro]};
  };
  for (const StageBlocks::Held& h : blocks.held) {
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
      for (const StageBlocks::Held& h : blocks.held) {
        const auto [from, to] = span(h, m);
        if (from >= 0 && from < i && i < to) addBytes(others, h.bytes, -1);
      }
    }
    const StageBlocks::Block& peak = blocks.blocks[blockOf[i]];
    RoleBytes breakdown = peak.breakdown;
    addBytes(breakdown, others, 1);
    int64_t total = 0;
    for (int64_t bytes : breakdown) total += bytes;
    if (total <= out.peak_bytes) continue;
    out = {.peak_bytes = total,
           .block = peak.name,
           .micro_batch = schedule[i].micro_batch,
           .order = peak.peak_order,
           .breakdown = breakdown};
  }
  return out;
}

absl::StatusOr<PipelinePrice> priceSchedules(const std::vector<StageRuns>& stages,
                                             int64_t micro_batches) {
  const int64_t count = static_cast<int64_t>(stages.size());
  // Chunk -> its forward and backward time, and the order of each stage.
  std::map<int64_t, double> forward, backward;
  std::vector<std::vector<stages::PipelineAction>> order(count);
  double transfer_s = 0;
  for (int64_t s = 0; s < count; ++s) {
    const StageRuns& runs = stages[s];
    transfer_s = std::max(transfer_s, runs.blocks->transfer_s);
    std::map<std::string, std::pair<int64_t, plan::Phase>, std::less<>> chunkOfBlock;
    for (const StageBlocks::Block& block : runs.blocks->blocks) {
      if (block.phase == plan::Phase::kOptimizer) continue;
      absl::StatusOr<int64_t> chunk = chunkOf(runs.stage, block.name);
      if (!chunk.ok()) return chunk.status();
      (block.phase == plan::Phase::kForward ? forward : backward)[*chunk] = block.compute_s;
      chunkOfBlock[block.name] = {*chunk, block.phase};
    }
    for (const plan::ScheduleEntry& entry : *runs.schedule) {
      if (entry.micro_batch < 0) continue;
      auto it = chunkOfBlock.find(entry.block);
      if (it == chunkOfBlock.end()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "stage ", runs.stage, "'s schedule runs block '", entry.block,
            "', which is not one of its model blocks"));
      }
      const auto [chunk, phase] = it->second;
      order[s].push_back({phase == plan::Phase::kForward ? stages::PipelineAction::Kind::kForward
                                                         : stages::PipelineAction::Kind::kBackward,
                          entry.micro_batch, chunk});
    }
  }
  const int64_t chunks = static_cast<int64_t>(forward.size());
  std::vector<double> forward_s(chunks, 0), backward_s(chunks, 0);
  for (int64_t c = 0; c < chunks; ++c) {
    if (!forward.count(c) || !backward.count(c)) {
      return absl::InvalidArgumentError(
          absl::StrCat("chunk ", c, " of ", chunks, " has no forward or backward"));
    }
    forward_s[c] = forward[c];
    backward_s[c] = backward[c];
  }
  const stages::PipelineShape shape{count, chunks / count, micro_batches};
  absl::StatusOr<stages::PipelineTiming> timing =
      stages::simulateOrder(order, shape, forward_s, backward_s, transfer_s);
  if (!timing.ok()) return absl::InvalidArgumentError(timing.status().message());
  PipelinePrice out{.pipeline_s = timing->step_s,
                    .bubble_s = timing->bubble_s,
                    .peak_in_flight = timing->peak_in_flight,
                    .memory = {}};
  for (int64_t s = 0; s < count; ++s) {
    absl::StatusOr<PipelinePrice::StageMemory> memory =
        scheduleMemory(*stages[s].schedule, *stages[s].blocks, micro_batches);
    if (!memory.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("stage ", stages[s].stage, ": ", memory.status().message()));
    }
    out.memory.push_back(*std::move(memory));
  }
  return out;
}

absl::StatusOr<PipelinePrice> pricePipeline(const plan::Plan& plan,
                                            const std::vector<PlanPrice>& prices) {
  if (prices.size() != plan.programs.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(prices.size(), " stage prices for ", plan.programs.size(), " programs"));
  }
  std::vector<StageRuns> stages;
  for (size_t s = 0; s < prices.size(); ++s) {
    stages.push_back({.stage = plan.programs[s].stage,
                      .blocks = &prices[s].blocks,
                      .schedule = &plan.programs[s].schedule});
  }
  absl::StatusOr<PipelinePrice> price = priceSchedules(stages, plan.micro_batches);
  if (!price.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(plan.source, ": ", price.status().message()));
  }
  return price;
}

}  // namespace loom::planner::cost
