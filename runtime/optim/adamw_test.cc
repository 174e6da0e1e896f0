// Tests of AdamW against a direct float64 transcription of the algorithm,
// of the shard-wise update, and of the global-norm clipping split.
#include "runtime/optim/adamw.h"

#include <cmath>
#include <cstdint>
#include <vector>

#include "gtest/gtest.h"

namespace loom::runtime::optim {
namespace {

std::vector<float> pattern(int64_t count, double phase, double amplitude) {
  std::vector<float> values(count);
  for (int64_t i = 0; i < count; ++i) {
    values[i] = static_cast<float>(amplitude * std::sin(0.7 * i + phase));
  }
  return values;
}

TEST(AdamWTest, FiveStepsMatchAFloat64Reference) {
  const AdamWConfig config{0.05, 0.9, 0.95, 1e-8, 0.1};
  const int64_t count = 9;
  std::vector<float> params = pattern(count, 0.3, 1.0);
  std::vector<float> m(count, 0.0f), v(count, 0.0f);
  std::vector<double> ref_p(params.begin(), params.end());
  std::vector<double> ref_m(count, 0.0), ref_v(count, 0.0);
  for (int64_t step = 1; step <= 5; ++step) {
    const std::vector<float> grads = pattern(count, 1.1 * step, 0.5 * step);
    adamwStep(config, step, params.data(), grads.data(), m.data(), v.data(), count);
    for (int64_t i = 0; i < count; ++i) {
      const double g = grads[i];
      ref_p[i] -= config.lr * config.weight_decay * ref_p[i];
      ref_m[i] = config.beta1 * ref_m[i] + (1 - config.beta1) * g;
      ref_v[i] = config.beta2 * ref_v[i] + (1 - config.beta2) * g * g;
      const double m_hat = ref_m[i] / (1 - std::pow(config.beta1, step));
      const double v_hat = ref_v[i] / (1 - std::pow(config.beta2, step));
      // torch adds eps to sqrt(v) / sqrt(1 - b2^t), i.e. to sqrt(v_hat).
      ref_p[i] -= config.lr * m_hat / (std::sqrt(v_hat) + config.eps);
    }
  }
  for (int64_t i = 0; i < count; ++i) {
    EXPECT_NEAR(params[i], ref_p[i], 1e-6 * std::abs(ref_p[i])) << i;
    EXPECT_NEAR(m[i], ref_m[i], 1e-6 * std::abs(ref_m[i])) << i;
    EXPECT_NEAR(v[i], ref_v[i], 1e-6 * std::abs(ref_v[i])) << i;
  }
}

// The vectorised update against the plain fp32 loop it replaced, written
// out here (this file is compiled without omp simd): the same operations per
// element, so the same bits, whatever the vector width and the tail.
TEST(AdamWTest, VectorisedUpdateIsBitIdenticalToTheScalarLoop) {
  const AdamWConfig config{0.05, 0.9, 0.95, 1e-8, 0.1};
  for (int64_t count : {1, 7, 8, 9, 31, 1000}) {
    std::vector<float> params = pattern(count, 0.3, 1.0);
    std::vector<float> m(count, 0.0f), v(count, 0.0f);
    std::vector<float> want_p = params, want_m = m, want_v = v;
    for (int64_t step = 1; step <= 3; ++step) {
      const std::vector<float> grads = pattern(count, 1.1 * step, 0.5 * step);
      adamwStep(config, step, params.data(), grads.data(), m.data(), v.data(), count);
      const auto t = static_cast<double>(step);
      const auto decay = static_cast<float>(1.0 - config.lr * config.weight_decay);
      const auto step_size = static_cast<float>(config.lr / (1.0 - std::pow(config.beta1, t)));
      const auto c2 = static_cast<float>(std::sqrt(1.0 - std::pow(config.beta2, t)));
      for (int64_t i = 0; i < count; ++i) {
        const float g = grads[i];
        want_p[i] *= decay;
        want_m[i] = want_m[i] * static_cast<float>(config.beta1) +
                    g * static_cast<float>(1.0 - config.beta1);
        want_v[i] = want_v[i] * static_cast<float>(config.beta2) +
                    g * g * static_cast<float>(1.0 - config.beta2);
        const float denom = std::sqrt(want_v[i]) / c2 + static_cast<float>(config.eps);
        want_p[i] -= step_size * (want_m[i] / denom);
      }
    }
    EXPECT_EQ(params, want_p) << count;
    EXPECT_EQ(m, want_m) << count;
    EXPECT_EQ(v, want_v) << count;
  }
}

TEST(AdamWTest, ShardUpdatesAreSlicesOfTheWholeUpdate) {
  const AdamWConfig config;
  const int64_t count = 10;
  std::vector<float> whole = pattern(count, 0.2, 1.0);
  std::vector<float> sharded = whole;
  std::vector<float> m(count, 0.0f), v(count, 0.0f);
  std::vector<float> shard_m(count, 0.0f), shard_v(count, 0.0f);
  for (int64_t step = 1; step <= 3; ++step) {
    const std::vector<float> grads = pattern(count, step, 1.0);
    adamwStep(config, step, whole.data(), grads.data(), m.data(), v.data(), count);
    // Uneven shards [0, 3) and [3, 10).
    adamwStep(config, step, sharded.data(), grads.data(), shard_m.data(), shard_v.data(), 3);
    adamwStep(config, step, sharded.data() + 3, grads.data() + 3, shard_m.data() + 3,
              shard_v.data() + 3, 7);
  }
  EXPECT_EQ(sharded, whole);
  EXPECT_EQ(shard_m, m);
  EXPECT_EQ(shard_v, v);
}

TEST(AdamWTest, ZeroWeightDecayLeavesOnlyTheAdamUpdate) {
  // First step with bias correction: m_hat = g, v_hat = g^2, so the update
  // is lr * g / (|g| + eps) = lr * sign(g) (to eps).
  const AdamWConfig config{0.01, 0.9, 0.999, 1e-8, 0.0};
  std::vector<float> params = {1.0f, -2.0f, 0.5f};
  const std::vector<float> grads = {0.3f, -4.0f, 1e-3f};
  std::vector<float> m(3, 0.0f), v(3, 0.0f);
  adamwStep(config, 1, params.data(), grads.data(), m.data(), v.data(), 3);
  EXPECT_NEAR(params[0], 0.99f, 1e-6);
  EXPECT_NEAR(params[1], -1.99f, 1e-6);
  EXPECT_NEAR(params[2], 0.49f, 1e-6);
}

TEST(ClipTest, LocalNormsOfShardsSumToTheWholeNorm) {
  const std::vector<float> grads = pattern(11, 0.4, 2.0);
  double whole = 0.0;
  for (float g : grads) whole += double{g} * g;
  const double shards = localSquaredNorm(grads.data(), 4) + localSquaredNorm(grads.data() + 4, 5) +
                        localSquaredNorm(grads.data() + 9, 2);
  EXPECT_NEAR(shards, whole, 1e-12 * whole);
  EXPECT_EQ(localSquaredNorm(grads.data(), 11), whole);
}

TEST(ClipTest, CoefficientFollowsClipGradNorm) {
  // Norm 5 above max 2: factor 2 / (5 + 1e-6).
  EXPECT_FLOAT_EQ(clipCoefficient(25.0, 2.0), 2.0 / (5.0 + 1e-6));
  // Below the max the gradients stay as they are; at it, torch's 1e-6 in the
  // denominator still scales them a hair.
  EXPECT_EQ(clipCoefficient(1.0, 2.0), 1.0f);
  EXPECT_FLOAT_EQ(clipCoefficient(4.0, 2.0), 2.0 / (2.0 + 1e-6));
  EXPECT_LT(clipCoefficient(4.0, 2.0), 1.0f);
  EXPECT_EQ(clipCoefficient(0.0, 1.0), 1.0f);
  std::vector<float> grads = {3.0f, -4.0f};
  scaleGradients(grads.data(), 2, clipCoefficient(localSquaredNorm(grads.data(), 2), 1.0));
  EXPECT_NEAR(grads[0], 0.6f, 1e-6);
  EXPECT_NEAR(grads[1], -0.8f, 1e-6);
}

}  // namespace
}  // namespace loom::runtime::optim
