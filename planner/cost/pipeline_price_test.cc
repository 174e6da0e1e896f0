// Tests of a pipeline plan's price: the hand-made two-stage plan
// (plan/testing/two_stage.h), each stage priced alone, then its block runs
// simulated in the schedule's order.
#include "planner/cost/pipeline_price.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
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
  absl::StatusOr<std::vector<PlanPrice>> prices = priceStages(plan, *model_);
  ASSERT_TRUE(prices.ok()) << prices.status();
  for (plan::Block& block : plan.programs[1].blocks) {
    if (block.name == "forward") block.name = "forward.x";
  }
  for (plan::ScheduleEntry& entry : plan.programs[1].schedule) {
    if (entry.block == "forward") entry.block = "forward.x";
  }
  absl::StatusOr<PipelinePrice> pipeline = pricePipeline(plan, *prices);
  ASSERT_FALSE(pipeline.ok());
  EXPECT_NE(pipeline.status().message().find("stage 1's block 'forward.x' names no model chunk"),
            std::string::npos)
      << pipeline.status();
}

}  // namespace
}  // namespace loom::planner::cost
