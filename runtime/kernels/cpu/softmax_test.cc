// Tests of softmax and cross-entropy on the vectorised exp (cpu_kernels.cc)
// against the libm kernels they replaced (softmax_reference.h): rows of
// every length around the vector width and the model zoo's vocabularies,
// logits narrow and wide enough to reach the clamp below -87, and the bits
// the executor relies on: a row's results do not depend on the rows beside
// it in the call.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/kernels/cpu/cpu_kernels.h"
#include "runtime/kernels/cpu/softmax_reference.h"

namespace loom::runtime::cpu {
namespace {

std::vector<float> randomVector(int64_t count, uint32_t seed, float scale) {
  std::mt19937 engine(seed);
  std::uniform_real_distribution<float> uniform(-scale, scale);
  std::vector<float> values(count);
  for (float& value : values) value = uniform(engine);
  return values;
}

std::vector<int32_t> randomLabels(int64_t tokens, int64_t vocab, uint32_t seed) {
  std::mt19937 engine(seed);
  std::uniform_int_distribution<int32_t> pick(0, static_cast<int32_t>(vocab - 1));
  std::vector<int32_t> labels(tokens);
  for (int32_t& label : labels) label = pick(engine);
  return labels;
}

// Each row of `actual` within `bound` of the largest magnitude of the same
// row of `want`: the exps differ by at most 2 ulp, so a row's probabilities
// differ by a few ulp of its largest one.
void expectRowsClose(const std::vector<float>& actual, const std::vector<float>& want, int64_t n,
                     double bound) {
  ASSERT_EQ(actual.size(), want.size());
  for (size_t row = 0; row * n < want.size(); ++row) {
    double scale = 0.0;
    for (int64_t j = 0; j < n; ++j) scale = std::max(scale, double{std::abs(want[row * n + j])});
    for (int64_t j = 0; j < n; ++j) {
      EXPECT_NEAR(actual[row * n + j], want[row * n + j], bound * scale)
          << "row " << row << ", element " << j;
    }
  }
}

struct Case {
  int64_t rows, n;
  float spread;  // logits uniform in [-spread, spread]
};

// Row lengths below, at and past the vector widths and the zoo's tiny and
// 64M vocabularies; a spread of 60 puts much of a row below the clamp.
const Case kCases[] = {{3, 1, 1.0f},   {5, 7, 3.0f},    {4, 16, 3.0f},    {3, 33, 10.0f},
                       {2, 255, 3.0f}, {4, 2048, 3.0f}, {2, 2048, 60.0f}, {2, 8192, 5.0f}};

TEST(SoftmaxTest, MatchesTheScalarKernel) {
  for (const Case& c : kCases) {
    SCOPED_TRACE(testing::Message() << c.rows << " x " << c.n << ", spread " << c.spread);
    const auto x = randomVector(c.rows * c.n, 7, c.spread);
    std::vector<float> y(x.size(), NAN), want(x.size());
    softmax(x.data(), y.data(), c.rows, c.n);
    softmaxReference(x.data(), want.data(), c.rows, c.n);
    expectRowsClose(y, want, c.n, 1e-6);
  }
}

TEST(CrossEntropyTest, LossAndGradientMatchTheScalarKernels) {
  for (const Case& c : kCases) {
    SCOPED_TRACE(testing::Message() << c.rows << " x " << c.n << ", spread " << c.spread);
    const auto logits = randomVector(c.rows * c.n, 11, c.spread);
    const auto labels = randomLabels(c.rows, c.n, 12);
    const float loss = crossEntropy(logits.data(), labels.data(), c.rows, c.n);
    const float want_loss = crossEntropyReference(logits.data(), labels.data(), c.rows, c.n);
    EXPECT_NEAR(loss, want_loss, 1e-6 * std::max(1.0f, std::abs(want_loss)));
    const float scale = 1.0f / static_cast<float>(c.rows);
    std::vector<float> grad(logits.size(), NAN), want(logits.size());
    crossEntropyGrad(logits.data(), labels.data(), 0.7f, scale, grad.data(), c.rows, c.n);
    crossEntropyGradReference(logits.data(), labels.data(), 0.7f, scale, want.data(), c.rows, c.n);
    expectRowsClose(grad, want, c.n, 1e-6);
  }
}

// A row computed alone gives the bits it gets in a call of many rows, as on
// a data-parallel rank that holds only some of the tokens.
TEST(CrossEntropyTest, EachRowsBitsAreItsOwn) {
  const int64_t tokens = 6, vocab = 2048;
  const auto logits = randomVector(tokens * vocab, 21, 4.0f);
  const auto labels = randomLabels(tokens, vocab, 22);
  std::vector<float> whole(tokens * vocab), alone(vocab), probs(tokens * vocab), prob(vocab);
  crossEntropyGrad(logits.data(), labels.data(), 1.0f, 0.25f, whole.data(), tokens, vocab);
  softmax(logits.data(), probs.data(), tokens, vocab);
  for (int64_t t = 0; t < tokens; ++t) {
    const float* row = logits.data() + t * vocab;
    crossEntropyGrad(row, labels.data() + t, 1.0f, 0.25f, alone.data(), 1, vocab);
    softmax(row, prob.data(), 1, vocab);
    EXPECT_TRUE(std::equal(alone.begin(), alone.end(), whole.begin() + t * vocab)) << "row " << t;
    EXPECT_TRUE(std::equal(prob.begin(), prob.end(), probs.begin() + t * vocab)) << "row " << t;
  }
}

}  // namespace
}  // namespace loom::runtime::cpu
