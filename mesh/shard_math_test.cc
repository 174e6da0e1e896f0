// Tests for shardSize and shardExtent: even splits, the zero-padding rule for
// uneven ones (including ranks left with no data), and invalid arguments.
#include "mesh/shard_math.h"

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace loom::mesh {
namespace {

using ::loom::testutil::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// The extents of every rank of a `ways`-way split.
std::vector<ShardExtent> allExtents(int64_t size, int64_t ways) {
  std::vector<ShardExtent> extents;
  for (int64_t index = 0; index < ways; ++index) {
    extents.push_back(shardExtent(size, ways, index).value());
  }
  return extents;
}

TEST(ShardSizeTest, DividesEvenly) {
  EXPECT_EQ(shardSize(8, 4), 2);
  EXPECT_EQ(shardSize(8, 1), 8);
  EXPECT_EQ(shardSize(0, 4), 0);
}

TEST(ShardSizeTest, RoundsUpWhenPadded) {
  EXPECT_EQ(shardSize(10, 4), 3);
  EXPECT_EQ(shardSize(9, 4), 3);
  EXPECT_EQ(shardSize(1, 4), 1);
}

TEST(ShardExtentTest, EvenSplitGivesEveryRankFullRows) {
  EXPECT_THAT(allExtents(8, 4), ElementsAre(ShardExtent{0, 2}, ShardExtent{2, 2}, ShardExtent{4, 2},
                                            ShardExtent{6, 2}));
}

TEST(ShardExtentTest, PaddingFallsOnTheLastRank) {
  // 10 rows padded to 12: the last rank holds rows 9..9 and 2 rows of zeros.
  EXPECT_THAT(allExtents(10, 4), ElementsAre(ShardExtent{0, 3}, ShardExtent{3, 3},
                                             ShardExtent{6, 3}, ShardExtent{9, 1}));
}

TEST(ShardExtentTest, TrailingRanksMayHoldOnlyPadding) {
  // 5 rows over 4 ranks: 2 rows each, padded to 8; rank 3 holds no data.
  EXPECT_THAT(allExtents(5, 4), ElementsAre(ShardExtent{0, 2}, ShardExtent{2, 2}, ShardExtent{4, 1},
                                            ShardExtent{5, 0}));
  // 2 rows over 4 ranks: ranks 2 and 3 hold padding only.
  EXPECT_THAT(allExtents(2, 4), ElementsAre(ShardExtent{0, 1}, ShardExtent{1, 1}, ShardExtent{2, 0},
                                            ShardExtent{2, 0}));
}

TEST(ShardExtentTest, ValidRowsSumToTheDimSize) {
  for (int64_t size = 0; size <= 17; ++size) {
    for (int64_t ways = 1; ways <= 6; ++ways) {
      int64_t total = 0;
      int64_t next = 0;
      for (const ShardExtent& extent : allExtents(size, ways)) {
        EXPECT_EQ(extent.begin, next) << size << " over " << ways;
        EXPECT_LE(extent.valid, shardSize(size, ways));
        total += extent.valid;
        next = extent.begin + extent.valid;
      }
      EXPECT_EQ(total, size) << size << " over " << ways;
    }
  }
}

TEST(ShardExtentTest, RejectsInvalidArguments) {
  EXPECT_THAT(shardExtent(-1, 4, 0).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("dim size must be non-negative, got: -1")));
  EXPECT_THAT(shardExtent(8, 0, 0).status(), StatusIs(absl::StatusCode::kInvalidArgument,
                                                      HasSubstr("at least 1 rank, got: 0 ways")));
  EXPECT_THAT(shardExtent(8, 4, 4).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("shard index 4 is out of range for a 4-way split; "
                                 "use an index in [0, 4)")));
  EXPECT_THAT(
      shardExtent(8, 4, -1).status(),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("shard index -1 is out of range")));
}

}  // namespace
}  // namespace loom::mesh
