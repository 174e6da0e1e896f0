// CostOpInterface of the `nn` ops: FLOPs and bytes moved, by the MLIR-free
// formulas of planner/cost/op_work.h, so an op costs the same here as in a
// plan (docs/planner_nn.md has the table).
#include <cstdint>
#include <vector>

#include "llvm/ADT/SmallVector.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Types.h"
#include "mlir/IR/Value.h"
#include "planner/cost/op_work.h"
#include "planner/dialect/nn/ir/nn_interfaces.h"
#include "planner/dialect/nn/ir/nn_ops.h"

namespace loom::planner::nn {
namespace {

cost::TensorDesc describe(mlir::Type type) {
  auto tensor = llvm::cast<mlir::RankedTensorType>(type);
  const mlir::Type element = tensor.getElementType();
  return {.shape = tensor.getShape(),
          .element_bytes = element.getIntOrFloatBitWidth() / 8,
          .dtype = element.isBF16()  ? cost::Dtype::kBF16
                   : element.isF16() ? cost::Dtype::kF16
                                     : cost::Dtype::kF32};
}

// Calls `fn` with the op's description (its shapes live as long as the op).
template <typename Fn>
auto withDesc(mlir::Operation* op, Fn fn) {
  llvm::SmallVector<cost::TensorDesc, 4> operands;
  llvm::SmallVector<cost::TensorDesc, 2> results;
  for (mlir::Type type : op->getOperandTypes()) operands.push_back(describe(type));
  for (mlir::Type type : op->getResultTypes()) results.push_back(describe(type));
  const cost::OpDesc desc{.name = op->getName().getStringRef(),
                          .operands = operands,
                          .results = results,
                          .transpose_lhs = op->hasAttr("transpose_lhs")};
  return fn(desc);
}

int64_t flopsOf(mlir::Operation* op) {
  return withDesc(op, [](const cost::OpDesc& desc) { return cost::opFlops(desc).value_or(0); });
}

int64_t bytesOf(mlir::Operation* op) {
  return withDesc(op, [](const cost::OpDesc& desc) { return cost::opBytesMoved(desc); });
}

}  // namespace

cost::ComputeCost computeCostOf(mlir::Operation* op) {
  if (!llvm::isa<CostOpInterface>(op)) return {};
  return withDesc(op, [](const cost::OpDesc& desc) {
    return cost::computeCost(desc).value_or(cost::ComputeCost{});
  });
}

int64_t EmbeddingOp::getFlops() { return flopsOf(*this); }
int64_t EmbeddingOp::getBytesMoved() { return bytesOf(*this); }
int64_t LinearOp::getFlops() { return flopsOf(*this); }
int64_t BiasAddOp::getFlops() { return flopsOf(*this); }
int64_t MatmulOp::getFlops() { return flopsOf(*this); }
int64_t RmsNormOp::getFlops() { return flopsOf(*this); }
int64_t LayerNormOp::getFlops() { return flopsOf(*this); }
int64_t RopeOp::getFlops() { return flopsOf(*this); }
int64_t AttentionOp::getFlops() { return flopsOf(*this); }
int64_t SiluOp::getFlops() { return flopsOf(*this); }
int64_t GeluOp::getFlops() { return flopsOf(*this); }
int64_t AddOp::getFlops() { return flopsOf(*this); }
int64_t MulOp::getFlops() { return flopsOf(*this); }
int64_t SoftmaxOp::getFlops() { return flopsOf(*this); }
int64_t ReshapeOp::getFlops() { return flopsOf(*this); }
int64_t TransposeOp::getFlops() { return flopsOf(*this); }
int64_t CrossEntropyOp::getFlops() { return flopsOf(*this); }
int64_t EmbeddingGradOp::getFlops() { return flopsOf(*this); }
int64_t EmbeddingGradOp::getBytesMoved() { return bytesOf(*this); }
int64_t ReduceSumOp::getFlops() { return flopsOf(*this); }
int64_t RmsNormGradOp::getFlops() { return flopsOf(*this); }
int64_t LayerNormGradOp::getFlops() { return flopsOf(*this); }
int64_t AttentionGradOp::getFlops() { return flopsOf(*this); }
int64_t SoftmaxGradOp::getFlops() { return flopsOf(*this); }
int64_t SiluGradOp::getFlops() { return flopsOf(*this); }
int64_t GeluGradOp::getFlops() { return flopsOf(*this); }
int64_t CrossEntropyGradOp::getFlops() { return flopsOf(*this); }
int64_t VocabMaxOp::getFlops() { return flopsOf(*this); }
int64_t VocabStatsOp::getFlops() { return flopsOf(*this); }
int64_t VocabCrossEntropyOp::getFlops() { return flopsOf(*this); }
int64_t VocabCrossEntropyGradOp::getFlops() { return flopsOf(*this); }

}  // namespace loom::planner::nn
