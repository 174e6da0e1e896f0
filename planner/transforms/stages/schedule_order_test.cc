#include "planner/transforms/stages/schedule_order.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace loom::planner::stages {
namespace {

using ::testing::DoubleEq;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using Kind = PipelineAction::Kind;

PipelineTiming run(PipelineSchedule schedule, PipelineShape shape, double forward,
                   double backward, double transfer = 0) {
  auto order = scheduleOrder(schedule, shape);
  EXPECT_TRUE(order.ok()) << order.status();
  const int64_t chunks = shape.stages * shape.virtual_stages;
  auto timing = simulateOrder(*order, shape, std::vector<double>(chunks, forward),
                              std::vector<double>(chunks, backward), transfer);
  EXPECT_TRUE(timing.ok()) << timing.status();
  return timing.ok() ? *timing : PipelineTiming{};
}

TEST(ScheduleOrderTest, OneForwardOneBackwardOrder) {
  auto order = scheduleOrder(PipelineSchedule::k1F1B, {.stages = 2, .micro_batches = 3});
  ASSERT_TRUE(order.ok());
  // Stage 0 warms up with one forward; the last stage alternates at once.
  EXPECT_THAT((*order)[0],
              ElementsAre(PipelineAction{Kind::kForward, 0, 0}, PipelineAction{Kind::kForward, 1, 0},
                          PipelineAction{Kind::kBackward, 0, 0}, PipelineAction{Kind::kForward, 2, 0},
                          PipelineAction{Kind::kBackward, 1, 0},
                          PipelineAction{Kind::kBackward, 2, 0}));
  EXPECT_THAT((*order)[1],
              ElementsAre(PipelineAction{Kind::kForward, 0, 1}, PipelineAction{Kind::kBackward, 0, 1},
                          PipelineAction{Kind::kForward, 1, 1}, PipelineAction{Kind::kBackward, 1, 1},
                          PipelineAction{Kind::kForward, 2, 1},
                          PipelineAction{Kind::kBackward, 2, 1}));
}

// Equal stages: both take (m + p - 1)(forward + backward); GPipe holds
// every micro-batch's activations, 1F1B at most p - s on stage s.
TEST(ScheduleOrderTest, GpipeAnd1F1BHaveTheSameBubbleAndDifferentMemory) {
  const PipelineShape shape{.stages = 4, .micro_batches = 8};
  const PipelineTiming gpipe = run(PipelineSchedule::kGpipe, shape, 1, 2);
  const PipelineTiming ofob = run(PipelineSchedule::k1F1B, shape, 1, 2);
  EXPECT_DOUBLE_EQ(gpipe.step_s, 33);
  EXPECT_DOUBLE_EQ(ofob.step_s, 33);
  EXPECT_THAT(gpipe.peak_in_flight, ElementsAre(8, 8, 8, 8));
  EXPECT_THAT(ofob.peak_in_flight, ElementsAre(4, 3, 2, 1));
  // Every stage computes 24 s and waits (p - 1)(f + b) = 9 s.
  EXPECT_THAT(ofob.busy_s, ElementsAre(24, 24, 24, 24));
  EXPECT_THAT(ofob.bubble_s, ElementsAre(9, 9, 9, 9));
}

// Megatron-LM's figure: v chunks per stage cut the bubble to
// (p - 1)(f + b) / v, each chunk doing 1/v of a stage's work.
TEST(ScheduleOrderTest, InterleavingDividesTheBubbleByTheChunks) {
  for (int64_t m : {4, 8, 12}) {
    for (int64_t v : {2, 3}) {
      const PipelineTiming t = run(PipelineSchedule::kInterleaved1F1B,
                                   {.stages = 4, .virtual_stages = v, .micro_batches = m},
                                   1.0 / static_cast<double>(v), 2.0 / static_cast<double>(v));
      EXPECT_THAT(t.step_s, DoubleEq(3.0 * static_cast<double>(m) + 9.0 / static_cast<double>(v)))
          << m << " micro-batches, " << v << " chunks";
    }
  }
}

TEST(ScheduleOrderTest, TransfersCrossEveryStageBoundaryTwice) {
  // One micro-batch over two stages: forward, transfer, forward, backward,
  // transfer, backward.
  const PipelineTiming t = run(PipelineSchedule::k1F1B, {.stages = 2, .micro_batches = 1}, 1, 2, 0.25);
  EXPECT_DOUBLE_EQ(t.step_s, 6.5);
  // One stage: no transfer, the micro-batches back to back.
  EXPECT_DOUBLE_EQ(run(PipelineSchedule::k1F1B, {.stages = 1, .micro_batches = 3}, 1, 2, 5).step_s, 9);
}

TEST(ScheduleOrderTest, UnequalStagesWaitForTheSlowest) {
  // Stage 1 twice as slow: the step is bound by it.
  auto order = scheduleOrder(PipelineSchedule::k1F1B, {.stages = 2, .micro_batches = 4});
  ASSERT_TRUE(order.ok());
  auto t = simulateOrder(*order, {.stages = 2, .micro_batches = 4}, {1, 2}, {2, 4}, 0);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_THAT(t->busy_s, ElementsAre(12, 24));
  EXPECT_DOUBLE_EQ(t->step_s, 1 + 24 + 2);  // its first input, its work, the last backward
}

TEST(ScheduleOrderTest, RefusesShapesTheSchedulesDoNotTake) {
  EXPECT_THAT(scheduleOrder(PipelineSchedule::kInterleaved1F1B,
                            {.stages = 4, .virtual_stages = 2, .micro_batches = 6})
                  .status()
                  .message(),
              HasSubstr("use a multiple of 4 micro-batches"));
  EXPECT_THAT(
      scheduleOrder(PipelineSchedule::kGpipe, {.stages = 2, .virtual_stages = 2, .micro_batches = 4})
          .status()
          .message(),
      HasSubstr("use interleaved-1f1b for virtual stages"));
  EXPECT_THAT(scheduleOrder(PipelineSchedule::kInterleaved1F1B, {.stages = 2, .micro_batches = 4})
                  .status()
                  .message(),
              HasSubstr("needs >= 2 chunks per stage"));
  EXPECT_FALSE(scheduleOrder(PipelineSchedule::k1F1B, {.stages = 0}).ok());
  EXPECT_THAT(parseSchedule("zb-h1").status().message(), HasSubstr("unknown pipeline schedule"));
  EXPECT_EQ(*parseSchedule("interleaved-1f1b"), PipelineSchedule::kInterleaved1F1B);
}

TEST(ScheduleOrderTest, RefusesOrdersThatCannotRun) {
  const PipelineShape shape{.stages = 2, .micro_batches = 1};
  // Stage 0 waits for its backward's input before running the forward
  // that would make it.
  std::vector<std::vector<PipelineAction>> stuck = {
      {{Kind::kBackward, 0, 0}, {Kind::kForward, 0, 0}},
      {{Kind::kForward, 0, 1}, {Kind::kBackward, 0, 1}}};
  auto t = simulateOrder(stuck, shape, {1, 1}, {1, 1}, 0);
  EXPECT_THAT(t.status().message(), HasSubstr("deadlocks: stage 0 waits for the input of its "
                                              "backward of micro-batch 0 through chunk 0"));
  std::vector<std::vector<PipelineAction>> missing = {{{Kind::kForward, 0, 0}},
                                                      {{Kind::kForward, 0, 1}, {Kind::kBackward, 0, 1}}};
  EXPECT_THAT(simulateOrder(missing, shape, {1, 1}, {1, 1}, 0).status().message(),
              HasSubstr("leaves out"));
  std::vector<std::vector<PipelineAction>> misplaced = {
      {{Kind::kForward, 0, 1}}, {{Kind::kForward, 0, 0}}};
  EXPECT_THAT(simulateOrder(misplaced, shape, {1, 1}, {1, 1}, 0).status().message(),
              HasSubstr("on another stage"));
}

}  // namespace
}  // namespace loom::planner::stages
