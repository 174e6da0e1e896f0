// The scalar attention kernels, exactly as they ran in cpu_kernels.cc before
// the blocked ones replaced them; the helpers are copies of that file's, so
// that this oracle keeps its bits when the kernels' file changes.
#include "runtime/kernels/cpu/attention_reference.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
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

// The causal attention probabilities p[0..i] of query row q_i against the
// keys of one kv head (`k_head` points at key 0 of that head, `k_stride`
// floats between consecutive positions).
void attentionProbs(const float* q_i, const float* k_head, int64_t k_stride, int64_t i,
                    int64_t head_dim, float scale, float* p) {
  for (int64_t j = 0; j <= i; ++j) {
    p[j] = scale * dot(q_i, k_head + j * k_stride, head_dim);
  }
  softmaxRow(p, p, i + 1);
}

}  // namespace

void attentionReference(const float* q, const float* k, const float* v, float* out,
                        const AttentionShape& shape) {
  const auto [batch, seq, heads, kv_heads, head_dim] = shape;
  const int64_t group = heads / kv_heads;
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  const int64_t q_stride = heads * head_dim;
  const int64_t kv_stride = kv_heads * head_dim;
  std::vector<float> p(seq);
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t h = 0; h < heads; ++h) {
      const int64_t kv_offset = b * seq * kv_stride + (h / group) * head_dim;
      const float* k_head = k + kv_offset;
      const float* v_head = v + kv_offset;
      for (int64_t i = 0; i < seq; ++i) {
        const int64_t q_offset = (b * seq + i) * q_stride + h * head_dim;
        attentionProbs(q + q_offset, k_head, kv_stride, i, head_dim, scale, p.data());
        float* out_i = out + q_offset;
        std::fill_n(out_i, head_dim, 0.0f);
        for (int64_t j = 0; j <= i; ++j) {
          axpy(p[j], v_head + j * kv_stride, out_i, head_dim);
        }
      }
    }
  }
}

void attentionGradReference(const float* q, const float* k, const float* v, const float* dout,
                            float* dq, float* dk, float* dv, const AttentionShape& shape) {
  const auto [batch, seq, heads, kv_heads, head_dim] = shape;
  const int64_t group = heads / kv_heads;
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  const int64_t q_stride = heads * head_dim;
  const int64_t kv_stride = kv_heads * head_dim;
  std::fill_n(dq, batch * seq * q_stride, 0.0f);
  std::fill_n(dk, batch * seq * kv_stride, 0.0f);
  std::fill_n(dv, batch * seq * kv_stride, 0.0f);
  std::vector<float> p(seq);
  std::vector<float> dp(seq);
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t h = 0; h < heads; ++h) {
      const int64_t kv_offset = b * seq * kv_stride + (h / group) * head_dim;
      const float* k_head = k + kv_offset;
      const float* v_head = v + kv_offset;
      float* dk_head = dk + kv_offset;
      float* dv_head = dv + kv_offset;
      for (int64_t i = 0; i < seq; ++i) {
        const int64_t q_offset = (b * seq + i) * q_stride + h * head_dim;
        const float* q_i = q + q_offset;
        const float* do_i = dout + q_offset;
        attentionProbs(q_i, k_head, kv_stride, i, head_dim, scale, p.data());
        // dv_j += p_j dO_i; dp_j = dO_i . v_j; ds = p (dp - sum_j p_j dp_j).
        float weighted = 0.0f;
        for (int64_t j = 0; j <= i; ++j) {
          axpy(p[j], do_i, dv_head + j * kv_stride, head_dim);
          dp[j] = dot(do_i, v_head + j * kv_stride, head_dim);
          weighted += p[j] * dp[j];
        }
        float* dq_i = dq + q_offset;
        for (int64_t j = 0; j <= i; ++j) {
          const float ds = scale * p[j] * (dp[j] - weighted);
          axpy(ds, k_head + j * kv_stride, dq_i, head_dim);
          axpy(ds, q_i, dk_head + j * kv_stride, head_dim);
        }
      }
    }
  }
}

}  // namespace loom::runtime::cpu
