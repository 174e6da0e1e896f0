// The search's candidates as the search page draws them: one point per
// ranked candidate, the winner flagged, the memory cap as the limit line.
#include "tools/plan/auto_plan.h"

#include <vector>

#include "gtest/gtest.h"
#include "mesh/topology.h"
#include "planner/cost/cost_model.h"
#include "planner/cost/search.h"
#include "planner/models/model_config.h"

namespace loom::tools::plan {
namespace {

TEST(AutoPlanTest, SearchPointsFollowTheRanking) {
  planner::models::TinyOptions options;
  options.num_layers = 4;
  options.hidden = 512;
  options.num_heads = 8;
  options.num_kv_heads = 8;
  options.ffn_hidden = 1536;
  options.vocab = 8192;
  options.max_seq = 2048;
  const planner::cost::Workload workload{.config = *planner::models::tinyConfig(options),
                                         .seq = 2048,
                                         .dtype = planner::cost::Dtype::kBF16};
  const planner::cost::CostModel model =
      *planner::cost::CostModel::create(*mesh::Topology::dgxH100(2));
  planner::cost::AnalyticPricer pricer(workload, model);
  absl::StatusOr<planner::cost::SearchResult> result =
      planner::cost::searchMesh(workload, model, pricer, {.global_batch = 16});
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_TRUE(result->found());
  const std::vector<planner::visual::SearchPoint> points = searchPoints(*result);
  ASSERT_EQ(points.size(), result->ranked.size());
  EXPECT_TRUE(points[0].winner);
  EXPECT_EQ(points[0].label, result->ranked[0].label());
  EXPECT_EQ(points[0].memory_limit_bytes, 80LL << 30);
  for (size_t i = 1; i < points.size(); ++i) EXPECT_FALSE(points[i].winner);
}

}  // namespace
}  // namespace loom::tools::plan
