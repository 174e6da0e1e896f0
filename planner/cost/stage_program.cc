// A pipeline priced from its chunks' programs (see stage_program.h).
#include "planner/cost/stage_program.h"

#include <algorithm>
#include <map>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace loom::planner::cost {
namespace {

const char* phaseWord(plan::Phase phase) {
  return phase == plan::Phase::kForward    ? "forward"
         : phase == plan::Phase::kBackward ? "backward"
                                           : "optimizer";
}

std::string blockNameOf(int64_t chunk, plan::Phase phase, bool numbered) {
  if (!numbered || phase == plan::Phase::kOptimizer) return phaseWord(phase);
  return absl::StrCat(phaseWord(phase), ".", chunk);
}

}  // namespace

absl::StatusOr<StageProgram> StageProgram::create(std::vector<const PricedProgram*> chunks,
                                                  std::vector<int64_t> ids,
                                                  const std::vector<Run>& first_runs,
                                                  bool numbered) {
  if (chunks.empty() || chunks.size() != ids.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("a stage of ", chunks.size(), " chunk programs for ", ids.size(), " chunks"));
  }
  StageProgram out;
  out.chunks_ = std::move(chunks);
  // Per chunk: where its buffers start, and where each of its instructions
  // lands in the stage's order (-1: not yet).
  std::vector<int64_t> base(out.chunks_.size(), 0);
  std::vector<std::vector<int64_t>> placed(out.chunks_.size());
  int64_t buffers = 0;
  for (size_t k = 0; k < out.chunks_.size(); ++k) {
    base[k] = buffers;
    buffers += out.chunks_[k]->numBuffers();
    placed[k].assign(static_cast<size_t>(out.chunks_[k]->size()), -1);
    for (int64_t id = 0; id < out.chunks_[k]->numBuffers(); ++id) {
      out.buffer_.emplace_back(static_cast<int32_t>(k), id);
    }
    if (const int64_t loss = out.chunks_[k]->loss(); loss >= 0) out.loss_ = base[k] + loss;
  }
  auto place = [&](size_t k, plan::Phase phase, int32_t name) {
    const PricedProgram& chunk = *out.chunks_[k];
    for (int64_t order = 0; order < chunk.size(); ++order) {
      const plan::Instruction& in = chunk.instruction(order);
      if (in.phase != phase) continue;
      placed[k][order] = static_cast<int64_t>(out.steps_.size());
      out.steps_.push_back({.chunk = static_cast<int32_t>(k),
                            .order = static_cast<int32_t>(order),
                            .args = static_cast<int32_t>(out.ids_.size()),
                            .name = name});
      for (int64_t id : chunk.operands(order)) out.ids_.push_back(base[k] + id);
      for (int64_t id : chunk.results(order)) out.ids_.push_back(base[k] + id);
    }
  };
  for (const Run& run : first_runs) {
    auto it = std::find(ids.begin(), ids.end(), run.chunk);
    if (it == ids.end() || run.phase == plan::Phase::kOptimizer) {
      return absl::InvalidArgumentError(absl::StrCat("the stage's schedule runs the ",
                                                     phaseWord(run.phase), " of chunk ", run.chunk,
                                                     ", which it does not hold"));
    }
    out.names_.push_back(blockNameOf(run.chunk, run.phase, numbered));
    place(static_cast<size_t>(it - ids.begin()), run.phase,
          static_cast<int32_t>(out.names_.size()) - 1);
  }
  out.names_.push_back("optimizer");
  for (size_t k = 0; k < out.chunks_.size(); ++k) {
    place(k, plan::Phase::kOptimizer, static_cast<int32_t>(out.names_.size()) - 1);
  }
  for (size_t k = 0; k < out.chunks_.size(); ++k) {
    const auto unplaced = std::find(placed[k].begin(), placed[k].end(), -1);
    if (unplaced != placed[k].end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "chunk ", ids[k], "'s ",
          phaseWord(out.chunks_[k]->instruction(unplaced - placed[k].begin()).phase),
          " is not in the stage's schedule"));
    }
  }
  out.live_.reserve(static_cast<size_t>(buffers));
  for (size_t k = 0; k < out.chunks_.size(); ++k) {
    for (int64_t id = 0; id < out.chunks_[k]->numBuffers(); ++id) {
      const plan::Lifetime local = out.chunks_[k]->live(id);
      out.live_.push_back({.first = local.first < 0 ? local.first : placed[k][local.first],
                           .last = local.last < 0 ? local.last : placed[k][local.last]});
    }
  }
  return out;
}

size_t slowestStage(const std::vector<PlanPrice>& prices, const PipelinePrice& pipeline) {
  size_t slowest = 0;
  auto total = [&](size_t k) { return prices[k].timing.step_time_s + pipeline.bubble_s[k]; };
  for (size_t k = 1; k < prices.size(); ++k) {
    if (total(k) > total(slowest)) slowest = k;
  }
  return slowest;
}

size_t fullestStage(const PipelinePrice& pipeline) {
  size_t fullest = 0;
  for (size_t k = 1; k < pipeline.memory.size(); ++k) {
    if (pipeline.memory[k].peak_bytes > pipeline.memory[fullest].peak_bytes) fullest = k;
  }
  return fullest;
}

absl::StatusOr<StagedPrice> priceChunks(std::span<const PricedProgram* const> chunks,
                                        stages::PipelineSchedule schedule,
                                        const stages::PipelineShape& shape,
                                        const CostModel& model) {
  const int64_t count = shape.stages * shape.virtual_stages;
  if (static_cast<int64_t>(chunks.size()) != count) {
    return absl::InvalidArgumentError(absl::StrCat(chunks.size(), " chunk programs for ",
                                                   shape.stages, " stages of ",
                                                   shape.virtual_stages, " chunks"));
  }
  absl::StatusOr<std::vector<std::vector<stages::PipelineAction>>> order =
      stages::scheduleOrder(schedule, shape);
  if (!order.ok()) return order.status();
  const bool numbered = shape.virtual_stages > 1;
  StagedPrice out;
  std::vector<std::vector<plan::ScheduleEntry>> entries(shape.stages);
  // Stages made of the same chunk programs share one price.
  std::map<std::vector<const PricedProgram*>, size_t> priced;
  for (int64_t s = 0; s < shape.stages; ++s) {
    std::vector<const PricedProgram*> held;
    std::vector<int64_t> ids;
    for (int64_t c = s; c < count; c += shape.stages) {
      held.push_back(chunks[c]);
      ids.push_back(c);
    }
    std::vector<StageProgram::Run> firstRuns;
    for (const stages::PipelineAction& action : (*order)[s]) {
      const plan::Phase phase = action.kind == stages::PipelineAction::Kind::kForward
                                    ? plan::Phase::kForward
                                    : plan::Phase::kBackward;
      entries[s].push_back({.block = blockNameOf(action.chunk, phase, numbered),
                            .micro_batch = action.micro_batch});
      const StageProgram::Run run{.chunk = action.chunk, .phase = phase};
      const bool seen = std::any_of(firstRuns.begin(), firstRuns.end(), [&](const auto& r) {
        return r.chunk == run.chunk && r.phase == run.phase;
      });
      if (!seen) firstRuns.push_back(run);
    }
    entries[s].push_back({.block = "optimizer", .micro_batch = -1});
    if (auto it = priced.find(held); it != priced.end()) {
      // The same programs under this stage's chunk numbers.
      const int64_t other = static_cast<int64_t>(it->second);
      PlanPrice copy = out.stages[other];
      for (StageBlocks::Block& block : copy.blocks.blocks) {
        int64_t chunk = 0;
        if (!numbered || block.phase == plan::Phase::kOptimizer ||
            !absl::SimpleAtoi(block.name.substr(block.name.find('.') + 1), &chunk)) {
          continue;
        }
        block.name = blockNameOf(ids[(chunk - other) / shape.stages], block.phase, numbered);
      }
      out.stages.push_back(std::move(copy));
      continue;
    }
    absl::StatusOr<PlanPrice> price;
    if (held.size() == 1) {
      price = priceProgram(*held.front(), model);
    } else {
      absl::StatusOr<StageProgram> program = StageProgram::create(held, ids, firstRuns, numbered);
      if (!program.ok()) return program.status();
      price = priceProgram(*program, model);
    }
    if (!price.ok()) return price.status();
    priced.emplace(held, out.stages.size());
    out.stages.push_back(*std::move(price));
  }
  std::vector<StageRuns> runs;
  for (int64_t s = 0; s < shape.stages; ++s) {
    runs.push_back({.stage = s, .blocks = &out.stages[s].blocks, .schedule = &entries[s]});
  }
  absl::StatusOr<PipelinePrice> pipeline = priceSchedules(runs, shape.micro_batches);
  if (!pipeline.ok()) return pipeline.status();
  out.pipeline = *std::move(pipeline);
  out.slowest = slowestStage(out.stages, out.pipeline);
  out.fullest = fullestStage(out.pipeline);
  return out;
}

}  // namespace loom::planner::cost
