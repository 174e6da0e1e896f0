// Tests of the fp32 CPU kernels: every forward kernel against the float64
// reference kernels of the nn dialect, every backward kernel against the
// reference backward and against central finite differences of the fp32
// forward kernel, plus the attention causal mask and the vocab-parallel
// embedding shards.
#include "runtime/kernels/cpu/cpu_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "planner/dialect/nn/eval/reference_kernels.h"
#include "runtime/kernels/ignore_label.h"

namespace loom::runtime::cpu {
namespace {

namespace ref = ::loom::planner::nn::eval;

std::vector<float> randomVector(int64_t count, uint32_t seed, float scale = 1.0f) {
  std::mt19937 engine(seed);
  std::uniform_real_distribution<float> uniform(-scale, scale);
  std::vector<float> values(count);
  for (float& value : values) value = uniform(engine);
  return values;
}

ref::Tensor toTensor(const std::vector<float>& values, std::vector<int64_t> shape) {
  return ref::Tensor(std::move(shape), std::vector<double>(values.begin(), values.end()));
}

template <typename Int>
ref::Tensor idsTensor(const std::vector<Int>& ids, std::vector<int64_t> shape) {
  return ref::Tensor(std::move(shape), std::vector<double>(ids.begin(), ids.end()));
}

// fp32 result vs float64 reference: every element within `rtol` of the
// reference's largest magnitude (fp32 sums of tens of terms round at ~1e-7
// of that scale).
void expectAllClose(const std::vector<float>& actual, const ref::Tensor& want, double rtol = 1e-5) {
  ASSERT_EQ(static_cast<int64_t>(actual.size()), want.numElements());
  double scale = 0.0;
  for (double value : want.values) scale = std::max(scale, std::abs(value));
  ASSERT_GT(scale, 0.0);
  for (size_t i = 0; i < actual.size(); ++i) {
    EXPECT_NEAR(actual[i], want.values[i], rtol * scale) << "element " << i;
  }
}

// sum(c * y) in double: the scalar whose gradient with respect to the
// forward's inputs the backward kernels compute when given dy = c.
double weightedSum(const std::vector<float>& c, const std::vector<float>& y) {
  double sum = 0.0;
  for (size_t i = 0; i < y.size(); ++i) sum += double{c[i]} * y[i];
  return sum;
}

// Central finite differences of `loss` at ~16 sampled elements of `x`
// (perturbed in place and restored) against the analytic gradient. fp32
// forward kernels limit the step to 1e-2; the check allows 1e-3 of the
// gradient's largest magnitude.
void expectMatchesFiniteDifferences(std::vector<float>& x, const std::vector<float>& grad,
                                    const std::function<double()>& loss) {
  ASSERT_EQ(x.size(), grad.size());
  constexpr float kStep = 1e-2f;
  double scale = 0.0;
  for (float g : grad) scale = std::max(scale, double{std::abs(g)});
  ASSERT_GT(scale, 0.0);
  const size_t stride = std::max<size_t>(1, x.size() / 16);
  for (size_t i = 0; i < x.size(); i += stride) {
    const float saved = x[i];
    x[i] = saved + kStep;
    const double plus = loss();
    x[i] = saved - kStep;
    const double minus = loss();
    x[i] = saved;
    EXPECT_NEAR((plus - minus) / (2.0 * kStep), grad[i], 1e-3 * scale) << "element " << i;
  }
}

TEST(LinearTest, MatchesReferenceWithAndWithoutBias) {
  const int64_t rows = 6, in = 8, out = 5;
  const auto x = randomVector(rows * in, 1);
  const auto w = randomVector(in * out, 2);
  const auto bias = randomVector(out, 3);
  std::vector<float> y(rows * out, 123.0f);
  linear(x.data(), w.data(), nullptr, y.data(), rows, in, out);
  expectAllClose(y, ref::linear(toTensor(x, {2, 3, in}), toTensor(w, {in, out}), nullptr));
  linear(x.data(), w.data(), bias.data(), y.data(), rows, in, out);
  const ref::Tensor bias_tensor = toTensor(bias, {out});
  expectAllClose(y, ref::linear(toTensor(x, {2, 3, in}), toTensor(w, {in, out}), &bias_tensor));
}

TEST(MatmulTest, ThreeLayoutsMatchReference) {
  const int64_t rows = 6, k = 7, n = 5;
  const auto lhs = randomVector(rows * k, 4);
  const auto rhs = randomVector(k * n, 5);
  std::vector<float> out(rows * n);
  matmul(lhs.data(), rhs.data(), out.data(), rows, k, n);
  expectAllClose(out, ref::matmul(toTensor(lhs, {2, 3, k}), toTensor(rhs, {k, n}), false, false));
  matmulTransposeRhs(lhs.data(), rhs.data(), out.data(), rows, k, n);
  expectAllClose(out, ref::matmul(toTensor(lhs, {2, 3, k}), toTensor(rhs, {n, k}), false, true));
  const auto right = randomVector(rows * n, 6);
  std::vector<float> product(k * n);
  matmulTransposeLhs(lhs.data(), right.data(), product.data(), rows, k, n);
  expectAllClose(product,
                 ref::matmul(toTensor(lhs, {2, 3, k}), toTensor(right, {2, 3, n}), true, false));
}

// linear's VJP in the nn dialect: dx = matmul(dy, w) transpose_rhs,
// dw = matmul(x, dy) transpose_lhs, db = reduce_sum(dy, token dims).
TEST(LinearTest, VjpKernelsMatchFiniteDifferences) {
  const int64_t rows = 6, in = 8, out = 5;
  auto x = randomVector(rows * in, 7);
  auto w = randomVector(in * out, 8);
  auto bias = randomVector(out, 9);
  const auto dy = randomVector(rows * out, 10);
  std::vector<float> dx(rows * in), dw(in * out), db(out);
  matmulTransposeRhs(dy.data(), w.data(), dx.data(), rows, out, in);
  matmulTransposeLhs(x.data(), dy.data(), dw.data(), rows, in, out);
  const int64_t shape[] = {2, 3, out};
  const int64_t dims[] = {0, 1};
  reduceSum(dy.data(), shape, dims, db.data());
  std::vector<float> y(rows * out);
  const auto loss = [&] {
    linear(x.data(), w.data(), bias.data(), y.data(), rows, in, out);
    return weightedSum(dy, y);
  };
  expectMatchesFiniteDifferences(x, dx, loss);
  expectMatchesFiniteDifferences(w, dw, loss);
  expectMatchesFiniteDifferences(bias, db, loss);
}

TEST(RmsNormTest, ForwardAndBackwardMatchReferenceAndFiniteDifferences) {
  const int64_t rows = 5, hidden = 16;
  const float eps = 1e-5f;
  auto x = randomVector(rows * hidden, 11);
  auto gamma = randomVector(hidden, 12);
  const auto dy = randomVector(rows * hidden, 13);
  std::vector<float> y(rows * hidden);
  rmsNorm(x.data(), gamma.data(), y.data(), rows, hidden, eps);
  expectAllClose(y, ref::rmsNorm(toTensor(x, {rows, hidden}), toTensor(gamma, {hidden}), eps));
  std::vector<float> dx(rows * hidden), dgamma(hidden, 99.0f);
  rmsNormGrad(x.data(), gamma.data(), dy.data(), dx.data(), dgamma.data(), rows, hidden, eps);
  const ref::NormGrads want = ref::rmsNormGrad(
      toTensor(x, {rows, hidden}), toTensor(gamma, {hidden}), toTensor(dy, {rows, hidden}), eps);
  expectAllClose(dx, want.input);
  expectAllClose(dgamma, want.gamma);
  const auto loss = [&] {
    rmsNorm(x.data(), gamma.data(), y.data(), rows, hidden, eps);
    return weightedSum(dy, y);
  };
  expectMatchesFiniteDifferences(x, dx, loss);
  expectMatchesFiniteDifferences(gamma, dgamma, loss);
}

TEST(LayerNormTest, ForwardAndBackwardMatchReferenceAndFiniteDifferences) {
  const int64_t rows = 5, hidden = 16;
  const float eps = 1e-5f;
  auto x = randomVector(rows * hidden, 14, 2.0f);
  auto gamma = randomVector(hidden, 15);
  auto beta = randomVector(hidden, 16);
  const auto dy = randomVector(rows * hidden, 17);
  std::vector<float> y(rows * hidden);
  layerNorm(x.data(), gamma.data(), beta.data(), y.data(), rows, hidden, eps);
  expectAllClose(y, ref::layerNorm(toTensor(x, {rows, hidden}), toTensor(gamma, {hidden}),
                                   toTensor(beta, {hidden}), eps));
  std::vector<float> dx(rows * hidden), dgamma(hidden, 99.0f), dbeta(hidden, 99.0f);
  layerNormGrad(x.data(), gamma.data(), dy.data(), dx.data(), dgamma.data(), dbeta.data(), rows,
                hidden, eps);
  const ref::NormGrads want = ref::layerNormGrad(
      toTensor(x, {rows, hidden}), toTensor(gamma, {hidden}), toTensor(dy, {rows, hidden}), eps);
  expectAllClose(dx, want.input);
  expectAllClose(dgamma, want.gamma);
  expectAllClose(dbeta, want.beta);
  const auto loss = [&] {
    layerNorm(x.data(), gamma.data(), beta.data(), y.data(), rows, hidden, eps);
    return weightedSum(dy, y);
  };
  expectMatchesFiniteDifferences(x, dx, loss);
  expectMatchesFiniteDifferences(gamma, dgamma, loss);
  expectMatchesFiniteDifferences(beta, dbeta, loss);
}

TEST(RopeTest, BothDirectionsMatchReferenceAndInvertEachOther) {
  const int64_t b = 2, s = 6, h = 3, d = 8;
  const float theta = 10000.0f;
  const auto x = randomVector(b * s * h * d, 18);
  std::vector<float> y(x.size()), back(x.size());
  for (bool inverse : {false, true}) {
    rope(x.data(), y.data(), b, s, h, d, theta, inverse);
    expectAllClose(y, ref::rope(toTensor(x, {b, s, h, d}), theta, inverse));
  }
  rope(x.data(), y.data(), b, s, h, d, theta, false);
  back = y;
  rope(back.data(), back.data(), b, s, h, d, theta, true);  // in place
  for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(back[i], x[i], 1e-6);
}

// The frequency scaling of long-context checkpoints: linear, and Llama
// 3.1's bands with a short original context so that positions 0..63 cross
// all three bands of head_dim 32.
TEST(RopeTest, ScaledFrequenciesMatchReference) {
  const int64_t b = 1, s = 64, h = 2, d = 32;
  const float theta = 10000.0f;
  const auto x = randomVector(b * s * h * d, 21);
  std::vector<float> y(x.size());
  for (const plan::RopeScaling& scaling :
       {plan::RopeScaling{.factor = 4.0}, plan::RopeScaling{.factor = 8.0,
                                                            .low_freq_factor = 1.0,
                                                            .high_freq_factor = 4.0,
                                                            .original_max_positions = 256}}) {
    for (bool inverse : {false, true}) {
      rope(x.data(), y.data(), b, s, h, d, theta, inverse, scaling);
      expectAllClose(y, ref::rope(toTensor(x, {b, s, h, d}), theta, inverse, scaling));
    }
  }
}

// rope's VJP is rope with `inverse` flipped (the rotation is orthogonal).
TEST(RopeTest, InverseIsTheVjpByFiniteDifferences) {
  const int64_t b = 1, s = 5, h = 2, d = 6;
  const float theta = 500.0f;
  auto x = randomVector(b * s * h * d, 19);
  const auto dy = randomVector(x.size(), 20);
  std::vector<float> dx(x.size()), y(x.size());
  rope(dy.data(), dx.data(), b, s, h, d, theta, true);
  expectMatchesFiniteDifferences(x, dx, [&] {
    rope(x.data(), y.data(), b, s, h, d, theta, false);
    return weightedSum(dy, y);
  });
}

class AttentionTest : public ::testing::TestWithParam<int64_t> {};

TEST_P(AttentionTest, ForwardAndBackwardMatchReference) {
  const AttentionShape shape{2, 5, 4, GetParam(), 8};
  const int64_t q_count = shape.batch * shape.seq * shape.heads * shape.head_dim;
  const int64_t kv_count = shape.batch * shape.seq * shape.kv_heads * shape.head_dim;
  const auto q = randomVector(q_count, 21);
  const auto k = randomVector(kv_count, 22);
  const auto v = randomVector(kv_count, 23);
  const auto dout = randomVector(q_count, 24);
  const std::vector<int64_t> q_shape = {shape.batch, shape.seq, shape.heads, shape.head_dim};
  const std::vector<int64_t> kv_shape = {shape.batch, shape.seq, shape.kv_heads, shape.head_dim};
  std::vector<float> out(q_count);
  attention(q.data(), k.data(), v.data(), out.data(), shape);
  expectAllClose(
      out, ref::attention(toTensor(q, q_shape), toTensor(k, kv_shape), toTensor(v, kv_shape)));
  std::vector<float> dq(q_count, 9.0f), dk(kv_count, 9.0f), dv(kv_count, 9.0f);
  attentionGrad(q.data(), k.data(), v.data(), dout.data(), dq.data(), dk.data(), dv.data(), shape);
  const ref::AttentionGrads want = ref::attentionGrad(
      toTensor(q, q_shape), toTensor(k, kv_shape), toTensor(v, kv_shape), toTensor(dout, q_shape));
  expectAllClose(dq, want.query);
  expectAllClose(dk, want.key);
  expectAllClose(dv, want.value);
}

TEST_P(AttentionTest, BackwardMatchesFiniteDifferences) {
  const AttentionShape shape{1, 4, 4, GetParam(), 4};
  const int64_t q_count = shape.seq * shape.heads * shape.head_dim;
  const int64_t kv_count = shape.seq * shape.kv_heads * shape.head_dim;
  auto q = randomVector(q_count, 25);
  auto k = randomVector(kv_count, 26);
  auto v = randomVector(kv_count, 27);
  const auto dout = randomVector(q_count, 28);
  std::vector<float> dq(q_count), dk(kv_count), dv(kv_count), out(q_count);
  attentionGrad(q.data(), k.data(), v.data(), dout.data(), dq.data(), dk.data(), dv.data(), shape);
  const auto loss = [&] {
    attention(q.data(), k.data(), v.data(), out.data(), shape);
    return weightedSum(dout, out);
  };
  expectMatchesFiniteDifferences(q, dq, loss);
  expectMatchesFiniteDifferences(k, dk, loss);
  expectMatchesFiniteDifferences(v, dv, loss);
}

// Changing the key, value and query of position t leaves every output before
// t bit-identical and changes the output at t.
TEST_P(AttentionTest, FutureTokensDoNotInfluenceOutputs) {
  const AttentionShape shape{1, 6, 4, GetParam(), 4};
  const int64_t q_row = shape.heads * shape.head_dim;
  const int64_t kv_row = shape.kv_heads * shape.head_dim;
  auto q = randomVector(shape.seq * q_row, 29);
  auto k = randomVector(shape.seq * kv_row, 30);
  auto v = randomVector(shape.seq * kv_row, 31);
  std::vector<float> before(q.size()), after(q.size());
  attention(q.data(), k.data(), v.data(), before.data(), shape);
  const int64_t t = 3;
  for (int64_t i = 0; i < kv_row; ++i) {
    k[t * kv_row + i] += 1.0f;
    v[t * kv_row + i] -= 2.0f;
  }
  for (int64_t i = 0; i < q_row; ++i) q[t * q_row + i] += 0.5f;
  attention(q.data(), k.data(), v.data(), after.data(), shape);
  for (int64_t i = 0; i < t * q_row; ++i) EXPECT_EQ(after[i], before[i]) << i;
  for (int64_t i = t * q_row; i < (t + 1) * q_row; ++i) {
    EXPECT_NE(after[i], before[i]) << i;
  }
}

INSTANTIATE_TEST_SUITE_P(MhaAndGqa, AttentionTest, ::testing::Values(4, 2),
                         [](const auto& info) { return info.param == 4 ? "Mha" : "Gqa4q2kv"; });

TEST(SoftmaxTest, ForwardAndBackwardMatchReferenceAndFiniteDifferences) {
  const int64_t rows = 4, n = 9;
  auto x = randomVector(rows * n, 32, 3.0f);
  const auto dy = randomVector(rows * n, 33);
  std::vector<float> y(rows * n), dx(rows * n);
  softmax(x.data(), y.data(), rows, n);
  expectAllClose(y, ref::softmax(toTensor(x, {rows, n})));
  softmaxGrad(y.data(), dy.data(), dx.data(), rows, n);
  expectAllClose(dx, ref::softmaxGrad(toTensor(y, {rows, n}), toTensor(dy, {rows, n})));
  std::vector<float> probe(rows * n);
  expectMatchesFiniteDifferences(x, dx, [&] {
    softmax(x.data(), probe.data(), rows, n);
    return weightedSum(dy, probe);
  });
}

TEST(ActivationTest, SiluAndGeluMatchReferenceAndFiniteDifferences) {
  const int64_t count = 40;
  using Forward = void (*)(const float*, float*, int64_t);
  using Backward = void (*)(const float*, const float*, float*, int64_t);
  struct Case {
    const char* name;
    Forward forward;
    Backward backward;
    ref::Tensor (*ref_forward)(const ref::Tensor&);
    ref::Tensor (*ref_backward)(const ref::Tensor&, const ref::Tensor&);
  };
  for (const Case& c : {Case{"silu", silu, siluGrad, ref::silu, ref::siluGrad},
                        Case{"gelu", gelu, geluGrad, ref::gelu, ref::geluGrad}}) {
    SCOPED_TRACE(c.name);
    auto x = randomVector(count, 34, 4.0f);
    const auto dy = randomVector(count, 35);
    std::vector<float> y(count), dx(count);
    c.forward(x.data(), y.data(), count);
    expectAllClose(y, c.ref_forward(toTensor(x, {count})));
    c.backward(x.data(), dy.data(), dx.data(), count);
    expectAllClose(dx, c.ref_backward(toTensor(x, {count}), toTensor(dy, {count})));
    expectMatchesFiniteDifferences(x, dx, [&] {
      c.forward(x.data(), y.data(), count);
      return weightedSum(dy, y);
    });
  }
}

// silu runs in blocks of 256 with exp's argument clamped below -87 and
// overflowing to infinity above 88: a count that spans blocks and ends in a
// partial one, and inputs far past both, where silu is x or 0 and its
// gradient dy or 0.
TEST(ActivationTest, SiluAcrossBlocksAndPastTheExpRange) {
  const int64_t count = 600;
  std::vector<float> x(count);
  for (int64_t i = 0; i < count; ++i) x[i] = -120.0f + 240.0f * static_cast<float>(i) / (count - 1);
  const auto dy = randomVector(count, 39);
  std::vector<float> y(count), dx(count);
  silu(x.data(), y.data(), count);
  expectAllClose(y, ref::silu(toTensor(x, {count})));
  siluGrad(x.data(), dy.data(), dx.data(), count);
  expectAllClose(dx, ref::siluGrad(toTensor(x, {count}), toTensor(dy, {count})));
  for (float big : {100.0f, 1e4f, 3e38f}) {
    float in[2] = {big, -big}, out[2], grad[2];
    const float d[2] = {0.5f, 0.5f};
    silu(in, out, 2);
    siluGrad(in, d, grad, 2);
    EXPECT_EQ(out[0], big) << big;
    EXPECT_EQ(out[1], 0.0f) << big;
    EXPECT_EQ(grad[0], 0.5f) << big;
    EXPECT_EQ(grad[1], 0.0f) << big;
  }
}

TEST(ElementwiseTest, AddAndMulMatchReference) {
  const int64_t count = 33;
  const auto a = randomVector(count, 36);
  const auto b = randomVector(count, 37);
  std::vector<float> out(count);
  add(a.data(), b.data(), out.data(), count);
  expectAllClose(out, ref::add(toTensor(a, {count}), toTensor(b, {count})));
  mul(a.data(), b.data(), out.data(), count);
  expectAllClose(out, ref::mul(toTensor(a, {count}), toTensor(b, {count})));
}

TEST(ReduceSumTest, EveryDimSubsetMatchesReference) {
  const std::vector<int64_t> shape = {2, 3, 4, 5};
  const auto x = randomVector(2 * 3 * 4 * 5, 38);
  for (int mask = 1; mask < 16; ++mask) {
    std::vector<int64_t> dims;
    int64_t out_count = 1;
    for (int64_t d = 0; d < 4; ++d) {
      if (mask & (1 << d)) {
        dims.push_back(d);
      } else {
        out_count *= shape[d];
      }
    }
    SCOPED_TRACE(mask);
    std::vector<float> out(out_count, 7.0f);
    reduceSum(x.data(), shape, dims, out.data());
    expectAllClose(out, ref::reduceSum(toTensor(x, shape), dims));
  }
}

template <typename Id>
class EmbeddingTest : public ::testing::Test {};
using IdTypes = ::testing::Types<int32_t, int64_t>;
TYPED_TEST_SUITE(EmbeddingTest, IdTypes);

TYPED_TEST(EmbeddingTest, ForwardAndBackwardMatchReference) {
  const int64_t vocab = 7, hidden = 5;
  const std::vector<TypeParam> ids = {3, 0, 6, 3, 1, 3};
  const int64_t tokens = static_cast<int64_t>(ids.size());
  auto table = randomVector(vocab * hidden, 39);
  const auto dy = randomVector(tokens * hidden, 40);
  std::vector<float> out(tokens * hidden), dtable(vocab * hidden, 5.0f);
  embedding(ids.data(), table.data(), out.data(), tokens, hidden, 0, vocab);
  expectAllClose(out, ref::embedding(idsTensor(ids, {2, 3}), toTensor(table, {vocab, hidden})));
  embeddingGrad(ids.data(), dy.data(), dtable.data(), tokens, hidden, 0, vocab);
  expectAllClose(dtable,
                 ref::embeddingGrad(idsTensor(ids, {2, 3}), toTensor(dy, {2, 3, hidden}), vocab));
  expectMatchesFiniteDifferences(table, dtable, [&] {
    embedding(ids.data(), table.data(), out.data(), tokens, hidden, 0, vocab);
    return weightedSum(dy, out);
  });
}

// Vocab-parallel: the row shards' outputs sum to the whole table's output,
// and their gradients are the matching row blocks of the whole gradient.
TYPED_TEST(EmbeddingTest, RowShardsComposeToTheWholeTable) {
  const int64_t vocab = 7, hidden = 3;
  const std::vector<TypeParam> ids = {6, 2, 4, 0, 4};
  const int64_t tokens = static_cast<int64_t>(ids.size());
  const auto table = randomVector(vocab * hidden, 41);
  const auto dy = randomVector(tokens * hidden, 42);
  std::vector<float> whole(tokens * hidden), whole_grad(vocab * hidden);
  embedding(ids.data(), table.data(), whole.data(), tokens, hidden, 0, vocab);
  embeddingGrad(ids.data(), dy.data(), whole_grad.data(), tokens, hidden, 0, vocab);
  std::vector<float> summed(tokens * hidden, 0.0f), part(tokens * hidden);
  for (const auto& [begin, rows] : {std::pair<int64_t, int64_t>{0, 4}, {4, 3}}) {
    embedding(ids.data(), table.data() + begin * hidden, part.data(), tokens, hidden, begin, rows);
    add(summed.data(), part.data(), summed.data(), tokens * hidden);
    std::vector<float> grad(rows * hidden);
    embeddingGrad(ids.data(), dy.data(), grad.data(), tokens, hidden, begin, rows);
    for (int64_t i = 0; i < rows * hidden; ++i) {
      EXPECT_EQ(grad[i], whole_grad[begin * hidden + i]);
    }
  }
  EXPECT_EQ(summed, whole);
}

template <typename Label>
class CrossEntropyTest : public ::testing::Test {};
TYPED_TEST_SUITE(CrossEntropyTest, IdTypes);

TYPED_TEST(CrossEntropyTest, LossAndGradientMatchReferenceAndFiniteDiffs) {
  const int64_t vocab = 11;
  const std::vector<TypeParam> labels = {4, 0, 10, 7, 4, 2};
  const int64_t tokens = static_cast<int64_t>(labels.size());
  auto logits = randomVector(tokens * vocab, 43, 3.0f);
  const float loss = crossEntropy(logits.data(), labels.data(), tokens, vocab);
  const ref::Tensor logits_ref = toTensor(logits, {2, 3, vocab});
  const ref::Tensor labels_ref = idsTensor(labels, {2, 3});
  EXPECT_NEAR(loss, ref::crossEntropy(logits_ref, labels_ref).values[0], 1e-5 * std::abs(loss));
  const float dloss = 0.7f;
  const float scale = 1.0f / static_cast<float>(tokens);
  std::vector<float> dlogits(tokens * vocab);
  crossEntropyGrad(logits.data(), labels.data(), dloss, scale, dlogits.data(), tokens, vocab);
  expectAllClose(dlogits,
                 ref::crossEntropyGrad(logits_ref, labels_ref, ref::Tensor({}, {dloss}), scale));
  crossEntropyGrad(logits.data(), labels.data(), 1.0f, scale, dlogits.data(), tokens, vocab);
  expectMatchesFiniteDifferences(logits, dlogits, [&] {
    return double{crossEntropy(logits.data(), labels.data(), tokens, vocab)};
  });
}

// With the batch's 1/N as `scale`, each token shard's gradient is exactly
// its rows of the whole batch's gradient.
TYPED_TEST(CrossEntropyTest, TokenShardGradientsUseTheBatchScale) {
  const int64_t vocab = 5, tokens = 6;
  const std::vector<TypeParam> labels = {1, 4, 0, 3, 3, 2};
  const auto logits = randomVector(tokens * vocab, 44, 2.0f);
  const float scale = 1.0f / static_cast<float>(tokens);
  std::vector<float> whole(tokens * vocab), shard(2 * vocab);
  crossEntropyGrad(logits.data(), labels.data(), 1.0f, scale, whole.data(), tokens, vocab);
  for (int64_t begin = 0; begin < tokens; begin += 2) {
    crossEntropyGrad(logits.data() + begin * vocab, labels.data() + begin, 1.0f, scale,
                     shard.data(), 2, vocab);
    for (int64_t i = 0; i < 2 * vocab; ++i) {
      EXPECT_EQ(shard[i], whole[begin * vocab + i]);
    }
  }
}

// The vocab-parallel cross-entropy: 11 vocab rows over 4 shards (3, 3, 3, 2
// real rows, padding poisoned) combine, through max/sum as the all-reduces
// would, into the whole-vocab loss and gradient of the reference.
TEST(VocabParallelTest, ShardsCombineIntoTheWholeLossAndGradient) {
  const int64_t vocab = 11, tokens = 5, shards = 4, local = 3;
  const std::vector<int32_t> labels = {4, 0, 10, 7, 3};
  const auto logits = randomVector(tokens * vocab, 47, 3.0f);
  std::vector<float> max(tokens, -1e30f), stats(2 * tokens, 0.0f);
  auto shard = [&](int64_t i) {
    std::vector<float> part(tokens * local, 1e30f);  // padding must not be read
    const int64_t begin = i * local, valid = std::clamp<int64_t>(vocab - begin, 0, local);
    for (int64_t t = 0; t < tokens; ++t) {
      for (int64_t r = 0; r < valid; ++r) part[t * local + r] = logits[t * vocab + begin + r];
    }
    return std::tuple{part, begin, valid};
  };
  for (int64_t i = 0; i < shards; ++i) {
    auto [part, begin, valid] = shard(i);
    std::vector<float> m(tokens);
    vocabMax(part.data(), m.data(), tokens, local, valid);
    for (int64_t t = 0; t < tokens; ++t) max[t] = std::max(max[t], m[t]);
  }
  for (int64_t i = 0; i < shards; ++i) {
    auto [part, begin, valid] = shard(i);
    std::vector<float> s(2 * tokens);
    vocabStats(part.data(), labels.data(), max.data(), s.data(), tokens, local, valid, begin);
    for (int64_t k = 0; k < 2 * tokens; ++k) stats[k] += s[k];
  }
  const float loss = vocabCrossEntropy(stats.data(), tokens);
  const ref::Tensor logits_ref = toTensor(logits, {tokens, vocab});
  const ref::Tensor labels_ref = idsTensor(labels, {tokens});
  EXPECT_NEAR(loss, ref::crossEntropy(logits_ref, labels_ref).values[0], 1e-5 * std::abs(loss));
  const float scale = 1.0f / tokens;
  const ref::Tensor whole =
      ref::crossEntropyGrad(logits_ref, labels_ref, ref::Tensor({}, {0.5f}), scale);
  for (int64_t i = 0; i < shards; ++i) {
    auto [part, begin, valid] = shard(i);
    std::vector<float> grad(tokens * local);
    vocabCrossEntropyGrad(part.data(), labels.data(), max.data(), stats.data(), 0.5f, scale,
                          grad.data(), tokens, local, valid, begin);
    for (int64_t t = 0; t < tokens; ++t) {
      for (int64_t r = 0; r < local; ++r) {
        const double want = r < valid ? whole.values[t * vocab + begin + r] : 0.0;
        EXPECT_NEAR(grad[t * local + r], want, 1e-6)
            << "shard " << i << " token " << t << " row " << r;
      }
    }
  }
}

// An ignored token (kIgnoreLabel) adds 0 to the loss and gets a 0 gradient
// row, and still counts in the mean: the loss of 6 tokens with 2 ignored is
// 4/6 of the mean over the 4 kept ones, and their gradient rows are those of
// the kept tokens alone at the same scale.
TEST(CrossEntropyIgnoreTest, IgnoredTokensAddNothingButCountInTheMean) {
  const int64_t vocab = 7, tokens = 6;
  const std::vector<int32_t> labels = {3, kIgnoreLabel, 0, 6, kIgnoreLabel, 2};
  const std::vector<int64_t> kept = {0, 2, 3, 5};
  const auto logits = randomVector(tokens * vocab, 48, 3.0f);
  std::vector<float> keptLogits;
  std::vector<int32_t> keptLabels;
  for (int64_t t : kept) {
    keptLogits.insert(keptLogits.end(), logits.begin() + t * vocab,
                      logits.begin() + (t + 1) * vocab);
    keptLabels.push_back(labels[t]);
  }
  const int64_t n = static_cast<int64_t>(kept.size());
  const float keptMean = crossEntropy(keptLogits.data(), keptLabels.data(), n, vocab);
  EXPECT_NEAR(crossEntropy(logits.data(), labels.data(), tokens, vocab), keptMean * n / tokens,
              1e-6);
  const float scale = 1.0f / tokens;
  std::vector<float> grad(tokens * vocab, 9.0f), keptGrad(n * vocab);
  crossEntropyGrad(logits.data(), labels.data(), 0.5f, scale, grad.data(), tokens, vocab);
  crossEntropyGrad(keptLogits.data(), keptLabels.data(), 0.5f, scale, keptGrad.data(), n, vocab);
  for (int64_t t = 0, k = 0; t < tokens; ++t) {
    const bool ignored = labels[t] == kIgnoreLabel;
    for (int64_t j = 0; j < vocab; ++j) {
      EXPECT_EQ(grad[t * vocab + j], ignored ? 0.0f : keptGrad[k * vocab + j])
          << "token " << t << " row " << j;
    }
    if (!ignored) ++k;
  }

  // The vocab-parallel form over 2 shards (4 and 3 rows) agrees: the
  // ignored tokens' +inf marker survives the sum of the shards' stats.
  const int64_t local = 4;
  std::vector<float> max(tokens, -1e30f), stats(2 * tokens, 0.0f);
  std::vector<std::vector<float>> parts;
  for (int64_t begin : {0, 4}) {
    const int64_t valid = std::min<int64_t>(local, vocab - begin);
    std::vector<float> part(tokens * local, 0.0f), m(tokens);
    for (int64_t t = 0; t < tokens; ++t) {
      for (int64_t r = 0; r < valid; ++r) part[t * local + r] = logits[t * vocab + begin + r];
    }
    vocabMax(part.data(), m.data(), tokens, local, valid);
    for (int64_t t = 0; t < tokens; ++t) max[t] = std::max(max[t], m[t]);
    parts.push_back(part);
  }
  for (int64_t i = 0; i < 2; ++i) {
    const int64_t begin = i * local, valid = std::min<int64_t>(local, vocab - begin);
    std::vector<float> s(2 * tokens);
    vocabStats(parts[i].data(), labels.data(), max.data(), s.data(), tokens, local, valid, begin);
    for (int64_t k = 0; k < 2 * tokens; ++k) stats[k] += s[k];
  }
  EXPECT_NEAR(vocabCrossEntropy(stats.data(), tokens), keptMean * n / tokens, 1e-5);
  for (int64_t i = 0; i < 2; ++i) {
    const int64_t begin = i * local, valid = std::min<int64_t>(local, vocab - begin);
    std::vector<float> g(tokens * local, 9.0f);
    vocabCrossEntropyGrad(parts[i].data(), labels.data(), max.data(), stats.data(), 0.5f, scale,
                          g.data(), tokens, local, valid, begin);
    for (int64_t t = 0; t < tokens; ++t) {
      for (int64_t r = 0; r < valid; ++r) {
        EXPECT_NEAR(g[t * local + r], grad[t * vocab + begin + r], 1e-6)
            << "shard " << i << " token " << t << " row " << r;
      }
    }
  }
}

TEST(BiasAddTest, AddsTheBiasToEveryRow) {
  const auto x = randomVector(3 * 4, 5, 1.0f);
  const auto bias = randomVector(4, 6, 1.0f);
  std::vector<float> y(12);
  biasAdd(x.data(), bias.data(), y.data(), 3, 4);
  expectAllClose(y, ref::biasAdd(toTensor(x, {3, 4}), toTensor(bias, {4})));
}

}  // namespace
}  // namespace loom::runtime::cpu
