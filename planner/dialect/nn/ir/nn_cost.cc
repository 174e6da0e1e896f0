// CostOpInterface of the `nn` ops: FLOPs and bytes moved. The per-element
// constants count the arithmetic of each op's documented formula (exp, tanh,
// division each count as one); the table is in docs/planner_nn.md.
#include <cstdint>

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Types.h"
#include "mlir/IR/Value.h"
#include "planner/dialect/nn/ir/nn_interfaces.h"
#include "planner/dialect/nn/ir/nn_ops.h"

namespace loom::planner::nn {
namespace {

int64_t numElements(mlir::Value value) {
  return llvm::cast<mlir::RankedTensorType>(value.getType()).getNumElements();
}

int64_t bytesOf(mlir::Value value) {
  auto type = llvm::cast<mlir::RankedTensorType>(value.getType());
  return type.getNumElements() * (type.getElementType().getIntOrFloatBitWidth() / 8);
}

// Multiply-adds of causal attention's two matrix products (Q K^T and P V):
// only the S(S+1)/2 unmasked (query, key) pairs count, as flash kernels skip
// masked blocks; softmax and scaling are not counted.
int64_t causalAttentionMacs(mlir::Value query) {
  const auto shape = llvm::cast<mlir::RankedTensorType>(query.getType()).getShape();
  const int64_t batch = shape[0];
  const int64_t seq = shape[1];
  const int64_t heads = shape[2];
  const int64_t headDim = shape[3];
  return batch * heads * headDim * (seq * (seq + 1) / 2);
}

}  // namespace

int64_t EmbeddingOp::getFlops() { return 0; }

// Reads the ids and only the looked-up rows, writes the result.
int64_t EmbeddingOp::getBytesMoved() { return bytesOf(getIds()) + 2 * bytesOf(getResult()); }

int64_t LinearOp::getFlops() {
  const int64_t in = getWeight().getType().getShape()[0];
  const int64_t biasAdds = getBias() ? numElements(getResult()) : 0;
  return 2 * numElements(getResult()) * in + biasAdds;
}

int64_t BiasAddOp::getFlops() { return numElements(getResult()); }

int64_t MatmulOp::getFlops() {
  if (getTransposeLhs()) {
    // [T..., m] x [T..., n] -> [m, n]: T * m * n multiply-adds.
    return 2 * numElements(getLhs()) * getRhs().getType().getShape().back();
  }
  return 2 * numElements(getResult()) * getLhs().getType().getShape().back();
}

int64_t RmsNormOp::getFlops() { return 4 * numElements(getInput()); }

int64_t LayerNormOp::getFlops() { return 7 * numElements(getInput()); }

int64_t RopeOp::getFlops() { return 3 * numElements(getInput()); }

int64_t AttentionOp::getFlops() { return 2 * 2 * causalAttentionMacs(getQuery()); }

int64_t SiluOp::getFlops() { return 4 * numElements(getInput()); }

int64_t GeluOp::getFlops() { return 9 * numElements(getInput()); }

int64_t AddOp::getFlops() { return numElements(getResult()); }

int64_t MulOp::getFlops() { return numElements(getResult()); }

int64_t SoftmaxOp::getFlops() { return 5 * numElements(getInput()); }

int64_t ReshapeOp::getFlops() { return 0; }

int64_t TransposeOp::getFlops() { return 0; }

int64_t CrossEntropyOp::getFlops() { return 4 * numElements(getLogits()); }

int64_t EmbeddingGradOp::getFlops() { return numElements(getResultGrad()); }

// Reads ids and result_grad, reads and writes the updated rows, and
// zero-fills the table.
int64_t EmbeddingGradOp::getBytesMoved() {
  return bytesOf(getIds()) + 3 * bytesOf(getResultGrad()) + bytesOf(getResult());
}

int64_t ReduceSumOp::getFlops() { return numElements(getInput()); }

int64_t RmsNormGradOp::getFlops() { return 11 * numElements(getInput()); }

int64_t LayerNormGradOp::getFlops() { return 17 * numElements(getInput()); }

// Five matrix products: Q K^T recomputed, dV, dP, dQ and dK.
int64_t AttentionGradOp::getFlops() { return 5 * 2 * causalAttentionMacs(getQuery()); }

int64_t SoftmaxGradOp::getFlops() { return 4 * numElements(getOutput()); }

int64_t SiluGradOp::getFlops() { return 10 * numElements(getInput()); }

int64_t GeluGradOp::getFlops() { return 18 * numElements(getInput()); }

int64_t CrossEntropyGradOp::getFlops() { return 6 * numElements(getLogits()); }

// nn.cross_entropy's 4 per logit, split: the max, then the shift, exp and
// sum; the loss adds a log and a subtraction per token.
int64_t VocabMaxOp::getFlops() { return numElements(getLogits()); }

int64_t VocabStatsOp::getFlops() { return 3 * numElements(getLogits()); }

int64_t VocabCrossEntropyOp::getFlops() { return numElements(getStats()); }

int64_t VocabCrossEntropyGradOp::getFlops() { return 6 * numElements(getLogits()); }

}  // namespace loom::planner::nn
