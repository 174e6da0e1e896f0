// ShardingRuleOpInterface of the `nn` ops: the einsum-like factors of each
// op (see OpShardingRule and docs/planner_nn.md for the format).
#include <cstdint>
#include <string>

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Value.h"
#include "planner/dialect/nn/ir/nn_interfaces.h"
#include "planner/dialect/nn/ir/nn_ops.h"

namespace loom::planner::nn {
namespace {

llvm::ArrayRef<int64_t> shapeOf(mlir::Value value) {
  return llvm::cast<mlir::RankedTensorType>(value.getType()).getShape();
}

// One factor per dim.
TensorFactors dimsOf(llvm::ArrayRef<int64_t> factors) {
  TensorFactors dims;
  for (int64_t factor : factors) dims.push_back({factor});
  return dims;
}

// `dims` followed by one more dim made of `factor`.
TensorFactors appendDim(TensorFactors dims, int64_t factor) {
  dims.push_back({factor});
  return dims;
}

// Adds one factor per size, named prefix0, prefix1, ...
llvm::SmallVector<int64_t> addFactors(OpShardingRule& rule, llvm::StringRef prefix, FactorKind kind,
                                      llvm::ArrayRef<int64_t> sizes,
                                      ReductionKind reduction = ReductionKind::kSum) {
  llvm::SmallVector<int64_t> factors;
  for (auto [index, size] : llvm::enumerate(sizes)) {
    factors.push_back(rule.addFactor(prefix.str() + std::to_string(index), kind, size,
                                     /*needsReplication=*/false, reduction));
  }
  return factors;
}

// An elementwise op over `shape` with `numOperands` operands and one result
// of that shape; the last dim needs replication when the op reduces over it
// (softmax).
OpShardingRule elementwiseRule(llvm::ArrayRef<int64_t> shape, int64_t numOperands,
                               bool lastDimIsReduced) {
  OpShardingRule rule;
  llvm::SmallVector<int64_t> factors;
  for (auto [index, size] : llvm::enumerate(shape)) {
    const bool reduced = lastDimIsReduced && index + 1 == shape.size();
    factors.push_back(
        rule.addFactor("d" + std::to_string(index), FactorKind::kOther, size, reduced));
  }
  for (int64_t i = 0; i < numOperands; ++i) rule.addOperand(dimsOf(factors));
  rule.addResult(dimsOf(factors));
  return rule;
}

// A norm over the last dim: input [b..., h] and per-feature operands [h].
// With `numGradResults` > 0 it is the backward op: result_grad follows the
// operands, and input_grad plus that many [h] gradients are the results.
OpShardingRule normRule(llvm::ArrayRef<int64_t> inputShape, int64_t numPerFeatureOperands,
                        int64_t numGradResults) {
  OpShardingRule rule;
  const TensorFactors tokens =
      dimsOf(addFactors(rule, "b", FactorKind::kBatch, inputShape.drop_back()));
  const int64_t hidden = rule.addFactor("h", FactorKind::kOther, inputShape.back(),
                                        /*needsReplication=*/true);
  const TensorFactors input = appendDim(tokens, hidden);
  rule.addOperand(input);
  for (int64_t i = 0; i < numPerFeatureOperands; ++i) {
    rule.addOperand({{hidden}});
  }
  if (numGradResults > 0) rule.addOperand(input);
  rule.addResult(input);
  for (int64_t i = 0; i < numGradResults; ++i) rule.addResult({{hidden}});
  return rule;
}

// Attention's factors: batch b, query positions s, key positions t, kv
// heads h, query heads per kv head g (only when > 1), the query-key dim d
// and the value dim e. Causal masking ties positions to global indices, and
// softmax runs over t, so s, t and d need replication; e does in the
// backward op, where dP = dO V^T sums over it.
OpShardingRule attentionRule(mlir::Value query, mlir::Value key, bool isGrad) {
  const llvm::ArrayRef<int64_t> q = shapeOf(query);
  const llvm::ArrayRef<int64_t> k = shapeOf(key);
  OpShardingRule rule;
  const int64_t b = rule.addFactor("b", FactorKind::kBatch, q[0]);
  const int64_t s = rule.addFactor("s", FactorKind::kOther, q[1], true);
  const int64_t t = rule.addFactor("t", FactorKind::kContracting, k[1], true);
  const int64_t h = rule.addFactor("h", FactorKind::kHead, k[2]);
  DimFactors queryHeads = {h};
  if (q[2] != k[2]) {
    queryHeads.push_back(rule.addFactor("g", FactorKind::kHead, q[2] / k[2]));
  }
  const int64_t d = rule.addFactor("d", FactorKind::kContracting, q[3], true);
  const int64_t e = rule.addFactor("e", FactorKind::kOther, k[3], isGrad);
  const TensorFactors queryDims = {{b}, {s}, queryHeads, {d}};
  const TensorFactors keyDims = {{b}, {t}, {h}, {d}};
  const TensorFactors valueDims = {{b}, {t}, {h}, {e}};
  const TensorFactors outputDims = {{b}, {s}, queryHeads, {e}};
  rule.addOperand(queryDims);
  rule.addOperand(keyDims);
  rule.addOperand(valueDims);
  if (isGrad) {
    rule.addOperand(outputDims);
    rule.addResult(queryDims);
    rule.addResult(keyDims);
    rule.addResult(valueDims);
  } else {
    rule.addResult(outputDims);
  }
  return rule;
}

// Cross-entropy over logits [b..., v]: the token factors average into the
// forward op's loss (the backward op keeps them in its result), and the
// vocab factor needs replication (logsumexp runs over it).
OpShardingRule crossEntropyRule(llvm::ArrayRef<int64_t> logitsShape, bool isGrad) {
  OpShardingRule rule;
  const TensorFactors tokens =
      dimsOf(addFactors(rule, "b", FactorKind::kBatch, logitsShape.drop_back(),
                        isGrad ? ReductionKind::kSum : ReductionKind::kMean));
  const int64_t vocab = rule.addFactor("v", FactorKind::kVocab, logitsShape.back(),
                                       /*needsReplication=*/true);
  const TensorFactors logits = appendDim(tokens, vocab);
  rule.addOperand(logits);
  rule.addOperand(tokens);
  if (isGrad) {
    rule.addOperand({});
    rule.addResult(logits);
  } else {
    rule.addResult({});
  }
  return rule;
}

// The vocab-parallel cross-entropy ops over logits [b..., v]: the token
// factors are batch (averaged into the loss), the vocab factor is shardable
// (a shard reduces over its rows; the max combines by max, the statistics
// by sum), and the pair dim of the statistics needs replication.
struct VocabFactors {
  TensorFactors tokens;
  int64_t vocab = -1;
  int64_t pair = -1;
};

VocabFactors vocabFactors(OpShardingRule& rule, llvm::ArrayRef<int64_t> tokenShape, int64_t vocab,
                          ReductionKind tokenReduction, ReductionKind vocabReduction) {
  VocabFactors factors;
  factors.tokens = dimsOf(addFactors(rule, "b", FactorKind::kBatch, tokenShape, tokenReduction));
  if (vocab > 0) {
    factors.vocab = rule.addFactor("v", FactorKind::kVocab, vocab,
                                   /*needsReplication=*/false, vocabReduction);
  }
  factors.pair = rule.addFactor("k", FactorKind::kOther, 2,
                                /*needsReplication=*/true);
  return factors;
}

}  // namespace

// A shard of the table holds a row range: it looks up the ids in its range
// and contributes zeros for the others, so the shards sum to the result.
OpShardingRule EmbeddingOp::getShardingRule() {
  OpShardingRule rule;
  const TensorFactors tokens = dimsOf(addFactors(rule, "b", FactorKind::kBatch, shapeOf(getIds())));
  const llvm::ArrayRef<int64_t> table = shapeOf(getTable());
  const int64_t vocab = rule.addFactor("v", FactorKind::kVocab, table[0]);
  const int64_t hidden = rule.addFactor("h", FactorKind::kOther, table[1]);
  rule.addOperand(tokens);
  rule.addOperand({{vocab}, {hidden}});
  rule.addResult(appendDim(tokens, hidden));
  return rule;
}

// The bias is an addend: with the contracting factor sharded, each shard
// adds its part of a partial bias so that the shards sum to the result.
OpShardingRule LinearOp::getShardingRule() {
  OpShardingRule rule;
  const llvm::ArrayRef<int64_t> input = shapeOf(getInput());
  const TensorFactors tokens = dimsOf(addFactors(rule, "b", FactorKind::kBatch, input.drop_back()));
  const int64_t in = rule.addFactor("i", FactorKind::kContracting, input.back());
  const int64_t out = rule.addFactor("o", FactorKind::kOther, shapeOf(getWeight())[1]);
  rule.addOperand(appendDim(tokens, in));
  rule.addOperand({{in}, {out}});
  if (getBias()) rule.addOperand({{out}}, /*isAddend=*/true);
  rule.addResult(appendDim(tokens, out));
  return rule;
}

OpShardingRule BiasAddOp::getShardingRule() {
  OpShardingRule rule;
  const llvm::ArrayRef<int64_t> input = shapeOf(getInput());
  const TensorFactors tokens = dimsOf(addFactors(rule, "b", FactorKind::kBatch, input.drop_back()));
  const int64_t out = rule.addFactor("o", FactorKind::kOther, input.back());
  rule.addOperand(appendDim(tokens, out));
  rule.addOperand({{out}});
  rule.addResult(appendDim(tokens, out));
  return rule;
}

OpShardingRule MatmulOp::getShardingRule() {
  OpShardingRule rule;
  const llvm::ArrayRef<int64_t> lhs = shapeOf(getLhs());
  const llvm::ArrayRef<int64_t> rhs = shapeOf(getRhs());
  const TensorFactors tokens = dimsOf(addFactors(rule, "b", FactorKind::kBatch, lhs.drop_back()));
  if (getTransposeLhs()) {
    const int64_t m = rule.addFactor("m", FactorKind::kOther, lhs.back());
    const int64_t n = rule.addFactor("n", FactorKind::kOther, rhs.back());
    rule.addOperand(appendDim(tokens, m));
    rule.addOperand(appendDim(tokens, n));
    rule.addResult({{m}, {n}});
    return rule;
  }
  const int64_t k = rule.addFactor("k", FactorKind::kContracting, lhs.back());
  const int64_t n = rule.addFactor("n", FactorKind::kOther, getTransposeRhs() ? rhs[0] : rhs[1]);
  rule.addOperand(appendDim(tokens, k));
  rule.addOperand(getTransposeRhs() ? TensorFactors{{n}, {k}} : TensorFactors{{k}, {n}});
  rule.addResult(appendDim(tokens, n));
  return rule;
}

OpShardingRule RmsNormOp::getShardingRule() { return normRule(shapeOf(getInput()), 1, 0); }

OpShardingRule LayerNormOp::getShardingRule() { return normRule(shapeOf(getInput()), 2, 0); }

// Rotation angles depend on the global position and pair feature i with
// i + head_dim/2, so seq and head_dim need replication.
OpShardingRule RopeOp::getShardingRule() {
  const llvm::ArrayRef<int64_t> shape = shapeOf(getInput());
  OpShardingRule rule;
  const TensorFactors dims = {{rule.addFactor("b", FactorKind::kBatch, shape[0])},
                              {rule.addFactor("s", FactorKind::kOther, shape[1], true)},
                              {rule.addFactor("h", FactorKind::kHead, shape[2])},
                              {rule.addFactor("d", FactorKind::kOther, shape[3], true)}};
  rule.addOperand(dims);
  rule.addResult(dims);
  return rule;
}

OpShardingRule AttentionOp::getShardingRule() {
  return attentionRule(getQuery(), getKey(), /*isGrad=*/false);
}

OpShardingRule SiluOp::getShardingRule() { return elementwiseRule(shapeOf(getInput()), 1, false); }

OpShardingRule GeluOp::getShardingRule() { return elementwiseRule(shapeOf(getInput()), 1, false); }

OpShardingRule AddOp::getShardingRule() { return elementwiseRule(shapeOf(getLhs()), 2, false); }

OpShardingRule MulOp::getShardingRule() { return elementwiseRule(shapeOf(getLhs()), 2, false); }

OpShardingRule SoftmaxOp::getShardingRule() {
  return elementwiseRule(shapeOf(getInput()), 1, true);
}

OpShardingRule ReshapeOp::getShardingRule() {
  const ReshapeRefinement refinement = refineReshape(shapeOf(getInput()), shapeOf(getResult()));
  OpShardingRule rule;
  addFactors(rule, "r", FactorKind::kOther, refinement.factorSizes);
  rule.addOperand(refinement.input);
  rule.addResult(refinement.result);
  return rule;
}

OpShardingRule TransposeOp::getShardingRule() {
  OpShardingRule rule;
  const llvm::SmallVector<int64_t> factors =
      addFactors(rule, "d", FactorKind::kOther, shapeOf(getInput()));
  rule.addOperand(dimsOf(factors));
  TensorFactors result;
  for (int64_t dim : getPermutation()) result.push_back({factors[dim]});
  rule.addResult(result);
  return rule;
}

OpShardingRule CrossEntropyOp::getShardingRule() {
  return crossEntropyRule(shapeOf(getLogits()), /*isGrad=*/false);
}

// A shard of the vocab computes its rows of the table gradient.
OpShardingRule EmbeddingGradOp::getShardingRule() {
  OpShardingRule rule;
  const TensorFactors tokens = dimsOf(addFactors(rule, "b", FactorKind::kBatch, shapeOf(getIds())));
  const llvm::ArrayRef<int64_t> table = shapeOf(getResult());
  const int64_t vocab = rule.addFactor("v", FactorKind::kVocab, table[0]);
  const int64_t hidden = rule.addFactor("h", FactorKind::kOther, table[1]);
  rule.addOperand(tokens);
  rule.addOperand(appendDim(tokens, hidden));
  rule.addResult({{vocab}, {hidden}});
  return rule;
}

OpShardingRule ReduceSumOp::getShardingRule() {
  OpShardingRule rule;
  const llvm::SmallVector<int64_t> factors =
      addFactors(rule, "d", FactorKind::kOther, shapeOf(getInput()));
  rule.addOperand(dimsOf(factors));
  TensorFactors result;
  for (auto [dim, factor] : llvm::enumerate(factors)) {
    if (!llvm::is_contained(getDims(), static_cast<int64_t>(dim))) {
      result.push_back({factor});
    }
  }
  rule.addResult(result);
  return rule;
}

OpShardingRule RmsNormGradOp::getShardingRule() { return normRule(shapeOf(getInput()), 1, 1); }

OpShardingRule LayerNormGradOp::getShardingRule() { return normRule(shapeOf(getInput()), 1, 2); }

OpShardingRule AttentionGradOp::getShardingRule() {
  return attentionRule(getQuery(), getKey(), /*isGrad=*/true);
}

OpShardingRule SoftmaxGradOp::getShardingRule() {
  return elementwiseRule(shapeOf(getOutput()), 2, true);
}

OpShardingRule SiluGradOp::getShardingRule() {
  return elementwiseRule(shapeOf(getInput()), 2, false);
}

OpShardingRule GeluGradOp::getShardingRule() {
  return elementwiseRule(shapeOf(getInput()), 2, false);
}

OpShardingRule CrossEntropyGradOp::getShardingRule() {
  return crossEntropyRule(shapeOf(getLogits()), /*isGrad=*/true);
}

OpShardingRule VocabMaxOp::getShardingRule() {
  const llvm::ArrayRef<int64_t> logits = shapeOf(getLogits());
  OpShardingRule rule;
  const TensorFactors tokens =
      dimsOf(addFactors(rule, "b", FactorKind::kBatch, logits.drop_back()));
  const int64_t vocab = rule.addFactor("v", FactorKind::kVocab, logits.back(),
                                       /*needsReplication=*/false, ReductionKind::kMax);
  rule.addOperand(appendDim(tokens, vocab));
  rule.addResult(tokens);
  return rule;
}

OpShardingRule VocabStatsOp::getShardingRule() {
  const llvm::ArrayRef<int64_t> logits = shapeOf(getLogits());
  OpShardingRule rule;
  const VocabFactors f = vocabFactors(rule, logits.drop_back(), logits.back(), ReductionKind::kSum,
                                      ReductionKind::kSum);
  rule.addOperand(appendDim(f.tokens, f.vocab));
  rule.addOperand(f.tokens);
  rule.addOperand(f.tokens);
  rule.addResult(appendDim(f.tokens, f.pair));
  return rule;
}

OpShardingRule VocabCrossEntropyOp::getShardingRule() {
  OpShardingRule rule;
  const VocabFactors f = vocabFactors(rule, shapeOf(getStats()).drop_back(), /*vocab=*/0,
                                      ReductionKind::kMean, ReductionKind::kSum);
  rule.addOperand(appendDim(f.tokens, f.pair));
  rule.addResult({});
  return rule;
}

OpShardingRule VocabCrossEntropyGradOp::getShardingRule() {
  const llvm::ArrayRef<int64_t> logits = shapeOf(getLogits());
  OpShardingRule rule;
  const VocabFactors f = vocabFactors(rule, logits.drop_back(), logits.back(), ReductionKind::kSum,
                                      ReductionKind::kSum);
  const TensorFactors logitDims = appendDim(f.tokens, f.vocab);
  rule.addOperand(logitDims);
  rule.addOperand(f.tokens);
  rule.addOperand(f.tokens);
  rule.addOperand(appendDim(f.tokens, f.pair));
  rule.addOperand({});
  rule.addResult(logitDims);
  return rule;
}

}  // namespace loom::planner::nn
