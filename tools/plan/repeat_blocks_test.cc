// repeatBlocks (planner/cost/repeat_blocks.h) against the pipeline: the
// plan of a 7-block template repeated to L blocks is the plan the pipeline
// makes for L blocks, instruction for instruction (op, scope, the bytes and
// lifetimes of every operand and result), and prices the same, whether
// materialised or read by reference to the template, for Llama
// and GPT-2 graphs over the meshes and knobs the search tries; so does a
// pipeline stage's program.
#include "planner/cost/repeat_blocks.h"

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "gtest/gtest.h"
#include "plan/lifetimes.h"
#include "plan/plan.h"
#include "planner/cost/cost_model.h"
#include "planner/cost/plan_price.h"
#include "planner/cost/resize_plan.h"
#include "tools/plan/test_plans.h"

namespace loom::tools::plan {
namespace {

struct Case {
  std::string model;  // "{L}" stands for the layer count
  std::string mesh;
  std::string dtype = "bf16";
  int64_t batch = 4;
  int64_t prefetch = 1;
  bool reshard = true;
  int64_t bucket_mb = 0;
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << c.model << " " << c.mesh << " prefetch " << c.prefetch << (c.reshard ? "" : " keep")
      << " bucket " << c.bucket_mb;
}

loom::plan::Plan planFor(const Case& c, int64_t layers) {
  const std::string model = absl::StrReplaceAll(c.model, {{"{L}", absl::StrCat(layers)}});
  auto plan = planThroughPipeline(model, c.batch, c.dtype,
                                  {.model_name = "m",
                                   .mesh = c.mesh,
                                   .prefetch = c.prefetch,
                                   .reshard_after_forward = c.reshard,
                                   .bucket_mb = c.bucket_mb});
  EXPECT_TRUE(plan.ok()) << plan.status();
  return plan.ok() ? *std::move(plan) : loom::plan::Plan{};
}

class RepeatBlocksTest : public ::testing::TestWithParam<Case> {};

TEST_P(RepeatBlocksTest, RepeatedTemplateIsThePipelinesPlan) {
  const Case& c = GetParam();
  constexpr int64_t kLayers = 10;
  const loom::plan::Plan shorter = planFor(c, planner::cost::kTemplateBlocks);
  const loom::plan::Plan full = planFor(c, kLayers);
  auto result = planner::cost::repeatBlocks(shorter, kLayers);
  ASSERT_TRUE(result.ok()) << result.status();
  const loom::plan::Plan materialized = planner::cost::materialize(shorter, *result);
  const loom::plan::Plan* repeated = &materialized;
  // The lifetimes repeatBlocks computes are the plan library's.
  const std::vector<loom::plan::Lifetime> lifetimes =
      loom::plan::computeLifetimes(materialized, materialized.programs.front());
  EXPECT_EQ(result->live, lifetimes);
  EXPECT_EQ(repeated->buffers.size(), full.buffers.size());

  const auto& got = repeated->programs.front().blocks;
  const auto& want = full.programs.front().blocks;
  ASSERT_EQ(got.size(), want.size());
  for (size_t b = 0; b < want.size(); ++b) {
    EXPECT_EQ(got[b].instructions.size(), want[b].instructions.size()) << want[b].name;
  }
  for (size_t b = 0; b < want.size(); ++b) {
    ASSERT_EQ(got[b].instructions.size(), want[b].instructions.size()) << want[b].name;
    for (size_t i = 0; i < want[b].instructions.size(); ++i) {
      const loom::plan::Instruction& g = got[b].instructions[i];
      const loom::plan::Instruction& w = want[b].instructions[i];
      ASSERT_EQ(g.op, w.op) << w.where();
      ASSERT_EQ(g.scope, w.scope) << w.where();
      ASSERT_EQ(g.operands.size(), w.operands.size()) << w.where();
      for (size_t k = 0; k < w.operands.size(); ++k) {
        const loom::plan::Buffer& gb = repeated->buffers[g.operands[k]];
        const loom::plan::Buffer& wb = full.buffers[w.operands[k]];
        ASSERT_EQ(gb.local_shape, wb.local_shape) << w.where() << " operand " << k;
        ASSERT_EQ(gb.live, wb.live) << w.where() << " operand " << k << " " << wb.name;
        if (loom::plan::onEntry(full, wb.id)) {
          ASSERT_EQ(gb.name, wb.name) << w.where();
        }
      }
      for (size_t k = 0; k < w.results.size(); ++k) {
        ASSERT_EQ(repeated->buffers[g.results[k]].live, full.buffers[w.results[k]].live)
            << w.where() << " result " << k;
      }
    }
  }
  EXPECT_TRUE(loom::plan::checkPlan(*repeated).ok()) << loom::plan::checkPlan(*repeated);

  auto model = costModelOf(full);
  ASSERT_TRUE(model.ok());
  // Priced without materialising, as the search does, and materialised.
  auto a = planner::cost::priceProgram(planner::cost::RepeatedProgram(shorter, shorter, *result), *model);
  auto b = planner::cost::pricePlan(full, *model);
  auto m = planner::cost::pricePlan(materialized, *model);
  ASSERT_TRUE(a.ok() && b.ok() && m.ok());
  EXPECT_EQ(m->timing.step_time_s, b->timing.step_time_s);
  EXPECT_EQ(m->peak_bytes, b->peak_bytes);
  EXPECT_EQ(a->start_s, b->start_s);
  EXPECT_EQ(a->duration_s, b->duration_s);
  EXPECT_EQ(a->model_flops, b->model_flops);
  EXPECT_EQ(a->breakdown, b->breakdown);
  EXPECT_EQ(a->timing.step_time_s, b->timing.step_time_s);
  EXPECT_EQ(a->timing.exposed_comm_s, b->timing.exposed_comm_s);
  EXPECT_EQ(a->peak_bytes, b->peak_bytes);
  EXPECT_EQ(a->peak_order, b->peak_order);
  EXPECT_EQ(a->comm_bytes_per_rank, b->comm_bytes_per_rank);
  EXPECT_EQ(b->peak_bytes, full.predicted.peak_bytes);
}

TEST(RepeatBlocksErrorsTest, NeedsATemplateOfTheRightDepth) {
  const Case c{.model = "tiny:layers={L},hidden=64,heads=4,kv_heads=2,ffn=96,vocab=250,seq=16",
               .mesh = "fsdp=2"};
  const loom::plan::Plan three = planFor(c, 3);
  EXPECT_EQ(planner::cost::repeatBlocks(three, 10).status().message(),
            "the template plan has 3 blocks of 'layers', fewer than 7");
  const loom::plan::Plan seven = planFor(c, 7);
  EXPECT_EQ(planner::cost::repeatBlocks(seven, 5).status().message(),
            "cannot shorten a plan: 5 < 7 blocks");
  auto same = planner::cost::repeatBlocks(seven, 7);
  ASSERT_TRUE(same.ok()) << same.status();
  EXPECT_EQ(same->source.size(), seven.buffers.size());
  loom::plan::Plan unscoped = seven;
  for (loom::plan::Block& block : unscoped.programs.front().blocks) {
    for (loom::plan::Instruction& in : block.instructions) in.scope.clear();
  }
  EXPECT_EQ(planner::cost::repeatBlocks(unscoped, 10).status().message(),
            "the plan has no repeated blocks (no instruction scope names a numbered layer)");
}

// Repeating once and reading each candidate's sizes from the re-sized
// template is repeating the re-sized template.
TEST(RepeatBlocksSizesTest, CopyingSizesEqualsRepeatingTheResizedTemplate) {
  const Case c{.model = "tiny:layers={L},hidden=64,heads=4,kv_heads=2,ffn=96,vocab=250,seq=16",
               .mesh = "dp=2,fsdp=2,tp=2",
               .batch = 4};
  const loom::plan::Plan shorter = planFor(c, planner::cost::kTemplateBlocks);
  auto resized = planner::cost::resizePlan(
      shorter,
      {.axis_sizes = {{"fsdp", 8}, {"dp", 4}}, .template_micro_batch = 1, .micro_batch = 3});
  ASSERT_TRUE(resized.ok()) << resized.status();
  auto direct = planner::cost::repeatBlocks(*resized, 12);
  auto once = planner::cost::repeatBlocks(shorter, 12);
  ASSERT_TRUE(direct.ok() && once.ok());
  const planner::cost::RepeatedProgram program(*resized, *resized, *once);
  const loom::plan::Plan longer = planner::cost::materialize(*resized, *direct);
  ASSERT_EQ(program.numBuffers(), static_cast<int64_t>(longer.buffers.size()));
  for (size_t i = 0; i < longer.buffers.size(); ++i) {
    EXPECT_EQ(program.buffer(static_cast<int64_t>(i)).local_shape, longer.buffers[i].local_shape)
        << i;
  }
  auto model = costModelOf(longer);
  ASSERT_TRUE(model.ok());
  auto a = planner::cost::priceProgram(program, *model);
  auto b = planner::cost::pricePlan(longer, *model);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->timing.step_time_s, b->timing.step_time_s);
  EXPECT_EQ(a->peak_bytes, b->peak_bytes);
}

// A pipeline stage's program repeats too: the stages of a template cut
// into three chunks of 7 layers, each repeated to a chunk of the full
// model, price as the full model's stages (time, memory, and the blocks'
// times and memory its schedule is priced from), at any chunk sizes.
TEST(RepeatBlocksStagesTest, RepeatedStagesAreThePipelinesStages) {
  const std::string model =
      "tiny:layers={L},hidden=64,heads=4,kv_heads=2,ffn=96,vocab=250,seq=16";
  for (const std::string mesh : {"pp=3,fsdp=2", "pp=3,tp=2"}) {
    PlanRequest request{
        .model_name = "m", .mesh = mesh, .micro_steps = 2, .stage_layers = "7,7,7"};
    auto shorter = planThroughPipeline(absl::StrReplaceAll(model, {{"{L}", "21"}}), 4, "bf16",
                                       request);
    ASSERT_TRUE(shorter.ok()) << shorter.status();
    request.stage_layers = "8,12,9";
    auto full = planThroughPipeline(absl::StrReplaceAll(model, {{"{L}", "29"}}), 4, "bf16",
                                    request);
    ASSERT_TRUE(full.ok()) << full.status();
    auto costs = costModelOf(*full);
    ASSERT_TRUE(costs.ok());
    auto want = planner::cost::priceStages(*full, *costs);
    ASSERT_TRUE(want.ok()) << want.status();
    const int64_t layers[] = {8, 12, 9};
    for (size_t k = 0; k < 3; ++k) {
      const loom::plan::Plan stage = planner::cost::stagePlan(*shorter, k);
      auto repeated = planner::cost::repeatBlocks(stage, layers[k]);
      ASSERT_TRUE(repeated.ok()) << mesh << " stage " << k << ": " << repeated.status();
      auto got = planner::cost::priceProgram(
          planner::cost::RepeatedProgram(stage, stage, *repeated), *costs);
      ASSERT_TRUE(got.ok()) << got.status();
      const planner::cost::PlanPrice& w = (*want)[k];
      EXPECT_EQ(got->timing.step_time_s, w.timing.step_time_s) << mesh << " stage " << k;
      EXPECT_EQ(got->timing.exposed_comm_s, w.timing.exposed_comm_s) << mesh << " stage " << k;
      EXPECT_EQ(got->peak_bytes, w.peak_bytes) << mesh << " stage " << k;
      EXPECT_EQ(got->breakdown, w.breakdown) << mesh << " stage " << k;
      EXPECT_EQ(got->comm_bytes_per_rank, w.comm_bytes_per_rank) << mesh << " stage " << k;
      EXPECT_EQ(got->model_flops, w.model_flops) << mesh << " stage " << k;
      ASSERT_EQ(got->blocks.blocks.size(), w.blocks.blocks.size());
      for (size_t b = 0; b < w.blocks.blocks.size(); ++b) {
        EXPECT_EQ(got->blocks.blocks[b].name, w.blocks.blocks[b].name);
        EXPECT_EQ(got->blocks.blocks[b].compute_s, w.blocks.blocks[b].compute_s);
        EXPECT_EQ(got->blocks.blocks[b].peak_bytes, w.blocks.blocks[b].peak_bytes)
            << mesh << " stage " << k << " block " << b;
      }
      ASSERT_EQ(got->blocks.held.size(), w.blocks.held.size());
      for (size_t h = 0; h < w.blocks.held.size(); ++h) {
        EXPECT_EQ(got->blocks.held[h].bytes, w.blocks.held[h].bytes)
            << mesh << " stage " << k << " held " << h;
      }
      EXPECT_EQ(got->blocks.transfer_s, w.blocks.transfer_s);
    }
  }
}

const char kLlama[] = "tiny:layers={L},hidden=64,heads=4,kv_heads=2,ffn=96,vocab=250,seq=16";
const char kGpt2[] =
    "tiny:family=gpt2,layers={L},hidden=64,heads=4,kv_heads=4,ffn=256,vocab=250,seq=16";

INSTANTIATE_TEST_SUITE_P(
    Plans, RepeatBlocksTest,
    ::testing::Values(Case{.model = kLlama, .mesh = "fsdp=4"},
                      Case{.model = kLlama, .mesh = "fsdp=4", .prefetch = 2},
                      Case{.model = kLlama, .mesh = "fsdp=4", .prefetch = 0, .reshard = false},
                      Case{.model = kLlama, .mesh = "fsdp=4", .bucket_mb = 1},
                      Case{.model = kLlama, .mesh = "dp=2,fsdp=2,tp=2"},
                      Case{.model = kLlama, .mesh = "dp=4", .dtype = "f32"},
                      Case{.model = kLlama, .mesh = "tp=2", .batch = 1},
                      Case{.model = kGpt2, .mesh = "fsdp=2,tp=2", .prefetch = 2},
                      Case{.model = kGpt2, .mesh = "dp=2,fsdp=2", .reshard = false}));

}  // namespace
}  // namespace loom::tools::plan
