// Tests of a pipeline plan's price: the hand-made two-stage plan
// (plan/testing/two_stage.h), each stage priced alone, then its block runs
// simulated in the schedule's order.
#include "planner/cost/pipeline_price.h"

#include <algorithm>
#include <map>
#include <utility>
#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "gtest/gtest.h"
#include "mesh/topology.h"
#include "plan/testing/two_stage.h"
#include "planner/cost/cost_model.h"
#include "planner/cost/plan_price.h"

namespace loom::planner::cost {
namespace {

using plan::testing::PipelineOrder;

class PipelinePriceTest : public ::testing::Test {
 protected:
  PipelinePriceTest() {
    auto topology = mesh::Topology::cpuHost(2);
    EXPECT_TRUE(topology.ok()) << topology.status();
    auto model = CostModel::create(*topology, Efficiency{});
    EXPECT_TRUE(model.ok()) << model.status();
    model_ = *std::move(model);
  }

  plan::Plan twoStages(int64_t micro_batches, PipelineOrder order) {
    auto plan = plan::testing::twoStagePlan(
        {.stages = 2, .micro_batches = micro_batches, .order = order, .batch = 64, .seq = 64,
         .hidden = 256, .vocab = 1024});
    EXPECT_TRUE(plan.ok()) << plan.status();
    return *std::move(plan);
  }

  // A block's compute time, summed over the block's own instructions.
  static double blockCompute(const plan::Block& block, const PlanPrice& price) {
    double total = 0;
    for (const plan::Instruction& in : block.instructions) {
      if (in.info->stream == plan::Stream::kCompute &&
          in.info->family != plan::OpFamily::kPointToPoint) {
        total += price.duration_s[in.order].value_or(0);
      }
    }
    return total;
  }

  std::optional<CostModel> model_;
};

TEST_F(PipelinePriceTest, SimulatesTheSchedulesWithTheStagesBlockTimes) {
  for (PipelineOrder order : {PipelineOrder::kGPipe, PipelineOrder::k1F1B}) {
    for (int64_t m : {1, 4}) {
      const plan::Plan plan = twoStages(m, order);
      absl::StatusOr<std::vector<PlanPrice>> prices = priceStages(plan, *model_);
      ASSERT_TRUE(prices.ok()) << prices.status();
      absl::StatusOr<PipelinePrice> pipeline = pricePipeline(plan, *prices);
      ASSERT_TRUE(pipeline.ok()) << pipeline.status();
      std::vector<double> forward, backward;
      for (size_t s = 0; s < 2; ++s) {
        forward.push_back(blockCompute(*plan.programs[s].block("forward"), (*prices)[s]));
        backward.push_back(blockCompute(*plan.programs[s].block("backward"), (*prices)[s]));
        EXPECT_GT(forward.back() + backward.back(), 0);
      }
      // Every stage is busy with its own blocks once per micro-batch and
      // waits the rest of the makespan.
      for (size_t s = 0; s < 2; ++s) {
        const double busy = m * (forward[s] + backward[s]);
        EXPECT_NEAR(pipeline->bubble_s[s] + busy, pipeline->pipeline_s, 1e-12) << s;
        EXPECT_GT(pipeline->bubble_s[s], 0) << "stage " << s << " never waits";
      }
      // No stage runs before the activation reaches it, nor finishes
      // before the gradient comes back: the makespan is at least one
      // micro-batch through both stages plus every other one's busy time.
      const double one = forward[0] + forward[1] + backward[1] + backward[0];
      EXPECT_GE(pipeline->pipeline_s + 1e-12,
                one + (m - 1) * std::max(forward[0] + backward[0], forward[1] + backward[1]));
      // GPipe keeps every micro-batch in flight on the first stage, 1F1B
      // at most as many as there are stages.
      EXPECT_EQ(pipeline->peak_in_flight[0], order == PipelineOrder::kGPipe ? m : std::min<int64_t>(m, 2));
    }
  }
}

TEST_F(PipelinePriceTest, TheRecordedStepWaitsForTheBubble) {
  plan::Plan plan = twoStages(4, PipelineOrder::k1F1B);
  absl::StatusOr<std::vector<PlanPrice>> prices = priceStages(plan, *model_);
  ASSERT_TRUE(prices.ok()) << prices.status();
  ASSERT_TRUE(recordPrice(*model_, plan).ok());
  EXPECT_GT(plan.predicted.bubble_s, 0);
  double longest = 0;
  for (const PlanPrice& price : *prices) longest = std::max(longest, price.timing.step_time_s);
  EXPECT_GT(plan.predicted.step_time_s, longest);
}

TEST_F(PipelinePriceTest, RefusesABlockThatNamesNoChunk) {
  plan::Plan plan = twoStages(1, PipelineOrder::kGPipe);
  for (plan::Block& block : plan.programs[1].blocks) {
    if (block.name != "forward") continue;
    block.name = "forward.x";
    for (plan::Instruction& in : block.instructions) in.block = block.name;
  }
  for (plan::ScheduleEntry& entry : plan.programs[1].schedule) {
    if (entry.block == "forward") entry.block = "forward.x";
  }
  absl::StatusOr<std::vector<PlanPrice>> prices = priceStages(plan, *model_);
  ASSERT_TRUE(prices.ok()) << prices.status();
  absl::StatusOr<PipelinePrice> pipeline = pricePipeline(plan, *prices);
  ASSERT_FALSE(pipeline.ok());
  EXPECT_NE(pipeline.status().message().find("stage 1's block 'forward.x' names no model chunk"),
            std::string::npos)
      << pipeline.status();
}

// Three blocks of one micro-batch: the forward peaks at 100 bytes, the
// backward at 120, the optimizer at 60, and each micro-batch holds 40 bytes
// of activations from its forward to its backward.
StageBlocks threeBlocks() {
  StageBlocks blocks;
  const int act = static_cast<int>(plan::BufferRole::kActivation);
  const int param = static_cast<int>(plan::BufferRole::kParam);
  for (const auto& [name, phase, bytes] :
       {std::tuple{"forward", plan::Phase::kForward, 100},
        std::tuple{"backward", plan::Phase::kBackward, 120},
        std::tuple{"optimizer", plan::Phase::kOptimizer, 60}}) {
    StageBlocks::Block block{.name = name, .phase = phase, .peak_bytes = bytes};
    block.breakdown[param] = 50;
    block.breakdown[act] = bytes - 50;
    blocks.blocks.push_back(block);
  }
  StageBlocks::Held held{.from = 0, .to = 1, .bytes = {}};
  held.bytes[act] = 40;
  blocks.held.push_back(held);
  return blocks;
}

std::vector<plan::ScheduleEntry> entries(const std::string& blocks) {
  // "F0 B0 O": block initial and micro-batch.
  std::vector<plan::ScheduleEntry> out;
  for (size_t i = 0; i < blocks.size(); i += 3) {
    const char kind = blocks[i];
    out.push_back({.block = kind == 'F' ? "forward" : kind == 'B' ? "backward" : "optimizer",
                   .micro_batch = kind == 'O' ? -1 : blocks[i + 1] - '0'});
  }
  return out;
}

TEST(ScheduleMemoryTest, CountsTheMicroBatchesInFlight) {
  // GPipe: after three forwards, the first backward runs with the other two
  // micro-batches' activations held: 120 + 2 x 40.
  absl::StatusOr<PipelinePrice::StageMemory> gpipe =
      scheduleMemory(entries("F0 F1 F2 B0 B1 B2 O"), threeBlocks(), 3);
  ASSERT_TRUE(gpipe.ok()) << gpipe.status();
  EXPECT_EQ(gpipe->peak_bytes, 200);
  EXPECT_EQ(gpipe->block, "backward");
  EXPECT_EQ(gpipe->micro_batch, 0);
  EXPECT_EQ(gpipe->breakdown[static_cast<int>(plan::BufferRole::kActivation)], 150);
  // 1F1B on the first of two stages holds at most one other: 120 + 40.
  absl::StatusOr<PipelinePrice::StageMemory> oneF1B =
      scheduleMemory(entries("F0 F1 B0 F2 B1 B2 O"), threeBlocks(), 3);
  ASSERT_TRUE(oneF1B.ok()) << oneF1B.status();
  EXPECT_EQ(oneF1B->peak_bytes, 160);
  // One micro-batch at a time: the blocks' own peaks.
  absl::StatusOr<PipelinePrice::StageMemory> serial =
      scheduleMemory(entries("F0 B0 F1 B1 O"), threeBlocks(), 2);
  ASSERT_TRUE(serial.ok()) << serial.status();
  EXPECT_EQ(serial->peak_bytes, 120);
}

TEST(ScheduleMemoryTest, RefusesABlockThePriceDoesNotHave) {
  std::vector<plan::ScheduleEntry> schedule = entries("F0 B0 O");
  schedule[1].block = "backward.3";
  absl::StatusOr<PipelinePrice::StageMemory> memory =
      scheduleMemory(schedule, threeBlocks(), 1);
  ASSERT_FALSE(memory.ok());
  EXPECT_NE(memory.status().message().find("schedule entry 1 runs block 'backward.3'"),
            std::string::npos)
      << memory.status();
}

TEST_F(PipelinePriceTest, StageMemoryHoldsTheScheduleInFlight) {
  // The first stage's peak by (schedule, micro-batches).
  std::map<std::pair<PipelineOrder, int64_t>, int64_t> peak;
  for (PipelineOrder order : {PipelineOrder::kGPipe, PipelineOrder::k1F1B}) {
    for (int64_t m : {1, 4}) {
      const plan::Plan plan = twoStages(m, order);
      absl::StatusOr<std::vector<PlanPrice>> prices = priceStages(plan, *model_);
      ASSERT_TRUE(prices.ok()) << prices.status();
      absl::StatusOr<PipelinePrice> pipeline = pricePipeline(plan, *prices);
      ASSERT_TRUE(pipeline.ok()) << pipeline.status();
      ASSERT_EQ(pipeline->memory.size(), 2u);
      for (size_t s = 0; s < 2; ++s) {
        // Never below one micro-batch's peak.
        EXPECT_GE(pipeline->memory[s].peak_bytes, (*prices)[s].peak_bytes) << s;
        if (m == 1) {
          EXPECT_EQ(pipeline->memory[s].peak_bytes, (*prices)[s].peak_bytes) << s;
        }
      }
      peak[std::pair(order, m)] = pipeline->memory[0].peak_bytes;
    }
  }
  // The first stage holds every micro-batch under GPipe, two under 1F1B:
  // its first backward runs with three or one other micro-batch's saved
  // activation (and the send of it) held.
  const plan::Plan plan = twoStages(4, PipelineOrder::kGPipe);
  absl::StatusOr<std::vector<PlanPrice>> prices = priceStages(plan, *model_);
  ASSERT_TRUE(prices.ok()) << prices.status();
  const StageBlocks& blocks = (*prices)[0].blocks;
  ASSERT_EQ(blocks.held.size(), 1u);
  int64_t held = 0;
  for (int64_t bytes : blocks.held[0].bytes) held += bytes;
  EXPECT_GT(held, 0);
  const int64_t backward = blocks.blocks[blocks.held[0].to].peak_bytes;
  EXPECT_EQ(peak[std::pair(PipelineOrder::kGPipe, 4)], backward + 3 * held);
  EXPECT_EQ(peak[std::pair(PipelineOrder::k1F1B, 4)], backward + held);
  EXPECT_GT(peak[std::pair(PipelineOrder::k1F1B, 4)], peak[std::pair(PipelineOrder::k1F1B, 1)]);
}

TEST_F(PipelinePriceTest, TheRecordedPeakIsTheFullestStagesSchedulePeak) {
  plan::Plan plan = twoStages(4, PipelineOrder::kGPipe);
  ASSERT_TRUE(recordPrice(*model_, plan).ok());
  absl::StatusOr<std::vector<PlanPrice>> prices = priceStages(plan, *model_);
  ASSERT_TRUE(prices.ok()) << prices.status();
  absl::StatusOr<PipelinePrice> pipeline = pricePipeline(plan, *prices);
  ASSERT_TRUE(pipeline.ok()) << pipeline.status();
  ASSERT_EQ(plan.predicted.stage_peak_bytes.size(), 2u);
  for (size_t s = 0; s < 2; ++s) {
    EXPECT_EQ(plan.predicted.stage_peak_bytes[s], pipeline->memory[s].peak_bytes);
  }
  EXPECT_EQ(plan.predicted.peak_bytes, std::max(plan.predicted.stage_peak_bytes[0],
                                                plan.predicted.stage_peak_bytes[1]));
  int64_t roles = 0;
  for (const auto& [role, bytes] : plan.predicted.breakdown) roles += bytes;
  EXPECT_EQ(roles, plan.predicted.peak_bytes);
}

}  // namespace
}  // namespace loom::planner::cost
