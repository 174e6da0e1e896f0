// resizePlan (planner/cost/resize_plan.h) against the pipeline: a plan made
// for small data-parallel axes and one sequence per rank, re-sized, is the
// plan the pipeline makes for the larger axes and micro-batch: the same
// instructions, every operand and result of the same local shape, and the
// same price; padded shards (a vocabulary that does not divide) included.
#include "planner/cost/resize_plan.h"

#include <cstdint>
#include <map>
#include <string>

#include "gtest/gtest.h"
#include "plan/plan.h"
#include "planner/cost/cost_model.h"
#include "planner/cost/plan_price.h"
#include "tools/plan/plan_pipeline.h"
#include "tools/plan/test_plans.h"

namespace loom::tools::plan {
namespace {

struct Case {
  std::string model;
  std::string from;  // the template's mesh, one sequence per data-parallel rank
  std::string to;    // the target mesh
  std::map<std::string, int64_t> sizes;
  int64_t micro_batch = 1;
  std::string dtype = "bf16";
  int64_t prefetch = 1;
  bool reshard = true;
  int64_t bucket_mb = 0;
  bool sequence_parallel = false;
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << c.model << " " << c.from << " -> " << c.to << " mb " << c.micro_batch;
}

int64_t dataRanks(const loom::plan::Plan& plan) {
  int64_t n = 1;
  for (size_t a = 0; a < plan.strategies.size(); ++a) {
    if (plan.strategies[a] == "dp" || plan.strategies[a] == "fsdp") n *= plan.mesh.shape()[a];
  }
  return n;
}

absl::StatusOr<loom::plan::Plan> planFor(const Case& c, const std::string& mesh, int64_t micro) {
  auto parsed = mesh::DeviceMesh::parse(*meshSpec(mesh, ""));
  if (!parsed.ok()) return parsed.status();
  int64_t ranks = 1;
  for (size_t a = 0; a < parsed->axisNames().size(); ++a) {
    if (parsed->axisNames()[a] != "tp") ranks *= parsed->shape()[a];
  }
  return planThroughPipeline(c.model, micro * ranks, c.dtype,
                             {.model_name = "m",
                              .mesh = mesh,
                              .prefetch = c.prefetch,
                              .reshard_after_forward = c.reshard,
                              .bucket_mb = c.bucket_mb,
                              .sequence_parallel = c.sequence_parallel});
}

class ResizePlanTest : public ::testing::TestWithParam<Case> {};

TEST_P(ResizePlanTest, ResizedTemplateIsThePipelinesPlan) {
  const Case& c = GetParam();
  auto small = planFor(c, c.from, 1);
  ASSERT_TRUE(small.ok()) << small.status();
  auto full = planFor(c, c.to, c.micro_batch);
  ASSERT_TRUE(full.ok()) << full.status();
  auto resized = planner::cost::resizePlan(
      *small, {.axis_sizes = c.sizes, .template_micro_batch = 1, .micro_batch = c.micro_batch});
  ASSERT_TRUE(resized.ok()) << resized.status();
  EXPECT_EQ(dataRanks(*resized), dataRanks(*full));

  const auto got = resized->programs.front().instructions();
  const auto want = full->programs.front().instructions();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_EQ(got[i]->op, want[i]->op) << want[i]->where();
    for (size_t k = 0; k < want[i]->operands.size(); ++k) {
      const loom::plan::Buffer& g = resized->buffers[got[i]->operands[k]];
      const loom::plan::Buffer& w = full->buffers[want[i]->operands[k]];
      ASSERT_EQ(g.local_shape, w.local_shape)
          << want[i]->where() << " operand " << k << " " << w.name;
      ASSERT_EQ(g.bytes, w.bytes) << want[i]->where() << " operand " << k;
    }
    for (size_t k = 0; k < want[i]->results.size(); ++k) {
      const loom::plan::Buffer& g = resized->buffers[got[i]->results[k]];
      const loom::plan::Buffer& w = full->buffers[want[i]->results[k]];
      ASSERT_EQ(g.local_shape, w.local_shape)
          << want[i]->where() << " result " << k << " " << w.name;
    }
  }
  auto model = costModelOf(*full);
  ASSERT_TRUE(model.ok());
  auto a = planner::cost::pricePlan(*resized, *model);
  auto b = planner::cost::pricePlan(*full, *model);
  ASSERT_TRUE(a.ok() && b.ok()) << a.status() << b.status();
  EXPECT_EQ(a->timing.step_time_s, b->timing.step_time_s);
  EXPECT_EQ(a->peak_bytes, b->peak_bytes);
  EXPECT_EQ(a->comm_bytes_per_rank, b->comm_bytes_per_rank);
  EXPECT_EQ(a->model_flops, b->model_flops);
  // The sizes did change: the template itself prices otherwise.
  EXPECT_TRUE(small->predicted.peak_bytes != b->peak_bytes ||
              small->predicted.comm_bytes_per_rank != b->comm_bytes_per_rank);
}

TEST(ResizePlanErrorsTest, OnlyDataAndPipelineAxesResize) {
  const Case c{.model = "tiny:layers=2,hidden=64,heads=4,kv_heads=2,ffn=96,vocab=250,seq=16",
               .from = "fsdp=2,tp=2",
               .to = "",
               .sizes = {}};
  auto small = planFor(c, c.from, 1);
  ASSERT_TRUE(small.ok()) << small.status();
  EXPECT_EQ(planner::cost::resizePlan(*small, {.axis_sizes = {{"tp", 4}}}).status().message(),
            "cannot resize axis 'tp': the plan has no data-parallel or pipeline axis of that name");
  EXPECT_EQ(planner::cost::resizePlan(*small, {.axis_sizes = {{"pp", 2}}}).status().message(),
            "cannot resize axis 'pp': the plan has no data-parallel or pipeline axis of that name");
  EXPECT_FALSE(planner::cost::resizePlan(
                   *small, {.axis_sizes = {}, .template_micro_batch = 2, .micro_batch = 1})
                   .ok());
}

const char kLlama[] = "tiny:layers=2,hidden=64,heads=4,kv_heads=2,ffn=96,vocab=250,seq=16";
const char kGpt2[] =
    "tiny:family=gpt2,layers=2,hidden=64,heads=4,kv_heads=4,ffn=256,vocab=250,seq=16";

INSTANTIATE_TEST_SUITE_P(
    Plans, ResizePlanTest,
    ::testing::Values(
        Case{.model = kLlama, .from = "fsdp=2", .to = "fsdp=8", .sizes = {{"fsdp", 8}}},
        Case{.model = kLlama,
             .from = "fsdp=2",
             .to = "fsdp=4",
             .sizes = {{"fsdp", 4}},
             .micro_batch = 3},
        Case{.model = kLlama,
             .from = "fsdp=2",
             .to = "fsdp=8",
             .sizes = {{"fsdp", 8}},
             .prefetch = 2,
             .reshard = false,
             .bucket_mb = 1},
        Case{.model = kLlama,
             .from = "dp=2,fsdp=2,tp=2",
             .to = "dp=4,fsdp=2,tp=2",
             .sizes = {{"dp", 4}},
             .micro_batch = 2},
        Case{.model = kLlama, .from = "dp=2", .to = "dp=8", .sizes = {{"dp", 8}}, .dtype = "f32"},
        Case{.model = kGpt2,
             .from = "fsdp=2",
             .to = "fsdp=4",
             .sizes = {{"fsdp", 4}},
             .micro_batch = 2},
        Case{.model = kGpt2,
             .from = "dp=2,fsdp=2,tp=2",
             .to = "dp=2,fsdp=4,tp=2",
             .sizes = {{"fsdp", 4}}},
        // Sequence parallelism under HSDP: the norms' shards are
        // all-reduced on dp and tp, the rest on dp, each set re-packed.
        Case{.model = kLlama,
             .from = "dp=2,fsdp=2,tp=2",
             .to = "dp=2,fsdp=4,tp=2",
             .sizes = {{"fsdp", 4}},
             .micro_batch = 2,
             .sequence_parallel = true},
        Case{.model = kGpt2,
             .from = "dp=2,fsdp=2,tp=2",
             .to = "dp=4,fsdp=2,tp=2",
             .sizes = {{"dp", 4}},
             .sequence_parallel = true}));

}  // namespace
}  // namespace loom::tools::plan
