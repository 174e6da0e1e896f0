// Float64 reference kernels of the `nn` ops: straightforward loops that
// follow the documented formulas, written for clarity rather than speed.
#include "planner/dialect/nn/eval/reference_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <numbers>
#include <numeric>
#include <utility>
#include <vector>

namespace loom::planner::nn::eval {
namespace {

int64_t product(const std::vector<int64_t>& shape) {
  return std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<int64_t>());
}

std::vector<int64_t> withLastDim(std::vector<int64_t> shape, int64_t last) {
  shape.back() = last;
  return shape;
}

// Applies `fn` to every element.
Tensor map(const Tensor& input, const std::function<double(double)>& fn) {
  Tensor result(input.shape);
  for (int64_t i = 0; i < input.numElements(); ++i) {
    result.values[i] = fn(input.values[i]);
  }
  return result;
}

// Applies `fn` to every pair of elements at one position.
Tensor zipWith(const Tensor& lhs, const Tensor& rhs,
               const std::function<double(double, double)>& fn) {
  Tensor result(lhs.shape);
  for (int64_t i = 0; i < lhs.numElements(); ++i) {
    result.values[i] = fn(lhs.values[i], rhs.values[i]);
  }
  return result;
}

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

// gelu's tanh approximation: 0.5 x (1 + tanh(c (x + a x^3))).
constexpr double kGeluA = 0.044715;
const double kGeluC = std::sqrt(2.0 / std::numbers::pi);

// log(sum(exp(row))), shifted by the row maximum for stability.
double logSumExp(const double* row, int64_t n) {
  const double max = *std::max_element(row, row + n);
  double sum = 0.0;
  for (int64_t j = 0; j < n; ++j) sum += std::exp(row[j] - max);
  return max + std::log(sum);
}

// Index of [b, s, h, d] in a row-major [B, S, H, D] tensor.
int64_t index4(const std::vector<int64_t>& shape, int64_t b, int64_t s, int64_t h, int64_t d) {
  return ((b * shape[1] + s) * shape[2] + h) * shape[3] + d;
}

// For query (b, i, h): the causal attention probabilities p[j], j <= i.
std::vector<double> attentionProbs(const Tensor& query, const Tensor& key, int64_t b, int64_t i,
                                   int64_t h, int64_t kvHead) {
  const int64_t headDim = query.shape[3];
  const double scale = 1.0 / std::sqrt(static_cast<double>(headDim));
  std::vector<double> scores(i + 1);
  for (int64_t j = 0; j <= i; ++j) {
    double dot = 0.0;
    for (int64_t d = 0; d < headDim; ++d) {
      dot += query.values[index4(query.shape, b, i, h, d)] *
             key.values[index4(key.shape, b, j, kvHead, d)];
    }
    scores[j] = scale * dot;
  }
  const double lse = logSumExp(scores.data(), i + 1);
  for (double& score : scores) score = std::exp(score - lse);
  return scores;
}

// rms_norm's per-row 1 / sqrt(mean(x^2) + epsilon).
double rmsNormScale(const double* row, int64_t n, double epsilon) {
  double sumSquares = 0.0;
  for (int64_t j = 0; j < n; ++j) sumSquares += row[j] * row[j];
  return 1.0 / std::sqrt(sumSquares / static_cast<double>(n) + epsilon);
}

// layer_norm's per-row mean and 1 / sqrt(var + epsilon).
std::pair<double, double> layerNormStats(const double* row, int64_t n, double epsilon) {
  double mean = 0.0;
  for (int64_t j = 0; j < n; ++j) mean += row[j];
  mean /= static_cast<double>(n);
  double var = 0.0;
  for (int64_t j = 0; j < n; ++j) var += (row[j] - mean) * (row[j] - mean);
  var /= static_cast<double>(n);
  return {mean, 1.0 / std::sqrt(var + epsilon)};
}

// The backward of both norms given xhat and r per row: input_grad =
// r (g - [mean(g)] - xhat mean(g xhat)) with g = dy gamma; the mean(g) term
// only for layer_norm. Accumulates gamma_grad (and beta_grad).
NormGrads normGrad(const Tensor& input, const Tensor& gamma, const Tensor& resultGrad,
                   bool centered,
                   const std::function<std::pair<double, double>(const double*)>& rowStats) {
  const int64_t n = input.lastDim();
  const int64_t rows = input.numElements() / n;
  NormGrads grads{Tensor(input.shape), Tensor(gamma.shape),
                  centered ? Tensor(gamma.shape) : Tensor()};
  std::vector<double> xhat(n);
  std::vector<double> g(n);
  for (int64_t r = 0; r < rows; ++r) {
    const double* x = &input.values[r * n];
    const double* dy = &resultGrad.values[r * n];
    const auto [mean, scale] = rowStats(x);
    double meanG = 0.0;
    double meanGXhat = 0.0;
    for (int64_t j = 0; j < n; ++j) {
      xhat[j] = (x[j] - mean) * scale;
      g[j] = dy[j] * gamma.values[j];
      meanG += g[j];
      meanGXhat += g[j] * xhat[j];
      grads.gamma.values[j] += dy[j] * xhat[j];
      if (centered) grads.beta.values[j] += dy[j];
    }
    meanG /= static_cast<double>(n);
    meanGXhat /= static_cast<double>(n);
    for (int64_t j = 0; j < n; ++j) {
      grads.input.values[r * n + j] =
          scale * (g[j] - (centered ? meanG : 0.0) - xhat[j] * meanGXhat);
    }
  }
  return grads;
}

}  // namespace

Tensor::Tensor(std::vector<int64_t> shape)
    : shape(std::move(shape)), values(product(this->shape), 0.0) {}

Tensor::Tensor(std::vector<int64_t> shape, std::vector<double> values)
    : shape(std::move(shape)), values(std::move(values)) {}

Tensor embedding(const Tensor& ids, const Tensor& table) {
  const int64_t hidden = table.shape[1];
  std::vector<int64_t> shape = ids.shape;
  shape.push_back(hidden);
  Tensor result(shape);
  for (int64_t t = 0; t < ids.numElements(); ++t) {
    const auto row = static_cast<int64_t>(ids.values[t]);
    std::copy_n(&table.values[row * hidden], hidden, &result.values[t * hidden]);
  }
  return result;
}

Tensor linear(const Tensor& input, const Tensor& weight, const Tensor* bias) {
  Tensor result = matmul(input, weight, false, false);
  if (bias != nullptr) {
    const int64_t out = weight.shape[1];
    for (int64_t i = 0; i < result.numElements(); ++i) {
      result.values[i] += bias->values[i % out];
    }
  }
  return result;
}

Tensor biasAdd(const Tensor& input, const Tensor& bias) {
  Tensor result = input;
  const int64_t out = input.lastDim();
  for (int64_t i = 0; i < result.numElements(); ++i) {
    result.values[i] += bias.values[i % out];
  }
  return result;
}

Tensor matmul(const Tensor& lhs, const Tensor& rhs, bool transposeLhs, bool transposeRhs) {
  if (transposeLhs) {
    // [T..., m] x [T..., n] -> [m, n], summing over the T rows.
    const int64_t m = lhs.lastDim();
    const int64_t n = rhs.lastDim();
    const int64_t rows = lhs.numElements() / m;
    Tensor result({m, n});
    for (int64_t t = 0; t < rows; ++t) {
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t j = 0; j < n; ++j) {
          result.values[i * n + j] += lhs.values[t * m + i] * rhs.values[t * n + j];
        }
      }
    }
    return result;
  }
  // [T..., k] x [k, n] (or [n, k] with transposeRhs) -> [T..., n].
  const int64_t k = lhs.lastDim();
  const int64_t n = transposeRhs ? rhs.shape[0] : rhs.shape[1];
  const int64_t rows = lhs.numElements() / k;
  Tensor result(withLastDim(lhs.shape, n));
  for (int64_t t = 0; t < rows; ++t) {
    for (int64_t j = 0; j < n; ++j) {
      double sum = 0.0;
      for (int64_t c = 0; c < k; ++c) {
        sum +=
            lhs.values[t * k + c] * (transposeRhs ? rhs.values[j * k + c] : rhs.values[c * n + j]);
      }
      result.values[t * n + j] = sum;
    }
  }
  return result;
}

Tensor rmsNorm(const Tensor& input, const Tensor& gamma, double epsilon) {
  const int64_t n = input.lastDim();
  Tensor result(input.shape);
  for (int64_t r = 0; r < input.numElements() / n; ++r) {
    const double* x = &input.values[r * n];
    const double scale = rmsNormScale(x, n, epsilon);
    for (int64_t j = 0; j < n; ++j) {
      result.values[r * n + j] = x[j] * scale * gamma.values[j];
    }
  }
  return result;
}

Tensor layerNorm(const Tensor& input, const Tensor& gamma, const Tensor& beta, double epsilon) {
  const int64_t n = input.lastDim();
  Tensor result(input.shape);
  for (int64_t r = 0; r < input.numElements() / n; ++r) {
    const double* x = &input.values[r * n];
    const auto [mean, scale] = layerNormStats(x, n, epsilon);
    for (int64_t j = 0; j < n; ++j) {
      result.values[r * n + j] = (x[j] - mean) * scale * gamma.values[j] + beta.values[j];
    }
  }
  return result;
}

Tensor rope(const Tensor& input, double theta, bool inverse,
            const loom::plan::RopeScaling& scaling) {
  const std::vector<int64_t>& shape = input.shape;
  const int64_t half = shape[3] / 2;
  Tensor result(shape);
  for (int64_t b = 0; b < shape[0]; ++b) {
    for (int64_t s = 0; s < shape[1]; ++s) {
      for (int64_t h = 0; h < shape[2]; ++h) {
        for (int64_t i = 0; i < half; ++i) {
          const double frequency = loom::plan::ropeInverseFrequency(i, shape[3], theta, scaling);
          const double angle = (inverse ? -1.0 : 1.0) * static_cast<double>(s) * frequency;
          const double x1 = input.values[index4(shape, b, s, h, i)];
          const double x2 = input.values[index4(shape, b, s, h, i + half)];
          result.values[index4(shape, b, s, h, i)] = x1 * std::cos(angle) - x2 * std::sin(angle);
          result.values[index4(shape, b, s, h, i + half)] =
              x2 * std::cos(angle) + x1 * std::sin(angle);
        }
      }
    }
  }
  return result;
}

Tensor attention(const Tensor& query, const Tensor& key, const Tensor& value) {
  const std::vector<int64_t>& shape = query.shape;
  const int64_t group = shape[2] / key.shape[2];
  Tensor result(shape);
  for (int64_t b = 0; b < shape[0]; ++b) {
    for (int64_t h = 0; h < shape[2]; ++h) {
      const int64_t kvHead = h / group;
      for (int64_t i = 0; i < shape[1]; ++i) {
        const std::vector<double> p = attentionProbs(query, key, b, i, h, kvHead);
        for (int64_t d = 0; d < shape[3]; ++d) {
          double sum = 0.0;
          for (int64_t j = 0; j <= i; ++j) {
            sum += p[j] * value.values[index4(value.shape, b, j, kvHead, d)];
          }
          result.values[index4(shape, b, i, h, d)] = sum;
        }
      }
    }
  }
  return result;
}

Tensor silu(const Tensor& input) {
  return map(input, [](double x) { return x * sigmoid(x); });
}

Tensor gelu(const Tensor& input) {
  return map(input, [](double x) {
    return 0.5 * x * (1.0 + std::tanh(kGeluC * (x + kGeluA * x * x * x)));
  });
}

Tensor add(const Tensor& lhs, const Tensor& rhs) { return zipWith(lhs, rhs, std::plus<double>()); }

Tensor mul(const Tensor& lhs, const Tensor& rhs) {
  return zipWith(lhs, rhs, std::multiplies<double>());
}

Tensor softmax(const Tensor& input) {
  const int64_t n = input.lastDim();
  Tensor result(input.shape);
  for (int64_t r = 0; r < input.numElements() / n; ++r) {
    const double* x = &input.values[r * n];
    const double lse = logSumExp(x, n);
    for (int64_t j = 0; j < n; ++j) {
      result.values[r * n + j] = std::exp(x[j] - lse);
    }
  }
  return result;
}

Tensor reshape(const Tensor& input, std::vector<int64_t> shape) {
  return Tensor(std::move(shape), input.values);
}

Tensor transpose(const Tensor& input, const std::vector<int64_t>& permutation) {
  const int64_t rank = static_cast<int64_t>(input.shape.size());
  std::vector<int64_t> inputStrides(rank, 1);
  for (int64_t d = rank - 2; d >= 0; --d) {
    inputStrides[d] = inputStrides[d + 1] * input.shape[d + 1];
  }
  std::vector<int64_t> shape(rank);
  for (int64_t d = 0; d < rank; ++d) shape[d] = input.shape[permutation[d]];
  Tensor result(shape);
  for (int64_t linear = 0; linear < result.numElements(); ++linear) {
    // Result index j maps to the input index k with k[permutation[d]] = j[d].
    int64_t rest = linear;
    int64_t source = 0;
    for (int64_t d = rank - 1; d >= 0; --d) {
      source += (rest % shape[d]) * inputStrides[permutation[d]];
      rest /= shape[d];
    }
    result.values[linear] = input.values[source];
  }
  return result;
}

Tensor crossEntropy(const Tensor& logits, const Tensor& labels) {
  const int64_t vocab = logits.lastDim();
  const int64_t tokens = labels.numElements();
  double sum = 0.0;
  for (int64_t t = 0; t < tokens; ++t) {
    const double* row = &logits.values[t * vocab];
    sum += logSumExp(row, vocab) - row[static_cast<int64_t>(labels.values[t])];
  }
  return Tensor({}, {sum / static_cast<double>(tokens)});
}

Tensor embeddingGrad(const Tensor& ids, const Tensor& resultGrad, int64_t vocab) {
  const int64_t hidden = resultGrad.lastDim();
  Tensor result({vocab, hidden});
  for (int64_t t = 0; t < ids.numElements(); ++t) {
    const auto row = static_cast<int64_t>(ids.values[t]);
    for (int64_t h = 0; h < hidden; ++h) {
      result.values[row * hidden + h] += resultGrad.values[t * hidden + h];
    }
  }
  return result;
}

Tensor reduceSum(const Tensor& input, const std::vector<int64_t>& dims) {
  const int64_t rank = static_cast<int64_t>(input.shape.size());
  std::vector<bool> reduced(rank, false);
  for (int64_t dim : dims) reduced[dim] = true;
  std::vector<int64_t> shape;
  for (int64_t d = 0; d < rank; ++d) {
    if (!reduced[d]) shape.push_back(input.shape[d]);
  }
  Tensor result(shape);
  for (int64_t linear = 0; linear < input.numElements(); ++linear) {
    // Drops the reduced dims from the input index, minor dims first.
    int64_t rest = linear;
    int64_t target = 0;
    int64_t stride = 1;
    for (int64_t d = rank - 1; d >= 0; --d) {
      const int64_t coordinate = rest % input.shape[d];
      rest /= input.shape[d];
      if (reduced[d]) continue;
      target += coordinate * stride;
      stride *= input.shape[d];
    }
    result.values[target] += input.values[linear];
  }
  return result;
}

NormGrads rmsNormGrad(const Tensor& input, const Tensor& gamma, const Tensor& resultGrad,
                      double epsilon) {
  const int64_t n = input.lastDim();
  return normGrad(input, gamma, resultGrad, /*centered=*/false, [&](const double* row) {
    return std::make_pair(0.0, rmsNormScale(row, n, epsilon));
  });
}

NormGrads layerNormGrad(const Tensor& input, const Tensor& gamma, const Tensor& resultGrad,
                        double epsilon) {
  const int64_t n = input.lastDim();
  return normGrad(input, gamma, resultGrad, /*centered=*/true,
                  [&](const double* row) { return layerNormStats(row, n, epsilon); });
}

AttentionGrads attentionGrad(const Tensor& query, const Tensor& key, const Tensor& value,
                             const Tensor& resultGrad) {
  const std::vector<int64_t>& shape = query.shape;
  const int64_t headDim = shape[3];
  const int64_t group = shape[2] / key.shape[2];
  const double scale = 1.0 / std::sqrt(static_cast<double>(headDim));
  AttentionGrads grads{Tensor(query.shape), Tensor(key.shape), Tensor(value.shape)};
  for (int64_t b = 0; b < shape[0]; ++b) {
    for (int64_t h = 0; h < shape[2]; ++h) {
      const int64_t kvHead = h / group;
      for (int64_t i = 0; i < shape[1]; ++i) {
        const std::vector<double> p = attentionProbs(query, key, b, i, h, kvHead);
        // dp[j] = dO_i . v_j; ds = p (dp - sum_j p dp).
        std::vector<double> dp(i + 1, 0.0);
        double weighted = 0.0;
        for (int64_t j = 0; j <= i; ++j) {
          for (int64_t d = 0; d < headDim; ++d) {
            const double dOut = resultGrad.values[index4(shape, b, i, h, d)];
            dp[j] += dOut * value.values[index4(value.shape, b, j, kvHead, d)];
            grads.value.values[index4(value.shape, b, j, kvHead, d)] += p[j] * dOut;
          }
          weighted += p[j] * dp[j];
        }
        for (int64_t j = 0; j <= i; ++j) {
          const double ds = p[j] * (dp[j] - weighted);
          for (int64_t d = 0; d < headDim; ++d) {
            grads.query.values[index4(shape, b, i, h, d)] +=
                scale * ds * key.values[index4(key.shape, b, j, kvHead, d)];
            grads.key.values[index4(key.shape, b, j, kvHead, d)] +=
                scale * ds * query.values[index4(shape, b, i, h, d)];
          }
        }
      }
    }
  }
  return grads;
}

Tensor softmaxGrad(const Tensor& output, const Tensor& resultGrad) {
  const int64_t n = output.lastDim();
  Tensor result(output.shape);
  for (int64_t r = 0; r < output.numElements() / n; ++r) {
    const double* y = &output.values[r * n];
    const double* dy = &resultGrad.values[r * n];
    double dot = 0.0;
    for (int64_t j = 0; j < n; ++j) dot += dy[j] * y[j];
    for (int64_t j = 0; j < n; ++j) {
      result.values[r * n + j] = y[j] * (dy[j] - dot);
    }
  }
  return result;
}

Tensor siluGrad(const Tensor& input, const Tensor& resultGrad) {
  return zipWith(input, resultGrad, [](double x, double dy) {
    const double s = sigmoid(x);
    return dy * s * (1.0 + x * (1.0 - s));
  });
}

Tensor geluGrad(const Tensor& input, const Tensor& resultGrad) {
  return zipWith(input, resultGrad, [](double x, double dy) {
    const double t = std::tanh(kGeluC * (x + kGeluA * x * x * x));
    return dy * (0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * kGeluC * (1.0 + 3.0 * kGeluA * x * x));
  });
}

Tensor crossEntropyGrad(const Tensor& logits, const Tensor& labels, const Tensor& lossGrad,
                        double scale) {
  const int64_t vocab = logits.lastDim();
  const double factor = lossGrad.values[0] * scale;
  Tensor result = softmax(logits);
  for (int64_t t = 0; t < labels.numElements(); ++t) {
    result.values[t * vocab + static_cast<int64_t>(labels.values[t])] -= 1.0;
  }
  for (double& v : result.values) v *= factor;
  return result;
}

namespace {

// The real rows of a vocab shard: local rows [0, n) are global rows
// [rowBegin, rowBegin + n), the rest is padding past `vocab`.
int64_t realRows(int64_t localRows, int64_t rowBegin, int64_t vocab) {
  return std::clamp<int64_t>(vocab - rowBegin, 0, localRows);
}

}  // namespace

Tensor vocabMax(const Tensor& logits, int64_t rowBegin, int64_t vocab) {
  const int64_t rows = logits.lastDim();
  const int64_t real = realRows(rows, rowBegin, vocab);
  const int64_t tokens = logits.numElements() / rows;
  Tensor result(std::vector<int64_t>(logits.shape.begin(), logits.shape.end() - 1));
  for (int64_t t = 0; t < tokens; ++t) {
    double max = -std::numeric_limits<double>::infinity();
    for (int64_t v = 0; v < real; ++v) {
      max = std::max(max, logits.values[t * rows + v]);
    }
    result.values[t] = max;
  }
  return result;
}

Tensor vocabStats(const Tensor& logits, const Tensor& labels, const Tensor& max, int64_t rowBegin,
                  int64_t vocab) {
  const int64_t rows = logits.lastDim();
  const int64_t real = realRows(rows, rowBegin, vocab);
  const int64_t tokens = labels.numElements();
  std::vector<int64_t> shape = labels.shape;
  shape.push_back(2);
  Tensor result(shape);
  for (int64_t t = 0; t < tokens; ++t) {
    const double* row = &logits.values[t * rows];
    double sum = 0.0;
    for (int64_t v = 0; v < real; ++v) sum += std::exp(row[v] - max.values[t]);
    const int64_t label = static_cast<int64_t>(labels.values[t]) - rowBegin;
    result.values[2 * t] = sum;
    result.values[2 * t + 1] = label >= 0 && label < real ? row[label] - max.values[t] : 0.0;
  }
  return result;
}

Tensor vocabCrossEntropy(const Tensor& stats) {
  const int64_t tokens = stats.numElements() / 2;
  double sum = 0.0;
  for (int64_t t = 0; t < tokens; ++t) {
    sum += std::log(stats.values[2 * t]) - stats.values[2 * t + 1];
  }
  return Tensor({}, {sum / static_cast<double>(tokens)});
}

Tensor vocabCrossEntropyGrad(const Tensor& logits, const Tensor& labels, const Tensor& max,
                             const Tensor& stats, const Tensor& lossGrad, double scale,
                             int64_t rowBegin, int64_t vocab) {
  const int64_t rows = logits.lastDim();
  const int64_t real = realRows(rows, rowBegin, vocab);
  const double factor = lossGrad.values[0] * scale;
  Tensor result(logits.shape);
  for (int64_t t = 0; t < labels.numElements(); ++t) {
    const int64_t label = static_cast<int64_t>(labels.values[t]) - rowBegin;
    for (int64_t v = 0; v < real; ++v) {
      const double p = std::exp(logits.values[t * rows + v] - max.values[t]) / stats.values[2 * t];
      result.values[t * rows + v] = (p - (v == label ? 1.0 : 0.0)) * factor;
    }
  }
  return result;
}

}  // namespace loom::planner::nn::eval
