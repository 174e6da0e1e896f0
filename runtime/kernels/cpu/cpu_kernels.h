// fp32 CPU kernels for every `nn` op, forward and backward, implementing the
// math of docs/planner_nn.md exactly (see docs/runtime_kernels.md).
// Matrix products, and the tiles of attention (attention.cc), go to
// OpenBLAS; everything else is plain single-threaded loops with contiguous
// inner dims that the compiler can vectorise.
//
// The kernels are lean on purpose: they take raw row-major pointers and
// sizes and do not validate them. The executor validates the plan once, so
// every call site already has verified shapes. Common preconditions: every
// size is > 0, every buffer holds the elements its shape says, outputs do not
// alias inputs unless a kernel says otherwise, and ids/labels lie in their
// documented range. "Rows" is the product of the leading token dims
// (`N` in the docs), so any number of leading dims is handled by flattening.
#ifndef LOOM_RUNTIME_KERNELS_CPU_CPU_KERNELS_H_
#define LOOM_RUNTIME_KERNELS_CPU_CPU_KERNELS_H_

#include <cstdint>
#include <span>

#include "plan/rope_frequency.h"
#include "runtime/kernels/ignore_label.h"

namespace loom::runtime::cpu {

// ---- Matrix products (OpenBLAS) -------------------------------------------

// nn.linear: y[rows, out] = x[rows, in] w[in, out] (+ bias[out]); `bias` may
// be null. The weight is [in, out] as in the nn dialect.
void linear(const float* x, const float* w, const float* bias, float* y, int64_t rows, int64_t in,
            int64_t out);

// nn.matmul, default layout: out[rows, n] = lhs[rows, k] rhs[k, n].
void matmul(const float* lhs, const float* rhs, float* out, int64_t rows, int64_t k, int64_t n);
// nn.matmul transpose_rhs: out[rows, n] = lhs[rows, k] rhs[n, k]^T.
void matmulTransposeRhs(const float* lhs, const float* rhs, float* out, int64_t rows, int64_t k,
                        int64_t n);
// nn.matmul transpose_lhs: out[m, n] = lhs[rows, m]^T rhs[rows, n], summing
// over all rows (a weight gradient x^T dy).
void matmulTransposeLhs(const float* lhs, const float* rhs, float* out, int64_t rows, int64_t m,
                        int64_t n);

// ---- Normalisation ---------------------------------------------------------

// nn.rms_norm over the last dim: y = x / sqrt(mean(x^2) + eps) * gamma.
void rmsNorm(const float* x, const float* gamma, float* y, int64_t rows, int64_t hidden,
             float epsilon);
// nn.rms_norm_grad: writes dx[rows, hidden] and dgamma[hidden] (overwritten,
// summed over rows).
void rmsNormGrad(const float* x, const float* gamma, const float* dy, float* dx, float* dgamma,
                 int64_t rows, int64_t hidden, float epsilon);

// nn.layer_norm with the biased variance.
void layerNorm(const float* x, const float* gamma, const float* beta, float* y, int64_t rows,
               int64_t hidden, float epsilon);
// nn.layer_norm_grad: writes dx, dgamma and dbeta (both overwritten).
void layerNormGrad(const float* x, const float* gamma, const float* dy, float* dx, float* dgamma,
                   float* dbeta, int64_t rows, int64_t hidden, float epsilon);

// ---- Attention family ------------------------------------------------------

// The shape of attention and rope tensors, [batch, seq, heads, head_dim].
// Keys and values have kv_heads heads; heads % kv_heads == 0 and query head
// h reads kv head h / (heads / kv_heads).
struct AttentionShape {
  int64_t batch;
  int64_t seq;
  int64_t heads;
  int64_t kv_heads;
  int64_t head_dim;
};

// nn.rope on x[batch, seq, heads, head_dim] (head_dim even): rotates the
// pairs (i, i + D/2) by s * theta^(-2i/D), with the frequency scaled as
// `scaling` says (plan/rope_frequency.h), negated when `inverse`; s counts
// from 0. `y` may equal `x` (in place).
void rope(const float* x, float* y, int64_t batch, int64_t seq, int64_t heads, int64_t head_dim,
          float theta, bool inverse, const plan::RopeScaling& scaling = {});

// nn.attention: causal SDPA with scale 1/sqrt(head_dim); q and out are
// [B, S, heads, D], k and v [B, S, kv_heads, D].
void attention(const float* q, const float* k, const float* v, float* out,
               const AttentionShape& shape);
// nn.attention_grad: recomputes the probabilities and writes dq, dk, dv
// (all overwritten); a kv head's gradient sums over its query-head group.
void attentionGrad(const float* q, const float* k, const float* v, const float* dout, float* dq,
                   float* dk, float* dv, const AttentionShape& shape);

// ---- Softmax and elementwise ----------------------------------------------

// nn.softmax over the last dim, max-shifted.
void softmax(const float* x, float* y, int64_t rows, int64_t n);
// nn.softmax_grad from softmax's output y: dx = y (dy - rowsum(dy y)).
void softmaxGrad(const float* y, const float* dy, float* dx, int64_t rows, int64_t n);

// nn.silu: x sigmoid(x); nn.silu_grad: dy s (1 + x (1 - s)).
void silu(const float* x, float* y, int64_t count);
void siluGrad(const float* x, const float* dy, float* dx, int64_t count);

// nn.gelu (tanh approximation) and nn.gelu_grad.
void gelu(const float* x, float* y, int64_t count);
void geluGrad(const float* x, const float* dy, float* dx, int64_t count);

// nn.add / nn.mul, elementwise; `out` may equal an input.
void add(const float* a, const float* b, float* out, int64_t count);
void mul(const float* a, const float* b, float* out, int64_t count);

// nn.reduce_sum: sums x (row-major, `shape`) over `dims` (strictly
// increasing) and writes the remaining dims, in order, to `out`.
void reduceSum(const float* x, std::span<const int64_t> shape, std::span<const int64_t> dims,
               float* out);

// ---- Embedding and loss ----------------------------------------------------

// nn.embedding: out[t, :] = table[ids[t] - row_begin, :]. `table` holds rows
// [row_begin, row_begin + table_rows) of the vocabulary (all of it when
// unsharded: row_begin 0, table_rows V). An id outside that range gives a
// zero row, which is the vocab-parallel shard's contribution to a P(sum)
// output; unsharded, ids must lie in [0, V).
void embedding(const int32_t* ids, const float* table, float* out, int64_t tokens, int64_t hidden,
               int64_t row_begin, int64_t table_rows);
void embedding(const int64_t* ids, const float* table, float* out, int64_t tokens, int64_t hidden,
               int64_t row_begin, int64_t table_rows);
// nn.embedding_grad: zeroes dtable[table_rows, hidden], then scatter-adds
// dy[t] into row ids[t] - row_begin; ids outside the rows are skipped.
void embeddingGrad(const int32_t* ids, const float* dy, float* dtable, int64_t tokens,
                   int64_t hidden, int64_t row_begin, int64_t table_rows);
void embeddingGrad(const int64_t* ids, const float* dy, float* dtable, int64_t tokens,
                   int64_t hidden, int64_t row_begin, int64_t table_rows);

// nn.cross_entropy: (1/tokens) sum_t (logsumexp(logits[t]) -
// logits[t, labels[t]]); labels in [0, vocab), or kIgnoreLabel for a token
// that adds 0 (and still counts in `tokens`, ignore_label.h).
float crossEntropy(const float* logits, const int32_t* labels, int64_t tokens, int64_t vocab);
float crossEntropy(const float* logits, const int64_t* labels, int64_t tokens, int64_t vocab);
// nn.cross_entropy_grad: dlogits = (softmax(logits) - onehot(labels)) *
// dloss * scale. `scale` is the op's attribute (1/N of the whole batch, not
// of this shard's tokens), so a token-sharded gradient stays exact. An
// ignored token's row is 0.
void crossEntropyGrad(const float* logits, const int32_t* labels, float dloss, float scale,
                      float* dlogits, int64_t tokens, int64_t vocab);
void crossEntropyGrad(const float* logits, const int64_t* labels, float dloss, float scale,
                      float* dlogits, int64_t tokens, int64_t vocab);

// nn.bias_add: y[t, o] = x[t, o] + bias[o]; y may alias x.
void biasAdd(const float* x, const float* bias, float* y, int64_t rows, int64_t out);

// Megatron's vocab-parallel cross-entropy (docs/planner_nn.md). `logits`
// rows hold `local` logits of which the first `valid` are global vocab rows
// [row_begin, row_begin + valid); the rest are padding and never read.
// vocabMax: the max over the valid rows (-inf when there are none).
void vocabMax(const float* logits, float* max, int64_t tokens, int64_t local, int64_t valid);
// vocabStats: stats[t] = {sum exp(l - max[t]), l[label - row_begin] - max[t]
// if this shard holds the label else 0}; for an ignored label, {sum, +inf}:
// the marker survives the sum over vocabulary shards.
void vocabStats(const float* logits, const int32_t* labels, const float* max, float* stats,
                int64_t tokens, int64_t local, int64_t valid, int64_t row_begin);
// vocabCrossEntropy: mean over the tokens of log stats[t, 0] - stats[t, 1],
// where an ignored token (stats[t, 1] = +inf) adds 0.
float vocabCrossEntropy(const float* stats, int64_t tokens);
// vocabCrossEntropyGrad: this shard's rows of softmax - onehot, times
// dloss * scale; padding rows and an ignored token's row 0.
void vocabCrossEntropyGrad(const float* logits, const int32_t* labels, const float* max,
                           const float* stats, float dloss, float scale, float* dlogits,
                           int64_t tokens, int64_t local, int64_t valid, int64_t row_begin);

}  // namespace loom::runtime::cpu

#endif  // LOOM_RUNTIME_KERNELS_CPU_CPU_KERNELS_H_
