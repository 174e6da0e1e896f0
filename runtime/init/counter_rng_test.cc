// Tests of Philox4x32-10 (Random123's known answers), the uniform and normal
// draws, and initShard's sharding invariance and argument checks.
#include "runtime/init/counter_rng.h"

#include <array>
#include <cmath>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace loom::runtime::init {
namespace {

using ::loom::testutil::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// tests/kat_vectors of Random123 (release 1.14.0), the philox4x32 10 lines.
TEST(PhiloxTest, MatchesRandom123KnownAnswers) {
  EXPECT_THAT(philox4x32({0, 0, 0, 0}, {0, 0}),
              ElementsAre(0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8));
  EXPECT_THAT(
      philox4x32({0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff}),
      ElementsAre(0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd));
  EXPECT_THAT(
      philox4x32({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0}),
      ElementsAre(0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1));
}

TEST(UniformTest, IsTheTop24BitsOfTheFirstWord) {
  // Counter (index lo, index hi, stream lo, stream hi), key (seed lo, hi).
  const uint32_t word = philox4x32({0, 0, 0, 0}, {0, 0})[0];
  EXPECT_EQ(uniform(0, 0, 0), static_cast<float>(word >> 8) / 16777216.0f);
  const uint32_t other = philox4x32({5, 1, 7, 0}, {0x2a, 0x3})[0];
  EXPECT_EQ(uniform((uint64_t{3} << 32) | 0x2a, 7, (uint64_t{1} << 32) | 5),
            static_cast<float>(other >> 8) / 16777216.0f);
}

TEST(UniformTest, StatisticsOfOneHundredThousandDraws) {
  constexpr int kCount = 100000;
  double sum = 0.0, squares = 0.0;
  for (int i = 0; i < kCount; ++i) {
    const double u = uniform(42, 1, i);
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
    squares += u * u;
  }
  const double mean = sum / kCount;
  // The standard error of the mean is sqrt(1/12 / 1e5) ~ 9e-4.
  EXPECT_NEAR(mean, 0.5, 4e-3);
  EXPECT_NEAR(squares / kCount - mean * mean, 1.0 / 12.0, 2e-3);
}

TEST(NormalTest, StatisticsOfOneHundredThousandDraws) {
  constexpr int kCount = 100000;
  double sum = 0.0, squares = 0.0;
  int beyond_two_sigma = 0;
  for (int i = 0; i < kCount; ++i) {
    const double x = normal(7, 3, i);
    ASSERT_TRUE(std::isfinite(x));
    sum += x;
    squares += x * x;
    if (std::abs(x) > 2.0) ++beyond_two_sigma;
  }
  const double mean = sum / kCount;
  const double std = std::sqrt(squares / kCount - mean * mean);
  // Standard errors: mean 3e-3, std 2.2e-3, tail fraction 7e-4.
  EXPECT_NEAR(mean, 0.0, 1.5e-2);
  EXPECT_NEAR(std, 1.0, 1e-2);
  EXPECT_NEAR(static_cast<double>(beyond_two_sigma) / kCount, 0.0455, 4e-3);
}

TEST(NormalTest, SeedStreamAndIndexEachChangeTheValue) {
  const float base = normal(1, 2, 3);
  EXPECT_NE(normal(9, 2, 3), base);
  EXPECT_NE(normal(1, 9, 3), base);
  EXPECT_NE(normal(1, 2, 9), base);
  EXPECT_EQ(normal(1, 2, 3), base);
}

// Copies shard (offsets, shape) of `whole` ([rows, cols]) out row by row.
std::vector<float> subBox(const std::vector<float>& whole, int64_t cols,
                          std::array<int64_t, 2> offsets, std::array<int64_t, 2> shape) {
  std::vector<float> box;
  for (int64_t r = 0; r < shape[0]; ++r) {
    for (int64_t c = 0; c < shape[1]; ++c) {
      box.push_back(whole[(offsets[0] + r) * cols + offsets[1] + c]);
    }
  }
  return box;
}

TEST(InitShardTest, EveryShardingGivesTheSameElements) {
  const InitSpec spec{InitSpec::Kind::kNormal, 0.5f, 0.02f, 1234, 17};
  const std::vector<int64_t> global = {7, 10};
  std::vector<float> whole(70);
  ASSERT_EQ(absl::OkStatus(),
            initShard(spec, global, std::vector<int64_t>{0, 0}, global, whole.data()));
  for (int64_t i = 0; i < 70; ++i) {
    ASSERT_EQ(whole[i], 0.5f + 0.02f * normal(1234, 17, i));
  }
  // Uneven row shards 3, 3, 1 and a 2x2 grid of sub-boxes (4+3 by 5+5).
  const std::vector<std::pair<std::array<int64_t, 2>, std::array<int64_t, 2>>> shards = {
      {{0, 0}, {3, 10}}, {{3, 0}, {3, 10}}, {{6, 0}, {1, 10}}, {{0, 0}, {4, 5}},
      {{0, 5}, {4, 5}},  {{4, 0}, {3, 5}},  {{4, 5}, {3, 5}}};
  for (const auto& [offsets, shape] : shards) {
    std::vector<float> part(shape[0] * shape[1]);
    ASSERT_EQ(absl::OkStatus(), initShard(spec, global, offsets, shape, part.data()));
    EXPECT_EQ(part, subBox(whole, 10, offsets, shape))
        << "shard at " << offsets[0] << "," << offsets[1];
  }
}

TEST(InitShardTest, ThreeDimensionalSubBoxUsesGlobalIndices) {
  const InitSpec spec{InitSpec::Kind::kNormal, 0.0f, 1.0f, 5, 2};
  const std::vector<int64_t> global = {3, 4, 5};
  std::vector<float> part(2 * 2 * 3);
  ASSERT_EQ(absl::OkStatus(), initShard(spec, global, std::vector<int64_t>{1, 2, 1},
                                        std::vector<int64_t>{2, 2, 3}, part.data()));
  int64_t i = 0;
  for (int64_t a = 1; a < 3; ++a) {
    for (int64_t b = 2; b < 4; ++b) {
      for (int64_t c = 1; c < 4; ++c) {
        EXPECT_EQ(part[i++], normal(5, 2, (a * 4 + b) * 5 + c));
      }
    }
  }
}

TEST(InitShardTest, ZerosOnesAndScalar) {
  std::vector<float> out(6, 3.0f);
  const std::vector<int64_t> shape = {2, 3};
  const std::vector<int64_t> origin = {0, 0};
  ASSERT_EQ(absl::OkStatus(),
            initShard({InitSpec::Kind::kZeros}, shape, origin, shape, out.data()));
  EXPECT_EQ(out, std::vector<float>(6, 0.0f));
  ASSERT_EQ(absl::OkStatus(), initShard({InitSpec::Kind::kOnes}, shape, origin, shape, out.data()));
  EXPECT_EQ(out, std::vector<float>(6, 1.0f));
  float scalar = 0.0f;
  ASSERT_EQ(absl::OkStatus(),
            initShard({InitSpec::Kind::kNormal, 1.0f, 2.0f, 8, 4}, {}, {}, {}, &scalar));
  EXPECT_EQ(scalar, 1.0f + 2.0f * normal(8, 4, 0));
}

TEST(InitShardTest, RejectsBadBoxes) {
  float out[16];
  const InitSpec spec;
  const std::vector<int64_t> global = {4, 4};
  EXPECT_THAT(initShard(spec, global, std::vector<int64_t>{0}, std::vector<int64_t>{4, 4}, out),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("ranks differ")));
  EXPECT_THAT(initShard(spec, global, std::vector<int64_t>{2, 0}, std::vector<int64_t>{3, 4}, out),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("does not lie inside global shape [4, 4] "
                                 "(dim 0)")));
  EXPECT_THAT(initShard(spec, global, std::vector<int64_t>{0, -1}, std::vector<int64_t>{1, 1}, out),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("(dim 1)")));
  EXPECT_THAT(initShard(spec, global, std::vector<int64_t>{0, 0}, std::vector<int64_t>{0, 4}, out),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("(dim 0)")));
}

}  // namespace
}  // namespace loom::runtime::init
