// Checks the reference kernels against values worked out by hand (or with an
// independent script) from the formulas in nn_ops.td. The backward kernels
// are checked against finite differences in nn_vjp_test.cc.
#include "planner/dialect/nn/eval/reference_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace loom::planner::nn::eval {
namespace {

using ::testing::DoubleNear;
using ::testing::ElementsAre;
using ::testing::Pointwise;

constexpr double kTolerance = 1e-12;

MATCHER(Near, "") { return std::abs(std::get<0>(arg) - std::get<1>(arg)) <= kTolerance; }

TEST(ReferenceKernelsTest, EmbeddingCopiesRows) {
  const Tensor table({3, 2}, {0, 1, 10, 11, 20, 21});
  const Tensor result = embedding(Tensor({2}, {2, 0}), table);
  EXPECT_THAT(result.shape, ElementsAre(2, 2));
  EXPECT_THAT(result.values, ElementsAre(20, 21, 0, 1));
}

TEST(ReferenceKernelsTest, LinearAddsBiasToEachRow) {
  const Tensor input({2, 2}, {1, 2, 3, 4});
  const Tensor weight({2, 3}, {1, 0, 1, 0, 1, 1});
  const Tensor bias({3}, {10, 20, 30});
  const Tensor result = linear(input, weight, &bias);
  EXPECT_THAT(result.shape, ElementsAre(2, 3));
  EXPECT_THAT(result.values, ElementsAre(11, 22, 33, 13, 24, 37));
}

TEST(ReferenceKernelsTest, BiasAddAddsBiasToEachRow) {
  const Tensor result = biasAdd(Tensor({2, 3}, {1, 2, 3, 4, 5, 6}), Tensor({3}, {10, 20, 30}));
  EXPECT_THAT(result.shape, ElementsAre(2, 3));
  EXPECT_THAT(result.values, ElementsAre(11, 22, 33, 14, 25, 36));
}

TEST(ReferenceKernelsTest, MatmulLayouts) {
  const Tensor a({2, 2}, {1, 2, 3, 4});
  const Tensor b({2, 2}, {5, 6, 7, 8});
  // A B, A B^T and A^T B.
  EXPECT_THAT(matmul(a, b, false, false).values, ElementsAre(19, 22, 43, 50));
  EXPECT_THAT(matmul(a, b, false, true).values, ElementsAre(17, 23, 39, 53));
  EXPECT_THAT(matmul(a, b, true, false).values, ElementsAre(26, 30, 38, 44));
}

TEST(ReferenceKernelsTest, TransposeLhsContractsAllLeadingDims) {
  const Tensor a({2, 1, 2}, {1, 2, 3, 4});
  const Tensor b({2, 1, 1}, {1, 10});
  const Tensor result = matmul(a, b, true, false);
  EXPECT_THAT(result.shape, ElementsAre(2, 1));
  EXPECT_THAT(result.values, ElementsAre(31, 42));
}

TEST(ReferenceKernelsTest, RmsNorm) {
  const Tensor result = rmsNorm(Tensor({1, 4}, {1, 2, 3, 4}), Tensor({4}, {1, 1, 1, 2}), 1e-5);
  EXPECT_THAT(result.values,
              Pointwise(Near(), std::vector<double>{0.3651481282381064, 0.7302962564762128,
                                                    1.0954443847143192, 2 * 1.4605925129524255}));
}

TEST(ReferenceKernelsTest, LayerNormUsesBiasedVariance) {
  const Tensor result = layerNorm(Tensor({1, 4}, {1, 2, 3, 4}), Tensor({4}, {1, 1, 1, 1}),
                                  Tensor({4}, {0, 0, 0, 1}), 1e-5);
  EXPECT_THAT(result.values,
              Pointwise(Near(), std::vector<double>{-1.3416354199689269, -0.447211806656309,
                                                    0.447211806656309, 1 + 1.3416354199689269}));
}

TEST(ReferenceKernelsTest, RopeRotatesHalvesByPosition) {
  // Position 0 is not rotated; position 1 rotates pair i by 100^(-2i/4).
  const Tensor input({1, 2, 1, 4}, {1, 2, 3, 4, 1, 2, 3, 4});
  const Tensor result = rope(input, 100.0, false);
  EXPECT_THAT(
      result.values,
      Pointwise(Near(), std::vector<double>{1, 2, 3, 4, -1.9841106485555495, 1.590674663968739,
                                            2.4623779024123156, 4.17968349440576}));
  EXPECT_THAT(rope(result, 100.0, true).values, Pointwise(Near(), input.values));
}

// Linear scaling by 2 halves every frequency: with the same features at
// every position, position 2s scaled is position s unscaled.
TEST(ReferenceKernelsTest, LinearRopeScalingStretchesPositions) {
  const std::vector<double> row = {1, -2, 3, 0.5, -1, 2, 0.25, 4};
  std::vector<double> values;
  for (int s = 0; s < 5; ++s) values.insert(values.end(), row.begin(), row.end());
  const Tensor input({1, 5, 1, 8}, values);
  const Tensor scaled = rope(input, 100.0, false, {.factor = 2.0});
  const Tensor plain = rope(input, 100.0, false);
  for (int64_t s : {1, 2}) {
    for (int64_t d = 0; d < 8; ++d) {
      EXPECT_NEAR(scaled.values[2 * s * 8 + d], plain.values[s * 8 + d], 1e-12) << s << " " << d;
    }
  }
  EXPECT_GT(std::abs(scaled.values[8] - plain.values[8]), 1e-3);
}

TEST(ReferenceKernelsTest, AttentionIsCausalAndScaled) {
  const Tensor query({1, 2, 1, 2}, {1, 0, 0, 1});
  const Tensor key({1, 2, 1, 2}, {1, 0, 1, 1});
  const Tensor value({1, 2, 1, 2}, {1, 2, 3, 4});
  // Query 0 sees key 0 only; query 1 weighs both with softmax(q.k / sqrt(2)).
  EXPECT_THAT(attention(query, key, value).values,
              Pointwise(Near(), std::vector<double>{1, 2, 2.3395230986533138, 3.3395230986533138}));
}

TEST(ReferenceKernelsTest, GroupedQueryAttentionRepeatsKvHeads) {
  // Two query heads share one kv head: with equal queries they agree.
  const Tensor query({1, 2, 2, 2}, {1, 0, 1, 0, 0, 1, 0, 1});
  const Tensor key({1, 2, 1, 2}, {1, 0, 1, 1});
  const Tensor value({1, 2, 1, 2}, {1, 2, 3, 4});
  EXPECT_THAT(
      attention(query, key, value).values,
      Pointwise(Near(), std::vector<double>{1, 2, 1, 2, 2.3395230986533138, 3.3395230986533138,
                                            2.3395230986533138, 3.3395230986533138}));
}

TEST(ReferenceKernelsTest, Activations) {
  EXPECT_THAT(silu(Tensor({2}, {1, -2})).values,
              Pointwise(Near(), std::vector<double>{0.7310585786300049, -0.2384058440442351}));
  EXPECT_THAT(gelu(Tensor({2}, {1, -0.5})).values,
              Pointwise(Near(), std::vector<double>{0.8411919906082768, -0.15428599017485606}));
}

TEST(ReferenceKernelsTest, ElementwiseAddAndMul) {
  const Tensor a({2}, {1, 2});
  const Tensor b({2}, {3, 5});
  EXPECT_THAT(add(a, b).values, ElementsAre(4, 7));
  EXPECT_THAT(mul(a, b).values, ElementsAre(3, 10));
}

TEST(ReferenceKernelsTest, SoftmaxPerRow) {
  EXPECT_THAT(
      softmax(Tensor({2, 3}, {1, 2, 3, 0, 0, 0})).values,
      Pointwise(Near(), std::vector<double>{0.09003057317038046, 0.24472847105479767,
                                            0.6652409557748219, 1.0 / 3, 1.0 / 3, 1.0 / 3}));
}

TEST(ReferenceKernelsTest, TransposeAndReshape) {
  const Tensor input({2, 3}, {0, 1, 2, 3, 4, 5});
  const Tensor transposed = transpose(input, {1, 0});
  EXPECT_THAT(transposed.shape, ElementsAre(3, 2));
  EXPECT_THAT(transposed.values, ElementsAre(0, 3, 1, 4, 2, 5));
  const Tensor reshaped = reshape(input, {3, 2});
  EXPECT_THAT(reshaped.shape, ElementsAre(3, 2));
  EXPECT_THAT(reshaped.values, ElementsAre(0, 1, 2, 3, 4, 5));
}

TEST(ReferenceKernelsTest, CrossEntropyIsTheMeanOverTokens) {
  const Tensor logits({2, 3}, {1, 2, 3, 1, 1, 1});
  const Tensor loss = crossEntropy(logits, Tensor({2}, {2, 0}));
  EXPECT_TRUE(loss.shape.empty());
  EXPECT_THAT(loss.values, ElementsAre(DoubleNear(0.7531091265562448, kTolerance)));
}

TEST(ReferenceKernelsTest, EmbeddingGradScatterAddsRepeatedIds) {
  const Tensor result = embeddingGrad(Tensor({3}, {1, 1, 0}), Tensor({3, 1}, {1, 2, 4}), 3);
  EXPECT_THAT(result.shape, ElementsAre(3, 1));
  EXPECT_THAT(result.values, ElementsAre(4, 3, 0));
}

TEST(ReferenceKernelsTest, ReduceSumDropsTheSummedDims) {
  const Tensor input({2, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8});
  const Tensor inner = reduceSum(input, {0, 1});
  EXPECT_THAT(inner.shape, ElementsAre(2));
  EXPECT_THAT(inner.values, ElementsAre(16, 20));
  const Tensor middle = reduceSum(input, {1});
  EXPECT_THAT(middle.shape, ElementsAre(2, 2));
  EXPECT_THAT(middle.values, ElementsAre(4, 6, 12, 14));
}

TEST(ReferenceKernelsTest, CrossEntropyGradIsScaledSoftmaxMinusOneHot) {
  const Tensor grad =
      crossEntropyGrad(Tensor({1, 2}, {0, 0}), Tensor({1}, {1}), Tensor({}, {2}), 0.5);
  EXPECT_THAT(grad.values, Pointwise(Near(), std::vector<double>{0.5, -0.5}));
}

// Random logits [2, 3, vocab] and labels for the vocab-parallel tests.
struct LossInputs {
  Tensor logits;
  Tensor labels;
};

LossInputs randomLossInputs(int64_t vocab, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> value(-3.0, 3.0);
  std::uniform_int_distribution<int64_t> label(0, vocab - 1);
  LossInputs inputs{Tensor({2, 3, vocab}), Tensor({2, 3})};
  for (double& v : inputs.logits.values) v = value(rng);
  for (double& v : inputs.labels.values) v = static_cast<double>(label(rng));
  return inputs;
}

TEST(ReferenceKernelsTest, VocabParallelLossIsCrossEntropyUnsharded) {
  const LossInputs in = randomLossInputs(10, 1);
  const Tensor max = vocabMax(in.logits, 0, 10);
  EXPECT_THAT(max.shape, ElementsAre(2, 3));
  const Tensor stats = vocabStats(in.logits, in.labels, max, 0, 10);
  EXPECT_THAT(stats.shape, ElementsAre(2, 3, 2));
  const Tensor loss = vocabCrossEntropy(stats);
  EXPECT_TRUE(loss.shape.empty());
  EXPECT_NEAR(loss.values[0], crossEntropy(in.logits, in.labels).values[0], kTolerance);
  const Tensor dloss({}, {0.5});
  const Tensor grad =
      vocabCrossEntropyGrad(in.logits, in.labels, max, stats, dloss, 1.0 / 6, 0, 10);
  EXPECT_THAT(grad.values,
              Pointwise(Near(), crossEntropyGrad(in.logits, in.labels, dloss, 1.0 / 6).values));
}

// Rows [begin, begin + rows) of the [2, 3, vocab] logits, padded past vocab
// with a value the kernels must not read.
Tensor shardOf(const Tensor& logits, int64_t begin, int64_t rows) {
  const int64_t vocab = logits.lastDim();
  Tensor shard({2, 3, rows});
  for (int64_t t = 0; t < 6; ++t) {
    for (int64_t v = 0; v < rows; ++v) {
      shard.values[t * rows + v] = begin + v < vocab ? logits.values[t * vocab + begin + v] : 1e3;
    }
  }
  return shard;
}

// The local semantics the runtime implements: 10 vocab rows over 4 ranks
// are shards of 3 rows starting at row_begin = 3 i (3, 3, 3 and 1 real
// rows). The max of the shard maxima, the sum of the shard statistics and
// the shard gradients put side by side give the unsharded values; padding
// rows are not read and get a zero gradient.
TEST(ReferenceKernelsTest, VocabShardsCombineToTheWholeLoss) {
  const LossInputs in = randomLossInputs(10, 2);
  const Tensor max = vocabMax(in.logits, 0, 10);
  const Tensor stats = vocabStats(in.logits, in.labels, max, 0, 10);
  const Tensor dloss({}, {1.0});
  const Tensor grad =
      vocabCrossEntropyGrad(in.logits, in.labels, max, stats, dloss, 1.0 / 6, 0, 10);
  Tensor shardMax({2, 3});
  std::fill(shardMax.values.begin(), shardMax.values.end(),
            -std::numeric_limits<double>::infinity());
  Tensor shardStats({2, 3, 2});
  for (int64_t rank = 0; rank < 4; ++rank) {
    const Tensor local = shardOf(in.logits, 3 * rank, 3);
    const Tensor m = vocabMax(local, 3 * rank, 10);
    for (int64_t t = 0; t < 6; ++t) {
      shardMax.values[t] = std::max(shardMax.values[t], m.values[t]);
    }
    // Every rank uses the all-reduced max.
    const Tensor s = vocabStats(local, in.labels, max, 3 * rank, 10);
    for (int64_t i = 0; i < 12; ++i) shardStats.values[i] += s.values[i];
    const Tensor g =
        vocabCrossEntropyGrad(local, in.labels, max, stats, dloss, 1.0 / 6, 3 * rank, 10);
    for (int64_t t = 0; t < 6; ++t) {
      for (int64_t v = 0; v < 3; ++v) {
        const int64_t row = 3 * rank + v;
        const double expected = row < 10 ? grad.values[t * 10 + row] : 0.0;
        EXPECT_NEAR(g.values[t * 3 + v], expected, kTolerance)
            << "rank " << rank << " token " << t << " row " << v;
      }
    }
  }
  EXPECT_THAT(shardMax.values, Pointwise(Near(), max.values));
  EXPECT_THAT(shardStats.values, Pointwise(Near(), stats.values));
}

// 2 vocab rows over 4 ranks: ranks 2 and 3 hold padding only; their max is
// -inf (the identity of max) and their statistics are 0.
TEST(ReferenceKernelsTest, VocabShardWithoutRealRows) {
  const Tensor logits({1, 1}, {5.0});
  const Tensor labels({1}, {1});
  EXPECT_EQ(vocabMax(logits, 2, 2).values[0], -std::numeric_limits<double>::infinity());
  EXPECT_THAT(vocabStats(logits, labels, Tensor({1}, {0.0}), 2, 2).values, ElementsAre(0.0, 0.0));
  EXPECT_THAT(vocabCrossEntropyGrad(logits, labels, Tensor({1}, {0.0}), Tensor({1, 2}, {2.0, 0.0}),
                                    Tensor({}, {1.0}), 1.0, 2, 2)
                  .values,
              ElementsAre(0.0));
}

}  // namespace
}  // namespace loom::planner::nn::eval
