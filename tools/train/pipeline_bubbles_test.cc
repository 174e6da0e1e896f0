#include "tools/train/pipeline_bubbles.h"

#include <memory>
#include <mutex>
#include <vector>

#include "comm/testing/process_group_testing.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace loom::train {
namespace {

using ::testing::HasSubstr;

TEST(PipelineBubblesTest, MedianLeavesTheFirstStepOut) {
  EXPECT_EQ(medianAfterFirst({}), 0);
  EXPECT_EQ(medianAfterFirst({7}), 7);
  // The first step's 100 is left out; the median of 3, 1, 2 is 2.
  EXPECT_EQ(medianAfterFirst({100, 3, 1, 2}), 2);
}

plan::Predicted predicted(double bubble_s, double step_s) {
  plan::Predicted p;
  p.bubble_s = bubble_s;
  p.step_time_s = step_s;
  return p;
}

// pp 2 x fsdp 2: ranks 0 and 1 run stage 0, ranks 2 and 3 stage 1.
TEST(PipelineBubblesTest, ReportsEachStageAsTheMeanOfItsRanks) {
  const nlohmann::json report =
      bubbleReport({{.rank = 0, .stage = 0, .bubble_s = 0.2, .step_s = 1},
                    {.rank = 1, .stage = 0, .bubble_s = 0.4, .step_s = 1},
                    {.rank = 2, .stage = 1, .bubble_s = 0.1, .step_s = 2},
                    {.rank = 3, .stage = 1, .bubble_s = 0.1, .step_s = 2}},
                   predicted(0.001, 0.004));
  EXPECT_EQ(report["predicted_bubble_s"], 0.001);
  EXPECT_EQ(report["predicted_step_s"], 0.004);
  ASSERT_EQ(report["stages"].size(), 2u);
  const nlohmann::json& first = report["stages"][0];
  EXPECT_EQ(first["stage"], 0);
  EXPECT_EQ(first["ranks"], nlohmann::json({0, 1}));
  EXPECT_DOUBLE_EQ(first["bubble_s"].get<double>(), 0.3);
  EXPECT_DOUBLE_EQ(first["step_s"].get<double>(), 1);
  EXPECT_EQ(report["stages"][1]["ranks"], nlohmann::json({2, 3}));

  const std::string table = bubbleTable(report);
  EXPECT_THAT(table, HasSubstr("planner: 1 ms of a 4 ms step, 25.0 %"));
  // 300 ms against the planner's 1 ms, 30 % of a 1 s step.
  EXPECT_THAT(table, HasSubstr("| 0 | 0,1 | 300.000 | 30.0 % | 300x |"));
  EXPECT_THAT(table, HasSubstr("| 1 | 2,3 | 100.000 | 5.0 % | 100x |"));
}

TEST(PipelineBubblesTest, SaysSoWhenThePlanPredictsNoBubble) {
  const std::string table = bubbleTable(
      bubbleReport({{.rank = 0, .stage = 0, .bubble_s = 0.5, .step_s = 1}}, predicted(0, 0)));
  EXPECT_THAT(table, HasSubstr("| 0 | 0 | 500.000 | 50.0 % | - |"));
}

// Every rank gives its stage and per-step figures; rank 0 gets them all.
TEST(PipelineBubblesTest, GathersEveryRanksMedians) {
  nlohmann::json report;
  std::mutex mu;
  comm::testing::runRanksShared(2, [&](std::shared_ptr<comm::ProcessGroup> group) {
    const int r = group->rank();
    absl::StatusOr<nlohmann::json> got =
        gatherBubbles(*group, /*stage=*/r, {9, 0.1 * (r + 1), 0.3 * (r + 1), 0.2 * (r + 1)},
                      {9, 1, 1, 1}, predicted(0.05, 0.5));
    ASSERT_TRUE(got.ok()) << got.status();
    if (r != 0) {
      EXPECT_TRUE(got->empty());
      return;
    }
    std::lock_guard<std::mutex> lock(mu);
    report = *std::move(got);
  });
  ASSERT_EQ(report["stages"].size(), 2u);
  EXPECT_DOUBLE_EQ(report["stages"][0]["bubble_s"].get<double>(), 0.2);
  EXPECT_DOUBLE_EQ(report["stages"][1]["bubble_s"].get<double>(), 0.4);
  EXPECT_DOUBLE_EQ(report["stages"][1]["step_s"].get<double>(), 1);
  EXPECT_EQ(report["predicted_bubble_s"], 0.05);
}

}  // namespace
}  // namespace loom::train
