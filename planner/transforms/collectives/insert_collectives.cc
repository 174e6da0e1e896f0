// plan-insert-collectives: turns a placed nn graph into the per-rank (SPMD)
// program. Every type becomes local, and each (given, wanted) placement
// mismatch becomes the dist collectives that convert one into the other.
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringRef.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/SymbolTable.h"
#include "planner/dialect/dist/ir/dist_attrs.h"
#include "planner/dialect/dist/ir/dist_dialect.h"
#include "planner/dialect/dist/ir/dist_ops.h"
#include "planner/dialect/dist/ir/local_shape.h"
#include "planner/dialect/nn/ir/nn_dialect.h"
#include "planner/transforms/autodiff/passes.h"
#include "planner/transforms/autodiff/phases.h"
#include "planner/transforms/bucketing/passes.h"
#include "planner/transforms/collectives/passes.h"
#include "planner/transforms/placement/passes.h"

namespace loom::planner::collectives {

#define GEN_PASS_DEF_PLANINSERTCOLLECTIVES
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#include "planner/transforms/collectives/passes.h.inc"
#pragma GCC diagnostic pop

namespace {

using Entries = llvm::SmallVector<dist::AxisPlacement, 4>;

// One op of a conversion (a collective or a local slice): its kind, the mesh
// axes it runs over (in mesh order), the dims it acts on and the placement it
// leaves.
struct Step {
  enum class Kind { kSlice, kReduceScatter, kAllReduce, kAllToAll, kAllGather };
  Kind kind;
  llvm::SmallVector<int64_t, 2> axes;
  // kSlice: the sliced dim; kReduceScatter: the scatter dim; kAllToAll: the
  // concat dim (the dim the axes leave); kAllGather: the gather dim.
  int64_t dim = 0;
  // kAllToAll: the split dim (the dim the axes move to).
  int64_t splitDim = 0;
  bool padded = false;
  dist::ReductionKind reduction = dist::ReductionKind::Sum;
  Entries after;
};

// One conversion of a value into a wanted placement, shared by every use
// in its segment (forward or backward) so the set of collectives is minimal.
struct Conversion {
  mlir::Value value;
  dist::PlacementAttr wanted;
  // The first and last ops that use the converted value; `first` is null
  // when only the function's return uses it.
  mlir::Operation* first = nullptr;
  mlir::Operation* last = nullptr;
  bool returned = false;
  // Only the return uses it, as a parameter's gradient: its reductions
  // follow grad-reduce-dtype and may change its element type.
  bool gradient = false;
  llvm::SmallVector<mlir::OpOperand*> uses;
};

// The types of one reduction: on the wire, of the accumulator and of the
// result (the wire or the accumulation type, per the dist verifier).
struct ReductionTypes {
  mlir::Type wire;
  mlir::Type accum;
  mlir::Type result;
};

// The mesh of a function's placements: axis names and sizes.
struct Mesh {
  dist::MeshOp op;
  mlir::FlatSymbolRefAttr ref;
  llvm::SmallVector<llvm::StringRef, 4> names;
  llvm::ArrayRef<int64_t> sizes;
};

// Recomputes `padded` for every shard entry of `entries` on a tensor of
// `shape`: a dim is padded when the product of the axes splitting it does
// not divide it.
Entries normalize(Entries entries, llvm::ArrayRef<int64_t> shape, const Mesh& mesh) {
  llvm::SmallVector<int64_t, 4> ways(shape.size(), 1);
  for (auto [axis, entry] : llvm::enumerate(entries)) {
    if (entry.isShard()) ways[entry.dim] *= mesh.sizes[axis];
  }
  for (dist::AxisPlacement& entry : entries) {
    if (entry.isShard()) {
      entry.padded = shape[entry.dim] % ways[entry.dim] != 0;
    }
  }
  return entries;
}

// `entries` with the entry of every size-1 mesh axis taken from `like`. Along
// an axis of one rank a tensor is whole and complete whatever its placement
// there says (a shard of one, a partial sum of one), so changing that entry
// needs no collective and no slice, and leaves the local shape as it is.
Entries withSizeOneAxesOf(Entries entries, const Entries& like, const Mesh& mesh) {
  for (auto [axis, entry] : llvm::enumerate(entries)) {
    if (mesh.sizes[axis] == 1) entry = like[axis];
  }
  return entries;
}

// Whether `given` serves where `wanted` is asked for without a conversion.
bool serves(const Entries& given, const Entries& wanted, const Mesh& mesh) {
  return withSizeOneAxesOf(given, wanted, mesh) == wanted;
}

// The mesh axes that shard `dim` in `entries`, in mesh order.
llvm::SmallVector<int64_t, 2> axesOn(const Entries& entries, int64_t dim) {
  llvm::SmallVector<int64_t, 2> axes;
  for (auto [axis, entry] : llvm::enumerate(entries)) {
    if (entry.isShard() && entry.dim == dim) axes.push_back(axis);
  }
  return axes;
}

std::string describe(const Entries& entries) {
  std::string text = "[";
  for (auto [i, entry] : llvm::enumerate(entries)) {
    if (i > 0) text += ", ";
    text += entry.toString();
  }
  return text + "]";
}

class PlanInsertCollectivesPass
    : public impl::PlanInsertCollectivesBase<PlanInsertCollectivesPass> {
 public:
  using PlanInsertCollectivesBase::PlanInsertCollectivesBase;

  void runOnOperation() override {
    mlir::ModuleOp module = getOperation();
    if (failed(checkKeepUnits(module))) return signalPassFailure();
    for (auto func : module.getOps<mlir::func::FuncOp>()) {
      if (func.isExternal()) continue;
      if (failed(convertFunction(func))) return signalPassFailure();
    }
  }

 private:
  // Parses a dtype option; null with an error on `func` when it is not one
  // of the float types a reduction can travel or accumulate in (f64 only
  // when `allowF64`).
  mlir::FailureOr<mlir::Type> parseFloat(mlir::func::FuncOp func, llvm::StringRef option,
                                         llvm::StringRef value, bool allowF64 = true) {
    mlir::Builder builder(func.getContext());
    if (value == "bf16") return mlir::Type(builder.getBF16Type());
    if (value == "f16") return mlir::Type(builder.getF16Type());
    if (value == "f32") return mlir::Type(builder.getF32Type());
    if (value == "f64" && allowF64) return mlir::Type(builder.getF64Type());
    return func.emitError() << "invalid " << option << "=" << value
                            << (allowF64 ? "; use bf16, f16, f32 or f64"
                                         : "; use bf16, f16 or f32, or leave it empty to keep "
                                           "the gradient's type");
  }

  mlir::LogicalResult convertFunction(mlir::func::FuncOp func) {
    mlir::FailureOr<mlir::Type> accum = parseFloat(func, "reduce-dtype", reduceDtype);
    if (failed(accum)) return mlir::failure();
    accumType_ = *accum;
    wireType_ = nullptr;
    if (!wireDtype.empty()) {
      mlir::FailureOr<mlir::Type> wire = parseFloat(func, "wire-dtype", wireDtype);
      if (failed(wire)) return mlir::failure();
      wireType_ = *wire;
    }
    gradType_ = nullptr;
    if (!gradReduceDtype.empty()) {
      // Mixed precision reduces gradients in 16- or 32-bit floats, and no
      // optimizer kernel takes f64 gradients, so f64 is not offered.
      mlir::FailureOr<mlir::Type> grad =
          parseFloat(func, "grad-reduce-dtype", gradReduceDtype, /*allowF64=*/false);
      if (failed(grad)) return mlir::failure();
      gradType_ = *grad;
    }
    given_.clear();
    globalShape_.clear();
    afterCursor_.clear();
    mesh_.reset();
    if (failed(readGiven(func))) return mlir::failure();
    if (!mesh_) return mlir::success();

    llvm::DenseSet<mlir::Operation*> backward = autodiff::backwardOps(func);
    std::vector<Conversion> conversions;
    if (failed(planConversions(func, backward, conversions))) {
      return mlir::failure();
    }
    if (failed(localizeTypes(func))) return mlir::failure();
    for (Conversion& conversion : conversions) {
      if (failed(emit(func, conversion))) return mlir::failure();
    }
    auto returnOp = llvm::cast<mlir::func::ReturnOp>(func.front().getTerminator());
    func.setFunctionType(mlir::FunctionType::get(func.getContext(), func.front().getArgumentTypes(),
                                                 returnOp.getOperandTypes()));
    return mlir::success();
  }

  // Records the mesh and a placement attribute's entries.
  mlir::LogicalResult useMesh(mlir::Operation* at, dist::PlacementAttr attr) {
    if (mesh_) {
      if (attr.getMesh() != mesh_->ref) {
        return at->emitOpError() << "uses mesh " << attr.getMesh() << " and " << mesh_->ref
                                 << "; plan-insert-collectives needs one mesh per function, "
                                    "place the function on one mesh";
      }
      return mlir::success();
    }
    auto meshOp = mlir::SymbolTable::lookupNearestSymbolFrom<dist::MeshOp>(at, attr.getMesh());
    if (!meshOp) {
      return at->emitOpError() << "refers to mesh " << attr.getMesh()
                               << ", which is not declared; declare it with "
                                  "dist.mesh";
    }
    Mesh mesh{meshOp, attr.getMesh(), {}, meshOp.getShape()};
    for (llvm::StringRef name : meshOp.getAxes().getAsValueRange<mlir::StringAttr>()) {
      mesh.names.push_back(name);
    }
    mesh_ = mesh;
    return mlir::success();
  }

  mlir::LogicalResult record(mlir::Operation* at, mlir::Value value, mlir::Attribute attr,
                             llvm::StringRef what) {
    auto placement = llvm::dyn_cast_or_null<dist::PlacementAttr>(attr);
    if (!placement) {
      return at->emitOpError() << "has no #dist.placement for " << what
                               << "; run --plan-placement before --plan-insert-collectives";
    }
    if (failed(useMesh(at, placement))) return mlir::failure();
    given_[value] = Entries(placement.getAxes());
    globalShape_[value] = llvm::SmallVector<int64_t, 4>(
        llvm::cast<mlir::RankedTensorType>(value.getType()).getShape());
    return mlir::success();
  }

  // What every argument and op result is: its given placement.
  mlir::LogicalResult readGiven(mlir::func::FuncOp func) {
    for (mlir::BlockArgument arg : func.getArguments()) {
      if (failed(record(func, arg,
                        func.getArgAttr(arg.getArgNumber(), placement::kPlacementAttrName),
                        "argument " + std::to_string(arg.getArgNumber())))) {
        return mlir::failure();
      }
    }
    for (mlir::Operation& op : func.front().without_terminator()) {
      auto results = op.getAttrOfType<mlir::ArrayAttr>(placement::kResultPlacementsAttrName);
      auto operands = op.getAttrOfType<mlir::ArrayAttr>(placement::kOperandPlacementsAttrName);
      if (!results || !operands || results.size() != op.getNumResults() ||
          operands.size() != op.getNumOperands()) {
        return op.emitOpError() << "needs " << placement::kOperandPlacementsAttrName << " and "
                                << placement::kResultPlacementsAttrName
                                << " with one #dist.placement per operand and result; run "
                                   "--plan-placement before --plan-insert-collectives";
      }
      for (auto [result, attr] : llvm::zip_equal(op.getResults(), results)) {
        if (failed(
                record(&op, result, attr, "result " + std::to_string(result.getResultNumber())))) {
          return mlir::failure();
        }
      }
    }
    return mlir::success();
  }

  // Whether function result `index` is the gradient of an nn.param
  // argument (plan-autodiff's nn.grad_of).
  static bool isParamGradient(mlir::func::FuncOp func, unsigned index) {
    auto of = func.getResultAttrOfType<mlir::IntegerAttr>(index, autodiff::kGradOfAttrName);
    return of && of.getInt() >= 0 && of.getInt() < static_cast<int64_t>(func.getNumArguments()) &&
           func.getArgAttr(of.getInt(), nn::NnDialect::kParamAttrName);
  }

  static bool isParam(mlir::Value value) {
    auto arg = llvm::dyn_cast<mlir::BlockArgument>(value);
    if (!arg) return false;
    auto func = llvm::cast<mlir::func::FuncOp>(arg.getOwner()->getParentOp());
    return static_cast<bool>(func.getArgAttr(arg.getArgNumber(), nn::NnDialect::kParamAttrName));
  }

  // The unit of a parameter, as plan-bucketing groups it (`root` without
  // an `nn.name`).
  static std::string unitOfParam(mlir::BlockArgument arg) {
    auto func = llvm::cast<mlir::func::FuncOp>(arg.getOwner()->getParentOp());
    auto name =
        func.getArgAttrOfType<mlir::StringAttr>(arg.getArgNumber(), nn::NnDialect::kNameAttrName);
    return name ? bucketing::unitOf(name.getValue()) : std::string("root");
  }

  // Whether `value` is a parameter of a unit listed in keep-units, so its
  // forward copy serves the backward pass too.
  bool isKept(mlir::Value value) {
    if (!isParam(value)) return false;
    const std::string unit = unitOfParam(llvm::cast<mlir::BlockArgument>(value));
    return llvm::is_contained(keepUnits, unit);
  }

  // Refuses a keep-units entry that names no unit of the module's
  // parameters (a typo would otherwise silently reshard that unit).
  mlir::LogicalResult checkKeepUnits(mlir::ModuleOp module) {
    std::set<std::string> units;
    for (auto func : module.getOps<mlir::func::FuncOp>()) {
      if (func.isExternal()) continue;
      for (mlir::BlockArgument arg : func.getArguments()) {
        if (isParam(arg)) units.insert(unitOfParam(arg));
      }
    }
    for (const std::string& unit : keepUnits) {
      if (units.contains(unit)) continue;
      return module.emitError() << "keep-units names unit '" << unit
                                << "', which no parameter belongs to; use units of the model ("
                                << llvm::join(units, ", ") << ")";
    }
    return mlir::success();
  }

  // Collects one conversion per (value, wanted placement, segment): the
  // segment is the backward pass for a parameter's backward uses when it is
  // gathered again, else the whole function.
  mlir::LogicalResult planConversions(mlir::func::FuncOp func,
                                      const llvm::DenseSet<mlir::Operation*>& backward,
                                      std::vector<Conversion>& conversions) {
    llvm::DenseMap<std::tuple<mlir::Value, mlir::Attribute, int>, size_t> index;
    auto add = [&](mlir::OpOperand& use, mlir::Attribute wanted, int segment) -> Conversion& {
      auto key = std::make_tuple(use.get(), wanted, segment);
      auto [it, inserted] = index.try_emplace(key, conversions.size());
      if (inserted) {
        conversions.push_back(Conversion{use.get(),
                                         llvm::cast<dist::PlacementAttr>(wanted),
                                         nullptr,
                                         nullptr,
                                         false,
                                         false,
                                         {}});
      }
      Conversion& conversion = conversions[it->second];
      conversion.uses.push_back(&use);
      return conversion;
    };
    for (mlir::Operation& op : func.front().without_terminator()) {
      auto operands = op.getAttrOfType<mlir::ArrayAttr>(placement::kOperandPlacementsAttrName);
      for (auto [use, wanted] : llvm::zip_equal(op.getOpOperands(), operands)) {
        auto placement = llvm::dyn_cast<dist::PlacementAttr>(wanted);
        if (!placement) {
          return op.emitOpError() << "has a " << placement::kOperandPlacementsAttrName
                                  << " entry that is not a #dist.placement: " << wanted
                                  << "; run --plan-placement before --plan-insert-collectives";
        }
        if (failed(useMesh(&op, placement))) return mlir::failure();
        if (serves(given_[use.get()], Entries(placement.getAxes()), *mesh_)) continue;
        const int segment = reshardAfterForward && isParam(use.get()) && !isKept(use.get()) &&
                                    backward.contains(&op)
                                ? 1
                                : 0;
        Conversion& conversion = add(use, wanted, segment);
        if (!conversion.first) conversion.first = &op;
        conversion.last = &op;
      }
    }
    mlir::Operation* returnOp = func.front().getTerminator();
    for (mlir::OpOperand& use : returnOp->getOpOperands()) {
      auto wanted = llvm::dyn_cast_or_null<dist::PlacementAttr>(
          func.getResultAttr(use.getOperandNumber(), placement::kPlacementAttrName));
      if (!wanted) {
        return returnOp->emitOpError() << "returns result " << use.getOperandNumber()
                                       << " without a #dist.placement; run --plan-placement before "
                                          "--plan-insert-collectives";
      }
      if (failed(useMesh(returnOp, wanted))) return mlir::failure();
      if (serves(given_[use.get()], Entries(wanted.getAxes()), *mesh_)) continue;
      // A gradient under grad-reduce-dtype gets its own conversion (segment
      // 2): its reductions change its type, which no op using the value
      // expects. Another returned value reuses the latest conversion an op
      // already made.
      const bool gradient =
          gradType_ &&
          llvm::isa<mlir::FloatType>(
              llvm::cast<mlir::RankedTensorType>(use.get().getType()).getElementType()) &&
          isParamGradient(func, use.getOperandNumber());
      const bool regathered =
          index.contains(std::make_tuple(use.get(), mlir::Attribute(wanted), 1));
      Conversion& conversion = add(use, wanted, gradient ? 2 : regathered ? 1 : 0);
      conversion.returned = true;
      conversion.gradient = gradient;
    }
    return mlir::success();
  }

  // Gives every argument and op result the local type of its given
  // placement.
  mlir::LogicalResult localizeTypes(mlir::func::FuncOp func) {
    auto localize = [&](mlir::Value value, mlir::Operation* at) -> mlir::LogicalResult {
      auto type = llvm::cast<mlir::RankedTensorType>(value.getType());
      mlir::FailureOr<llvm::SmallVector<int64_t>> shape =
          localShape(globalShape_[value], given_[value], at);
      if (failed(shape)) return mlir::failure();
      value.setType(mlir::RankedTensorType::get(*shape, type.getElementType()));
      return mlir::success();
    };
    // An argument keeps its global shape as an attribute: the buffer the
    // exporter describes is a shard of it, and a padded dim's global size
    // does not follow from the local one.
    for (mlir::BlockArgument arg : func.getArguments()) {
      func.setArgAttr(arg.getArgNumber(), kGlobalShapeAttrName,
                      mlir::DenseI64ArrayAttr::get(func.getContext(), globalShape_[arg]));
      if (failed(localize(arg, func))) return mlir::failure();
    }
    for (mlir::Operation& op : func.front().without_terminator()) {
      for (mlir::Value result : op.getResults()) {
        if (failed(localize(result, &op))) return mlir::failure();
      }
    }
    return mlir::success();
  }

  mlir::FailureOr<llvm::SmallVector<int64_t>> localShape(llvm::ArrayRef<int64_t> global,
                                                         const Entries& entries,
                                                         mlir::Operation* at) {
    auto attr = dist::PlacementAttr::get(at->getContext(), mesh_->ref, entries);
    return dist::computeLocalShape(global, attr, mesh_->op, [&] { return at->emitOpError(); });
  }

  // Plans the ops that take `from` to `to` on a tensor of `shape`: the
  // slices the collectives allow first, reduce-scatters, all-reduces,
  // all-to-alls, all-gathers, then the other slices, each kind in mesh-axis
  // order. Fails with a diagnostic at `user` (a note at the value) for a
  // conversion dist cannot express.
  mlir::FailureOr<llvm::SmallVector<Step, 2>> planSteps(const Conversion& conversion,
                                                        llvm::ArrayRef<int64_t> shape,
                                                        mlir::Operation* user) {
    const Entries to = normalize(Entries(conversion.wanted.getAxes()), shape, *mesh_);
    // Only the axes of more than one rank take part in the conversion.
    const Entries from = withSizeOneAxesOf(given_[conversion.value], to, *mesh_);
    const int64_t rank = static_cast<int64_t>(shape.size());
    auto fail = [&](int64_t axis, llvm::StringRef why) -> mlir::LogicalResult {
      mlir::InFlightDiagnostic diag = user->emitOpError()
                                      << "cannot convert " << describe(from) << " to "
                                      << describe(to) << " on mesh axis \"" << mesh_->names[axis]
                                      << "\" (" << from[axis].toString() << " -> "
                                      << to[axis].toString() << "): " << why;
      if (mlir::Operation* producer = conversion.value.getDefiningOp()) {
        diag.attachNote(producer->getLoc()) << "the value is produced here";
      }
      return diag;
    };
    llvm::SmallVector<Step, 2> steps;
    Entries current = from;
    // The axes in `axes` move onto `dim` (from partial or another dim); the
    // shards stay in row-major mesh order only if every axis already on
    // `dim` comes before them.
    auto appendsTo = [&](const Entries& entries, int64_t dim, llvm::ArrayRef<int64_t> axes) {
      for (int64_t axis : axesOn(entries, dim)) {
        if (!llvm::is_contained(axes, axis) && axis > axes.front()) {
          return false;
        }
      }
      return true;
    };
    auto push = [&](Step step) {
      step.after = normalize(step.after, shape, *mesh_);
      current = step.after;
      steps.push_back(std::move(step));
    };

    // replicate -> shard<d>: one local slice per dim.
    auto slice = [&](int64_t dim) -> mlir::LogicalResult {
      Step step{Step::Kind::kSlice, {}, dim, 0, false, dist::ReductionKind::Sum, current};
      for (auto [axis, entry] : llvm::enumerate(current)) {
        if (entry.isReplicate() && to[axis].isShard() && to[axis].dim == dim) {
          step.axes.push_back(axis);
          step.after[axis] = to[axis];
        }
      }
      if (step.axes.empty()) return mlir::success();
      if (!appendsTo(current, dim, step.axes)) {
        return fail(step.axes.front(),
                    "a slice would put its shards inside those of a later "
                    "mesh axis; shard the dim on the earlier mesh axis "
                    "first");
      }
      step.padded = normalize(step.after, shape, *mesh_)[step.axes.front()].padded;
      if (step.padded && step.axes.size() != axesOn(step.after, dim).size()) {
        return fail(step.axes.front(),
                    "a padded dim must be sliced over all its axes at once; "
                    "shard it on these axes only");
      }
      push(std::move(step));
      return mlir::success();
    };
    // Whether the slice of `dim` can run before the collectives: no
    // collective takes a shard off the dim (a gather or all-to-all needs its
    // axes innermost) and every axis a collective adds to it comes after the
    // sliced axes in mesh order (a shard is added innermost).
    auto slicesFirst = [&](int64_t dim) {
      int64_t lastSliced = -1;
      for (auto [axis, have, want] : llvm::enumerate(from, to)) {
        if (have.isReplicate() && want.isShard() && want.dim == dim) {
          lastSliced = static_cast<int64_t>(axis);
        }
      }
      for (auto [axis, have, want] : llvm::enumerate(from, to)) {
        const bool had = have.isShard() && have.dim == dim;
        const bool wants = want.isShard() && want.dim == dim;
        if (had && !wants) return false;
        if (!had && wants && !have.isReplicate() && static_cast<int64_t>(axis) < lastSliced) {
          return false;
        }
      }
      return true;
    };
    // Slices first where the collectives allow it: they cost no
    // communication and shrink what the collectives then move.
    for (int64_t dim = 0; dim < rank; ++dim) {
      if (slicesFirst(dim) && failed(slice(dim))) return mlir::failure();
    }
    // partial -> shard<d>: one reduce-scatter per (dim, reduction).
    for (int64_t dim = 0; dim < rank; ++dim) {
      for (dist::ReductionKind kind : {dist::ReductionKind::Sum, dist::ReductionKind::Avg,
                                       dist::ReductionKind::Max, dist::ReductionKind::Min}) {
        Step step{Step::Kind::kReduceScatter, {}, dim, 0, false, kind, current};
        for (auto [axis, entry] : llvm::enumerate(current)) {
          if (entry.isPartial() && entry.reduction == kind && to[axis].isShard() &&
              to[axis].dim == dim) {
            step.axes.push_back(axis);
            step.after[axis] = to[axis];
          }
        }
        if (step.axes.empty()) continue;
        if (!appendsTo(current, dim, step.axes)) {
          return fail(step.axes.front(),
                      "a reduce-scatter would put its shards inside those of "
                      "a later mesh axis; shard the dim on the earlier mesh "
                      "axis first");
        }
        step.padded = normalize(step.after, shape, *mesh_)[step.axes.front()].padded;
        if (step.padded && step.axes.size() != axesOn(step.after, dim).size()) {
          return fail(step.axes.front(),
                      "a padded dim must be reduce-scattered over all its "
                      "axes at once; shard it on these axes only");
        }
        push(std::move(step));
      }
    }
    // partial -> replicate: one all-reduce per reduction.
    for (dist::ReductionKind kind : {dist::ReductionKind::Sum, dist::ReductionKind::Avg,
                                     dist::ReductionKind::Max, dist::ReductionKind::Min}) {
      Step step{Step::Kind::kAllReduce, {}, 0, 0, false, kind, current};
      for (auto [axis, entry] : llvm::enumerate(current)) {
        if (entry.isPartial() && entry.reduction == kind && to[axis].isReplicate()) {
          step.axes.push_back(axis);
          step.after[axis] = to[axis];
        }
      }
      if (!step.axes.empty()) push(std::move(step));
    }
    // shard<d> -> shard<e>: one all-to-all per (d, e).
    for (int64_t dim = 0; dim < rank; ++dim) {
      for (int64_t split = 0; split < rank; ++split) {
        if (split == dim) continue;
        Step step{Step::Kind::kAllToAll, {}, dim, split, false, dist::ReductionKind::Sum, current};
        for (auto [axis, entry] : llvm::enumerate(current)) {
          if (entry.isShard() && entry.dim == dim && to[axis].isShard() && to[axis].dim == split) {
            step.axes.push_back(axis);
            step.after[axis] = to[axis];
          }
        }
        if (step.axes.empty()) continue;
        bool padded = false;
        for (const Entries& entries : {current, normalize(step.after, shape, *mesh_)}) {
          for (const dist::AxisPlacement& entry : entries) {
            padded |= entry.isShard() && entry.padded && (entry.dim == dim || entry.dim == split);
          }
        }
        if (padded) {
          return fail(step.axes.front(),
                      "dist.all_to_all has no padded form; make the dims "
                      "divide by their mesh axes");
        }
        const llvm::SmallVector<int64_t, 2> on = axesOn(current, dim);
        if (!appendsTo(current, split, step.axes) ||
            !llvm::equal(llvm::ArrayRef(on).take_back(step.axes.size()), step.axes)) {
          return fail(step.axes.front(),
                      "the all-to-all would reorder the shards of a dim "
                      "split by several mesh axes");
        }
        push(std::move(step));
      }
    }
    // shard<d> -> replicate: one all-gather per dim.
    for (int64_t dim = 0; dim < rank; ++dim) {
      Step step{Step::Kind::kAllGather, {}, dim, 0, false, dist::ReductionKind::Sum, current};
      for (auto [axis, entry] : llvm::enumerate(current)) {
        if (entry.isShard() && entry.dim == dim && to[axis].isReplicate()) {
          step.axes.push_back(axis);
          step.after[axis] = to[axis];
        }
      }
      if (step.axes.empty()) continue;
      const llvm::SmallVector<int64_t, 2> on = axesOn(current, dim);
      if (!llvm::equal(llvm::ArrayRef(on).take_back(step.axes.size()), step.axes)) {
        return fail(step.axes.front(),
                    "an all-gather over an outer mesh axis while an inner "
                    "one still shards the dim would reorder the shards; "
                    "gather the inner axis too");
      }
      step.padded = current[step.axes.front()].padded;
      if (step.padded && on.size() != step.axes.size()) {
        return fail(step.axes.front(),
                    "a padded dim must be gathered over all its axes at "
                    "once; replicate it on every axis that shards it");
      }
      push(std::move(step));
    }
    // The other slices: after the collectives, so their shards are in place
    // and the slice splits each of them further.
    for (int64_t dim = 0; dim < rank; ++dim) {
      if (!slicesFirst(dim) && failed(slice(dim))) return mlir::failure();
    }
    for (auto [axis, have, want] : llvm::enumerate(current, to)) {
      if (have == want) continue;
      // The steps above reach every wanted replicate and shard entry, so
      // only a wanted partial can be left.
      return fail(axis, have.isPartial() ? "a change of reduction kind has no collective"
                                         : "dist has no op that makes a partial value "
                                           "(one rank keeping it, the others zero); "
                                           "give the user a replicated operand");
    }
    return steps;
  }

  // The insertion point right after `op`, past what was already inserted
  // there, so conversions and frees keep their planning order.
  void setInsertionAfter(mlir::OpBuilder& builder, mlir::Operation* op) {
    auto [it, inserted] = afterCursor_.try_emplace(op, op);
    builder.setInsertionPointAfter(it->second);
  }

  mlir::LogicalResult emit(mlir::func::FuncOp func, Conversion& conversion) {
    mlir::Value value = conversion.value;
    mlir::Operation* user = conversion.first ? conversion.first : func.front().getTerminator();
    llvm::ArrayRef<int64_t> shape = globalShape_[value];
    mlir::FailureOr<llvm::SmallVector<Step, 2>> steps = planSteps(conversion, shape, user);
    if (failed(steps)) return mlir::failure();

    mlir::OpBuilder builder(func.getContext());
    mlir::Operation* anchor = nullptr;
    if (conversion.first) {
      builder.setInsertionPoint(conversion.first);
    } else if (mlir::Operation* producer = value.getDefiningOp()) {
      anchor = producer;
      setInsertionAfter(builder, producer);
    } else {
      builder.setInsertionPointToStart(&func.front());
    }
    mlir::Type element = llvm::cast<mlir::RankedTensorType>(value.getType()).getElementType();
    mlir::Value current = value;
    const mlir::Location loc = conversion.first ? conversion.first->getLoc() : value.getLoc();
    for (const Step& step : *steps) {
      mlir::FailureOr<llvm::SmallVector<int64_t>> local = localShape(shape, step.after, user);
      if (failed(local)) return mlir::failure();
      // A reduction may change the element type (grad-reduce-dtype); its
      // result and the steps after it carry the new one.
      std::optional<ReductionTypes> dtypes;
      if (step.kind == Step::Kind::kReduceScatter || step.kind == Step::Kind::kAllReduce) {
        mlir::FailureOr<ReductionTypes> types = reductionTypes(element, user, conversion.gradient);
        if (failed(types)) return mlir::failure();
        dtypes = *types;
        element = dtypes->result;
      }
      auto type = mlir::RankedTensorType::get(*local, element);
      llvm::SmallVector<llvm::StringRef, 2> names;
      for (int64_t axis : step.axes) names.push_back(mesh_->names[axis]);
      mlir::ArrayAttr axes = builder.getStrArrayAttr(names);
      mlir::Operation* op = nullptr;
      switch (step.kind) {
        case Step::Kind::kSlice:
          op = dist::SliceOp::create(builder, loc, type, mesh_->ref, axes, current,
                                     builder.getI64IntegerAttr(step.dim),
                                     step.padded ? builder.getUnitAttr() : nullptr);
          break;
        case Step::Kind::kAllGather:
          op = dist::AllGatherOp::create(
              builder, loc, type, mesh_->ref, axes, current, builder.getI64IntegerAttr(step.dim),
              step.padded ? builder.getUnitAttr() : nullptr, mlir::TypeAttr::get(element));
          break;
        case Step::Kind::kAllToAll:
          op = dist::AllToAllOp::create(builder, loc, type, mesh_->ref, axes, current,
                                        builder.getI64IntegerAttr(step.splitDim),
                                        builder.getI64IntegerAttr(step.dim),
                                        mlir::TypeAttr::get(element));
          break;
        case Step::Kind::kReduceScatter:
        case Step::Kind::kAllReduce: {
          auto reduction = dist::ReductionKindAttr::get(func.getContext(), step.reduction);
          auto wire = mlir::TypeAttr::get(dtypes->wire);
          auto accum = mlir::TypeAttr::get(dtypes->accum);
          if (step.kind == Step::Kind::kAllReduce) {
            op = dist::AllReduceOp::create(builder, loc, type, mesh_->ref, axes, current, reduction,
                                           wire, accum);
          } else {
            op = dist::ReduceScatterOp::create(
                builder, loc, type, mesh_->ref, axes, current, builder.getI64IntegerAttr(step.dim),
                step.padded ? builder.getUnitAttr() : nullptr, reduction, wire, accum);
          }
          break;
        }
      }
      current = op->getResult(0);
      if (anchor) afterCursor_[anchor] = op;
    }
    for (mlir::OpOperand* use : conversion.uses) use->set(current);
    // A parameter's gathered copy dies after its last use in the segment.
    if (isParam(value) && !conversion.returned) {
      setInsertionAfter(builder, conversion.last);
      auto freeOp = dist::FreeOp::create(builder, conversion.last->getLoc(), current);
      afterCursor_[conversion.last] = freeOp;
    }
    return mlir::success();
  }

  // The types of a reduction of `element` tensors. A parameter gradient
  // under grad-reduce-dtype=T travels as T, accumulates in the wider of T
  // and reduce-dtype and yields T (FSDP2's reduce_dtype: bf16 gradients
  // reduced and kept in f32). Other floats use wire-dtype and reduce-dtype
  // and keep the element type, so it must be one of the two; integers use
  // the element type throughout.
  mlir::FailureOr<ReductionTypes> reductionTypes(mlir::Type element, mlir::Operation* user,
                                                 bool gradient) {
    if (!llvm::isa<mlir::FloatType>(element)) {
      return ReductionTypes{element, element, element};
    }
    if (gradient && gradType_) {
      mlir::Type accum = accumType_.getIntOrFloatBitWidth() > gradType_.getIntOrFloatBitWidth()
                             ? accumType_
                             : gradType_;
      return ReductionTypes{gradType_, accum, gradType_};
    }
    mlir::Type wire = wireType_ ? wireType_ : element;
    mlir::Type accum = accumType_;
    // f32 accumulation of a wider (f64) wire would lose precision the wire
    // kept, so the default widens with it.
    if (reduceDtype == "f32" && wire.getIntOrFloatBitWidth() > accum.getIntOrFloatBitWidth()) {
      accum = wire;
    }
    if (accum.getIntOrFloatBitWidth() < wire.getIntOrFloatBitWidth()) {
      return user->emitOpError() << "needs a reduction with wire type " << wire
                                 << " and accumulation type " << accum
                                 << ", which is narrower than the wire; set reduce-dtype to a "
                                    "type at least as wide as "
                                 << wire;
    }
    if (element != wire && element != accum) {
      return user->emitOpError() << "needs a reduction of " << element << " values with wire type "
                                 << wire << " and accumulation type " << accum
                                 << ", so its result would not be " << element
                                 << "; set wire-dtype or reduce-dtype to " << element;
    }
    return ReductionTypes{wire, accum, element};
  }

  std::optional<Mesh> mesh_;
  llvm::DenseMap<mlir::Value, Entries> given_;
  llvm::DenseMap<mlir::Value, llvm::SmallVector<int64_t, 4>> globalShape_;
  llvm::DenseMap<mlir::Operation*, mlir::Operation*> afterCursor_;
  mlir::Type wireType_;
  mlir::Type accumType_;
  // grad-reduce-dtype; null when empty.
  mlir::Type gradType_;
};

}  // namespace
}  // namespace loom::planner::collectives
