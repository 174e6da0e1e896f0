// Per-mesh-axis propagation of placements through the sharding rules of nn
// ops; see propagation.h and docs/planner_placement.md for the rules.
#include "planner/transforms/placement/propagation.h"

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Value.h"
#include "planner/dialect/nn/ir/nn_dialect.h"
#include "planner/dialect/nn/ir/nn_interfaces.h"
#include "planner/dialect/nn/ir/nn_ops.h"
#include "planner/transforms/placement/passes.h"
#include "planner/transforms/placement/strategy.h"

namespace loom::planner::placement {
namespace {

using nn::Placement;

// The result attribute plan-autodiff pairs a gradient with the index of its
// parameter argument by.
constexpr char kGradOfAttrName[] = "nn.grad_of";

bool isShard(const Placement& placement) { return placement.kind == Placement::Kind::kShard; }

// The factor that splits dim `dim` of `tensor` when that dim is sharded: its
// first factor larger than 1 (placementsFor refuses minor factors).
std::optional<int64_t> majorFactor(const nn::OpShardingRule& rule, const nn::TensorFactors& tensor,
                                   int64_t dim) {
  if (dim >= static_cast<int64_t>(tensor.size())) return std::nullopt;
  for (int64_t factor : tensor[dim]) {
    if (rule.getFactors()[factor].size > 1) return factor;
  }
  return std::nullopt;
}

bool hasFactor(const nn::TensorFactors& tensor, int64_t factor) {
  return llvm::any_of(tensor,
                      [&](const nn::DimFactors& dim) { return llvm::is_contained(dim, factor); });
}

llvm::ArrayRef<int64_t> shapeOf(mlir::Type type) {
  return llvm::cast<mlir::RankedTensorType>(type).getShape();
}

// An nn op of the body, its rule and, per operand, the index of the
// parameter argument it is (or -1).
struct PlacedOp {
  mlir::Operation* op;
  nn::OpShardingRule rule;
  llvm::SmallVector<int64_t, 4> paramArgs;
};

// The factor of an activation's sequence dim (dim 1 of a [batch, seq,
// ...] tensor): a token factor.
std::optional<int64_t> sequenceFactor(const nn::OpShardingRule& rule,
                                      const nn::TensorFactors& tensor) {
  if (tensor.size() < 3) return std::nullopt;
  std::optional<int64_t> factor = majorFactor(rule, tensor, 1);
  if (!factor || rule.getFactors()[*factor].kind != nn::FactorKind::kBatch) return std::nullopt;
  return factor;
}

class FunctionPlacer {
 public:
  FunctionPlacer(mlir::func::FuncOp func, llvm::ArrayRef<MeshAxis> axes,
                 const PlacementOptions& options)
      : func_(func), axes_(axes), options_(options) {}

  mlir::FailureOr<FunctionPlacements> run();

 private:
  mlir::LogicalResult collect();
  mlir::LogicalResult checkBatch();
  mlir::LogicalResult placeAxis(int64_t axis);
  std::optional<int64_t> chooseFactor(const PlacedOp& placed, int64_t axis,
                                      llvm::ArrayRef<std::optional<Placement>> operands) const;
  mlir::LogicalResult checkUnevenSplit(const PlacedOp& placed, int64_t factor,
                                       const MeshAxis& axis) const;
  Placement storage(int64_t arg, int64_t axis) const;
  Placement fsdpStorage(int64_t arg) const;
  Placement resultTarget(int64_t result, int64_t axis) const;

  mlir::func::FuncOp func_;
  llvm::ArrayRef<MeshAxis> axes_;
  const PlacementOptions options_;
  int64_t tpAxis_ = -1;
  std::vector<PlacedOp> ops_;
  llvm::SmallVector<OpPlacements> opPlacements_;
  llvm::SmallVector<mlir::Type> argTypes_;
  llvm::SmallVector<bool> isParam_;
  llvm::SmallVector<ParamStrategy> paramStrategies_;
  // Per function result: the parameter argument it is the gradient of.
  llvm::SmallVector<std::optional<int64_t>> gradOf_;
  // The function results each returned value is.
  llvm::DenseMap<mlir::Value, llvm::SmallVector<int64_t, 1>> returnedAs_;
  // Per argument: the tp placement a parameter is computed and stored in,
  // decided by its first use.
  llvm::SmallVector<std::optional<Placement>> tpPlacements_;
  llvm::SmallVector<AxisPlacements> arguments_;
};

mlir::LogicalResult FunctionPlacer::collect() {
  if (!func_.getBody().hasOneBlock()) {
    return func_.emitError() << "has " << func_.getBody().getBlocks().size()
                             << " blocks; plan-placement places functions of "
                                "one block of nn ops";
  }
  for (auto [index, axis] : llvm::enumerate(axes_)) {
    if (axis.strategy == AxisStrategy::kTp) tpAxis_ = index;
  }
  const int64_t numArgs = func_.getNumArguments();
  for (int64_t arg = 0; arg < numArgs; ++arg) {
    const bool param = func_.getArgAttr(arg, nn::NnDialect::kParamAttrName) != nullptr;
    isParam_.push_back(param);
    argTypes_.push_back(func_.getArgument(arg).getType());
    ParamStrategy strategy = ParamStrategy::kDefault;
    if (mlir::Attribute attr = func_.getArgAttr(arg, kParamStrategyAttrName)) {
      auto name = llvm::dyn_cast<mlir::StringAttr>(attr);
      if (!name || !param) {
        return func_.emitError() << "argument #" << arg << " has " << kParamStrategyAttrName
                                 << " = " << attr
                                 << ", expected a string on an nn.param argument; use \"dp\" or "
                                    "\"replicate\" on a parameter";
      }
      absl::StatusOr<ParamStrategy> parsed = parseParamStrategy(name.getValue().str());
      if (!parsed.ok()) {
        return func_.emitError() << "argument #" << arg << ": "
                                 << std::string(parsed.status().message());
      }
      strategy = *parsed;
    }
    paramStrategies_.push_back(strategy);
    tpPlacements_.push_back(strategy == ParamStrategy::kReplicate
                                ? std::optional(Placement::replicate())
                                : std::nullopt);
  }

  mlir::Block& body = func_.getBody().front();
  mlir::func::ReturnOp returnOp;
  for (mlir::Operation& op : body) {
    if (auto ret = llvm::dyn_cast<mlir::func::ReturnOp>(op)) {
      returnOp = ret;
      continue;
    }
    auto ruleOp = llvm::dyn_cast<nn::ShardingRuleOpInterface>(op);
    if (!ruleOp) {
      return op.emitOpError() << "has no sharding rule; plan-placement places functions of nn "
                                 "ops, so lower or remove this op first";
    }
    PlacedOp placed{&op, ruleOp.getShardingRule(), {}};
    for (mlir::Value operand : op.getOperands()) {
      auto arg = llvm::dyn_cast<mlir::BlockArgument>(operand);
      placed.paramArgs.push_back(arg && isParam_[arg.getArgNumber()]
                                     ? static_cast<int64_t>(arg.getArgNumber())
                                     : int64_t{-1});
    }
    ops_.push_back(std::move(placed));
  }

  for (int64_t result = 0; result < func_.getNumResults(); ++result) {
    std::optional<int64_t> gradOf;
    if (mlir::Attribute attr = func_.getResultAttr(result, kGradOfAttrName)) {
      auto index = llvm::dyn_cast<mlir::IntegerAttr>(attr);
      if (!index || index.getInt() < 0 || index.getInt() >= numArgs || !isParam_[index.getInt()]) {
        return func_.emitError() << "result #" << result << " has " << kGradOfAttrName << " = "
                                 << attr
                                 << ", which is not the index of an nn.param argument; it "
                                    "must name the parameter the result is the gradient of";
      }
      gradOf = index.getInt();
    }
    gradOf_.push_back(gradOf);
    returnedAs_[returnOp.getOperand(result)].push_back(result);
  }
  return mlir::success();
}

mlir::LogicalResult FunctionPlacer::checkBatch() {
  int64_t ways = 1;
  std::string names;
  for (const MeshAxis& axis : axes_) {
    if (!splitsBatch(axis.strategy)) continue;
    ways *= axis.size;
    if (!names.empty()) names += ", ";
    names += axis.name + "=" + std::to_string(axis.size);
  }
  for (mlir::BlockArgument arg : func_.getArguments()) {
    if (isParam_[arg.getArgNumber()]) continue;
    const llvm::ArrayRef<int64_t> shape = shapeOf(arg.getType());
    if (shape.empty() || shape[0] % ways == 0) continue;
    return func_.emitError() << "input argument #" << arg.getArgNumber() << " has batch dim 0 of "
                             << "size " << shape[0] << ", which does not divide by the " << ways
                             << " ranks of the data axes (" << names
                             << "); use a batch that is a multiple of " << ways
                             << " (zero-padded rows would skew the mean loss)";
  }
  return mlir::success();
}

Placement FunctionPlacer::fsdpStorage(int64_t arg) const {
  const int64_t rank = shapeOf(argTypes_[arg]).size();
  std::optional<int64_t> tpDim;
  if (tpAxis_ >= 0 && tpPlacements_[arg] && isShard(*tpPlacements_[arg])) {
    tpDim = tpPlacements_[arg]->dim;
  }
  for (int64_t dim = 0; dim < rank; ++dim) {
    if (dim != tpDim) return Placement::shard(dim);
  }
  // Every dim is split by tp (the bias of a column-parallel linear). Nesting
  // the fsdp split inside the tp blocks on the same dim keeps a gather along
  // fsdp contiguous only when the tp axis is the outer one.
  const bool tpIsOuter = llvm::all_of(llvm::enumerate(axes_), [&](auto axis) {
    return axis.value().strategy != AxisStrategy::kFsdp ||
           static_cast<int64_t>(axis.index()) > tpAxis_;
  });
  if (tpDim && tpIsOuter) return Placement::shard(*tpDim);
  return Placement::replicate();
}

Placement FunctionPlacer::storage(int64_t arg, int64_t axis) const {
  switch (axes_[axis].strategy) {
    case AxisStrategy::kTp:
      return tpPlacements_[arg].value_or(Placement::replicate());
    case AxisStrategy::kDp:
    case AxisStrategy::kPp:  // each stage holds its chunks' parameters whole
      return Placement::replicate();
    case AxisStrategy::kFsdp:
      return paramStrategies_[arg] == ParamStrategy::kDefault ? fsdpStorage(arg)
                                                              : Placement::replicate();
  }
  return Placement::replicate();
}

Placement FunctionPlacer::resultTarget(int64_t result, int64_t axis) const {
  if (gradOf_[result]) return storage(*gradOf_[result], axis);
  return Placement::replicate();
}

std::optional<int64_t> FunctionPlacer::chooseFactor(
    const PlacedOp& placed, int64_t axis, llvm::ArrayRef<std::optional<Placement>> operands) const {
  const nn::OpShardingRule& rule = placed.rule;
  const bool tp = axes_[axis].strategy == AxisStrategy::kTp;
  auto usable = [&](std::optional<int64_t> factor) {
    return factor && succeeded(rule.placementsFor(*factor));
  };
  const bool undecidedParam = llvm::any_of(llvm::enumerate(operands), [&](auto operand) {
    return placed.paramArgs[operand.index()] >= 0 && !operand.value();
  });
  const bool sequenceParallel = tp && options_.sequence_parallel;
  // A sharded operand's factor: a parameter's (`fromParams`) or an
  // activation's; under sequence parallelism, sequence shards of
  // activations only with `sequence` (they come last, so that a Megatron
  // split of the op wins and its sequence-sharded input is gathered).
  auto fromOperands = [&](bool fromParams, bool sequence) -> std::optional<int64_t> {
    for (auto [index, given] : llvm::enumerate(operands)) {
      if ((placed.paramArgs[index] >= 0) != fromParams) continue;
      if (!given || !isShard(*given)) continue;
      std::optional<int64_t> factor = majorFactor(rule, rule.getOperands()[index], given->dim);
      const bool onSequence = sequenceParallel && !fromParams &&
                              factor == sequenceFactor(rule, rule.getOperands()[index]);
      if (onSequence == sequence && usable(factor)) return factor;
    }
    return std::nullopt;
  };
  // 1. A parameter whose tp placement an earlier use fixed (the backward
  //    uses of a Megatron weight follow its forward use); 2. a sharded
  //    activation operand.
  if (tp) {
    if (std::optional<int64_t> factor = fromOperands(true, false)) return factor;
  }
  if (std::optional<int64_t> factor = fromOperands(false, false)) return factor;
  // 3. Megatron seeds, for an op with a parameter not placed yet and
  //    activations replicated on tp: vocab-parallel (a vocab factor of the
  //    parameter), else column-parallel (a factor of the parameter and the
  //    result that no activation operand has: linear's output features).
  if (tp && undecidedParam) {
    auto inParam = [&](int64_t factor) {
      return llvm::any_of(llvm::enumerate(rule.getOperands()), [&](auto operand) {
        return placed.paramArgs[operand.index()] >= 0 && hasFactor(operand.value(), factor);
      });
    };
    auto inActivation = [&](int64_t factor) {
      return llvm::any_of(llvm::enumerate(rule.getOperands()), [&](auto operand) {
        return placed.paramArgs[operand.index()] < 0 && hasFactor(operand.value(), factor);
      });
    };
    auto inResult = [&](int64_t factor) {
      return llvm::any_of(rule.getResults(),
                          [&](const auto& result) { return hasFactor(result, factor); });
    };
    const auto factors = rule.getFactors();
    for (int64_t f = 0; f < static_cast<int64_t>(factors.size()); ++f) {
      if (factors[f].kind == nn::FactorKind::kVocab && factors[f].size > 1 && inParam(f) &&
          usable(f)) {
        return f;
      }
    }
    for (int64_t f = 0; f < static_cast<int64_t>(factors.size()); ++f) {
      if (factors[f].kind == nn::FactorKind::kOther && factors[f].size > 1 && inParam(f) &&
          inResult(f) && !inActivation(f) && usable(f)) {
        return f;
      }
    }
  }
  // 4. A result returned in a sharded placement (a gradient stored sharded)
  //    is produced sharded when the operands allow it.
  for (auto [index, value] : llvm::enumerate(placed.op->getResults())) {
    auto returned = returnedAs_.find(value);
    if (returned == returnedAs_.end()) continue;
    for (int64_t result : returned->second) {
      const Placement target = resultTarget(result, axis);
      if (!isShard(target)) continue;
      std::optional<int64_t> factor = majorFactor(rule, rule.getResults()[index], target.dim);
      if (usable(factor)) return factor;
    }
  }
  // 5. Under sequence parallelism, what tp would replicate runs on
  //    sequence shards of its activations, when its results keep the
  //    sequence (a loss that sums over tokens is left whole).
  if (sequenceParallel) {
    auto keepsSequence = [&](std::optional<int64_t> factor) {
      return factor && llvm::any_of(rule.getResults(), [&](const nn::TensorFactors& result) {
               return hasFactor(result, *factor);
             });
    };
    if (std::optional<int64_t> factor = fromOperands(false, true); keepsSequence(factor)) {
      return factor;
    }
    for (auto [index, tensor] : llvm::enumerate(rule.getOperands())) {
      if (placed.paramArgs[index] >= 0) continue;
      std::optional<int64_t> factor = sequenceFactor(rule, tensor);
      if (keepsSequence(factor) && usable(factor)) return factor;
    }
  }
  return std::nullopt;
}

mlir::LogicalResult FunctionPlacer::checkUnevenSplit(const PlacedOp& placed, int64_t factor,
                                                     const MeshAxis& axis) const {
  const nn::ShardingFactor& info = placed.rule.getFactors()[factor];
  if (info.size % axis.size == 0) return mlir::success();
  if (info.kind == nn::FactorKind::kHead) {
    return placed.op->emitOpError()
           << "cannot split " << info.size << " attention heads (factor '" << info.name
           << "') over the tp axis '" << axis.name << "' of size " << axis.size
           << ": heads must divide by the tensor-parallel size (a head cannot "
              "be padded, and with grouped-query attention the query heads of "
              "a group stay with their kv head); use a tp size that divides "
           << info.size;
  }
  auto check = [&](llvm::ArrayRef<nn::TensorFactors> tensors,
                   llvm::StringRef what) -> mlir::LogicalResult {
    for (auto [index, tensor] : llvm::enumerate(tensors)) {
      for (auto [dim, factors] : llvm::enumerate(tensor)) {
        if (!llvm::is_contained(factors, factor)) continue;
        const bool merged = llvm::any_of(factors, [&](int64_t other) {
          return other != factor && placed.rule.getFactors()[other].size > 1;
        });
        if (!merged) continue;
        return placed.op->emitOpError()
               << "cannot split factor '" << info.name << "' of size " << info.size
               << " unevenly over the tp axis '" << axis.name << "' of size " << axis.size << ": "
               << what << " #" << index << " merges it with other factors in dim " << dim
               << ", where zero padding would not line up; use a tp size "
                  "that divides "
               << info.size << " (with attention: the head count)";
      }
    }
    return mlir::success();
  };
  if (failed(check(placed.rule.getOperands(), "operand"))) {
    return mlir::failure();
  }
  return check(placed.rule.getResults(), "result");
}

mlir::LogicalResult FunctionPlacer::placeAxis(int64_t axis) {
  const MeshAxis& meshAxis = axes_[axis];
  const bool tp = meshAxis.strategy == AxisStrategy::kTp;
  llvm::DenseMap<mlir::Value, Placement> given;
  for (mlir::BlockArgument arg : func_.getArguments()) {
    if (!isParam_[arg.getArgNumber()]) {
      given.try_emplace(arg, arguments_[arg.getArgNumber()][axis]);
    }
  }
  for (auto [placed, out] : llvm::zip_equal(ops_, opPlacements_)) {
    llvm::SmallVector<std::optional<Placement>, 4> operands;
    for (auto [index, operand] : llvm::enumerate(placed.op->getOperands())) {
      const int64_t param = placed.paramArgs[index];
      if (param >= 0) {
        operands.push_back(tp ? tpPlacements_[param] : std::optional(Placement::replicate()));
      } else {
        operands.push_back(given.find(operand)->second);
      }
    }
    if (llvm::isa<nn::AddOp>(placed.op) && llvm::all_of(operands, [](const auto& operand) {
          return operand && *operand == Placement::partial(nn::ReductionKind::kSum);
        })) {
      // A sum of partial sums is a partial sum: summed cotangents and tied
      // weight gradients reduce once, after the add (rather than each
      // operand on its own to a sharded result).
      const Placement partial = Placement::partial(nn::ReductionKind::kSum);
      for (AxisPlacements& operand : out.operands) operand[axis] = partial;
      out.results[0][axis] = partial;
    } else if (std::optional<int64_t> factor = chooseFactor(placed, axis, operands)) {
      if (tp && failed(checkUnevenSplit(placed, *factor, meshAxis))) {
        return mlir::failure();
      }
      const nn::FactorPlacements chosen = *placed.rule.placementsFor(*factor);
      for (auto [index, placement] : llvm::enumerate(chosen.operands)) {
        out.operands[index][axis] = placement;
      }
      for (auto [index, placement] : llvm::enumerate(chosen.results)) {
        out.results[index][axis] = placement;
      }
    }
    for (auto [index, param] : llvm::enumerate(placed.paramArgs)) {
      if (!tp || param < 0 || tpPlacements_[param]) continue;
      const Placement wanted = out.operands[index][axis];
      // A row-parallel bias is wanted partial; it is stored replicated and
      // made partial locally.
      tpPlacements_[param] =
          wanted.kind == Placement::Kind::kPartial ? Placement::replicate() : wanted;
    }
    for (auto [index, result] : llvm::enumerate(placed.op->getResults())) {
      given.insert_or_assign(result, out.results[index][axis]);
    }
  }
  return mlir::success();
}

mlir::FailureOr<FunctionPlacements> FunctionPlacer::run() {
  if (failed(collect()) || failed(checkBatch())) return mlir::failure();
  // Sequence shards must be even: the inputs' sequence dim divides by tp.
  if (options_.sequence_parallel && tpAxis_ >= 0) {
    const int64_t tp = axes_[tpAxis_].size;
    for (mlir::BlockArgument arg : func_.getArguments()) {
      if (isParam_[arg.getArgNumber()]) continue;
      llvm::ArrayRef<int64_t> shape = shapeOf(arg.getType());
      if (shape.size() < 2 || shape[1] % tp == 0) continue;
      return func_.emitError() << "sequence-parallel splits the sequence of argument #"
                               << arg.getArgNumber() << " (" << shape[1] << " tokens) over "
                               << axes_[tpAxis_].name << "=" << tp
                               << ", which does not divide it; use a sequence length that "
                                  "divides by "
                               << tp << " or plan without sequence parallelism";
    }
  }
  const AxisPlacements replicated(axes_.size(), Placement::replicate());
  for (mlir::BlockArgument arg : func_.getArguments()) {
    AxisPlacements placements = replicated;
    if (!isParam_[arg.getArgNumber()] && !shapeOf(arg.getType()).empty()) {
      for (auto [index, axis] : llvm::enumerate(axes_)) {
        if (splitsBatch(axis.strategy)) placements[index] = Placement::shard(0);
      }
    }
    arguments_.push_back(std::move(placements));
  }
  for (const PlacedOp& placed : ops_) {
    opPlacements_.push_back(
        {llvm::SmallVector<AxisPlacements>(placed.op->getNumOperands(), replicated),
         llvm::SmallVector<AxisPlacements>(placed.op->getNumResults(), replicated)});
  }
  // The tp axis goes first: fsdp shards a dim that tp leaves whole.
  if (tpAxis_ >= 0 && failed(placeAxis(tpAxis_))) return mlir::failure();
  for (int64_t axis = 0; axis < static_cast<int64_t>(axes_.size()); ++axis) {
    if (axis != tpAxis_ && failed(placeAxis(axis))) return mlir::failure();
  }

  FunctionPlacements placements;
  for (auto [arg, argPlacements] : llvm::enumerate(arguments_)) {
    if (isParam_[arg]) {
      for (int64_t axis = 0; axis < static_cast<int64_t>(axes_.size()); ++axis) {
        argPlacements[axis] = storage(arg, axis);
      }
    }
    placements.arguments.push_back(std::move(argPlacements));
  }
  for (int64_t result = 0; result < func_.getNumResults(); ++result) {
    AxisPlacements target;
    for (int64_t axis = 0; axis < static_cast<int64_t>(axes_.size()); ++axis) {
      target.push_back(resultTarget(result, axis));
    }
    placements.results.push_back(std::move(target));
  }
  for (auto [placed, out] : llvm::zip_equal(ops_, opPlacements_)) {
    placements.ops.try_emplace(placed.op, std::move(out));
  }
  return placements;
}

}  // namespace

mlir::FailureOr<FunctionPlacements> placeFunction(mlir::func::FuncOp func,
                                                  llvm::ArrayRef<MeshAxis> axes,
                                                  const PlacementOptions& options) {
  return FunctionPlacer(func, axes, options).run();
}

}  // namespace loom::planner::placement
