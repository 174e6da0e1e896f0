// Tests of the axis and parameter strategy parsers: every accepted form and
// every refusal, with its message.
#include "planner/transforms/placement/strategy.h"

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace loom::planner::placement {
namespace {

using ::loom::testutil::StatusIs;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

const std::vector<std::string> kTwoAxes = {"dp", "tp"};

TEST(ParseAxisStrategiesTest, OneStrategyPerAxis) {
  auto strategies = parseAxisStrategies(" fsdp , tp ", kTwoAxes);
  ASSERT_TRUE(strategies.ok()) << strategies.status();
  EXPECT_THAT(*strategies, ElementsAre(AxisStrategy::kFsdp, AxisStrategy::kTp));
}

TEST(ParseAxisStrategiesTest, HsdpIsDpAndFsdp) {
  auto strategies = parseAxisStrategies("dp,fsdp", kTwoAxes);
  ASSERT_TRUE(strategies.ok()) << strategies.status();
  EXPECT_THAT(*strategies, ElementsAre(AxisStrategy::kDp, AxisStrategy::kFsdp));
  EXPECT_TRUE(splitsBatch(AxisStrategy::kDp));
  EXPECT_TRUE(splitsBatch(AxisStrategy::kFsdp));
  EXPECT_FALSE(splitsBatch(AxisStrategy::kTp));
}

TEST(ParseAxisStrategiesTest, RefusesEmptySpec) {
  EXPECT_THAT(parseAxisStrategies(" ", kTwoAxes).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("no axis strategies given for mesh axes [dp, "
                                 "tp]")));
}

TEST(ParseAxisStrategiesTest, RefusesCountMismatch) {
  EXPECT_THAT(parseAxisStrategies("fsdp", kTwoAxes).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("got 1 axis strategies ('fsdp') for 2 "
                                       "mesh axes [dp, tp]"),
                             HasSubstr("exactly one strategy per mesh axis"))));
}

TEST(ParseAxisStrategiesTest, RefusesUnknownStrategy) {
  EXPECT_THAT(parseAxisStrategies("dp,zero3", kTwoAxes).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("unknown strategy 'zero3' for mesh axis "
                                       "'tp'"),
                             HasSubstr("expected fsdp, dp, tp or pp"))));
}

TEST(ParseAxisStrategiesTest, PipelineAxisSplitsNothing) {
  auto strategies = parseAxisStrategies("pp,tp", kTwoAxes);
  ASSERT_TRUE(strategies.ok()) << strategies.status();
  EXPECT_THAT(*strategies, ElementsAre(AxisStrategy::kPp, AxisStrategy::kTp));
  EXPECT_FALSE(splitsBatch(AxisStrategy::kPp));
}

TEST(ParseAxisStrategiesTest, RefusesTwoPpAxes) {
  EXPECT_THAT(parseAxisStrategies("pp,pp", kTwoAxes).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("got 2 pp axes in 'pp,pp'")));
}

TEST(ParseAxisStrategiesTest, RefusesTwoTpAxes) {
  EXPECT_THAT(parseAxisStrategies("tp,tp", kTwoAxes).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("got 2 tp axes in 'tp,tp'")));
}

TEST(AxisStrategyNameTest, NamesRoundTrip) {
  for (AxisStrategy strategy :
       {AxisStrategy::kDp, AxisStrategy::kFsdp, AxisStrategy::kTp, AxisStrategy::kPp}) {
    auto parsed = parseAxisStrategies(axisStrategyName(strategy), {"a"});
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_THAT(*parsed, ElementsAre(strategy));
  }
}

TEST(ParseParamStrategyTest, AcceptsDpAndReplicate) {
  EXPECT_EQ(*parseParamStrategy("dp"), ParamStrategy::kDp);
  EXPECT_EQ(*parseParamStrategy("replicate"), ParamStrategy::kReplicate);
  EXPECT_THAT(
      parseParamStrategy("fsdp").status(),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("unknown parameter strategy 'fsdp'")));
}

}  // namespace
}  // namespace loom::planner::placement
