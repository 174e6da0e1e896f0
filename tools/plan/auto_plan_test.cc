// plan --mesh=auto end to end: a zoo model and a graph file are searched on
// the pipeline's own programs, and the winner's plan has the search's
// figures; the search page's points follow the ranking.
#include "tools/plan/auto_plan.h"

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "llvm/Support/raw_ostream.h"
#include "mlir/IR/MLIRContext.h"
#include "tools/plan/model_loader.h"

namespace loom::tools::plan {
namespace {

const char kTiny[] = "tiny:layers=9,hidden=64,heads=4,kv_heads=2,ffn=96,vocab=250,seq=16";

// The winner's plan (one micro-step, run `accumulation` times) has the
// figures the search gave it.
void expectWinnerAgrees(const AutoResult& result) {
  const planner::cost::Candidate& winner = result.search.ranked.front();
  const loom::plan::Predicted& p = result.plan.plan.predicted;
  const double a = static_cast<double>(winner.strategy.accumulation);
  EXPECT_EQ(winner.estimate.step_time_s, (p.step_time_s - p.optimizer_s) * a + p.optimizer_s);
  EXPECT_EQ(winner.estimate.peak_bytes, p.peak_bytes);
}

TEST(AutoPlanTest, AZooModelsWinnerEqualsTheSearch) {
  mlir::MLIRContext context;
  absl::StatusOr<AutoResult> result =
      planAuto(context, {.model = kTiny, .devices = 8, .batch = 16});
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_FALSE(result->graph);
  EXPECT_GT(result->templates, 0);
  EXPECT_LE(result->placements, result->templates);
  expectWinnerAgrees(*result);
  EXPECT_NE(formatSearch(*result, 3).find("repeated to the model's depth"), std::string::npos);
}

TEST(AutoPlanTest, AGraphFileIsSearchedAtItsOwnBatch) {
  // The same model written out as a graph file of batch 4.
  const std::string path = std::string(testing::TempDir()) + "/tiny_b4.mlir";
  {
    mlir::MLIRContext context;
    auto module = loadModel(context, {.model = kTiny, .batch = 4, .seq = 16, .dtype = "f32"});
    ASSERT_TRUE(module.ok()) << module.status();
    std::error_code error;
    llvm::raw_fd_ostream os(path, error);
    ASSERT_FALSE(error) << error.message();
    (*module)->print(os);
  }
  mlir::MLIRContext context;
  absl::StatusOr<AutoResult> result = planAuto(context, {.model = path, .devices = 4});
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_TRUE(result->graph);
  EXPECT_EQ(result->workload.model, "tiny_b4.mlir");
  EXPECT_EQ(result->workload.seq, 16);
  for (const planner::cost::Candidate& c : result->search.ranked) {
    EXPECT_EQ(c.strategy.globalBatch(), 4) << c.label();
    EXPECT_EQ(c.strategy.accumulation, 1) << c.label();
  }
  EXPECT_EQ(result->winner_batch, 4);
  expectWinnerAgrees(*result);
  EXPECT_NE(formatSearch(*result, 3).find("each the whole graph"), std::string::npos);

  // The graph fixes its batch: --batch is refused, naming it.
  absl::StatusOr<AutoResult> batched = planAuto(context, {.model = path, .devices = 4, .batch = 8});
  ASSERT_FALSE(batched.ok());
  EXPECT_NE(batched.status().message().find("fixes its batch (4)"), std::string::npos)
      << batched.status();
  std::filesystem::remove(path);
}

TEST(AutoPlanTest, SearchPointsFollowTheRanking) {
  mlir::MLIRContext context;
  absl::StatusOr<AutoResult> result =
      planAuto(context, {.model = kTiny, .devices = 8, .batch = 16});
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_TRUE(result->search.found());
  const std::vector<planner::visual::SearchPoint> points = searchPoints(result->search);
  ASSERT_EQ(points.size(), result->search.ranked.size());
  EXPECT_TRUE(points[0].winner);
  EXPECT_EQ(points[0].label, result->search.ranked[0].label());
  EXPECT_EQ(points[0].memory_limit_bytes, 80LL << 30);
  for (size_t i = 1; i < points.size(); ++i) EXPECT_FALSE(points[i].winner);
}

}  // namespace
}  // namespace loom::tools::plan
