// The scalar softmax and cross-entropy kernels, exactly as they ran in
// cpu_kernels.cc before the vectorised ones replaced them.
#include "runtime/kernels/cpu/softmax_reference.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace loom::runtime::cpu {
namespace {

// Writes softmax(x) of one row to y; returns logsumexp(x).
float softmaxRow(const float* x, float* y, int64_t n) {
  const float max = *std::max_element(x, x + n);
  float sum = 0.0f;
  for (int64_t j = 0; j < n; ++j) {
    y[j] = std::exp(x[j] - max);
  }
#pragma omp simd reduction(+ : sum)
  for (int64_t j = 0; j < n; ++j) sum += y[j];
  const float inverse = 1.0f / sum;
  for (int64_t j = 0; j < n; ++j) y[j] *= inverse;
  return max + std::log(sum);
}

}  // namespace

void softmaxReference(const float* x, float* y, int64_t rows, int64_t n) {
  for (int64_t r = 0; r < rows; ++r) softmaxRow(x + r * n, y + r * n, n);
}

float crossEntropyReference(const float* logits, const int32_t* labels, int64_t tokens,
                            int64_t vocab) {
  std::vector<float> probs(vocab);
  double sum = 0.0;
  for (int64_t t = 0; t < tokens; ++t) {
    const float* row = logits + t * vocab;
    const float lse = softmaxRow(row, probs.data(), vocab);
    sum += static_cast<double>(lse) - static_cast<double>(row[static_cast<int64_t>(labels[t])]);
  }
  return static_cast<float>(sum / static_cast<double>(tokens));
}

void crossEntropyGradReference(const float* logits, const int32_t* labels, float dloss, float scale,
                               float* dlogits, int64_t tokens, int64_t vocab) {
  const float factor = dloss * scale;
  for (int64_t t = 0; t < tokens; ++t) {
    float* out = dlogits + t * vocab;
    softmaxRow(logits + t * vocab, out, vocab);
    out[static_cast<int64_t>(labels[t])] -= 1.0f;
    for (int64_t j = 0; j < vocab; ++j) out[j] *= factor;
  }
}

}  // namespace loom::runtime::cpu
