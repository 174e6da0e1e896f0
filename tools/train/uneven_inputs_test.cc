// --uneven_inputs' pieces: the flag, which steps a rank has data for under a
// one-pass feed, the even check's error (the same on every rank), and the
// shadow steps of a joined rank through comm::Join.
#include "tools/train/uneven_inputs.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "comm/join.h"
#include "comm/testing/process_group_testing.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/data/token_feed.h"
#include "tests/testing/status_matchers.h"

namespace loom::train {
namespace {

using ::loom::testutil::StatusIs;
using runtime::data::RowRange;
using ::testing::HasSubstr;

TEST(UnevenInputsTest, ParsesTheThreeModes) {
  EXPECT_EQ(*parseUnevenInputs("even"), UnevenInputs::kEven);
  EXPECT_EQ(*parseUnevenInputs("join"), UnevenInputs::kJoin);
  EXPECT_EQ(*parseUnevenInputs("throw"), UnevenInputs::kThrow);
  EXPECT_THAT(parseUnevenInputs("pad").status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("even, join, throw")));
}

// Two files of 5 and 2 windows (seq 4), 4 rows per step: rows [0, 2) read
// the first, [2, 4) the second, so the second's ranks run out after step 1.
TEST(UnevenInputsTest, LastStepFollowsEachRanksRows) {
  const runtime::data::FeedConfig config{.seed = 1, .vocab = 16, .seq = 4, .global_batch = 4};
  std::vector<std::string> paths;
  for (int windows : {5, 2}) {
    paths.push_back(::testing::TempDir() + "/uneven" + std::to_string(windows) + ".tok");
    ASSERT_TRUE(runtime::data::writeTokenFile(paths.back(),
                                              std::vector<int32_t>(windows * 4 + 1, 3),
                                              runtime::data::TokenDType::kU16)
                    .ok());
  }
  absl::StatusOr<std::unique_ptr<runtime::data::DataFeed>> feed =
      runtime::data::openDataFeed("epoch:" + paths[0] + "," + paths[1], config);
  ASSERT_TRUE(feed.ok()) << feed.status();
  EXPECT_EQ(lastStepWithInputs(**feed, {RowRange{0, 2}}, 1, 100), 3);  // windows 0..5, 2 a step
  EXPECT_EQ(lastStepWithInputs(**feed, {RowRange{2, 2}}, 1, 100), 1);
  EXPECT_EQ(lastStepWithInputs(**feed, {RowRange{1, 2}}, 1, 100), 2);  // a row of each
  EXPECT_EQ(lastStepWithInputs(**feed, {RowRange{0, 2}}, 1, 2), 2);    // --steps first
  EXPECT_EQ(lastStepWithInputs(**feed, {RowRange{2, 2}}, 3, 100), 2);  // none from step 3
  // Micro-batches: a rank has inputs while any of its ranges does.
  EXPECT_TRUE(hasInputs(**feed, {RowRange{2, 1}, RowRange{0, 1}}, 3));
  EXPECT_FALSE(hasInputs(**feed, {RowRange{2, 1}, RowRange{3, 1}}, 2));
  absl::StatusOr<std::unique_ptr<runtime::data::DataFeed>> endless =
      runtime::data::openDataFeed("synthetic", config);
  ASSERT_TRUE(endless.ok());
  EXPECT_EQ(lastStepWithInputs(**endless, {RowRange{0, 4}}, 1, 7), 7);
}

TEST(UnevenInputsTest, EvenCheckFailsEveryRankAlikeNamingTheShortOnes) {
  comm::testing::runRanks(3, [](comm::ProcessGroup& group) {
    EXPECT_TRUE(checkEvenInputs(group, 6, absl::Seconds(20)).ok());
    const int64_t last = group.rank() == 1 ? 4 : 6;
    EXPECT_THAT(checkEvenInputs(group, last, absl::Seconds(20)),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         HasSubstr("rank(s) 1 have data up to step 4, the longest up to step 6 "
                                   "(per rank: 6, 4, 6); pass --uneven_inputs=join")));
  });
}

// Ranks with 3, 1 and 2 steps: the joined ones shadow the rest, one shadow
// step per step the others still take.
TEST(UnevenInputsTest, JoinedRanksShadowTheOthersSteps) {
  const std::vector<int> steps = {3, 1, 2};
  comm::testing::runRanks(3, [&](comm::ProcessGroup& group) {
    int shadowed = 0;
    std::vector<int64_t> sums;
    auto allReduce = [&](int64_t value) {
      std::vector<int64_t> v = {value};
      EXPECT_TRUE(group.allReduceSync(comm::Tensor::of(v)).ok());
      sums.push_back(v[0]);
    };
    ShadowSteps shadow(group, [&] {
      ++shadowed;
      allReduce(0);
      return absl::OkStatus();
    });
    comm::Join join({&shadow});
    for (int s = 0; s < steps[group.rank()]; ++s) {
      ASSERT_TRUE(join.notify().ok());
      allReduce(1);
    }
    ASSERT_TRUE(join.join().ok());
    EXPECT_EQ(shadowed, 3 - steps[group.rank()]);
    EXPECT_EQ(sums, (std::vector<int64_t>{3, 2, 1}));
  });
}

}  // namespace
}  // namespace loom::train
