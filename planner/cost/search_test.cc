// Tests of the mesh search: the pruned search ranks its top rows exactly as
// exhaustive enumeration does on small cases; pins, the tp limit, the
// memory cap and the outputs (explanation, candidates.json, points).
#include "planner/cost/search.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "mesh/topology.h"
#include "planner/cost/cost_model.h"
#include "planner/cost/transformer_model.h"
#include "planner/models/model_config.h"
#include "tests/testing/status_matchers.h"

namespace loom::planner::cost {
namespace {

using ::loom::testutil::StatusIs;
using ::testing::HasSubstr;

Workload llamaLike(int64_t layers, int64_t seq) {
  models::TinyOptions options;
  options.num_layers = layers;
  options.hidden = 512;
  options.num_heads = 8;
  options.num_kv_heads = 8;
  options.ffn_hidden = 1536;
  options.vocab = 8192;
  options.max_seq = seq;
  return {.config = *models::tinyConfig(options), .seq = seq, .dtype = Dtype::kBF16};
}

// The top `rows` of two rankings name the same candidates with the same
// step times.
void expectSameTop(const SearchResult& pruned, const SearchResult& full, size_t rows) {
  ASSERT_GE(full.ranked.size(), rows);
  ASSERT_GE(pruned.ranked.size(), rows);
  for (size_t i = 0; i < rows; ++i) {
    if (!full.ranked[i].fits) break;
    EXPECT_EQ(pruned.ranked[i].label(), full.ranked[i].label()) << "row " << i;
    EXPECT_DOUBLE_EQ(pruned.ranked[i].estimate.step_time_s, full.ranked[i].estimate.step_time_s);
  }
}

TEST(SearchTest, PrunedSearchMatchesExhaustiveEnumeration) {
  struct Case {
    int64_t hosts;
    int64_t batch;
    int64_t seq;
    double cap_gib;
  };
  for (const Case& c : std::vector<Case>{{1, 8, 1024, 80},
                                         {2, 16, 2048, 80},
                                         {2, 64, 1024, 80},
                                         {4, 32, 4096, 0.4},
                                         {4, 128, 512, 1.0}}) {
    SCOPED_TRACE(testing::Message() << c.hosts << " hosts, batch " << c.batch << ", seq " << c.seq
                                    << ", cap " << c.cap_gib << " GiB");
    const Workload w = llamaLike(4, c.seq);
    const CostModel model = *CostModel::create(*mesh::Topology::dgxH100(c.hosts));
    AnalyticPricer pricer(w, model);
    SearchOptions options{.global_batch = c.batch,
                          .memory_cap_bytes = static_cast<int64_t>(c.cap_gib * (1LL << 30)),
                          .top = 10};
    absl::StatusOr<SearchResult> pruned = searchMesh(w, model, pricer, options);
    ASSERT_TRUE(pruned.ok()) << pruned.status();
    options.exhaustive = true;
    absl::StatusOr<SearchResult> full = searchMesh(w, model, pricer, options);
    ASSERT_TRUE(full.ok()) << full.status();
    EXPECT_EQ(full->evaluated, full->enumerated);
    EXPECT_EQ(pruned->evaluated + pruned->pruned_memory + pruned->pruned_bound, pruned->enumerated);
    EXPECT_EQ(pruned->enumerated, full->enumerated);
    expectSameTop(*pruned, *full, 10);
  }
}

TEST(SearchTest, PruningSkipsMostOfALargeSearch) {
  const Workload w = llamaLike(8, 2048);
  const CostModel model = *CostModel::create(*mesh::Topology::dgxH100(16));
  AnalyticPricer pricer(w, model);
  absl::StatusOr<SearchResult> result = searchMesh(w, model, pricer, {.global_batch = 128});
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_GT(result->enumerated, 300);
  EXPECT_LT(result->evaluated, result->enumerated / 2);
  ASSERT_TRUE(result->found());
}

TEST(SearchTest, TensorParallelismStaysInsideAHostUnlessAllowed) {
  const Workload w = llamaLike(2, 1024);
  const CostModel model = *CostModel::create(*mesh::Topology::dgxH100(4));
  AnalyticPricer pricer(w, model);
  SearchOptions options{.global_batch = 32, .exhaustive = true};
  absl::StatusOr<SearchResult> result = searchMesh(w, model, pricer, options);
  ASSERT_TRUE(result.ok()) << result.status();
  for (const Candidate& c : result->ranked) EXPECT_LE(c.strategy.tp, 8) << c.label();
  options.max_tp = 2;
  result = searchMesh(w, model, pricer, options);
  for (const Candidate& c : result->ranked) EXPECT_LE(c.strategy.tp, 2) << c.label();
}

TEST(SearchTest, PinsFixTheirChoices) {
  const Workload w = llamaLike(2, 1024);
  const CostModel model = *CostModel::create(*mesh::Topology::dgxH100(2));
  AnalyticPricer pricer(w, model);
  Pins pins;
  ASSERT_TRUE(parsePin("tp=4", pins).ok());
  ASSERT_TRUE(parsePin("reshard=false", pins).ok());
  ASSERT_TRUE(parsePin("micro-batch=2", pins).ok());
  absl::StatusOr<SearchResult> result =
      searchMesh(w, model, pricer, {.global_batch = 16, .pins = pins, .exhaustive = true});
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_FALSE(result->ranked.empty());
  for (const Candidate& c : result->ranked) {
    EXPECT_EQ(c.strategy.tp, 4);
    EXPECT_EQ(c.strategy.micro_batch, 2);
    if (c.strategy.fsdp > 1) {
      EXPECT_FALSE(c.strategy.reshard_after_forward);
    }
  }
}

TEST(SearchTest, PinErrorsNameTheKey) {
  Pins pins;
  EXPECT_THAT(parsePin("tp", pins), StatusIs(absl::StatusCode::kInvalidArgument,
                                             HasSubstr("--pin 'tp' is not key=value")));
  EXPECT_THAT(parsePin("pp=2", pins),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("unknown key 'pp'")));
  EXPECT_THAT(parsePin("tp=0", pins), StatusIs(absl::StatusCode::kInvalidArgument,
                                               HasSubstr("--pin tp='0' is not an integer >= 1")));
  EXPECT_THAT(parsePin("reshard=yes", pins),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not true or false")));
}

TEST(SearchTest, TheMemoryCapDecidesWhatFits) {
  const Workload w = llamaLike(4, 4096);
  const CostModel model = *CostModel::create(*mesh::Topology::dgxH100(1));
  AnalyticPricer pricer(w, model);
  absl::StatusOr<SearchResult> tight =
      searchMesh(w, model, pricer, {.global_batch = 8, .memory_cap_bytes = 1LL << 20});
  ASSERT_TRUE(tight.ok()) << tight.status();
  EXPECT_FALSE(tight->found());
  EXPECT_THAT(explainWinner(*tight), HasSubstr("No candidate fits in 0.0 GiB"));
  absl::StatusOr<SearchResult> roomy = searchMesh(w, model, pricer, {.global_batch = 8});
  ASSERT_TRUE(roomy->found());
  EXPECT_LE(roomy->ranked.front().estimate.peak_bytes, 80LL << 30);
}

TEST(SearchTest, ReportsTheWinnerTheRankingAndWhy) {
  const Workload w = llamaLike(4, 2048);
  const CostModel model = *CostModel::create(*mesh::Topology::dgxH100(2));
  AnalyticPricer pricer(w, model);
  absl::StatusOr<SearchResult> result = searchMesh(w, model, pricer, {.global_batch = 16});
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_TRUE(result->found());
  const std::string why = explainWinner(*result);
  EXPECT_THAT(why, HasSubstr("Why " + result->ranked.front().strategy.parallelism() + " won"));
  EXPECT_THAT(why, HasSubstr("decided it"));
  EXPECT_THAT(why, HasSubstr("Peak memory"));
  const std::string table = formatRanking(*result, 3);
  EXPECT_THAT(table, HasSubstr("| 1 | " + result->ranked.front().strategy.parallelism()));
  const nlohmann::json json = candidatesJson(*result, w, model);
  EXPECT_EQ(json["format"], "loom.mesh_search");
  EXPECT_EQ(json["devices"], 16);
  EXPECT_EQ(json["candidates"].size(), result->ranked.size());
  EXPECT_EQ(json["candidates"][0]["rank"], 1);
  EXPECT_EQ(json["candidates"][0]["mesh"], result->ranked.front().strategy.meshSpec());
}

}  // namespace
}  // namespace loom::planner::cost
