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

}  // namespace

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
      // The transfers between a micro-batch's chunks; the optimizer's (a
      // tied gradient's exchange) is in the stage's own priced time.
      if (in->info->family == plan::OpFamily::kPointToPoint) {
        if (in->phase != plan::Phase::kOptimizer) transfer_s = std::max(transfer_s, duration);
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
  return PipelinePrice{.pipeline_s = timing->step_s,
                       .bubble_s = timing->bubble_s,
                       .peak_in_flight = timing->peak_in_flight};
}

}  // namespace loom::planner::cost
