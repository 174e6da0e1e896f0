// PlacementTransferOpInterface of the `dist` ops: the layout each op gives
// its result along the mesh axes it works on (see dist_interfaces.td).
#include <cstdint>

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "planner/dialect/dist/ir/dist_interfaces.h"
#include "planner/dialect/dist/ir/dist_ops.h"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#include "planner/dialect/dist/ir/dist_interfaces.cpp.inc"
#pragma GCC diagnostic pop

namespace loom::planner::dist {
namespace {

using Placement = llvm::SmallVector<AxisPlacement>;

// `operand` (padded with replicate to one entry per mesh axis) with every
// axis in `opAxes` set to `entry`.
Placement withAxes(llvm::ArrayRef<AxisPlacement> operand, mlir::ArrayAttr opAxes,
                   mlir::ArrayAttr meshAxes, AxisPlacement entry) {
  Placement placement(operand.begin(), operand.end());
  placement.resize(meshAxes.size());
  for (mlir::Attribute axis : opAxes) {
    const auto* it = llvm::find(meshAxes, axis);
    if (it != meshAxes.end()) placement[it - meshAxes.begin()] = entry;
  }
  return placement;
}

}  // namespace

// Gathers and all-reduces leave their axes replicated; reduce-scatters and
// slices shard them along their dim, all-to-alls along the split dim.
Placement AllGatherOp::getResultPlacement(unsigned, llvm::ArrayRef<AxisPlacement> operand,
                                          mlir::ArrayAttr meshAxes) {
  return withAxes(operand, getMeshAxes(), meshAxes, AxisPlacement::replicate());
}

Placement AllGatherStartOp::getResultPlacement(unsigned, llvm::ArrayRef<AxisPlacement> operand,
                                               mlir::ArrayAttr meshAxes) {
  return withAxes(operand, getMeshAxes(), meshAxes, AxisPlacement::replicate());
}

Placement AllReduceOp::getResultPlacement(unsigned, llvm::ArrayRef<AxisPlacement> operand,
                                          mlir::ArrayAttr meshAxes) {
  return withAxes(operand, getMeshAxes(), meshAxes, AxisPlacement::replicate());
}

Placement AllReduceStartOp::getResultPlacement(unsigned, llvm::ArrayRef<AxisPlacement> operand,
                                               mlir::ArrayAttr meshAxes) {
  return withAxes(operand, getMeshAxes(), meshAxes, AxisPlacement::replicate());
}

Placement ReduceScatterOp::getResultPlacement(unsigned, llvm::ArrayRef<AxisPlacement> operand,
                                              mlir::ArrayAttr meshAxes) {
  return withAxes(operand, getMeshAxes(), meshAxes,
                  AxisPlacement::shard(getScatterDim(), getPadded()));
}

Placement ReduceScatterStartOp::getResultPlacement(unsigned, llvm::ArrayRef<AxisPlacement> operand,
                                                   mlir::ArrayAttr meshAxes) {
  return withAxes(operand, getMeshAxes(), meshAxes,
                  AxisPlacement::shard(getScatterDim(), getPadded()));
}

Placement AllToAllOp::getResultPlacement(unsigned, llvm::ArrayRef<AxisPlacement> operand,
                                         mlir::ArrayAttr meshAxes) {
  return withAxes(operand, getMeshAxes(), meshAxes, AxisPlacement::shard(getSplitDim()));
}

Placement AllToAllStartOp::getResultPlacement(unsigned, llvm::ArrayRef<AxisPlacement> operand,
                                              mlir::ArrayAttr meshAxes) {
  return withAxes(operand, getMeshAxes(), meshAxes, AxisPlacement::shard(getSplitDim()));
}

Placement SliceOp::getResultPlacement(unsigned, llvm::ArrayRef<AxisPlacement> operand,
                                      mlir::ArrayAttr meshAxes) {
  return withAxes(operand, getMeshAxes(), meshAxes,
                  AxisPlacement::shard(getSliceDim(), getPadded()));
}

// Every input's shards are flattened into dim 0 of the flat buffer.
Placement BucketOp::getResultPlacement(unsigned, llvm::ArrayRef<AxisPlacement> operand,
                                       mlir::ArrayAttr meshAxes) {
  Placement placement(operand.begin(), operand.end());
  placement.resize(meshAxes.size());
  for (AxisPlacement& entry : placement) {
    if (entry.isShard()) entry = AxisPlacement::shard(0);
  }
  return placement;
}

}  // namespace loom::planner::dist
