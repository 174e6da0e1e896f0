// The sharding-rule value (factors, placements, text form), the default
// byte count of CostOpInterface, and the generated interface definitions.
#include "planner/dialect/nn/ir/nn_interfaces.h"

#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/raw_ostream.h"
#include "mlir/IR/BuiltinTypes.h"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#include "planner/dialect/nn/ir/nn_interfaces.cpp.inc"
#pragma GCC diagnostic pop

namespace loom::planner::nn {

llvm::StringRef stringifyFactorKind(FactorKind kind) {
  switch (kind) {
    case FactorKind::kBatch:
      return "batch";
    case FactorKind::kContracting:
      return "contracting";
    case FactorKind::kHead:
      return "head";
    case FactorKind::kVocab:
      return "vocab";
    case FactorKind::kOther:
      return "other";
  }
  llvm_unreachable("unknown FactorKind");
}

llvm::StringRef stringifyReductionKind(ReductionKind kind) {
  switch (kind) {
    case ReductionKind::kSum:
      return "sum";
    case ReductionKind::kMean:
      return "mean";
    case ReductionKind::kMax:
      return "max";
  }
  llvm_unreachable("unknown ReductionKind");
}

std::string Placement::str() const {
  switch (kind) {
    case Kind::kReplicate:
      return "R";
    case Kind::kShard:
      return "S(" + std::to_string(dim) + ")";
    case Kind::kPartial:
      return "P(" + stringifyReductionKind(reduction).str() + ")";
  }
  llvm_unreachable("unknown Placement::Kind");
}

int64_t OpShardingRule::addFactor(llvm::StringRef name, FactorKind kind, int64_t size,
                                  bool needsReplication, ReductionKind reduction) {
  factors_.push_back(ShardingFactor{name.str(), kind, size, needsReplication, reduction});
  return static_cast<int64_t>(factors_.size()) - 1;
}

void OpShardingRule::addOperand(TensorFactors dims, bool isAddend) {
  operands_.push_back(std::move(dims));
  addends_.push_back(isAddend);
}

void OpShardingRule::addResult(TensorFactors dims) { results_.push_back(std::move(dims)); }

std::optional<int64_t> OpShardingRule::findFactor(llvm::StringRef name) const {
  for (auto [index, factor] : llvm::enumerate(factors_)) {
    if (factor.name == name) return static_cast<int64_t>(index);
  }
  return std::nullopt;
}

namespace {

// Where `factor` sits in `tensor`: the dim it is the major factor of (only
// size-1 factors before it), or failure when a larger factor comes first, so
// sharding it would not split the dim into contiguous blocks; nullopt when
// the tensor lacks it.
mlir::FailureOr<std::optional<int64_t>> shardedDim(llvm::ArrayRef<ShardingFactor> allFactors,
                                                   const TensorFactors& tensor, int64_t factor) {
  for (auto [dim, factors] : llvm::enumerate(tensor)) {
    const auto* position = llvm::find(factors, factor);
    if (position == factors.end()) continue;
    const bool major = llvm::all_of(llvm::make_range(factors.begin(), position),
                                    [&](int64_t before) { return allFactors[before].size == 1; });
    if (!major) return mlir::failure();
    return std::optional<int64_t>(static_cast<int64_t>(dim));
  }
  return std::optional<int64_t>();
}

}  // namespace

mlir::FailureOr<FactorPlacements> OpShardingRule::placementsFor(int64_t factor) const {
  const ShardingFactor& info = factors_[factor];
  if (info.needsReplication) return mlir::failure();
  auto contains = [&](const TensorFactors& tensor) {
    return llvm::any_of(tensor,
                        [&](const DimFactors& dim) { return llvm::is_contained(dim, factor); });
  };
  const bool inAnOperand = llvm::any_of(operands_, contains);
  // A factor in no result is summed (or averaged) over inside the op.
  const bool reduced = llvm::none_of(results_, contains);
  FactorPlacements placements;
  for (auto [index, operand] : llvm::enumerate(operands_)) {
    auto dim = shardedDim(factors_, operand, factor);
    if (failed(dim)) return mlir::failure();
    if (dim->has_value()) {
      placements.operands.push_back(Placement::shard(**dim));
    } else if (addends_[index] && reduced) {
      placements.operands.push_back(Placement::partial(ReductionKind::kSum));
    } else {
      placements.operands.push_back(Placement::replicate());
    }
  }
  for (const TensorFactors& result : results_) {
    auto dim = shardedDim(factors_, result, factor);
    if (failed(dim)) return mlir::failure();
    if (dim->has_value()) {
      placements.results.push_back(Placement::shard(**dim));
    } else if (inAnOperand) {
      placements.results.push_back(Placement::partial(info.reduction));
    } else {
      placements.results.push_back(Placement::replicate());
    }
  }
  return placements;
}

std::string OpShardingRule::str() const {
  std::string text;
  llvm::raw_string_ostream os(text);
  auto printTensors = [&](llvm::ArrayRef<TensorFactors> tensors, llvm::ArrayRef<bool> addends) {
    os << '(';
    for (auto [index, tensor] : llvm::enumerate(tensors)) {
      if (index > 0) os << ", ";
      if (!addends.empty() && addends[index]) os << '+';
      os << '[';
      llvm::interleaveComma(tensor, os, [&](const DimFactors& dim) {
        if (dim.empty()) {
          os << '1';
          return;
        }
        if (dim.size() > 1) os << '{';
        llvm::interleaveComma(dim, os, [&](int64_t f) { os << factors_[f].name; });
        if (dim.size() > 1) os << '}';
      });
      os << ']';
    }
    os << ')';
  };
  printTensors(operands_, addends_);
  os << " -> ";
  printTensors(results_, {});
  os << " {";
  llvm::interleaveComma(factors_, os, [&](const ShardingFactor& factor) {
    os << factor.name << '=' << factor.size << ' ' << stringifyFactorKind(factor.kind);
    if (factor.needsReplication) os << ":replicated";
    if (factor.reduction != ReductionKind::kSum) {
      os << ':' << stringifyReductionKind(factor.reduction);
    }
  });
  os << '}';
  return text;
}

int64_t operandAndResultBytes(mlir::Operation* op) {
  int64_t bytes = 0;
  auto add = [&](mlir::Type type) {
    auto tensor = llvm::cast<mlir::RankedTensorType>(type);
    bytes += tensor.getNumElements() * (tensor.getElementType().getIntOrFloatBitWidth() / 8);
  };
  llvm::for_each(op->getOperandTypes(), add);
  llvm::for_each(op->getResultTypes(), add);
  return bytes;
}

}  // namespace loom::planner::nn
