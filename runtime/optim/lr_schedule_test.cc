// The learning-rate schedules' shapes at their boundaries.
#include "runtime/optim/lr_schedule.h"

#include <cmath>

#include "gtest/gtest.h"

namespace loom::runtime::optim {
namespace {

TEST(LrScheduleTest, ConstantIsOne) {
  const LrSchedule s;
  EXPECT_EQ(s.factor(1), 1.0);
  EXPECT_EQ(s.factor(1000), 1.0);
}

TEST(LrScheduleTest, WarmupRampsLinearlyAndNeverStartsAtZero) {
  const LrSchedule s{.warmup_steps = 4};
  EXPECT_DOUBLE_EQ(s.factor(1), 0.2);
  EXPECT_DOUBLE_EQ(s.factor(4), 0.8);
  EXPECT_EQ(s.factor(5), 1.0);
}

TEST(LrScheduleTest, LinearAndCosineDecayToTheFloor) {
  const LrSchedule linear{
      .warmup_steps = 2, .decay = LrDecay::kLinear, .decay_end_step = 12, .min_ratio = 0.1};
  EXPECT_DOUBLE_EQ(linear.factor(3), 0.1 + 0.9 * 0.9);
  EXPECT_DOUBLE_EQ(linear.factor(7), 0.1 + 0.9 * 0.5);
  EXPECT_DOUBLE_EQ(linear.factor(12), 0.1);
  EXPECT_DOUBLE_EQ(linear.factor(50), 0.1);
  const LrSchedule cosine{
      .warmup_steps = 2, .decay = LrDecay::kCosine, .decay_end_step = 12, .min_ratio = 0};
  EXPECT_NEAR(cosine.factor(7), 0.5, 1e-15);  // half way
  EXPECT_GT(cosine.factor(3), cosine.factor(4));
  EXPECT_LT(cosine.factor(11), 0.03);
  EXPECT_EQ(cosine.factor(12), 0.0);
}

TEST(LrScheduleTest, ErrorsNameTheFlag) {
  EXPECT_EQ(parseLrDecay("step").status().message(),
            "--lr_decay='step' is not constant, linear or cosine");
  EXPECT_EQ(checkLrSchedule({.warmup_steps = -1}).message(), "--lr_warmup_steps=-1 must be >= 0");
  EXPECT_EQ(checkLrSchedule({.min_ratio = 2}).message(), "--lr_min_ratio=2 must be in [0, 1]");
  EXPECT_NE(checkLrSchedule({.warmup_steps = 10, .decay = LrDecay::kCosine, .decay_end_step = 10})
                .message()
                .find("raise --lr_decay_steps"),
            std::string::npos);
  EXPECT_TRUE(
      checkLrSchedule({.warmup_steps = 2, .decay = LrDecay::kLinear, .decay_end_step = 3}).ok());
}

}  // namespace
}  // namespace loom::runtime::optim
