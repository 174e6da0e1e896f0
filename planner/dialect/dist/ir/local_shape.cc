// computeLocalShape: applies a placement's entries, mesh axis by mesh axis.
#include "planner/dialect/dist/ir/local_shape.h"

#include <cstdint>
#include <string>
#include <vector>

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mesh/shard_math.h"

namespace loom::planner::dist {

namespace {

// How the entries of a placement split one tensor dim.
struct DimSplit {
  int64_t ways = 1;
  int64_t shard_entries = 0;
  int64_t padded_entries = 0;
  // "dp=2, tp=2": the mesh axes that split the dim, in mesh order.
  std::string axes;
};

}  // namespace

mlir::FailureOr<llvm::SmallVector<int64_t>> computeLocalShape(
    llvm::ArrayRef<int64_t> global_shape, PlacementAttr placement, MeshOp mesh,
    llvm::function_ref<mlir::InFlightDiagnostic()> emitError) {
  // Every failure is about the mesh's sizes or axes, so each points at it.
  auto fail = [&]() {
    mlir::InFlightDiagnostic diag = emitError();
    diag.attachNote(mesh.getLoc()) << "mesh @" << mesh.getSymName() << " declared here";
    return diag;
  };
  const llvm::ArrayRef<int64_t> mesh_shape = mesh.getShape();
  const llvm::ArrayRef<AxisPlacement> entries = placement.getAxes();
  if (entries.size() != mesh_shape.size()) {
    fail() << "placement has " << entries.size() << " entries but @" << mesh.getSymName() << " has "
           << mesh_shape.size() << " axes (" << mesh.describe()
           << "); give one entry per mesh axis";
    return mlir::failure();
  }
  const int64_t rank = static_cast<int64_t>(global_shape.size());
  std::vector<DimSplit> splits(global_shape.size());
  for (const auto& [axis, entry] : llvm::enumerate(entries)) {
    if (!entry.isShard()) continue;
    const llvm::StringRef name = llvm::cast<mlir::StringAttr>(mesh.getAxes()[axis]).getValue();
    if (entry.dim >= rank) {
      fail() << "placement entry for mesh axis \"" << name << "\" shards dim " << entry.dim
             << ", out of range for a rank-" << rank << " tensor; use a dim in [0, " << rank << ")";
      return mlir::failure();
    }
    DimSplit& split = splits[entry.dim];
    split.ways *= mesh_shape[axis];
    ++split.shard_entries;
    if (entry.padded) ++split.padded_entries;
    if (!split.axes.empty()) split.axes += ", ";
    split.axes += name.str() + "=" + std::to_string(mesh_shape[axis]);
  }

  llvm::SmallVector<int64_t> local(global_shape);
  for (const auto& [dim, split] : llvm::enumerate(splits)) {
    if (split.shard_entries == 0) continue;
    if (split.padded_entries != 0 && split.padded_entries != split.shard_entries) {
      fail() << "shard entries of dim " << dim
             << " disagree on `padded`; mark all of them `padded` or none";
      return mlir::failure();
    }
    const bool padded = split.padded_entries != 0;
    const int64_t size = global_shape[dim];
    const bool divides = size % split.ways == 0;
    if (!padded && !divides) {
      fail() << "dim " << dim << " of size " << size << " does not divide by "
             << "the " << split.ways << " ranks that shard it (" << split.axes << "), got: " << size
             << " % " << split.ways << " = " << size % split.ways
             << "; mark its shard entries `padded` (each rank then holds "
             << "ceil(" << size << " / " << split.ways
             << ") = " << mesh::shardSize(size, split.ways)
             << " rows) or change the dim or the mesh";
      return mlir::failure();
    }
    if (padded && divides) {
      fail() << "dim " << dim << " of size " << size << " divides by the " << split.ways
             << " ranks that shard it (" << split.axes
             << "), so nothing is padded; drop `padded` from its shard "
                "entries";
      return mlir::failure();
    }
    local[dim] = mesh::shardSize(size, split.ways);
  }
  return local;
}

}  // namespace loom::planner::dist
