// nn.attention and nn.attention_grad (declared in cpu_kernels.h) as blocked,
// flash-attention style kernels: per (batch, query head), tiles of query rows
// by key columns whose products are OpenBLAS GEMMs, an online softmax in f32,
// and no score matrix larger than one tile. The backward recomputes the
// forward per head (output and logsumexp) rather than saving it, so the
// signatures stay those of the scalar kernels (attention_reference.h).
//
// Determinism: a (batch, head) is computed from its own rows, packed into
// contiguous [seq, head_dim] buffers, with a tile size that never depends on
// the shape. Every GEMM and every reduction therefore sees the same operands
// in the same order whatever else the call holds, so splitting the heads
// (tensor parallel) or the batch (data parallel) over calls gives the same
// bits as one call.
#include <cblas.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <vector>

#include "runtime/kernels/cpu/cpu_kernels.h"
#include "runtime/kernels/cpu/simd_exp.h"

namespace loom::runtime::cpu {
namespace {

// Query rows and key columns per tile. A constant, never derived from the
// shape: that is what keeps a head's bits independent of how the call is
// split. 32, 48, 64 and 96 ran within 10 % of each other at kernels_bench's
// shapes; 64 keeps a tile's GEMMs at or under OpenBLAS's single-thread
// threshold (64^3 multiply-adds) for head_dim <= 64, and a tile of scores
// (16 KiB) in L1 beside its operands.
constexpr int64_t kTile = 64;

// One (batch, query head) and its kv head, packed [seq, dim] row-major: the
// kernels below see only these, never the caller's [B, S, H, D] strides.
struct Head {
  Head(int64_t seq, int64_t dim, bool backward)
      : seq(seq),
        dim(dim),
        scale(1.0f / std::sqrt(static_cast<float>(dim))),
        q(seq * dim),
        k(seq * dim),
        v(seq * dim),
        out(seq * dim),
        lse(seq),
        probs(kTile * kTile) {
    if (!backward) return;
    for (std::vector<float>* x : {&dout, &dq, &dk, &dv}) x->resize(seq * dim);
    delta.resize(seq);
    dprobs.resize(kTile * kTile);
  }

  int64_t seq;
  int64_t dim;
  float scale;
  std::vector<float> q, k, v, out, lse, probs;
  // Backward only: dout, the gradients, rowsum(dout * out) and one tile of
  // dP / dS.
  std::vector<float> dout, dq, dk, dv, delta, dprobs;
};

// Query rows [row0, row0 + rows) against key columns [col0, col0 + cols).
// Row r sees the columns up to its own position, which only cuts a tile that
// reaches the diagonal.
struct Tile {
  int64_t row0, rows, col0, cols;

  int64_t visible(int64_t r) const { return std::min(cols, row0 + r + 1 - col0); }
};

// Calls visit(tile) for the tiles of query block row0 that the mask leaves
// anything in, in a fixed order: key blocks 0 .. row0 - kTile whole, then the
// diagonal block as its two row halves, each stopping at its own diagonal,
// which skips the quarter of that block the mask would zero.
template <typename Visit>
void forEachTile(const Head& h, int64_t row0, const Visit& visit) {
  const int64_t rows = std::min(kTile, h.seq - row0);
  for (int64_t col0 = 0; col0 < row0; col0 += kTile) visit(Tile{row0, rows, col0, kTile});
  const int64_t half = (rows + 1) / 2;
  visit(Tile{row0, half, row0, half});
  if (rows > half) visit(Tile{row0 + half, rows - half, row0, rows});
}

// dst[s, :] = src[s * stride, :dim]: one head out of a [S, H, D] slab.
void gatherHead(const float* src, int64_t stride, const Head& h, std::vector<float>& dst) {
  for (int64_t s = 0; s < h.seq; ++s) std::copy_n(src + s * stride, h.dim, &dst[s * h.dim]);
}

void scatterHead(const std::vector<float>& src, const Head& h, int64_t stride, float* dst) {
  for (int64_t s = 0; s < h.seq; ++s) std::copy_n(&src[s * h.dim], h.dim, dst + s * stride);
}

// h.probs[rows, cols] = scale * q[tile rows] k[tile cols]^T.
void tileScores(Head& h, const Tile& t) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, t.rows, t.cols, h.dim, h.scale,
              &h.q[t.row0 * h.dim], h.dim, &h.k[t.col0 * h.dim], h.dim, 0.0f, h.probs.data(),
              t.cols);
}

// x[j] = exp(x[j] - shift) for j < n and 0 for the masked rest of the row up
// to `cols`; returns the sum of the first n (simd_exp.h).
float expRow(float* x, int64_t n, int64_t cols, float shift) {
  const float sum = expShiftedSum(x, x, n, shift);
  std::fill(x + n, x + cols, 0.0f);
  return sum;
}

void scaleRow(float* x, int64_t n, float factor) {
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) x[j] *= factor;
}

// One tile of the online softmax: turns h.probs into exp(scores - new max),
// rescales the rows' running maxima, sums and outputs to the new max, and
// adds probs v[tile cols] to the outputs; a row's first tile starts them.
// `max` and `sum` point at the tile's first row.
void forwardTile(Head& h, const Tile& t, float* max, float* sum) {
  const bool first = t.col0 == 0;
  float* out = &h.out[t.row0 * h.dim];
  for (int64_t r = 0; r < t.rows; ++r) {
    float* p = &h.probs[r * t.cols];
    const int64_t n = t.visible(r);
    const float new_max = first ? rowMax(p, n) : std::max(max[r], rowMax(p, n));
    const float row_sum = expRow(p, n, t.cols, new_max);
    if (first) {
      sum[r] = row_sum;
    } else {
      const float correction = std::exp(max[r] - new_max);
      sum[r] = sum[r] * correction + row_sum;
      scaleRow(out + r * h.dim, h.dim, correction);
    }
    max[r] = new_max;
  }
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, t.rows, h.dim, t.cols, 1.0f,
              h.probs.data(), t.cols, &h.v[t.col0 * h.dim], h.dim, first ? 0.0f : 1.0f, out, h.dim);
}

// h.out and h.lse from h.q, h.k and h.v: each query block runs over its key
// blocks in ascending order, then divides by the softmax's sum.
void forwardHead(Head& h) {
  std::array<float, kTile> max, sum;
  for (int64_t row0 = 0; row0 < h.seq; row0 += kTile) {
    forEachTile(h, row0, [&](const Tile& t) {
      tileScores(h, t);
      forwardTile(h, t, &max[t.row0 - row0], &sum[t.row0 - row0]);
    });
    const int64_t rows = std::min(kTile, h.seq - row0);
    for (int64_t r = 0; r < rows; ++r) {
      scaleRow(&h.out[(row0 + r) * h.dim], h.dim, 1.0f / sum[r]);
      h.lse[row0 + r] = max[r] + std::log(sum[r]);
    }
  }
}

// h.delta[i] = rowsum(dout_i * out_i), the softmax backward's sum_j p_ij dp_ij.
void computeDelta(Head& h) {
  for (int64_t i = 0; i < h.seq; ++i) {
    const float* a = &h.dout[i * h.dim];
    const float* b = &h.out[i * h.dim];
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int64_t j = 0; j < h.dim; ++j) sum += a[j] * b[j];
    h.delta[i] = sum;
  }
}

// One tile of the backward, after tileScores: P = exp(scores - lse), then
// dv[cols] += P^T dout[rows], dP = dout[rows] v[cols]^T,
// dS = P (dP - delta), dq[rows] += scale dS k[cols] and
// dk[cols] += scale dS^T q[rows]. Masked entries of P are 0, so dS is too.
void backwardTile(Head& h, const Tile& t) {
  float* p = h.probs.data();
  float* ds = h.dprobs.data();
  const float* dout = &h.dout[t.row0 * h.dim];
  for (int64_t r = 0; r < t.rows; ++r) {
    expRow(p + r * t.cols, t.visible(r), t.cols, h.lse[t.row0 + r]);
  }
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, t.cols, h.dim, t.rows, 1.0f, p, t.cols, dout,
              h.dim, 1.0f, &h.dv[t.col0 * h.dim], h.dim);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, t.rows, t.cols, h.dim, 1.0f, dout, h.dim,
              &h.v[t.col0 * h.dim], h.dim, 0.0f, ds, t.cols);
  for (int64_t r = 0; r < t.rows; ++r) {
    const float delta = h.delta[t.row0 + r];
    float* ds_r = ds + r * t.cols;
    const float* p_r = p + r * t.cols;
#pragma omp simd
    for (int64_t c = 0; c < t.cols; ++c) ds_r[c] = p_r[c] * (ds_r[c] - delta);
  }
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, t.rows, h.dim, t.cols, h.scale, ds, t.cols,
              &h.k[t.col0 * h.dim], h.dim, 1.0f, &h.dq[t.row0 * h.dim], h.dim);
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, t.cols, h.dim, t.rows, h.scale, ds, t.cols,
              &h.q[t.row0 * h.dim], h.dim, 1.0f, &h.dk[t.col0 * h.dim], h.dim);
}

// Overwrites h.dq and adds this query head's share to h.dk and h.dv. Query
// blocks run in ascending order, each over its key blocks in ascending
// order, which fixes the order of every gradient's sum.
void backwardHead(Head& h) {
  forwardHead(h);
  computeDelta(h);
  std::fill(h.dq.begin(), h.dq.end(), 0.0f);
  for (int64_t row0 = 0; row0 < h.seq; row0 += kTile) {
    forEachTile(h, row0, [&](const Tile& t) {
      tileScores(h, t);
      backwardTile(h, t);
    });
  }
}

// Where (batch b, head) starts in a [B, S, heads, D] tensor; its rows are
// heads * D apart.
int64_t headOffset(const AttentionShape& s, int64_t heads, int64_t b, int64_t head) {
  return (b * s.seq * heads + head) * s.head_dim;
}

}  // namespace

void attention(const float* q, const float* k, const float* v, float* out,
               const AttentionShape& shape) {
  const auto [batch, seq, heads, kv_heads, head_dim] = shape;
  const int64_t group = heads / kv_heads;
  Head h(seq, head_dim, /*backward=*/false);
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t g = 0; g < kv_heads; ++g) {
      const int64_t kv_offset = headOffset(shape, kv_heads, b, g);
      gatherHead(k + kv_offset, kv_heads * head_dim, h, h.k);
      gatherHead(v + kv_offset, kv_heads * head_dim, h, h.v);
      for (int64_t head = g * group; head < (g + 1) * group; ++head) {
        const int64_t q_offset = headOffset(shape, heads, b, head);
        gatherHead(q + q_offset, heads * head_dim, h, h.q);
        forwardHead(h);
        scatterHead(h.out, h, heads * head_dim, out + q_offset);
      }
    }
  }
}

void attentionGrad(const float* q, const float* k, const float* v, const float* dout, float* dq,
                   float* dk, float* dv, const AttentionShape& shape) {
  const auto [batch, seq, heads, kv_heads, head_dim] = shape;
  const int64_t group = heads / kv_heads;
  Head h(seq, head_dim, /*backward=*/true);
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t g = 0; g < kv_heads; ++g) {
      const int64_t kv_offset = headOffset(shape, kv_heads, b, g);
      gatherHead(k + kv_offset, kv_heads * head_dim, h, h.k);
      gatherHead(v + kv_offset, kv_heads * head_dim, h, h.v);
      std::fill(h.dk.begin(), h.dk.end(), 0.0f);
      std::fill(h.dv.begin(), h.dv.end(), 0.0f);
      // The group's query heads add into dk and dv in ascending order.
      for (int64_t head = g * group; head < (g + 1) * group; ++head) {
        const int64_t q_offset = headOffset(shape, heads, b, head);
        gatherHead(q + q_offset, heads * head_dim, h, h.q);
        gatherHead(dout + q_offset, heads * head_dim, h, h.dout);
        backwardHead(h);
        scatterHead(h.dq, h, heads * head_dim, dq + q_offset);
      }
      scatterHead(h.dk, h, kv_heads * head_dim, dk + kv_offset);
      scatterHead(h.dv, h, kv_heads * head_dim, dv + kv_offset);
    }
  }
}

}  // namespace loom::runtime::cpu
