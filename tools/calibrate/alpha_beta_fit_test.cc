// Tests of the alpha-beta fit: exact recovery from points on the model,
// the bus factors, the intercept clamp and every refusal.
#include "tools/calibrate/alpha_beta_fit.h"

#include <cmath>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace loom::calibrate {
namespace {

using ::loom::testutil::StatusIs;
using ::testing::HasSubstr;

std::vector<TimedPoint> onModel(double alpha, double bandwidth, double factor) {
  std::vector<TimedPoint> points;
  for (int64_t bytes = 4096; bytes <= (int64_t{64} << 20); bytes *= 4) {
    points.push_back({bytes, alpha + static_cast<double>(bytes) * factor / bandwidth});
  }
  return points;
}

TEST(AlphaBetaFitTest, RecoversExactParametersForEveryKindAndGroupSize) {
  for (CollectiveKind kind : kAllCollectiveKinds) {
    for (int g : {2, 3, 4, 8, 64}) {
      const double factor = busFactor(kind, g);
      const double alpha = 37e-6 * g, bandwidth = 11.5e9 / g;
      absl::StatusOr<AlphaBetaFit> fit = fitAlphaBeta(onModel(alpha, bandwidth, factor), factor);
      ASSERT_TRUE(fit.ok()) << fit.status();
      EXPECT_NEAR(fit->latency_s, alpha, alpha * 1e-9) << collectiveKindName(kind) << " g=" << g;
      EXPECT_NEAR(fit->bus_bandwidth_bytes_per_s, bandwidth, bandwidth * 1e-9);
      EXPECT_LT(fit->rms_relative_error, 1e-12);
    }
  }
}

TEST(AlphaBetaFitTest, TwoPointsDetermineTheLine) {
  absl::StatusOr<AlphaBetaFit> fit = fitAlphaBeta({{1000, 2e-3}, {3000, 4e-3}}, 1.0);
  ASSERT_TRUE(fit.ok()) << fit.status();
  EXPECT_NEAR(fit->latency_s, 1e-3, 1e-15);
  EXPECT_NEAR(fit->bus_bandwidth_bytes_per_s, 1e6, 1e-6);
  EXPECT_NEAR(fit->predict(5000, 1.0), 6e-3, 1e-15);
}

TEST(AlphaBetaFitTest, RelativeWeightsKeepTheLatencyOfSmallMessages) {
  // 10% noise on the largest point would swamp an unweighted fit's
  // intercept; relative weights keep alpha close.
  std::vector<TimedPoint> points = onModel(50e-6, 1e9, 1.0);
  points.back().time_s *= 1.10;
  absl::StatusOr<AlphaBetaFit> fit = fitAlphaBeta(points, 1.0);
  ASSERT_TRUE(fit.ok()) << fit.status();
  EXPECT_NEAR(fit->latency_s, 50e-6, 5e-6);
}

TEST(AlphaBetaFitTest, NegativeInterceptIsClampedToZero) {
  // Times exactly proportional, slightly below the origin line at the
  // small end: the fit goes through the origin.
  absl::StatusOr<AlphaBetaFit> fit =
      fitAlphaBeta({{1000, 0.5e-6}, {10000, 10e-6}, {100000, 100e-6}}, 1.0);
  ASSERT_TRUE(fit.ok()) << fit.status();
  EXPECT_EQ(fit->latency_s, 0);
  EXPECT_GT(fit->bus_bandwidth_bytes_per_s, 0);
}

TEST(AlphaBetaFitTest, BusFactors) {
  EXPECT_DOUBLE_EQ(busFactor(CollectiveKind::kAllReduce, 4), 1.5);
  EXPECT_DOUBLE_EQ(busFactor(CollectiveKind::kAllGather, 4), 0.75);
  EXPECT_DOUBLE_EQ(busFactor(CollectiveKind::kReduceScatter, 2), 0.5);
  EXPECT_DOUBLE_EQ(busFactor(CollectiveKind::kBroadcast, 8), 1.0);
  EXPECT_DOUBLE_EQ(busFactor(CollectiveKind::kAllReduce, 1), 0.0);
}

TEST(AlphaBetaFitTest, KindNamesRoundTrip) {
  for (CollectiveKind kind : kAllCollectiveKinds) {
    absl::StatusOr<CollectiveKind> back = collectiveKindFromName(collectiveKindName(kind));
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(*back, kind);
  }
  EXPECT_THAT(collectiveKindFromName("all_to_all").status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("'all_to_all'")));
}

TEST(AlphaBetaFitTest, Refusals) {
  EXPECT_THAT(fitAlphaBeta({{1000, 1e-3}, {1000, 2e-3}}, 1.0).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("2 distinct message sizes")));
  EXPECT_THAT(fitAlphaBeta({{1000, 1e-3}, {2000, 2e-3}}, 0.0).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("bus factor")));
  EXPECT_THAT(fitAlphaBeta({{1000, 0.0}, {2000, 2e-3}}, 1.0).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("(1000 bytes, 0 s)")));
  EXPECT_THAT(fitAlphaBeta({{1000, 3e-3}, {2000, 2e-3}, {4000, 1e-3}}, 1.0).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("does not grow with message size")));
}

}  // namespace
}  // namespace loom::calibrate
