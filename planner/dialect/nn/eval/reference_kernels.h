// Float64 reference implementations of the `nn` ops' math, as plain loops
// over row-major tensors. They define what every op computes (the formulas
// are in nn_ops.td) and are the reference that runtime kernels and
// finite-difference tests compare against; they do not depend on MLIR.
#ifndef LOOM_PLANNER_DIALECT_NN_EVAL_REFERENCE_KERNELS_H_
#define LOOM_PLANNER_DIALECT_NN_EVAL_REFERENCE_KERNELS_H_

#include <cstdint>
#include <vector>

#include "plan/rope_frequency.h"

namespace loom::planner::nn::eval {

// A dense row-major tensor. Integer tensors (token ids, labels) hold whole
// numbers; a rank-0 tensor has one value.
struct Tensor {
  Tensor() = default;
  // A tensor of zeros.
  explicit Tensor(std::vector<int64_t> shape);
  Tensor(std::vector<int64_t> shape, std::vector<double> values);

  int64_t numElements() const { return static_cast<int64_t>(values.size()); }
  // The size of the last dim (1 for rank 0).
  int64_t lastDim() const { return shape.empty() ? 1 : shape.back(); }

  std::vector<int64_t> shape;
  std::vector<double> values;
};

struct NormGrads {
  Tensor input;
  Tensor gamma;
  Tensor beta;  // empty for rms_norm
};

struct AttentionGrads {
  Tensor query;
  Tensor key;
  Tensor value;
};

// The kernels assume shapes that the op's verifier accepts and, for
// embedding ops and cross-entropy, ids/labels in [0, vocab).
Tensor embedding(const Tensor& ids, const Tensor& table);
Tensor linear(const Tensor& input, const Tensor& weight, const Tensor* bias);
Tensor biasAdd(const Tensor& input, const Tensor& bias);
Tensor matmul(const Tensor& lhs, const Tensor& rhs, bool transposeLhs, bool transposeRhs);
Tensor rmsNorm(const Tensor& input, const Tensor& gamma, double epsilon);
Tensor layerNorm(const Tensor& input, const Tensor& gamma, const Tensor& beta, double epsilon);
Tensor rope(const Tensor& input, double theta, bool inverse,
            const loom::plan::RopeScaling& scaling = {});
Tensor attention(const Tensor& query, const Tensor& key, const Tensor& value);
Tensor silu(const Tensor& input);
Tensor gelu(const Tensor& input);
Tensor add(const Tensor& lhs, const Tensor& rhs);
Tensor mul(const Tensor& lhs, const Tensor& rhs);
Tensor softmax(const Tensor& input);
Tensor reshape(const Tensor& input, std::vector<int64_t> shape);
Tensor transpose(const Tensor& input, const std::vector<int64_t>& permutation);
Tensor crossEntropy(const Tensor& logits, const Tensor& labels);

Tensor embeddingGrad(const Tensor& ids, const Tensor& resultGrad, int64_t vocab);
Tensor reduceSum(const Tensor& input, const std::vector<int64_t>& dims);
NormGrads rmsNormGrad(const Tensor& input, const Tensor& gamma, const Tensor& resultGrad,
                      double epsilon);
NormGrads layerNormGrad(const Tensor& input, const Tensor& gamma, const Tensor& resultGrad,
                        double epsilon);
AttentionGrads attentionGrad(const Tensor& query, const Tensor& key, const Tensor& value,
                             const Tensor& resultGrad);
Tensor softmaxGrad(const Tensor& output, const Tensor& resultGrad);
Tensor siluGrad(const Tensor& input, const Tensor& resultGrad);
Tensor geluGrad(const Tensor& input, const Tensor& resultGrad);
Tensor crossEntropyGrad(const Tensor& logits, const Tensor& labels, const Tensor& lossGrad,
                        double scale);

// The vocab-parallel cross-entropy (docs/planner_nn.md, "Vocab-parallel
// cross-entropy"). `logits` is [T..., V]: rows [rowBegin, rowBegin + V) of
// a [T..., vocab] tensor zero-padded past `vocab` (rowBegin = 0 and
// V = vocab unsharded). Only its real rows, the global indices below
// `vocab`, are read, and labels are global indices in [0, vocab): a shard
// gives its contribution to the partial<max> (vocabMax) or partial<sum>
// (vocabStats) result, and its rows of the gradient (0 on padding).
Tensor vocabMax(const Tensor& logits, int64_t rowBegin, int64_t vocab);
Tensor vocabStats(const Tensor& logits, const Tensor& labels, const Tensor& max, int64_t rowBegin,
                  int64_t vocab);
Tensor vocabCrossEntropy(const Tensor& stats);
Tensor vocabCrossEntropyGrad(const Tensor& logits, const Tensor& labels, const Tensor& max,
                             const Tensor& stats, const Tensor& lossGrad, double scale,
                             int64_t rowBegin, int64_t vocab);

}  // namespace loom::planner::nn::eval

#endif  // LOOM_PLANNER_DIALECT_NN_EVAL_REFERENCE_KERNELS_H_
