// A pipeline priced from its model chunks' programs: what the mesh search
// does for a candidate with a pp axis. Each chunk of the pipeline (a run of
// whole layers, plan-stages' unit) is a program of its own, repeated and
// re-sized from a template (repeat_blocks.h); a stage holding several
// chunks (interleaved schedules) runs them as one program, their blocks in
// the schedule's first-run order and their optimizer steps in one block,
// as the exporter writes a stage program (planner/export/stage_functions.h).
// Each stage is priced as a plan's program is (priceProgram), and the
// pipeline as a plan's stages are (priceSchedules), so a candidate's
// figures are those of the plan the pipeline makes for it.
#ifndef LOOM_PLANNER_COST_STAGE_PROGRAM_H_
#define LOOM_PLANNER_COST_STAGE_PROGRAM_H_

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "plan/plan.h"
#include "planner/cost/cost_model.h"
#include "planner/cost/pipeline_price.h"
#include "planner/cost/plan_price.h"
#include "planner/transforms/stages/schedule_order.h"

namespace loom::planner::cost {

// The chunks one stage holds as one program. `chunks[k]` is chunk
// `ids[k]`'s program (its blocks named forward, backward, optimizer);
// `first_runs` the stage's blocks in the order its schedule first runs them
// (chunk and phase). Blocks are renamed "forward.c" and "backward.c" (with
// `numbered`; else the names stay), the optimizer steps of every chunk run
// in one "optimizer" block, and each chunk's buffers are its own. All
// arguments are borrowed.
class StageProgram final : public PricedProgram {
 public:
  struct Run {
    int64_t chunk = 0;
    plan::Phase phase = plan::Phase::kForward;
  };
  static absl::StatusOr<StageProgram> create(std::vector<const PricedProgram*> chunks,
                                             std::vector<int64_t> ids,
                                             const std::vector<Run>& first_runs, bool numbered);

  const plan::Plan& header() const override { return chunks_.front()->header(); }
  int64_t size() const override { return static_cast<int64_t>(steps_.size()); }
  const plan::Instruction& instruction(int64_t order) const override {
    const Step& s = steps_[order];
    return chunks_[s.chunk]->instruction(s.order);
  }
  std::span<const int64_t> operands(int64_t order) const override {
    return {ids_.data() + steps_[order].args, instruction(order).operands.size()};
  }
  std::span<const int64_t> results(int64_t order) const override {
    const plan::Instruction& in = instruction(order);
    return {ids_.data() + steps_[order].args + in.operands.size(), in.results.size()};
  }
  int64_t numBuffers() const override { return static_cast<int64_t>(buffer_.size()); }
  const plan::Buffer& buffer(int64_t id) const override {
    const auto [chunk, local] = buffer_[id];
    return chunks_[chunk]->buffer(local);
  }
  plan::Lifetime live(int64_t id) const override { return live_[id]; }
  bool holds(int64_t id) const override {
    const auto [chunk, local] = buffer_[id];
    return chunks_[chunk]->holds(local);
  }
  int64_t loss() const override { return loss_; }
  bool pipelineStage() const override { return true; }
  std::string_view blockName(int64_t order) const override {
    return names_[steps_[order].name];
  }
  int64_t scopeShift(int64_t order) const override {
    const Step& s = steps_[order];
    return chunks_[s.chunk]->scopeShift(s.order);
  }
  int64_t nameShift(int64_t id) const override {
    const auto [chunk, local] = buffer_[id];
    return chunks_[chunk]->nameShift(local);
  }

 private:
  struct Step {
    int32_t chunk = 0;  // index into chunks_
    int32_t order = 0;  // in the chunk's program
    int32_t args = 0;   // into ids_
    int32_t name = 0;   // into names_
  };
  StageProgram() = default;

  std::vector<const PricedProgram*> chunks_;
  std::vector<Step> steps_;
  std::vector<int64_t> ids_;
  // Per buffer: (chunk index, its id in the chunk's program).
  std::vector<std::pair<int32_t, int64_t>> buffer_;
  std::vector<plan::Lifetime> live_;
  std::vector<std::string> names_;
  int64_t loss_ = -1;
};

// A pipeline of `shape` whose chunk c is `chunks[c]` (each re-sized to the
// candidate: its header's micro_batches are the micro-batches), run in
// `schedule`'s order: every stage composed (StageProgram) and priced, the
// stages' schedules simulated (priceSchedules). Stages that hold the same
// chunk programs (pointer for pointer) are priced once.
struct StagedPrice {
  std::vector<PlanPrice> stages;
  PipelinePrice pipeline;
  // The stage whose own time plus its wait for its peers is the longest,
  // and the one with the highest peak.
  size_t slowest = 0;
  size_t fullest = 0;
};
absl::StatusOr<StagedPrice> priceChunks(std::span<const PricedProgram* const> chunks,
                                        stages::PipelineSchedule schedule,
                                        const stages::PipelineShape& shape,
                                        const CostModel& model);

// The stage `prices` and `pipeline` make slowest (own time plus bubble;
// the first of equals) and fullest (highest schedule peak).
size_t slowestStage(const std::vector<PlanPrice>& prices, const PipelinePrice& pipeline);
size_t fullestStage(const PipelinePrice& pipeline);

}  // namespace loom::planner::cost

#endif  // LOOM_PLANNER_COST_STAGE_PROGRAM_H_
