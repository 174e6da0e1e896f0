// Tests of nn.rope's frequencies: unscaled, linear, and llama3 against a
// line-by-line transcription of Hugging Face's `_compute_llama3_parameters`.
#include "plan/rope_frequency.h"

#include <cmath>
#include <cstdint>
#include <numbers>
#include <vector>

#include "gtest/gtest.h"

namespace loom::plan {
namespace {

// transformers/modeling_rope_utils.py (v4.43+), `_compute_default_rope_parameters`
// then `_compute_llama3_parameters`, one torch.where at a time.
std::vector<double> hfLlama3InverseFrequencies(double base, int64_t dim, double factor,
                                               double low_freq_factor, double high_freq_factor,
                                               double old_context_len) {
  std::vector<double> result;
  const double low_freq_wavelen = old_context_len / low_freq_factor;
  const double high_freq_wavelen = old_context_len / high_freq_factor;
  for (int64_t j = 0; j < dim; j += 2) {
    const double inv_freq = 1.0 / std::pow(base, static_cast<double>(j) / static_cast<double>(dim));
    const double wavelen = 2 * std::numbers::pi / inv_freq;
    const double inv_freq_llama = wavelen > low_freq_wavelen ? inv_freq / factor : inv_freq;
    const double smooth_factor =
        (old_context_len / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor);
    const double smoothed_inv_freq =
        (1 - smooth_factor) * inv_freq_llama / factor + smooth_factor * inv_freq_llama;
    const bool is_medium_freq = !(wavelen < high_freq_wavelen) && !(wavelen > low_freq_wavelen);
    result.push_back(is_medium_freq ? smoothed_inv_freq : inv_freq_llama);
  }
  return result;
}

TEST(RopeFrequencyTest, UnscaledIsThetaToTheMinusTwoIOverD) {
  EXPECT_DOUBLE_EQ(ropeInverseFrequency(0, 8, 10000.0, {}), 1.0);
  EXPECT_DOUBLE_EQ(ropeInverseFrequency(1, 8, 10000.0, {}), 0.1);
  EXPECT_DOUBLE_EQ(ropeInverseFrequency(3, 8, 10000.0, {}), 0.001);
}

TEST(RopeFrequencyTest, LinearDividesEveryFrequency) {
  const RopeScaling linear = {.factor = 4.0};
  for (int64_t i = 0; i < 4; ++i) {
    EXPECT_DOUBLE_EQ(ropeInverseFrequency(i, 8, 10000.0, linear),
                     ropeInverseFrequency(i, 8, 10000.0, {}) / 4.0);
  }
}

TEST(RopeFrequencyTest, Llama3MatchesHuggingFace) {
  struct Case {
    int64_t dim;
    double theta, factor, low, high;
    int64_t original;
  };
  // Llama 3.1's head dim and settings, then smaller heads and other bands.
  for (const Case& c :
       {Case{128, 500000.0, 8.0, 1.0, 4.0, 8192}, Case{64, 500000.0, 8.0, 1.0, 4.0, 8192},
        Case{16, 10000.0, 4.0, 2.0, 8.0, 64}, Case{32, 10000.0, 32.0, 1.0, 4.0, 512}}) {
    const RopeScaling scaling = {.factor = c.factor,
                                 .low_freq_factor = c.low,
                                 .high_freq_factor = c.high,
                                 .original_max_positions = c.original};
    const std::vector<double> want = hfLlama3InverseFrequencies(
        c.theta, c.dim, c.factor, c.low, c.high, static_cast<double>(c.original));
    int kept = 0, divided = 0, smoothed = 0;
    for (int64_t i = 0; i < c.dim / 2; ++i) {
      const double got = ropeInverseFrequency(i, c.dim, c.theta, scaling);
      EXPECT_NEAR(got, want[i], 1e-15 + 1e-12 * want[i]) << "dim " << c.dim << " pair " << i;
      const double base = ropeInverseFrequency(i, c.dim, c.theta, {});
      kept += got == base;
      divided += got == base / c.factor;
      smoothed += got != base && got != base / c.factor;
    }
    // Every case exercises all three bands.
    EXPECT_GT(kept, 0) << c.dim;
    EXPECT_GT(divided, 0) << c.dim;
    EXPECT_GT(smoothed, 0) << c.dim;
  }
}

}  // namespace
}  // namespace loom::plan
