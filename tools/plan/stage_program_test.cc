// cost::priceChunks (planner/cost/stage_program.h) against the pipeline: a
// pipeline's chunks taken one per stage from a plan of as many stages,
// then composed into fewer stages of several chunks each (interleaved
// 1F1B), price as the pipeline's own plan of those fewer stages: each
// stage's time, memory and blocks, the bubble and the schedule peaks.
#include "planner/cost/stage_program.h"

#include <cstdint>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "plan/plan.h"
#include "planner/cost/cost_model.h"
#include "planner/cost/pipeline_price.h"
#include "planner/cost/plan_price.h"
#include "planner/cost/repeat_blocks.h"
#include "planner/cost/resize_plan.h"
#include "tools/plan/test_plans.h"

namespace loom::tools::plan {
namespace {

namespace cost = ::loom::planner::cost;

constexpr char kModel[] = "tiny:layers=8,hidden=64,heads=4,kv_heads=2,ffn=96,vocab=250,seq=16";

loom::plan::Plan planWith(const std::string& mesh, int64_t virtual_stages) {
  auto plan = planThroughPipeline(kModel, 4, "bf16",
                                  {.model_name = "m",
                                   .mesh = mesh,
                                   .micro_steps = 4,
                                   .virtual_stages = virtual_stages,
                                   .stage_layers = "2,2,2,2"});
  EXPECT_TRUE(plan.ok()) << plan.status();
  return plan.ok() ? *std::move(plan) : loom::plan::Plan{};
}

TEST(StageProgramTest, ChunksComposeIntoThePipelinesInterleavedStages) {
  for (const std::string inner : {"", ",fsdp=2", ",tp=2"}) {
    // Chunk c of four is stage c of a pp 4 plan, and half of stage c mod 2
    // of the pp 2 plan with two chunks per stage.
    const loom::plan::Plan four = planWith("pp=4" + inner, 1);
    const loom::plan::Plan two = planWith("pp=2" + inner, 2);
    auto resized = cost::resizePlan(four, {.axis_sizes = {{"pp", 2}}});
    ASSERT_TRUE(resized.ok()) << resized.status();
    std::vector<loom::plan::Plan> stagePlans;
    std::vector<cost::Repeated> whole;
    for (size_t c = 0; c < 4; ++c) {
      stagePlans.push_back(cost::stagePlan(four, c));
      whole.push_back(cost::wholePlan(stagePlans.back()));
    }
    std::vector<cost::RepeatedProgram> programs;
    for (size_t c = 0; c < 4; ++c) programs.emplace_back(stagePlans[c], *resized, whole[c]);
    std::vector<const cost::PricedProgram*> chunks;
    for (const cost::RepeatedProgram& p : programs) chunks.push_back(&p);

    auto model = costModelOf(two);
    ASSERT_TRUE(model.ok());
    auto got = cost::priceChunks(chunks, planner::stages::PipelineSchedule::kInterleaved1F1B,
                                 {.stages = 2, .virtual_stages = 2, .micro_batches = 4}, *model);
    ASSERT_TRUE(got.ok()) << got.status();
    auto want = cost::priceStages(two, *model);
    ASSERT_TRUE(want.ok()) << want.status();
    auto pipeline = cost::pricePipeline(two, *want);
    ASSERT_TRUE(pipeline.ok()) << pipeline.status();
    for (size_t s = 0; s < 2; ++s) {
      const cost::PlanPrice& g = got->stages[s];
      const cost::PlanPrice& w = (*want)[s];
      EXPECT_DOUBLE_EQ(g.timing.step_time_s, w.timing.step_time_s) << inner << " stage " << s;
      EXPECT_DOUBLE_EQ(g.timing.exposed_comm_s, w.timing.exposed_comm_s) << inner << " " << s;
      EXPECT_DOUBLE_EQ(g.optimizer_s, w.optimizer_s) << inner << " stage " << s;
      EXPECT_EQ(g.peak_bytes, w.peak_bytes) << inner << " stage " << s;
      EXPECT_EQ(g.comm_bytes_per_rank, w.comm_bytes_per_rank) << inner << " stage " << s;
      ASSERT_EQ(g.blocks.blocks.size(), w.blocks.blocks.size()) << inner << " stage " << s;
      for (size_t b = 0; b < w.blocks.blocks.size(); ++b) {
        EXPECT_EQ(g.blocks.blocks[b].name, w.blocks.blocks[b].name) << inner << " " << s;
        EXPECT_EQ(g.blocks.blocks[b].peak_bytes, w.blocks.blocks[b].peak_bytes)
            << inner << " stage " << s << " block " << w.blocks.blocks[b].name;
        EXPECT_DOUBLE_EQ(g.blocks.blocks[b].compute_s, w.blocks.blocks[b].compute_s);
      }
      EXPECT_DOUBLE_EQ(got->pipeline.bubble_s[s], pipeline->bubble_s[s]) << inner << " " << s;
      EXPECT_EQ(got->pipeline.memory[s].peak_bytes, pipeline->memory[s].peak_bytes)
          << inner << " stage " << s;
    }
    EXPECT_EQ(got->pipeline.peak_in_flight, pipeline->peak_in_flight);
  }
}

TEST(StageProgramTest, RefusesAScheduleThatSkipsAChunk) {
  const loom::plan::Plan four = planWith("pp=4", 1);
  const loom::plan::Plan stage = cost::stagePlan(four, 1);
  const cost::Repeated whole = cost::wholePlan(stage);
  const cost::RepeatedProgram program(stage, stage, whole);
  auto composed = cost::StageProgram::create(
      {&program, &program}, {1, 3}, {{.chunk = 1, .phase = loom::plan::Phase::kForward}}, true);
  ASSERT_FALSE(composed.ok());
  EXPECT_EQ(composed.status().message(), "chunk 1's backward is not in the stage's schedule");
}

}  // namespace
}  // namespace loom::tools::plan
