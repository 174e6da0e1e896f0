// The per-rank (local) shape of a tensor from its global shape, its
// #dist.placement and the mesh: the rule `dist.annotate` verifies and the plan
// exporter uses to size buffers.
#ifndef LOOM_PLANNER_DIALECT_DIST_IR_LOCAL_SHAPE_H_
#define LOOM_PLANNER_DIALECT_DIST_IR_LOCAL_SHAPE_H_

#include <cstdint>

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Support/LLVM.h"
#include "planner/dialect/dist/ir/dist_attrs.h"
#include "planner/dialect/dist/ir/dist_ops.h"

namespace loom::planner::dist {

// Each dim is divided by the product of the sizes of the mesh axes that
// shard it (shardSize: rounded up when its entries are `padded`); replicate
// and partial entries leave shapes alone. Reports through `emitError`, with a
// note on `mesh`, when the placement does not fit: an entry count other than
// the mesh rank, a sharded dim out of range, a size that does not divide
// without `padded`, `padded` on a size that divides, or the entries of one dim
// disagreeing on `padded`. `placement` must refer to `mesh`.
mlir::FailureOr<llvm::SmallVector<int64_t>> computeLocalShape(
    llvm::ArrayRef<int64_t> global_shape, PlacementAttr placement, MeshOp mesh,
    llvm::function_ref<mlir::InFlightDiagnostic()> emitError);

}  // namespace loom::planner::dist

#endif  // LOOM_PLANNER_DIALECT_DIST_IR_LOCAL_SHAPE_H_
