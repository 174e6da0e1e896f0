// The tensor-parallel rewrites of plan-placement; see tp_rewrites.h.
#include "planner/transforms/placement/tp_rewrites.h"

#include <cstdint>
#include <vector>

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Value.h"
#include "planner/dialect/nn/ir/nn_interfaces.h"
#include "planner/dialect/nn/ir/nn_ops.h"

namespace loom::planner::placement {
namespace {

// What `value` is on mesh axis `axis`: its argument's placement or its
// producer's result placement.
nn::Placement givenOn(const FunctionPlacements& placements, mlir::Value value, int64_t axis) {
  if (auto arg = llvm::dyn_cast<mlir::BlockArgument>(value)) {
    return placements.arguments[arg.getArgNumber()][axis];
  }
  auto result = llvm::cast<mlir::OpResult>(value);
  auto it = placements.ops.find(result.getOwner());
  if (it == placements.ops.end()) return nn::Placement::replicate();
  return it->second.results[result.getResultNumber()][axis];
}

}  // namespace

int64_t splitPartialBiases(mlir::func::FuncOp func, const FunctionPlacements& placements) {
  std::vector<nn::LinearOp> linears;
  for (auto linear : func.getBody().front().getOps<nn::LinearOp>()) {
    if (!linear.getBias()) continue;
    auto it = placements.ops.find(linear);
    if (it == placements.ops.end()) continue;
    const AxisPlacements& bias = it->second.operands[2];
    if (llvm::any_of(bias, [](const nn::Placement& placement) {
          return placement.kind == nn::Placement::Kind::kPartial;
        })) {
      linears.push_back(linear);
    }
  }
  for (nn::LinearOp linear : linears) {
    mlir::OpBuilder builder(linear);
    auto product = nn::LinearOp::create(builder, linear.getLoc(), linear.getInput(),
                                        linear.getWeight(), mlir::Value());
    auto sum =
        nn::BiasAddOp::create(builder, linear.getLoc(), product.getResult(), linear.getBias());
    linear.getResult().replaceAllUsesWith(sum.getResult());
    linear.erase();
  }
  return static_cast<int64_t>(linears.size());
}

int64_t lowerVocabParallelLoss(mlir::func::FuncOp func, const FunctionPlacements& placements,
                               int64_t tpAxis) {
  std::vector<nn::CrossEntropyOp> losses;
  for (auto loss : func.getBody().front().getOps<nn::CrossEntropyOp>()) {
    const nn::Placement given = givenOn(placements, loss.getLogits(), tpAxis);
    const int64_t vocabDim = loss.getLogits().getType().getRank() - 1;
    if (given.kind == nn::Placement::Kind::kShard && given.dim == vocabDim) {
      losses.push_back(loss);
    }
  }
  for (nn::CrossEntropyOp loss : losses) {
    const mlir::TypedValue<mlir::RankedTensorType> logits = loss.getLogits();
    const mlir::Value labels = loss.getLabels();
    const int64_t vocab = logits.getType().getShape().back();
    mlir::OpBuilder builder(loss);
    const mlir::Location loc = loss.getLoc();
    auto max = nn::VocabMaxOp::create(builder, loc, logits, vocab);
    auto stats = nn::VocabStatsOp::create(builder, loc, logits, labels, max.getResult(), vocab);
    auto value = nn::VocabCrossEntropyOp::create(builder, loc, stats.getResult());
    llvm::SmallVector<nn::CrossEntropyGradOp> grads;
    for (mlir::Operation* user : logits.getUsers()) {
      auto grad = llvm::dyn_cast<nn::CrossEntropyGradOp>(user);
      if (grad && grad.getLogits() == logits && grad.getLabels() == labels) {
        grads.push_back(grad);
      }
    }
    for (nn::CrossEntropyGradOp grad : grads) {
      builder.setInsertionPoint(grad);
      auto lowered = nn::VocabCrossEntropyGradOp::create(
          builder, grad.getLoc(), logits, labels, max.getResult(), stats.getResult(),
          grad.getLossGrad(), grad.getScaleAttr(), builder.getI64IntegerAttr(vocab));
      grad.getResult().replaceAllUsesWith(lowered.getResult());
      grad.erase();
    }
    loss.getResult().replaceAllUsesWith(value.getResult());
    loss.erase();
  }
  return static_cast<int64_t>(losses.size());
}

}  // namespace loom::planner::placement
