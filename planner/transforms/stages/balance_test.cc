#include "planner/transforms/stages/balance.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace loom::planner::stages {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// The least largest run over every split, by brute force.
int64_t bruteForce(const std::vector<int64_t>& costs, int64_t parts, int64_t first,
                   int64_t last) {
  const int64_t layers = static_cast<int64_t>(costs.size());
  int64_t best = INT64_MAX;
  // Every choice of parts-1 cut points among layers-1 gaps.
  std::vector<bool> cut(layers - 1, false);
  std::fill(cut.begin(), cut.begin() + (parts - 1), true);
  std::sort(cut.begin(), cut.end());
  do {
    std::vector<int64_t> counts;
    int64_t run = 1;
    for (int64_t g = 0; g < layers - 1; ++g) {
      if (cut[g]) {
        counts.push_back(run);
        run = 1;
      } else {
        ++run;
      }
    }
    counts.push_back(run);
    const std::vector<int64_t> each = runCosts(costs, counts, first, last);
    best = std::min(best, *std::max_element(each.begin(), each.end()));
  } while (std::next_permutation(cut.begin(), cut.end()));
  return best;
}

TEST(BalanceTest, EqualLayersSplitEvenly) {
  const std::vector<int64_t> costs(8, 10);
  EXPECT_THAT(*balancedRuns(costs, 4, 0, 0), ElementsAre(2, 2, 2, 2));
  EXPECT_THAT(*balancedRuns(costs, 1, 0, 0), ElementsAre(8));
  EXPECT_THAT(*balancedRuns(costs, 8, 0, 0), ElementsAre(1, 1, 1, 1, 1, 1, 1, 1));
}

TEST(BalanceTest, TheHeadTakesLayersFromTheLastRun) {
  // 8 layers of 10 and a head worth 15: the last run gives up a layer.
  const std::vector<int64_t> costs(8, 10);
  const std::vector<int64_t> counts = *balancedRuns(costs, 4, 0, 15);
  EXPECT_THAT(counts, ElementsAre(2, 2, 3, 1));
  EXPECT_THAT(runCosts(costs, counts, 0, 15), ElementsAre(20, 20, 30, 25));
}

TEST(BalanceTest, TheMostEvenSplitOfTheLeastLargestRunWins) {
  // Largest run 30 either way; 1+3+3+1 leaves the first stage idle.
  const std::vector<int64_t> costs(8, 10);
  EXPECT_THAT(*balancedRuns(costs, 4, 0, 15), ElementsAre(2, 2, 3, 1));
  // Extras at both ends: the middle runs take more layers (22, 30, 30,
  // 22 and 35, 40, 40, 35).
  EXPECT_THAT(*balancedRuns(costs, 4, 12, 12), ElementsAre(1, 3, 3, 1));
  EXPECT_THAT(*balancedRuns(std::vector<int64_t>(10, 10), 4, 25, 25), ElementsAre(1, 4, 4, 1));
}

TEST(BalanceTest, TiesEndEachRunAtItsEarliest) {
  // 5 equal layers in 2 runs: 2+3 and 3+2 both have a largest run of 30.
  EXPECT_THAT(*balancedRuns(std::vector<int64_t>(5, 10), 2, 0, 0), ElementsAre(2, 3));
}

TEST(BalanceTest, MatchesBruteForce) {
  // A fixed pseudo-random sequence of costs (a linear congruential
  // generator), every part count, with and without extras.
  uint64_t state = 12345;
  auto next = [&] {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<int64_t>((state >> 33) % 100);
  };
  for (int64_t layers = 1; layers <= 9; ++layers) {
    std::vector<int64_t> costs;
    for (int64_t i = 0; i < layers; ++i) costs.push_back(next());
    for (int64_t parts = 1; parts <= layers; ++parts) {
      for (auto [first, last] : {std::pair<int64_t, int64_t>{0, 0}, {37, 0}, {5, 120}}) {
        const std::vector<int64_t> counts = *balancedRuns(costs, parts, first, last);
        ASSERT_EQ(static_cast<int64_t>(counts.size()), parts);
        int64_t sum = 0;
        for (int64_t c : counts) {
          EXPECT_GE(c, 1);
          sum += c;
        }
        EXPECT_EQ(sum, layers);
        const std::vector<int64_t> each = runCosts(costs, counts, first, last);
        EXPECT_EQ(*std::max_element(each.begin(), each.end()),
                  bruteForce(costs, parts, first, last))
            << layers << " layers, " << parts << " parts";
      }
    }
  }
}

TEST(BalanceTest, RefusesMoreRunsThanLayers) {
  auto counts = balancedRuns(std::vector<int64_t>(3, 1), 4, 0, 0);
  ASSERT_FALSE(counts.ok());
  EXPECT_THAT(counts.status().message(), HasSubstr("cannot cut 3 layers into 4 runs"));
  EXPECT_FALSE(balancedRuns(std::vector<int64_t>{1, -1}, 2, 0, 0).ok());
}

}  // namespace
}  // namespace loom::planner::stages
