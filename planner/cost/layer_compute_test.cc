// The pipeline bounds read off a model's layers (layer_compute.h).
#include "planner/cost/layer_compute.h"

#include <cstdint>
#include <vector>

#include "gtest/gtest.h"

namespace loom::planner::cost {
namespace {

using stages::PipelineSchedule;

// Four layers, an embedding before them and a head after.
LayerCompute fourLayers(int64_t saved_per_layer) {
  LayerCompute compute;
  for (int i = 0; i < 4; ++i) {
    compute.layers.push_back({.forward_s = 1,
                              .backward_s = 2,
                              .resident_bytes = 10,
                              .grad_bytes = 6,
                              .saved_bytes = saved_per_layer});
  }
  compute.before = {.resident_bytes = 50, .saved_bytes = saved_per_layer > 0 ? 30 : 0};
  compute.after = {.resident_bytes = 70, .saved_bytes = saved_per_layer > 0 ? 200 : 0};
  return compute;
}

TEST(PipelineMemoryBoundTest, CountsTheMicroBatchesEachScheduleHoldsInFlight) {
  const LayerCompute compute = fourLayers(100);
  const std::vector<int64_t> counts = {2, 2};
  const stages::PipelineShape shape{.stages = 2, .micro_batches = 4};
  // 1F1B: the first stage holds two micro-batches (its state 2 x 10 + 50,
  // its chunk's activations 2 x 100 + 30 each), the last one (90 + 400).
  auto oneFOneB = pipelineMemoryBound(compute, counts, PipelineSchedule::k1F1B, shape, 1);
  ASSERT_TRUE(oneFOneB.ok()) << oneFOneB.status();
  EXPECT_EQ(*oneFOneB, 70 + 2 * 230);
  // GPipe runs every forward first: the last stage holds all four.
  auto gpipe = pipelineMemoryBound(compute, counts, PipelineSchedule::kGpipe, shape, 1);
  ASSERT_TRUE(gpipe.ok()) << gpipe.status();
  EXPECT_EQ(*gpipe, 90 + 4 * 400);
  // Sharded state: each rank holds at least its share of it.
  auto sharded = pipelineMemoryBound(compute, counts, PipelineSchedule::k1F1B, shape, 2);
  ASSERT_TRUE(sharded.ok()) << sharded.status();
  EXPECT_EQ(*sharded, 70 / 2 + 2 * 230);
}

TEST(PipelineMemoryBoundTest, GradientsTheOptimizerReadsWhenTheyOutweighActivations) {
  const LayerCompute compute = fourLayers(0);
  auto bound = pipelineMemoryBound(compute, {2, 2}, PipelineSchedule::k1F1B,
                                   {.stages = 2, .micro_batches = 4}, 1);
  ASSERT_TRUE(bound.ok()) << bound.status();
  EXPECT_EQ(*bound, 90 + 2 * 6);
}

TEST(PipelineStepBoundTest, ComputeMakespanPlusEachMicroBatchsBlockingCollectives) {
  LayerCompute compute = fourLayers(0);
  // One micro-batch through two stages of two layers: 2 + 2 forward, then
  // 4 + 4 backward.
  auto bound = pipelineStepBound(compute, {2, 2}, PipelineSchedule::kGpipe,
                                 {.stages = 2, .micro_batches = 1});
  ASSERT_TRUE(bound.ok()) << bound.status();
  EXPECT_DOUBLE_EQ(*bound, 12);
  for (LayerCompute::Part& layer : compute.layers) layer.blocking_s = 0.5;
  bound = pipelineStepBound(compute, {2, 2}, PipelineSchedule::kGpipe,
                            {.stages = 2, .micro_batches = 3});
  ASSERT_TRUE(bound.ok()) << bound.status();
  // Three micro-batches: the compute makespan, plus 3 x (2 x 0.5) on the
  // most blocked stage.
  auto without = pipelineStepBound(fourLayers(0), {2, 2}, PipelineSchedule::kGpipe,
                                   {.stages = 2, .micro_batches = 3});
  ASSERT_TRUE(without.ok()) << without.status();
  EXPECT_DOUBLE_EQ(*bound, *without + 3 * 1.0);
}

TEST(StackMemoryBoundTest, StatesWithActivationsOrGradients) {
  LayerCompute compute = fourLayers(100);
  for (LayerCompute::Part& layer : compute.layers) layer.optimizer_bytes = 8;
  // State 4 x 10 + 50 + 70, activations 4 x 100 + 30 + 200.
  EXPECT_EQ(stackMemoryBound(compute, 1, false), 160 + 630);
  EXPECT_EQ(stackMemoryBound(compute, 2, false), 80 + 630);
  // Offloaded, the optimizer states are on the host.
  EXPECT_EQ(stackMemoryBound(compute, 1, true), 160 - 32 + 630);
  // Without saved activations, the gradients the optimizer reads, unless
  // it reads them on the host.
  EXPECT_EQ(stackMemoryBound(fourLayers(0), 1, false), 160 + 24);
  EXPECT_EQ(stackMemoryBound(fourLayers(0), 1, true), 160);
}

TEST(PipelineBoundTest, RejectsAShapeTheScheduleCannotRun) {
  // Interleaving needs micro-batches in groups of the stage count.
  auto bound = pipelineMemoryBound(fourLayers(100), {1, 1, 1, 1},
                                   PipelineSchedule::kInterleaved1F1B,
                                   {.stages = 2, .virtual_stages = 2, .micro_batches = 3}, 1);
  EXPECT_FALSE(bound.ok());
}

}  // namespace
}  // namespace loom::planner::cost
