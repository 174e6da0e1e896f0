// The placement algorithm of plan-placement: per mesh axis, one walk over a
// function's ops that picks which factor of each op's sharding rule the axis
// shards, from the placements of its operands (and, for tensor parallelism,
// the Megatron seeds). The result is plain data; placement.cc writes it as
// #dist.placement attributes.
#ifndef LOOM_PLANNER_TRANSFORMS_PLACEMENT_PROPAGATION_H_
#define LOOM_PLANNER_TRANSFORMS_PLACEMENT_PROPAGATION_H_

#include <cstdint>
#include <string>

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallVector.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Operation.h"
#include "mlir/Support/LLVM.h"
#include "planner/dialect/nn/ir/nn_interfaces.h"
#include "planner/transforms/placement/strategy.h"

namespace loom::planner::placement {

// One mesh axis as the algorithm sees it.
struct MeshAxis {
  std::string name;
  int64_t size;
  AxisStrategy strategy;
};

// The placement of one tensor along every mesh axis, in mesh order.
using AxisPlacements = llvm::SmallVector<nn::Placement, 4>;

// What one op computes on (one entry per operand) and produces (per result).
struct OpPlacements {
  llvm::SmallVector<AxisPlacements> operands;
  llvm::SmallVector<AxisPlacements> results;
};

struct FunctionPlacements {
  // Per argument: a parameter's storage placement, an input's split.
  llvm::SmallVector<AxisPlacements> arguments;
  // Per function result: the placement it must be returned in.
  llvm::SmallVector<AxisPlacements> results;
  // Per nn op of the body.
  llvm::DenseMap<mlir::Operation*, OpPlacements> ops;
};

// Places every argument, nn op and result of `func` (one block of nn ops and
// a return) on a mesh of `axes`. Reports a diagnostic and fails for a
// non-nn op, a batch that does not divide by the data axes, heads that do
// not divide by the tp size, an uneven tp split inside a merged dim, a bad
// `dist.strategy` or `nn.grad_of`. Linear in the number of ops (one walk
// per mesh axis).
struct PlacementOptions {
  // Megatron's sequence parallelism on the tp axis: what tp would
  // replicate (norms, residual adds, the embedding's output) is sharded on
  // the sequence dim instead, so each tp all-reduce becomes a
  // reduce-scatter into sequence shards and an all-gather before the next
  // column-parallel op.
  bool sequence_parallel = false;
};

mlir::FailureOr<FunctionPlacements> placeFunction(mlir::func::FuncOp func,
                                                  llvm::ArrayRef<MeshAxis> axes,
                                                  const PlacementOptions& options = {});

}  // namespace loom::planner::placement

#endif  // LOOM_PLANNER_TRANSFORMS_PLACEMENT_PROPAGATION_H_
