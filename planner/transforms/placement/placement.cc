// plan-placement: resolves the mesh and the strategy of each axis, declares
// the mesh, and writes the placements propagation.cc computes as
// #dist.placement attributes on arguments, nn ops and function results.
#include <cstdint>
#include <iterator>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "mesh/device_mesh.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/SymbolTable.h"
#include "planner/dialect/dist/ir/dist_attrs.h"
#include "planner/dialect/dist/ir/dist_dialect.h"
#include "planner/dialect/dist/ir/dist_ops.h"
#include "planner/transforms/placement/passes.h"
#include "planner/transforms/placement/propagation.h"
#include "planner/transforms/placement/strategy.h"
#include "planner/transforms/placement/tp_rewrites.h"

namespace loom::planner::placement {

#define GEN_PASS_DEF_PLANPLACEMENT
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#include "planner/transforms/placement/passes.h.inc"
#pragma GCC diagnostic pop

namespace {

dist::ReductionKind distReduction(nn::ReductionKind reduction) {
  switch (reduction) {
    case nn::ReductionKind::kSum:
      return dist::ReductionKind::Sum;
    case nn::ReductionKind::kMean:
      return dist::ReductionKind::Avg;
    case nn::ReductionKind::kMax:
      return dist::ReductionKind::Max;
  }
  return dist::ReductionKind::Sum;
}

// Turns per-axis placements of a tensor of `shape` into #dist.placement,
// marking a sharded dim `padded` when the product of the sizes of the axes
// that shard it does not divide it.
dist::PlacementAttr toAttr(mlir::MLIRContext* context, mlir::FlatSymbolRefAttr mesh,
                           llvm::ArrayRef<MeshAxis> axes, const AxisPlacements& placements,
                           llvm::ArrayRef<int64_t> shape) {
  llvm::SmallVector<int64_t, 4> ways(shape.size(), 1);
  for (auto [axis, placement] : llvm::zip_equal(axes, placements)) {
    if (placement.kind == nn::Placement::Kind::kShard) {
      ways[placement.dim] *= axis.size;
    }
  }
  llvm::SmallVector<dist::AxisPlacement, 4> entries;
  for (const nn::Placement& placement : placements) {
    switch (placement.kind) {
      case nn::Placement::Kind::kReplicate:
        entries.push_back(dist::AxisPlacement::replicate());
        break;
      case nn::Placement::Kind::kShard:
        entries.push_back(dist::AxisPlacement::shard(
            placement.dim, shape[placement.dim] % ways[placement.dim] != 0));
        break;
      case nn::Placement::Kind::kPartial:
        entries.push_back(dist::AxisPlacement::partial(distReduction(placement.reduction)));
        break;
    }
  }
  return dist::PlacementAttr::get(context, mesh, entries);
}

llvm::ArrayRef<int64_t> shapeOf(mlir::Type type) {
  return llvm::cast<mlir::RankedTensorType>(type).getShape();
}

class PlanPlacementPass : public impl::PlanPlacementBase<PlanPlacementPass> {
 public:
  using PlanPlacementBase::PlanPlacementBase;

  void runOnOperation() override {
    mlir::ModuleOp module = getOperation();
    mlir::FailureOr<dist::MeshOp> meshOp = declareMesh(module);
    if (failed(meshOp)) return signalPassFailure();
    mlir::FailureOr<llvm::SmallVector<MeshAxis>> axesOr = resolveAxes(*meshOp);
    if (failed(axesOr)) return signalPassFailure();
    const auto meshRef = mlir::FlatSymbolRefAttr::get(meshOp->getSymNameAttr());
    for (auto func : module.getOps<mlir::func::FuncOp>()) {
      if (func.isExternal()) continue;
      const PlacementOptions options{.sequence_parallel = sequenceParallel};
      mlir::FailureOr<FunctionPlacements> placements = placeFunction(func, *axesOr, options);
      if (failed(placements)) return signalPassFailure();
      if (rewrite(func, *axesOr, *placements) > 0) {
        placements = placeFunction(func, *axesOr, options);
        if (failed(placements)) return signalPassFailure();
      }
      annotate(func, meshRef, *axesOr, *placements);
    }
  }

 private:
  // The tp rewrites of tp_rewrites.h that the first placement calls for;
  // returns how many ops were rewritten.
  int64_t rewrite(mlir::func::FuncOp func, llvm::ArrayRef<MeshAxis> axes,
                  const FunctionPlacements& placements) {
    int64_t tpAxis = -1;
    for (auto [index, axis] : llvm::enumerate(axes)) {
      if (axis.strategy == AxisStrategy::kTp) tpAxis = index;
    }
    if (tpAxis < 0) return 0;
    int64_t rewritten = 0;
    if (vocabParallelLoss) {
      rewritten += lowerVocabParallelLoss(func, placements, tpAxis);
    }
    return rewritten + splitPartialBiases(func, placements);
  }

  // The module's dist.mesh: the one `mesh=` describes (created first in the
  // module), or the one the module declares when `mesh=` is empty.
  mlir::FailureOr<dist::MeshOp> declareMesh(mlir::ModuleOp module) {
    auto existing = module.getOps<dist::MeshOp>();
    const auto count = std::distance(existing.begin(), existing.end());
    if (mesh.empty()) {
      if (count != 1) {
        return module.emitError() << "plan-placement needs one mesh, got " << count
                                  << " dist.mesh ops and no mesh= option; pass e.g. "
                                     "--plan-placement=\"mesh=dp=2,tp=4 axes=dp,tp\" or declare "
                                     "one dist.mesh";
      }
      dist::MeshOp meshOp = *existing.begin();
      int64_t size = 1;
      for (int64_t axisSize : meshOp.getShape()) size *= axisSize;
      if (devices > 0 && size != devices) {
        return meshOp.emitOpError() << "has " << size << " devices (" << meshOp.describe()
                                    << "), but devices=" << devices
                                    << "; make the product of the axis sizes " << devices;
      }
      return meshOp;
    }
    if (count != 0) {
      return (*existing.begin()).emitOpError()
             << "is declared and mesh=" << mesh << " is given too; drop one of them";
    }
    absl::StatusOr<::loom::mesh::DeviceMesh> parsed =
        devices > 0 ? ::loom::mesh::DeviceMesh::parse(mesh, devices)
                    : ::loom::mesh::DeviceMesh::parse(mesh);
    if (!parsed.ok()) {
      return module.emitError() << "invalid mesh '" << mesh
                                << "': " << std::string(parsed.status().message());
    }
    if (mlir::SymbolTable::lookupSymbolIn(module, kMeshSymbolName)) {
      return module.emitError() << "symbol @" << kMeshSymbolName
                                << " is taken, so plan-placement cannot declare its mesh; "
                                   "rename that symbol";
    }
    mlir::OpBuilder builder = mlir::OpBuilder::atBlockBegin(module.getBody());
    std::vector<llvm::StringRef> names(parsed->axisNames().begin(), parsed->axisNames().end());
    return dist::MeshOp::create(builder, module.getLoc(), builder.getStringAttr(kMeshSymbolName),
                                builder.getDenseI64ArrayAttr(parsed->shape()),
                                builder.getStrArrayAttr(names));
  }

  // The mesh's axes with the strategy of each, from `axes=` or the mesh's
  // dist.strategies, which is then set to what was used.
  mlir::FailureOr<llvm::SmallVector<MeshAxis>> resolveAxes(dist::MeshOp meshOp) {
    std::vector<std::string> names;
    for (llvm::StringRef name : meshOp.getAxes().getAsValueRange<mlir::StringAttr>()) {
      names.push_back(name.str());
    }
    std::string spec = axes;
    if (spec.empty()) {
      auto annotated = meshOp->getAttrOfType<mlir::ArrayAttr>(kStrategiesAttrName);
      if (!annotated) {
        return meshOp.emitOpError() << "has no " << kStrategiesAttrName
                                    << " and no axes= option is given; pass one strategy per "
                                       "mesh axis (fsdp, dp, tp, pp), e.g. axes=fsdp,tp";
      }
      for (mlir::Attribute name : annotated) {
        auto text = llvm::dyn_cast<mlir::StringAttr>(name);
        if (!text) {
          return meshOp.emitOpError()
                 << kStrategiesAttrName << " must hold strings, got: " << annotated;
        }
        if (!spec.empty()) spec += ",";
        spec += text.getValue().str();
      }
    }
    absl::StatusOr<std::vector<AxisStrategy>> strategies = parseAxisStrategies(spec, names);
    if (!strategies.ok()) {
      return meshOp.emitOpError() << std::string(strategies.status().message());
    }
    llvm::SmallVector<MeshAxis> result;
    std::vector<llvm::StringRef> strategyNames;
    for (auto [name, size, strategy] : llvm::zip_equal(names, meshOp.getShape(), *strategies)) {
      result.push_back(MeshAxis{name, size, strategy});
      strategyNames.push_back(axisStrategyName(strategy));
    }
    mlir::Builder builder(meshOp.getContext());
    meshOp->setAttr(kStrategiesAttrName, builder.getStrArrayAttr(strategyNames));
    return result;
  }

  void annotate(mlir::func::FuncOp func, mlir::FlatSymbolRefAttr meshRef,
                llvm::ArrayRef<MeshAxis> meshAxes, const FunctionPlacements& placements) {
    mlir::MLIRContext* context = func.getContext();
    auto attrOf = [&](const AxisPlacements& axisPlacements, mlir::Type type) {
      return toAttr(context, meshRef, meshAxes, axisPlacements, shapeOf(type));
    };
    for (auto [arg, argPlacements] : llvm::enumerate(placements.arguments)) {
      func.setArgAttr(arg, kPlacementAttrName,
                      attrOf(argPlacements, func.getArgument(arg).getType()));
    }
    for (auto [result, target] : llvm::enumerate(placements.results)) {
      func.setResultAttr(result, kPlacementAttrName, attrOf(target, func.getResultTypes()[result]));
    }
    auto arrayOf = [&](llvm::ArrayRef<AxisPlacements> tensors, mlir::TypeRange types) {
      llvm::SmallVector<mlir::Attribute> attrs;
      for (auto [tensor, type] : llvm::zip_equal(tensors, types)) {
        attrs.push_back(attrOf(tensor, type));
      }
      return mlir::ArrayAttr::get(context, attrs);
    };
    for (const auto& [op, opPlacements] : placements.ops) {
      op->setAttr(kOperandPlacementsAttrName,
                  arrayOf(opPlacements.operands, op->getOperandTypes()));
      op->setAttr(kResultPlacementsAttrName, arrayOf(opPlacements.results, op->getResultTypes()));
    }
  }
};

}  // namespace
}  // namespace loom::planner::placement
