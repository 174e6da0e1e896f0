// Per-rank communication volume of a dist function (see comm_volume.h for
// the byte formula of each collective).
#include "planner/transforms/collectives/comm_volume.h"

#include <cstdint>
#include <string>

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/TypeSwitch.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/SymbolTable.h"
#include "planner/dialect/dist/ir/dist_ops.h"

namespace loom::planner::collectives {
namespace {

int64_t elementBytes(mlir::Type type) {
  return (static_cast<int64_t>(type.getIntOrFloatBitWidth()) + 7) / 8;
}

// The group size and axis key of a collective on `mesh` over `axes`.
std::pair<int64_t, std::string> groupOf(mlir::Operation* op, mlir::FlatSymbolRefAttr mesh,
                                        mlir::ArrayAttr axes) {
  std::string key;
  for (llvm::StringRef axis : axes.getAsValueRange<mlir::StringAttr>()) {
    if (!key.empty()) key += ",";
    key += axis.str();
  }
  return {groupSize(op, mesh, axes), key};
}

int64_t elements(mlir::Value value) {
  return llvm::cast<mlir::RankedTensorType>(value.getType()).getNumElements();
}

}  // namespace

int64_t groupSize(mlir::Operation* op, mlir::FlatSymbolRefAttr mesh, mlir::ArrayAttr axes) {
  auto meshOp =
      mesh ? mlir::SymbolTable::lookupNearestSymbolFrom<dist::MeshOp>(op, mesh) : dist::MeshOp();
  if (!meshOp || !axes) return 1;
  int64_t size = 1;
  for (llvm::StringRef axis : axes.getAsValueRange<mlir::StringAttr>()) {
    for (auto [name, extent] :
         llvm::zip_equal(meshOp.getAxes().getAsValueRange<mlir::StringAttr>(), meshOp.getShape())) {
      if (name == axis) size *= extent;
    }
  }
  return size;
}

const char* collectiveKindName(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::kAllGather:
      return "all_gather";
    case CollectiveKind::kReduceScatter:
      return "reduce_scatter";
    case CollectiveKind::kAllReduce:
      return "all_reduce";
    case CollectiveKind::kAllToAll:
      return "all_to_all";
  }
  return "unknown";
}

CommVolume::Entry CommVolume::of(CollectiveKind kind) const {
  Entry sum;
  for (const auto& [key, entry] : entries) {
    if (key.second != kind) continue;
    sum.count += entry.count;
    sum.bytes += entry.bytes;
  }
  return sum;
}

int64_t CommVolume::totalBytes() const {
  int64_t sum = 0;
  for (const auto& [key, entry] : entries) sum += entry.bytes;
  return sum;
}

CommVolume computeCommVolume(mlir::func::FuncOp func) {
  CommVolume volume;
  for (mlir::Operation& op : func.getBody().getOps()) {
    auto count = [&](CollectiveKind kind, mlir::FlatSymbolRefAttr mesh, mlir::ArrayAttr axes,
                     mlir::Type wire, auto bytesOfGroup) {
      auto [size, key] = groupOf(&op, mesh, axes);
      CommVolume::Entry& entry = volume.entries[{key, kind}];
      entry.count += 1;
      entry.bytes += bytesOfGroup(size) * elementBytes(wire);
    };
    auto gather = [&](auto gatherOp) {
      const int64_t in = elements(gatherOp.getInput());
      count(CollectiveKind::kAllGather, gatherOp.getMeshAttr(), gatherOp.getMeshAxes(),
            gatherOp.getWireType(), [&](int64_t g) { return (g - 1) * in; });
    };
    auto scatter = [&](auto scatterOp) {
      const int64_t out = scatterOp.getResultTensorType().getNumElements();
      count(CollectiveKind::kReduceScatter, scatterOp.getMeshAttr(), scatterOp.getMeshAxes(),
            scatterOp.getWireType(), [&](int64_t g) { return (g - 1) * out; });
    };
    auto reduce = [&](auto reduceOp) {
      const int64_t in = elements(reduceOp.getInput());
      count(CollectiveKind::kAllReduce, reduceOp.getMeshAttr(), reduceOp.getMeshAxes(),
            reduceOp.getWireType(), [&](int64_t g) { return 2 * (g - 1) * ((in + g - 1) / g); });
    };
    auto exchange = [&](auto exchangeOp) {
      const int64_t in = elements(exchangeOp.getInput());
      count(CollectiveKind::kAllToAll, exchangeOp.getMeshAttr(), exchangeOp.getMeshAxes(),
            exchangeOp.getWireType(), [&](int64_t g) { return (g - 1) * (in / g); });
    };
    llvm::TypeSwitch<mlir::Operation*>(&op)
        .Case<dist::AllGatherOp, dist::AllGatherStartOp>(gather)
        .Case<dist::ReduceScatterOp, dist::ReduceScatterStartOp>(scatter)
        .Case<dist::AllReduceOp, dist::AllReduceStartOp>(reduce)
        .Case<dist::AllToAllOp, dist::AllToAllStartOp>(exchange);
  }
  return volume;
}

}  // namespace loom::planner::collectives
