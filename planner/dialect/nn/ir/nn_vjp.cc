// VjpOpInterface of the forward `nn` ops: each builds the backward ops of
// its vector-Jacobian product (the math is in nn_ops.td).
#include <cstdint>

#include "llvm/ADT/SmallVector.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Value.h"
#include "mlir/IR/ValueRange.h"
#include "planner/dialect/nn/ir/nn_interfaces.h"
#include "planner/dialect/nn/ir/nn_ops.h"

namespace loom::planner::nn {

using ::llvm::SmallVector;
using ::mlir::FailureOr;
using ::mlir::OpBuilder;
using ::mlir::Value;
using ::mlir::ValueRange;

namespace {

// Checks that buildVjp got one cotangent of the right type per result.
mlir::LogicalResult checkCotangents(mlir::Operation* op, ValueRange cotangents) {
  if (cotangents.size() != op->getNumResults()) {
    return op->emitOpError() << "vjp needs one cotangent per result, got: " << cotangents.size()
                             << " != " << op->getNumResults()
                             << "; pass a cotangent for every result";
  }
  for (auto [index, cotangent, result] : llvm::enumerate(cotangents, op->getResults())) {
    if (!cotangent || cotangent.getType() != result.getType()) {
      return op->emitOpError() << "vjp cotangent #" << index << " must have type "
                               << result.getType()
                               << ", got: " << (cotangent ? cotangent.getType() : mlir::Type())
                               << "; pass a cotangent of the result's type";
    }
  }
  return mlir::success();
}

// The leading (token) dims of a [T..., features] tensor: what a bias
// gradient sums over.
SmallVector<int64_t> tokenDims(mlir::RankedTensorType type) {
  SmallVector<int64_t> dims;
  for (int64_t dim = 0; dim + 1 < type.getRank(); ++dim) dims.push_back(dim);
  return dims;
}

}  // namespace

FailureOr<SmallVector<Value>> EmbeddingOp::buildVjp(OpBuilder& builder, ValueRange cotangents) {
  if (failed(checkCotangents(*this, cotangents))) return mlir::failure();
  Value tableGrad =
      EmbeddingGradOp::create(builder, getLoc(), getTable().getType(), getIds(), cotangents[0]);
  return SmallVector<Value>{Value(), tableGrad};
}

FailureOr<SmallVector<Value>> LinearOp::buildVjp(OpBuilder& builder, ValueRange cotangents) {
  if (failed(checkCotangents(*this, cotangents))) return mlir::failure();
  const Value dy = cotangents[0];
  SmallVector<Value> grads = {MatmulOp::create(builder, getLoc(), dy, getWeight(),
                                               /*transpose_lhs=*/false, /*transpose_rhs=*/true),
                              MatmulOp::create(builder, getLoc(), getInput(), dy,
                                               /*transpose_lhs=*/true, /*transpose_rhs=*/false)};
  if (getBias()) {
    grads.push_back(ReduceSumOp::create(builder, getLoc(), dy, tokenDims(getInput().getType())));
  }
  return grads;
}

FailureOr<SmallVector<Value>> BiasAddOp::buildVjp(OpBuilder& builder, ValueRange cotangents) {
  if (failed(checkCotangents(*this, cotangents))) return mlir::failure();
  const Value dy = cotangents[0];
  return SmallVector<Value>{
      dy, ReduceSumOp::create(builder, getLoc(), dy, tokenDims(getInput().getType()))};
}

FailureOr<SmallVector<Value>> MatmulOp::buildVjp(OpBuilder& builder, ValueRange cotangents) {
  if (failed(checkCotangents(*this, cotangents))) return mlir::failure();
  const Value dc = cotangents[0];
  const mlir::Location loc = getLoc();
  if (getTransposeLhs()) {
    // C = A^T B over the leading dims: dA = B dC^T, dB = A dC.
    return SmallVector<Value>{MatmulOp::create(builder, loc, getRhs(), dc, false, true),
                              MatmulOp::create(builder, loc, getLhs(), dc, false, false)};
  }
  if (getTransposeRhs()) {
    // C = A B^T: dA = dC B, dB = dC^T A.
    return SmallVector<Value>{MatmulOp::create(builder, loc, dc, getRhs(), false, false),
                              MatmulOp::create(builder, loc, dc, getLhs(), true, false)};
  }
  // C = A B: dA = dC B^T, dB = A^T dC.
  return SmallVector<Value>{MatmulOp::create(builder, loc, dc, getRhs(), false, true),
                            MatmulOp::create(builder, loc, getLhs(), dc, true, false)};
}

FailureOr<SmallVector<Value>> RmsNormOp::buildVjp(OpBuilder& builder, ValueRange cotangents) {
  if (failed(checkCotangents(*this, cotangents))) return mlir::failure();
  auto grad = RmsNormGradOp::create(builder, getLoc(), getInput(), getGamma(), cotangents[0],
                                    getEpsilonAttr());
  return SmallVector<Value>{grad.getInputGrad(), grad.getGammaGrad()};
}

FailureOr<SmallVector<Value>> LayerNormOp::buildVjp(OpBuilder& builder, ValueRange cotangents) {
  if (failed(checkCotangents(*this, cotangents))) return mlir::failure();
  auto grad = LayerNormGradOp::create(builder, getLoc(), getInput(), getGamma(), cotangents[0],
                                      getEpsilonAttr());
  return SmallVector<Value>{grad.getInputGrad(), grad.getGammaGrad(), grad.getBetaGrad()};
}

// The rotation is orthogonal: its transpose is the opposite rotation.
FailureOr<SmallVector<Value>> RopeOp::buildVjp(OpBuilder& builder, ValueRange cotangents) {
  if (failed(checkCotangents(*this, cotangents))) return mlir::failure();
  Value grad = RopeOp::create(builder, getLoc(), cotangents[0], getThetaAttr(),
                              /*inverse=*/!getInverse(), getScaling());
  return SmallVector<Value>{grad};
}

FailureOr<SmallVector<Value>> AttentionOp::buildVjp(OpBuilder& builder, ValueRange cotangents) {
  if (failed(checkCotangents(*this, cotangents))) return mlir::failure();
  auto grad =
      AttentionGradOp::create(builder, getLoc(), getQuery(), getKey(), getValue(), cotangents[0]);
  return SmallVector<Value>{grad.getQueryGrad(), grad.getKeyGrad(), grad.getValueGrad()};
}

FailureOr<SmallVector<Value>> SiluOp::buildVjp(OpBuilder& builder, ValueRange cotangents) {
  if (failed(checkCotangents(*this, cotangents))) return mlir::failure();
  Value grad = SiluGradOp::create(builder, getLoc(), getInput(), cotangents[0]);
  return SmallVector<Value>{grad};
}

FailureOr<SmallVector<Value>> GeluOp::buildVjp(OpBuilder& builder, ValueRange cotangents) {
  if (failed(checkCotangents(*this, cotangents))) return mlir::failure();
  Value grad = GeluGradOp::create(builder, getLoc(), getInput(), cotangents[0]);
  return SmallVector<Value>{grad};
}

FailureOr<SmallVector<Value>> AddOp::buildVjp(OpBuilder&, ValueRange cotangents) {
  if (failed(checkCotangents(*this, cotangents))) return mlir::failure();
  return SmallVector<Value>{cotangents[0], cotangents[0]};
}

FailureOr<SmallVector<Value>> MulOp::buildVjp(OpBuilder& builder, ValueRange cotangents) {
  if (failed(checkCotangents(*this, cotangents))) return mlir::failure();
  return SmallVector<Value>{MulOp::create(builder, getLoc(), cotangents[0], getRhs()),
                            MulOp::create(builder, getLoc(), cotangents[0], getLhs())};
}

FailureOr<SmallVector<Value>> SoftmaxOp::buildVjp(OpBuilder& builder, ValueRange cotangents) {
  if (failed(checkCotangents(*this, cotangents))) return mlir::failure();
  Value grad = SoftmaxGradOp::create(builder, getLoc(), getResult(), cotangents[0]);
  return SmallVector<Value>{grad};
}

FailureOr<SmallVector<Value>> ReshapeOp::buildVjp(OpBuilder& builder, ValueRange cotangents) {
  if (failed(checkCotangents(*this, cotangents))) return mlir::failure();
  Value grad = ReshapeOp::create(builder, getLoc(), getInput().getType(), cotangents[0]);
  return SmallVector<Value>{grad};
}

FailureOr<SmallVector<Value>> TransposeOp::buildVjp(OpBuilder& builder, ValueRange cotangents) {
  if (failed(checkCotangents(*this, cotangents))) return mlir::failure();
  SmallVector<int64_t> inverse(getPermutation().size());
  for (auto [index, dim] : llvm::enumerate(getPermutation())) {
    inverse[dim] = static_cast<int64_t>(index);
  }
  Value grad = TransposeOp::create(builder, getLoc(), cotangents[0], inverse);
  return SmallVector<Value>{grad};
}

// scale = 1 / N with N the tokens of this (unsharded) op, so the backward op
// stays exact when its tokens are later split across devices.
FailureOr<SmallVector<Value>> CrossEntropyOp::buildVjp(OpBuilder& builder, ValueRange cotangents) {
  if (failed(checkCotangents(*this, cotangents))) return mlir::failure();
  const double tokens = static_cast<double>(getLabels().getType().getNumElements());
  Value grad = CrossEntropyGradOp::create(builder, getLoc(), getLogits(), getLabels(),
                                          cotangents[0], builder.getF64FloatAttr(1.0 / tokens));
  return SmallVector<Value>{grad, Value()};
}

}  // namespace loom::planner::nn
