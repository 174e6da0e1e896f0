// fp32 CPU kernels of the nn ops. Reductions use `omp simd` (compiled with
// -fopenmp-simd, no OpenMP runtime) so the compiler may vectorise them: the
// summation order is then fixed by the build, not by the data layout, which
// keeps results deterministic run to run.
#include "runtime/kernels/cpu/cpu_kernels.h"
#include "runtime/kernels/cpu/simd_exp.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <cstdint>
#include <numbers>
#include <span>
#include <vector>

namespace loom::runtime::cpu {
namespace {

float dot(const float* a, const float* b, int64_t n) {
  float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
  for (int64_t i = 0; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

// y += alpha x.
void axpy(float alpha, const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += alpha * x[i];
}

// silu's elements go through blocks of this many: exp(-x) of a block into a
// stack buffer, then the rest, each loop vectorised.
constexpr int64_t kSiluBlock = 256;

// e[j] = exp(-x[j]). Below -87 the argument is clamped (sigmoid is 1 to
// within 1e-38 there); above 88, where expf overflows, e is infinity, so that
// sigmoid is exactly 0 as with libm's expf. Each step is a loop of its own so
// that every one of them vectorises.
void expNegated(const float* x, float* e, int64_t n) {
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) {
    const float a = -x[j];
    const float low = a < -87.0f ? -87.0f : a;
    e[j] = low > 88.0f ? 88.0f : low;
  }
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) e[j] = expClamped(e[j]);
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) {
    e[j] = -x[j] > 88.0f ? std::numeric_limits<float>::infinity() : e[j];
  }
}

constexpr float kGeluA = 0.044715f;
const float kGeluC = static_cast<float>(std::sqrt(2.0 / std::numbers::pi));

// Writes softmax(x) of one row to y; returns logsumexp(x). The exp is
// simd_exp.h's, so every loop of the row vectorises (libm's expf does not).
float softmaxRow(const float* x, float* y, int64_t n) {
  const float max = rowMax(x, n);
  const float sum = expShiftedSum(x, y, n, max);
  const float inverse = 1.0f / sum;
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) y[j] *= inverse;
  return max + std::log(sum);
}

template <typename Id>
void embeddingImpl(const Id* ids, const float* table, float* out, int64_t tokens, int64_t hidden,
                   int64_t row_begin, int64_t table_rows) {
  for (int64_t t = 0; t < tokens; ++t) {
    const int64_t row = static_cast<int64_t>(ids[t]) - row_begin;
    float* dst = out + t * hidden;
    if (row >= 0 && row < table_rows) {
      std::copy_n(table + row * hidden, hidden, dst);
    } else {
      std::fill_n(dst, hidden, 0.0f);
    }
  }
}

template <typename Id>
void embeddingGradImpl(const Id* ids, const float* dy, float* dtable, int64_t tokens,
                       int64_t hidden, int64_t row_begin, int64_t table_rows) {
  std::fill_n(dtable, table_rows * hidden, 0.0f);
  for (int64_t t = 0; t < tokens; ++t) {
    const int64_t row = static_cast<int64_t>(ids[t]) - row_begin;
    if (row >= 0 && row < table_rows) {
      axpy(1.0f, dy + t * hidden, dtable + row * hidden, hidden);
    }
  }
}

template <typename Label>
float crossEntropyImpl(const float* logits, const Label* labels, int64_t tokens, int64_t vocab) {
  std::vector<float> exps(vocab);
  // The token sum is kept in double: it adds up many similar terms, and the
  // result is compared across shardings.
  double sum = 0.0;
  for (int64_t t = 0; t < tokens; ++t) {
    if (static_cast<int64_t>(labels[t]) == kIgnoreLabel) continue;
    const float* row = logits + t * vocab;
    // Only logsumexp is needed: the exps are summed, never normalised.
    const float max = rowMax(row, vocab);
    const float lse = max + std::log(expShiftedSum(row, exps.data(), vocab, max));
    sum += static_cast<double>(lse) - static_cast<double>(row[static_cast<int64_t>(labels[t])]);
  }
  return static_cast<float>(sum / static_cast<double>(tokens));
}

template <typename Label>
void crossEntropyGradImpl(const float* logits, const Label* labels, float dloss, float scale,
                          float* dlogits, int64_t tokens, int64_t vocab) {
  const float factor = dloss * scale;
  for (int64_t t = 0; t < tokens; ++t) {
    const float* row = logits + t * vocab;
    float* out = dlogits + t * vocab;
    if (static_cast<int64_t>(labels[t]) == kIgnoreLabel) {
      std::fill_n(out, vocab, 0.0f);
      continue;
    }
    const float max = rowMax(row, vocab);
    const float inverse = 1.0f / expShiftedSum(row, out, vocab, max);
    // (softmax - onehot) * factor in one pass, each element rounded as the
    // three passes (normalise, subtract at the label, scale) would.
    const int64_t label = static_cast<int64_t>(labels[t]);
    const float at_label = (out[label] * inverse - 1.0f) * factor;
#pragma omp simd
    for (int64_t j = 0; j < vocab; ++j) out[j] = out[j] * inverse * factor;
    out[label] = at_label;
  }
}

}  // namespace

void linear(const float* x, const float* w, const float* bias, float* y, int64_t rows, int64_t in,
            int64_t out) {
  if (bias != nullptr) {
    // Seeding y with the bias lets one GEMM with beta = 1 add it.
    for (int64_t r = 0; r < rows; ++r) std::copy_n(bias, out, y + r * out);
  }
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, out, in, 1.0f, x, in, w, out,
              bias != nullptr ? 1.0f : 0.0f, y, out);
}

void matmul(const float* lhs, const float* rhs, float* out, int64_t rows, int64_t k, int64_t n) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, n, k, 1.0f, lhs, k, rhs, n, 0.0f,
              out, n);
}

void matmulTransposeRhs(const float* lhs, const float* rhs, float* out, int64_t rows, int64_t k,
                        int64_t n) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, n, k, 1.0f, lhs, k, rhs, k, 0.0f, out,
              n);
}

void matmulTransposeLhs(const float* lhs, const float* rhs, float* out, int64_t rows, int64_t m,
                        int64_t n) {
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, m, n, rows, 1.0f, lhs, m, rhs, n, 0.0f, out,
              n);
}

void rmsNorm(const float* x, const float* gamma, float* y, int64_t rows, int64_t hidden,
             float epsilon) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * hidden;
    float* yr = y + r * hidden;
    const float scale =
        1.0f / std::sqrt(dot(xr, xr, hidden) / static_cast<float>(hidden) + epsilon);
    for (int64_t j = 0; j < hidden; ++j) yr[j] = xr[j] * scale * gamma[j];
  }
}

void rmsNormGrad(const float* x, const float* gamma, const float* dy, float* dx, float* dgamma,
                 int64_t rows, int64_t hidden, float epsilon) {
  std::fill_n(dgamma, hidden, 0.0f);
  const float inverse_n = 1.0f / static_cast<float>(hidden);
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * hidden;
    const float* dyr = dy + r * hidden;
    float* dxr = dx + r * hidden;
    const float scale = 1.0f / std::sqrt(dot(xr, xr, hidden) * inverse_n + epsilon);
    // mean(g xhat) with g = dy gamma, xhat = x scale.
    float g_xhat = 0.0f;
#pragma omp simd reduction(+ : g_xhat)
    for (int64_t j = 0; j < hidden; ++j) g_xhat += dyr[j] * gamma[j] * xr[j];
    const float mean_g_xhat = g_xhat * scale * inverse_n;
    for (int64_t j = 0; j < hidden; ++j) {
      const float xhat = xr[j] * scale;
      dxr[j] = scale * (dyr[j] * gamma[j] - xhat * mean_g_xhat);
      dgamma[j] += dyr[j] * xhat;
    }
  }
}

void layerNorm(const float* x, const float* gamma, const float* beta, float* y, int64_t rows,
               int64_t hidden, float epsilon) {
  const float inverse_n = 1.0f / static_cast<float>(hidden);
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * hidden;
    float* yr = y + r * hidden;
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int64_t j = 0; j < hidden; ++j) sum += xr[j];
    const float mean = sum * inverse_n;
    // Two passes (mean, then squared deviations) avoid the cancellation of
    // E[x^2] - E[x]^2.
    float squares = 0.0f;
#pragma omp simd reduction(+ : squares)
    for (int64_t j = 0; j < hidden; ++j) {
      squares += (xr[j] - mean) * (xr[j] - mean);
    }
    const float scale = 1.0f / std::sqrt(squares * inverse_n + epsilon);
    for (int64_t j = 0; j < hidden; ++j) {
      yr[j] = (xr[j] - mean) * scale * gamma[j] + beta[j];
    }
  }
}

void layerNormGrad(const float* x, const float* gamma, const float* dy, float* dx, float* dgamma,
                   float* dbeta, int64_t rows, int64_t hidden, float epsilon) {
  std::fill_n(dgamma, hidden, 0.0f);
  std::fill_n(dbeta, hidden, 0.0f);
  const float inverse_n = 1.0f / static_cast<float>(hidden);
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * hidden;
    const float* dyr = dy + r * hidden;
    float* dxr = dx + r * hidden;
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int64_t j = 0; j < hidden; ++j) sum += xr[j];
    const float mean = sum * inverse_n;
    float squares = 0.0f;
#pragma omp simd reduction(+ : squares)
    for (int64_t j = 0; j < hidden; ++j) {
      squares += (xr[j] - mean) * (xr[j] - mean);
    }
    const float scale = 1.0f / std::sqrt(squares * inverse_n + epsilon);
    float g_sum = 0.0f;
    float g_xhat = 0.0f;
#pragma omp simd reduction(+ : g_sum, g_xhat)
    for (int64_t j = 0; j < hidden; ++j) {
      const float g = dyr[j] * gamma[j];
      g_sum += g;
      g_xhat += g * (xr[j] - mean) * scale;
    }
    const float mean_g = g_sum * inverse_n;
    const float mean_g_xhat = g_xhat * inverse_n;
    for (int64_t j = 0; j < hidden; ++j) {
      const float xhat = (xr[j] - mean) * scale;
      dxr[j] = scale * (dyr[j] * gamma[j] - mean_g - xhat * mean_g_xhat);
      dgamma[j] += dyr[j] * xhat;
      dbeta[j] += dyr[j];
    }
  }
}

void rope(const float* x, float* y, int64_t batch, int64_t seq, int64_t heads, int64_t head_dim,
          float theta, bool inverse, const plan::RopeScaling& scaling) {
  const int64_t half = head_dim / 2;
  // cos/sin of every (position, pair), computed in double once per call: the
  // angle s * theta^(-2i/D) grows with s, and float would lose its phase.
  std::vector<double> frequencies(half);
  for (int64_t i = 0; i < half; ++i) {
    frequencies[i] = plan::ropeInverseFrequency(i, head_dim, static_cast<double>(theta), scaling);
  }
  std::vector<float> cosines(seq * half);
  std::vector<float> sines(seq * half);
  for (int64_t s = 0; s < seq; ++s) {
    for (int64_t i = 0; i < half; ++i) {
      const double angle = (inverse ? -1.0 : 1.0) * static_cast<double>(s) * frequencies[i];
      cosines[s * half + i] = static_cast<float>(std::cos(angle));
      sines[s * half + i] = static_cast<float>(std::sin(angle));
    }
  }
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t s = 0; s < seq; ++s) {
      const float* c = &cosines[s * half];
      const float* sn = &sines[s * half];
      for (int64_t h = 0; h < heads; ++h) {
        const int64_t offset = ((b * seq + s) * heads + h) * head_dim;
        const float* xr = x + offset;
        float* yr = y + offset;
        for (int64_t i = 0; i < half; ++i) {
          // Both halves are read before either is written, so y may be x.
          const float x1 = xr[i];
          const float x2 = xr[i + half];
          yr[i] = x1 * c[i] - x2 * sn[i];
          yr[i + half] = x2 * c[i] + x1 * sn[i];
        }
      }
    }
  }
}

void softmax(const float* x, float* y, int64_t rows, int64_t n) {
  for (int64_t r = 0; r < rows; ++r) softmaxRow(x + r * n, y + r * n, n);
}

void softmaxGrad(const float* y, const float* dy, float* dx, int64_t rows, int64_t n) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* yr = y + r * n;
    const float* dyr = dy + r * n;
    const float weighted = dot(dyr, yr, n);
    float* dxr = dx + r * n;
    for (int64_t j = 0; j < n; ++j) dxr[j] = yr[j] * (dyr[j] - weighted);
  }
}

// sigmoid(x) = 1 / (1 + exp(-x)) with the vectorised exp: 4-5x faster than
// libm's scalar expf at -O2 (docs/runtime_kernels.md).
void silu(const float* x, float* y, int64_t count) {
  float e[kSiluBlock];
  for (int64_t b = 0; b < count; b += kSiluBlock) {
    const int64_t n = std::min(kSiluBlock, count - b);
    expNegated(x + b, e, n);
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) y[b + j] = x[b + j] * (1.0f / (1.0f + e[j]));
  }
}

void siluGrad(const float* x, const float* dy, float* dx, int64_t count) {
  float e[kSiluBlock];
  for (int64_t b = 0; b < count; b += kSiluBlock) {
    const int64_t n = std::min(kSiluBlock, count - b);
    expNegated(x + b, e, n);
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) {
      const float s = 1.0f / (1.0f + e[j]);
      dx[b + j] = dy[b + j] * s * (1.0f + x[b + j] * (1.0f - s));
    }
  }
}

void gelu(const float* x, float* y, int64_t count) {
  for (int64_t i = 0; i < count; ++i) {
    const float xi = x[i];
    y[i] = 0.5f * xi * (1.0f + std::tanh(kGeluC * (xi + kGeluA * xi * xi * xi)));
  }
}

void geluGrad(const float* x, const float* dy, float* dx, int64_t count) {
  for (int64_t i = 0; i < count; ++i) {
    const float xi = x[i];
    const float t = std::tanh(kGeluC * (xi + kGeluA * xi * xi * xi));
    dx[i] = dy[i] * (0.5f * (1.0f + t) +
                     0.5f * xi * (1.0f - t * t) * kGeluC * (1.0f + 3.0f * kGeluA * xi * xi));
  }
}

void add(const float* a, const float* b, float* out, int64_t count) {
  for (int64_t i = 0; i < count; ++i) out[i] = a[i] + b[i];
}

void mul(const float* a, const float* b, float* out, int64_t count) {
  for (int64_t i = 0; i < count; ++i) out[i] = a[i] * b[i];
}

void reduceSum(const float* x, std::span<const int64_t> shape, std::span<const int64_t> dims,
               float* out) {
  const int64_t rank = static_cast<int64_t>(shape.size());
  // The output stride of every input dim, 0 for a reduced one.
  std::vector<int64_t> out_strides(rank, 0);
  int64_t out_count = 1;
  for (int64_t d = rank - 1; d >= 0; --d) {
    if (std::find(dims.begin(), dims.end(), d) != dims.end()) continue;
    out_strides[d] = out_count;
    out_count *= shape[d];
  }
  std::fill_n(out, out_count, 0.0f);
  const int64_t inner = shape[rank - 1];
  const bool inner_reduced = out_strides[rank - 1] == 0;
  int64_t outer = 1;
  for (int64_t d = 0; d + 1 < rank; ++d) outer *= shape[d];
  // Walks the input one contiguous last-dim row at a time, carrying the
  // coordinates of the outer dims like an odometer.
  std::vector<int64_t> coords(rank, 0);
  int64_t offset = 0;
  for (int64_t row = 0; row < outer; ++row) {
    const float* xr = x + row * inner;
    if (inner_reduced) {
      float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
      for (int64_t j = 0; j < inner; ++j) sum += xr[j];
      out[offset] += sum;
    } else {
      axpy(1.0f, xr, out + offset, inner);
    }
    for (int64_t d = rank - 2; d >= 0; --d) {
      offset += out_strides[d];
      if (++coords[d] < shape[d]) break;
      offset -= coords[d] * out_strides[d];
      coords[d] = 0;
    }
  }
}

void embedding(const int32_t* ids, const float* table, float* out, int64_t tokens, int64_t hidden,
               int64_t row_begin, int64_t table_rows) {
  embeddingImpl(ids, table, out, tokens, hidden, row_begin, table_rows);
}

void embedding(const int64_t* ids, const float* table, float* out, int64_t tokens, int64_t hidden,
               int64_t row_begin, int64_t table_rows) {
  embeddingImpl(ids, table, out, tokens, hidden, row_begin, table_rows);
}

void embeddingGrad(const int32_t* ids, const float* dy, float* dtable, int64_t tokens,
                   int64_t hidden, int64_t row_begin, int64_t table_rows) {
  embeddingGradImpl(ids, dy, dtable, tokens, hidden, row_begin, table_rows);
}

void embeddingGrad(const int64_t* ids, const float* dy, float* dtable, int64_t tokens,
                   int64_t hidden, int64_t row_begin, int64_t table_rows) {
  embeddingGradImpl(ids, dy, dtable, tokens, hidden, row_begin, table_rows);
}

float crossEntropy(const float* logits, const int32_t* labels, int64_t tokens, int64_t vocab) {
  return crossEntropyImpl(logits, labels, tokens, vocab);
}

float crossEntropy(const float* logits, const int64_t* labels, int64_t tokens, int64_t vocab) {
  return crossEntropyImpl(logits, labels, tokens, vocab);
}

void crossEntropyGrad(const float* logits, const int32_t* labels, float dloss, float scale,
                      float* dlogits, int64_t tokens, int64_t vocab) {
  crossEntropyGradImpl(logits, labels, dloss, scale, dlogits, tokens, vocab);
}

void crossEntropyGrad(const float* logits, const int64_t* labels, float dloss, float scale,
                      float* dlogits, int64_t tokens, int64_t vocab) {
  crossEntropyGradImpl(logits, labels, dloss, scale, dlogits, tokens, vocab);
}

void biasAdd(const float* x, const float* bias, float* y, int64_t rows, int64_t out) {
  for (int64_t t = 0; t < rows; ++t) {
    const float* in = x + t * out;
    float* o = y + t * out;
#pragma omp simd
    for (int64_t j = 0; j < out; ++j) o[j] = in[j] + bias[j];
  }
}

void vocabMax(const float* logits, float* max, int64_t tokens, int64_t local, int64_t valid) {
  for (int64_t t = 0; t < tokens; ++t) {
    const float* row = logits + t * local;
    float m = -std::numeric_limits<float>::infinity();
    for (int64_t r = 0; r < valid; ++r) m = std::max(m, row[r]);
    max[t] = m;
  }
}

void vocabStats(const float* logits, const int32_t* labels, const float* max, float* stats,
                int64_t tokens, int64_t local, int64_t valid, int64_t row_begin) {
  for (int64_t t = 0; t < tokens; ++t) {
    const float* row = logits + t * local;
    double sum = 0.0;
    for (int64_t r = 0; r < valid; ++r) sum += std::exp(static_cast<double>(row[r]) - max[t]);
    const int64_t label = static_cast<int64_t>(labels[t]) - row_begin;
    stats[2 * t] = static_cast<float>(sum);
    if (labels[t] == kIgnoreLabel) {
      stats[2 * t + 1] = std::numeric_limits<float>::infinity();
    } else {
      stats[2 * t + 1] = label >= 0 && label < valid ? row[label] - max[t] : 0.0f;
    }
  }
}

float vocabCrossEntropy(const float* stats, int64_t tokens) {
  double sum = 0.0;
  for (int64_t t = 0; t < tokens; ++t) {
    if (std::isinf(stats[2 * t + 1])) continue;  // an ignored token
    sum += std::log(static_cast<double>(stats[2 * t])) - static_cast<double>(stats[2 * t + 1]);
  }
  return static_cast<float>(sum / static_cast<double>(tokens));
}

void vocabCrossEntropyGrad(const float* logits, const int32_t* labels, const float* max,
                           const float* stats, float dloss, float scale, float* dlogits,
                           int64_t tokens, int64_t local, int64_t valid, int64_t row_begin) {
  const float factor = dloss * scale;
  for (int64_t t = 0; t < tokens; ++t) {
    const float* row = logits + t * local;
    float* out = dlogits + t * local;
    if (labels[t] == kIgnoreLabel) {
      std::fill_n(out, local, 0.0f);
      continue;
    }
    const float inverse = 1.0f / stats[2 * t];
    for (int64_t r = 0; r < valid; ++r) out[r] = std::exp(row[r] - max[t]) * inverse * factor;
    for (int64_t r = valid; r < local; ++r) out[r] = 0.0f;
    const int64_t label = static_cast<int64_t>(labels[t]) - row_begin;
    if (label >= 0 && label < valid) out[label] -= factor;
  }
}

}  // namespace loom::runtime::cpu
