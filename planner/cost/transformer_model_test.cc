// Tests of the analytic step model against hand counts: FLOPs, the bytes
// each rank moves under fsdp, the memory lower bound, accumulation and the
// refusals. Agreement with the real pipeline is
// tools/plan/cost_validation_test.
#include "planner/cost/transformer_model.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "mesh/topology.h"
#include "planner/cost/cost_model.h"
#include "planner/models/model_config.h"
#include "tests/testing/status_matchers.h"

namespace loom::planner::cost {
namespace {

using ::loom::testutil::StatusIs;
using ::testing::HasSubstr;

// h 64, 4 heads of 16, 2 kv heads, ffn 128, vocab 256, 2 layers.
Workload tiny(Dtype dtype = Dtype::kBF16) {
  models::TinyOptions options;
  options.max_seq = 32;
  return {.config = *models::tinyConfig(options), .seq = 32, .dtype = dtype};
}

CostModel h100(int64_t hosts) { return *CostModel::create(*mesh::Topology::dgxH100(hosts)); }

CostModel cpu(int64_t ranks) { return *CostModel::create(*mesh::Topology::cpuHost(ranks)); }

TEST(TransformerModelTest, ForwardFlopsCountEveryOp) {
  const Workload w = tiny();
  const double s = 32, h = 64, hq = 64, kv = 32, f = 128, V = 256;
  const double linears = 2 * s * (h * hq + 2 * h * kv + hq * h + 3 * h * f);
  const double attention = 4.0 * 4 * 16 * s * (s + 1) / 2;
  const double elementwise = s * (8 * h + 3 * (hq + kv) + 2 * h + 5 * f);
  const double head = 2 * s * h * V + 4 * s * h + 4 * s * V;
  EXPECT_DOUBLE_EQ(forwardFlopsPerSequence(w), 2 * (linears + attention + elementwise) + head);
}

TEST(TransformerModelTest, FsdpMovesTheZero3Volume) {
  // fsdp=4, bf16: every parameter is gathered forward and backward (the
  // embedding table forward only) and reduce-scattered once; the loss is
  // all-reduced. Per rank: (g - 1) x shard bytes per collective.
  const Workload w = tiny();
  const CostModel model = cpu(4);
  absl::StatusOr<StepEstimate> e = estimateStep(w, {.fsdp = 4, .micro_batch = 1}, model);
  ASSERT_TRUE(e.ok()) << e.status();
  const int64_t layer = 2 * 64 + 64 * 64 + 2 * 64 * 32 + 64 * 64 + 3 * 64 * 128;
  const int64_t table = 256 * 64, head = 64 * 256, norm = 64;
  const int64_t elements = 2 * layer + table + head + norm;
  const int64_t gathered = elements + (2 * layer + head + norm);  // backward: no table
  const int64_t expected = 3 * (gathered + elements) / 4 * 2 + 2 * 3 * 4;
  EXPECT_EQ(e->comm_bytes_per_rank, expected);
}

TEST(TransformerModelTest, OneDeviceMovesNothingAndStepsAreComputePlusOptimizer) {
  const Workload w = tiny(Dtype::kF32);
  const CostModel model = cpu(1);
  absl::StatusOr<StepEstimate> e = estimateStep(w, {.micro_batch = 2}, model);
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->comm_bytes_per_rank, 0);
  EXPECT_EQ(e->exposed_comm_s, 0);
  EXPECT_DOUBLE_EQ(e->step_time_s, e->compute_s);
  EXPECT_GT(e->optimizer_s, 0);
  EXPECT_EQ(e->tokens_per_step, 2 * 32);
  EXPECT_DOUBLE_EQ(e->tokens_per_s_per_device, 64 / e->step_time_s);
  EXPECT_DOUBLE_EQ(e->mfu,
                   e->model_flops_per_device / (e->step_time_s * model.peakFlops(Dtype::kF32)));
  EXPECT_DOUBLE_EQ(e->model_flops_per_device, 3 * 2 * forwardFlopsPerSequence(w));
}

TEST(TransformerModelTest, AccumulationRepeatsTheMicroStepAndSharesTheOptimizer) {
  const Workload w = tiny();
  const CostModel model = h100(1);
  const StepEstimate one = *estimateStep(w, {.fsdp = 8, .micro_batch = 1}, model);
  const StepEstimate four =
      *estimateStep(w, {.fsdp = 8, .micro_batch = 1, .accumulation = 4}, model);
  EXPECT_DOUBLE_EQ(four.step_time_s - four.optimizer_s, 4 * (one.step_time_s - one.optimizer_s));
  EXPECT_DOUBLE_EQ(four.optimizer_s, one.optimizer_s);
  EXPECT_EQ(four.peak_bytes, one.peak_bytes);
  EXPECT_EQ(four.comm_bytes_per_rank, 4 * one.comm_bytes_per_rank);
  EXPECT_EQ(four.tokens_per_step, 4 * one.tokens_per_step);
}

TEST(TransformerModelTest, MemoryLowerBoundIsBelowEveryPeak) {
  const Workload w = tiny();
  const CostModel model = h100(1);
  for (const Strategy& s : {Strategy{.fsdp = 8}, Strategy{.dp = 8}, Strategy{.fsdp = 4, .tp = 2},
                            Strategy{.dp = 2, .fsdp = 2, .tp = 2, .micro_batch = 4},
                            Strategy{.fsdp = 8, .prefetch = 0, .reshard_after_forward = false}}) {
    absl::StatusOr<StepEstimate> e = estimateStep(w, s, model);
    ASSERT_TRUE(e.ok()) << e.status();
    EXPECT_LE(memoryLowerBound(w, s), e->peak_bytes) << s.meshSpec() << " " << s.knobs();
  }
}

TEST(TransformerModelTest, StrategiesNameTheirMeshAndKnobs) {
  const Strategy s{
      .dp = 2, .fsdp = 64, .tp = 8, .prefetch = 2, .micro_batch = 2, .accumulation = 4};
  EXPECT_EQ(s.meshSpec(), "dp=2,fsdp=64,tp=8");
  EXPECT_EQ(s.axes(), "dp,fsdp,tp");
  EXPECT_EQ(s.parallelism(), "hsdp 2x64 + tp 8");
  EXPECT_EQ(s.knobs(), "prefetch 2, reshard, bucket/unit, mb 2x4");
  EXPECT_EQ(s.globalBatch(), 2 * 64 * 2 * 4);
  EXPECT_EQ(Strategy{}.meshSpec(), "dp=1");
  EXPECT_EQ((Strategy{.tp = 8}).parallelism(), "tp 8");
}

TEST(TransformerModelTest, RefusesWhatThePipelineWouldRefuse) {
  const CostModel model = h100(1);
  Workload w = tiny();
  EXPECT_THAT(estimateStep(w, {.fsdp = 2, .tp = 4}, model).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("tp=4 does not divide the 4 heads and 2 kv heads")));
  EXPECT_THAT(estimateStep(w, {.fsdp = 4}, model).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("uses 4 devices but the topology has 8")));
  EXPECT_THAT(estimateStep(w, {.fsdp = 8, .micro_batch = 0}, model).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("micro-batch")));
  w.config = *models::publishedConfig("gpt2");
  w.seq = 64;
  EXPECT_THAT(estimateStep(w, {.fsdp = 8}, model).status(),
              StatusIs(absl::StatusCode::kUnimplemented, HasSubstr("Llama family only")));
}

}  // namespace
}  // namespace loom::planner::cost
