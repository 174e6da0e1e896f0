// plan-bucketing: packs the per-parameter FSDP collectives of each unit into
// one flat buffer, so a unit needs one all-gather per pass and one
// reduce-scatter instead of one per tensor.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

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
#include "planner/dialect/dist/ir/dist_dialect.h"
#include "planner/dialect/dist/ir/dist_ops.h"
#include "planner/dialect/nn/ir/nn_dialect.h"
#include "planner/transforms/autodiff/passes.h"
#include "planner/transforms/autodiff/phases.h"
#include "planner/transforms/collectives/comm_volume.h"
#include "planner/transforms/placement/passes.h"
#include "planner/transforms/bucketing/passes.h"

namespace loom::planner::bucketing {

#define GEN_PASS_DEF_PLANBUCKETING
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#include "planner/transforms/bucketing/passes.h.inc"
#pragma GCC diagnostic pop

std::string unitOf(llvm::StringRef name) {
  llvm::SmallVector<llvm::StringRef, 8> parts;
  name.split(parts, '.');
  for (auto [i, part] : llvm::enumerate(parts)) {
    if (i > 0 && !part.empty() && llvm::all_of(part, llvm::isDigit)) {
      return llvm::join(llvm::ArrayRef(parts).take_front(i + 1), ".");
    }
  }
  return "root";
}

namespace {

// One gathered parameter or one gradient reduction: the collectives it
// takes (a reduce-scatter, then an all-reduce under HSDP or of a
// sequence-parallel norm's gradient), the value the bucket packs, the value
// its users read and the dim its collective gathers or scatters (1 for
// fsdp x tp's row-parallel weights). `followUp` keys the all-reduce (empty
// when there is none).
struct Member {
  llvm::SmallVector<mlir::Operation*, 2> chain;
  mlir::Value packed;
  mlir::Value delivered;
  int64_t dim;
  std::string followUp = {};
  // The returned gradient's placement (null if it has none).
  dist::PlacementAttr placement = {};
};

// Collectives that may share one flat buffer: same unit, pass and
// collective attributes, in program order.
struct Group {
  std::string key;
  std::vector<Member> members;
};

int64_t bytesOf(mlir::Type type) {
  auto tensor = llvm::cast<mlir::RankedTensorType>(type);
  return tensor.getNumElements() * ((tensor.getElementTypeBitWidth() + 7) / 8);
}

int64_t elementsOf(mlir::Value value) {
  return llvm::cast<mlir::RankedTensorType>(value.getType()).getNumElements();
}

std::string printed(mlir::Attribute attr) {
  std::string text;
  llvm::raw_string_ostream os(text);
  attr.print(os);
  return text;
}

class PlanBucketingPass : public impl::PlanBucketingBase<PlanBucketingPass> {
 public:
  using PlanBucketingBase::PlanBucketingBase;

  void runOnOperation() override {
    const int64_t limitMb = bucketMb;
    if (limitMb < 0) {
      getOperation().emitError() << "invalid bucket-mb=" << limitMb
                                 << "; use 0 (one bucket per unit) or a size in MiB";
      return signalPassFailure();
    }
    for (auto func : getOperation().getOps<mlir::func::FuncOp>()) {
      if (func.isExternal()) continue;
      bucketGathers(func);
      bucketReductions(func);
    }
  }

 private:
  // The unit of argument `index` when it is a parameter.
  static std::optional<std::string> paramUnit(mlir::func::FuncOp func, unsigned index) {
    if (!func.getArgAttr(index, nn::NnDialect::kParamAttrName)) {
      return std::nullopt;
    }
    auto name = func.getArgAttrOfType<mlir::StringAttr>(index, nn::NnDialect::kNameAttrName);
    return name ? unitOf(name.getValue()) : std::string("root");
  }

  // Appends `member` to the group of `key`, keeping groups in the order of
  // their first member.
  static void add(std::vector<Group>& groups, const std::string& key, Member member) {
    for (Group& group : groups) {
      if (group.key == key) {
        group.members.push_back(std::move(member));
        return;
      }
    }
    groups.push_back(Group{key, {std::move(member)}});
  }

  // Splits a group into consecutive buckets of at most bucket-mb MiB of
  // `sizeOf` each (one bucket when the option is 0).
  template <typename SizeOf>
  std::vector<std::vector<Member>> split(const Group& group, SizeOf sizeOf) {
    std::vector<std::vector<Member>> buckets(1);
    const int64_t limit = bucketMb * 1024 * 1024;
    int64_t filled = 0;
    for (const Member& member : group.members) {
      const int64_t size = sizeOf(member);
      if (limit > 0 && !buckets.back().empty() && filled + size > limit) {
        buckets.emplace_back();
        filled = 0;
      }
      buckets.back().push_back(member);
      filled += size;
    }
    return buckets;
  }

  // The `split_dims` of a bucket's whole tensors: each member's collective
  // dim, or none (all 0, the default) when every member splits dim 0.
  static mlir::DenseI64ArrayAttr splitDimsOf(mlir::OpBuilder& builder,
                                             llvm::ArrayRef<Member> bucket) {
    llvm::SmallVector<int64_t> dims;
    for (const Member& member : bucket) dims.push_back(member.dim);
    if (llvm::all_of(dims, [](int64_t dim) { return dim == 0; })) {
      return nullptr;
    }
    return builder.getDenseI64ArrayAttr(dims);
  }

  // The packed offsets of the members' `packed` values split into `chunks`
  // parts each along their collective dim; a dim that does not divide gives
  // parts of ceil(n / chunks) rows (the padding rule of dist.bucket).
  static llvm::SmallVector<int64_t> offsetsOf(llvm::ArrayRef<Member> bucket, int64_t chunks,
                                              int64_t& total) {
    llvm::SmallVector<int64_t> offsets;
    total = 0;
    for (const Member& member : bucket) {
      offsets.push_back(total);
      const int64_t rows =
          llvm::cast<mlir::RankedTensorType>(member.packed.getType()).getDimSize(member.dim);
      total += elementsOf(member.packed) / rows * ((rows + chunks - 1) / chunks);
    }
    return offsets;
  }

  // Whether some member's collective dim does not divide into `chunks`, so
  // the bucket layout needs `padded`; null when none does.
  static mlir::UnitAttr paddedOf(mlir::OpBuilder& builder, llvm::ArrayRef<Member> bucket,
                                 int64_t chunks, bool wholeTensors) {
    for (const Member& member : bucket) {
      mlir::Value whole = wholeTensors ? member.packed : member.delivered;
      const int64_t rows =
          llvm::cast<mlir::RankedTensorType>(whole.getType()).getDimSize(member.dim);
      if (rows % chunks != 0) return builder.getUnitAttr();
    }
    return nullptr;
  }

  void bucketGathers(mlir::func::FuncOp func) {
    const llvm::DenseSet<mlir::Operation*> backward = autodiff::backwardOps(func);
    std::vector<Group> groups;
    for (auto gather : func.front().getOps<dist::AllGatherOp>()) {
      auto arg = llvm::dyn_cast<mlir::BlockArgument>(gather.getInput());
      if (!arg) continue;
      std::optional<std::string> unit = paramUnit(func, arg.getArgNumber());
      if (!unit) continue;
      bool inBackward = !gather->use_empty();
      for (mlir::Operation* user : gather->getUsers()) {
        if (!llvm::isa<dist::FreeOp>(user) && !backward.contains(user)) {
          inBackward = false;
        }
      }
      const std::string key = *unit + (inBackward ? "|bwd|" : "|fwd|") +
                              printed(gather.getMeshAttr()) + printed(gather.getMeshAxes()) +
                              printed(gather.getWireTypeAttr());
      add(groups, key,
          Member{{gather},
                 gather.getInput(),
                 gather.getResult(),
                 static_cast<int64_t>(gather.getGatherDim())});
    }
    for (const Group& group : groups) {
      for (const std::vector<Member>& bucket :
           split(group, [](const Member& m) { return bytesOf(m.delivered.getType()); })) {
        if (bucket.size() > 1) emitGather(bucket);
      }
    }
  }

  void emitGather(llvm::ArrayRef<Member> bucket) {
    auto first = llvm::cast<dist::AllGatherOp>(bucket.front().chain.front());
    const int64_t size = collectives::groupSize(first, first.getMeshAttr(), first.getMeshAxes());
    llvm::SmallVector<mlir::Value> shards;
    llvm::SmallVector<mlir::Type> fullTypes;
    for (const Member& member : bucket) {
      shards.push_back(member.packed);
      fullTypes.push_back(member.delivered.getType());
    }
    int64_t total = 0;
    llvm::SmallVector<int64_t> offsets = offsetsOf(bucket, 1, total);
    mlir::Type element =
        llvm::cast<mlir::RankedTensorType>(shards.front().getType()).getElementType();
    mlir::Type wire = first.getWireType();

    mlir::OpBuilder builder(first);
    const mlir::Location loc = first.getLoc();
    auto packed = dist::BucketOp::create(
        builder, loc, mlir::RankedTensorType::get({total}, element), shards,
        builder.getDenseI64ArrayAttr(offsets), builder.getI64IntegerAttr(1), nullptr, nullptr);
    auto gathered =
        dist::AllGatherOp::create(builder, loc, mlir::RankedTensorType::get({total * size}, wire),
                                  first.getMeshAttr(), first.getMeshAxes(), packed.getResult(),
                                  builder.getI64IntegerAttr(0), nullptr, first.getWireTypeAttr());
    dist::FreeOp::create(builder, loc, packed.getResult());
    auto unpacked = dist::UnbucketOp::create(
        builder, loc, fullTypes, gathered.getResult(), builder.getDenseI64ArrayAttr(offsets),
        builder.getI64IntegerAttr(size), splitDimsOf(builder, bucket),
        paddedOf(builder, bucket, size, /*wholeTensors=*/false));

    // The parameters are views of the gathered buffer: it is freed once,
    // where the last of their frees was, and only if each had one.
    llvm::SmallVector<mlir::Operation*> frees;
    for (const Member& member : bucket) {
      for (mlir::Operation* user : member.delivered.getUsers()) {
        if (llvm::isa<dist::FreeOp>(user)) frees.push_back(user);
      }
    }
    mlir::Operation* lastFree = nullptr;
    for (mlir::Operation* free : frees) {
      if (!lastFree || lastFree->isBeforeInBlock(free)) lastFree = free;
    }
    if (lastFree && frees.size() == bucket.size()) {
      builder.setInsertionPoint(lastFree);
      dist::FreeOp::create(builder, lastFree->getLoc(), gathered.getResult());
      for (mlir::Operation* free : frees) free->erase();
    }
    for (auto [member, full] : llvm::zip_equal(bucket, unpacked.getResults())) {
      mlir::Value(member.delivered).replaceAllUsesWith(full);
      member.chain.front()->erase();
    }
  }

  // The parameter index a returned value is the gradient of.
  static std::optional<int64_t> gradientOf(mlir::func::FuncOp func, mlir::Value value) {
    if (!value.hasOneUse()) return std::nullopt;
    mlir::OpOperand& use = *value.getUses().begin();
    if (!llvm::isa<mlir::func::ReturnOp>(use.getOwner())) return std::nullopt;
    auto index = func.getResultAttrOfType<mlir::IntegerAttr>(use.getOperandNumber(),
                                                             autodiff::kGradOfAttrName);
    if (!index) return std::nullopt;
    return index.getInt();
  }

  void bucketReductions(mlir::func::FuncOp func) {
    std::vector<Group> groups;
    for (auto scatter : func.front().getOps<dist::ReduceScatterOp>()) {
      Member member{{scatter},
                    scatter.getInput(),
                    scatter.getResult(),
                    static_cast<int64_t>(scatter.getScatterDim())};
      // The input and result element types both: a gradient reduction may
      // change the type (grad-reduce-dtype), and one bucket packs one type
      // and yields one type.
      std::string key =
          printed(scatter.getMeshAttr()) + printed(scatter.getMeshAxes()) +
          printed(scatter.getReductionAttr()) + printed(scatter.getWireTypeAttr()) +
          printed(scatter.getAccumTypeAttr()) + "|" +
          printed(mlir::TypeAttr::get(
              llvm::cast<mlir::RankedTensorType>(scatter.getInput().getType()).getElementType())) +
          "->" + printed(mlir::TypeAttr::get(scatter.getResultTensorType().getElementType()));
      // HSDP: the shard is all-reduced over the replica axes next; under
      // sequence parallelism a norm's gradient shard also over tp. The
      // all-reduce is not part of the key: gradients that share the
      // reduce-scatter share its bucket, whatever follows it.
      if (scatter->hasOneUse()) {
        if (auto reduce = llvm::dyn_cast<dist::AllReduceOp>(*scatter->user_begin())) {
          member.chain.push_back(reduce);
          member.delivered = reduce.getResult();
          member.followUp = printed(reduce.getMeshAxes()) + printed(reduce.getReductionAttr()) +
                            printed(reduce.getWireTypeAttr()) + printed(reduce.getAccumTypeAttr());
        }
      }
      std::optional<int64_t> param = gradientOf(func, member.delivered);
      if (!param || *param < 0 || *param >= static_cast<int64_t>(func.getNumArguments())) {
        continue;
      }
      std::optional<std::string> unit = paramUnit(func, *param);
      if (!unit) continue;
      member.placement = func.getResultAttrOfType<dist::PlacementAttr>(
          member.delivered.getUses().begin()->getOperandNumber(), placement::kPlacementAttrName);
      add(groups, *unit + "|" + key, std::move(member));
    }
    for (const Group& group : groups) {
      for (const std::vector<Member>& bucket :
           split(group, [](const Member& m) { return bytesOf(m.packed.getType()); })) {
        if (bucket.size() > 1) emitReduction(bucket);
      }
    }
  }

  void emitReduction(llvm::ArrayRef<Member> bucket) {
    auto first = llvm::cast<dist::ReduceScatterOp>(bucket.front().chain.front());
    const int64_t size = collectives::groupSize(first, first.getMeshAttr(), first.getMeshAxes());
    // The bucket needs every gradient: it goes where the last collective
    // of the group was.
    mlir::Operation* last = nullptr;
    llvm::SmallVector<mlir::Value> grads;
    llvm::SmallVector<mlir::Type> shardTypes;
    for (const Member& member : bucket) {
      grads.push_back(member.packed);
      shardTypes.push_back(member.delivered.getType());
      for (mlir::Operation* op : member.chain) {
        if (!last || last->isBeforeInBlock(op)) last = op;
      }
    }
    int64_t total = 0;
    llvm::SmallVector<int64_t> offsets = offsetsOf(bucket, size, total);
    mlir::Type element =
        llvm::cast<mlir::RankedTensorType>(grads.front().getType()).getElementType();
    mlir::Type result = first.getResultTensorType().getElementType();

    mlir::OpBuilder builder(last);
    const mlir::Location loc = first.getLoc();
    auto packed = dist::BucketOp::create(
        builder, loc, mlir::RankedTensorType::get({total * size}, element), grads,
        builder.getDenseI64ArrayAttr(offsets), builder.getI64IntegerAttr(size),
        splitDimsOf(builder, bucket), paddedOf(builder, bucket, size, /*wholeTensors=*/true));
    auto shardType = mlir::RankedTensorType::get({total}, result);
    mlir::Value current = dist::ReduceScatterOp::create(
        builder, loc, shardType, first.getMeshAttr(), first.getMeshAxes(), packed.getResult(),
        builder.getI64IntegerAttr(0), nullptr, first.getReductionAttr(), first.getWireTypeAttr(),
        first.getAccumTypeAttr());
    dist::FreeOp::create(builder, loc, packed.getResult());
    const bool oneFollowUp = llvm::all_of(
        bucket, [&](const Member& member) { return member.followUp == bucket.front().followUp; });
    if (oneFollowUp && bucket.front().chain.size() == 2) {
      current = allReduceLike(builder, bucket.front().chain[1], current);
    }
    auto unpacked = dist::UnbucketOp::create(builder, loc, shardTypes, current,
                                             builder.getDenseI64ArrayAttr(offsets),
                                             builder.getI64IntegerAttr(1), nullptr, nullptr);
    llvm::SmallVector<mlir::Value> shards(unpacked.getResults());
    if (!oneFollowUp) {
      setResultPlacements(unpacked, bucket, /*beforeFollowUp=*/true);
      reduceFollowUps(builder, bucket, shards);
    }
    for (auto [member, shard] : llvm::zip_equal(bucket, shards)) {
      mlir::Value(member.delivered).replaceAllUsesWith(shard);
      for (mlir::Operation* op : llvm::reverse(member.chain)) op->erase();
    }
  }

  // A copy of the all-reduce `like` applied to `input`.
  static mlir::Value allReduceLike(mlir::OpBuilder& builder, mlir::Operation* like,
                                   mlir::Value input) {
    auto reduce = llvm::cast<dist::AllReduceOp>(like);
    return dist::AllReduceOp::create(builder, reduce.getLoc(), input.getType(),
                                     reduce.getMeshAttr(), reduce.getMeshAxes(), input,
                                     reduce.getReductionAttr(), reduce.getWireTypeAttr(),
                                     reduce.getAccumTypeAttr());
  }

  // A bucket whose members follow the shared reduce-scatter with different
  // all-reduces (fsdp x tp with sequence parallelism: only the norms'
  // gradient shards are all-reduced over tp): after the unbucket, the
  // shards of each all-reduce are packed again (chunks 1), all-reduced
  // once and unbucketed; `shards` then holds each member's reduced shard.
  void reduceFollowUps(mlir::OpBuilder& builder, llvm::ArrayRef<Member> bucket,
                       llvm::SmallVector<mlir::Value>& shards) {
    std::vector<std::string> keys;
    for (const Member& member : bucket) {
      if (!member.followUp.empty() && !llvm::is_contained(keys, member.followUp)) {
        keys.push_back(member.followUp);
      }
    }
    for (const std::string& key : keys) {
      llvm::SmallVector<size_t> indices;
      for (auto [i, member] : llvm::enumerate(bucket)) {
        if (member.followUp == key) indices.push_back(i);
      }
      mlir::Operation* like = bucket[indices.front()].chain[1];
      const mlir::Location loc = like->getLoc();
      if (indices.size() == 1) {
        shards[indices.front()] = allReduceLike(builder, like, shards[indices.front()]);
        continue;
      }
      llvm::SmallVector<mlir::Value> inputs;
      llvm::SmallVector<mlir::Type> types;
      llvm::SmallVector<int64_t> offsets;
      int64_t total = 0;
      for (size_t i : indices) {
        inputs.push_back(shards[i]);
        types.push_back(shards[i].getType());
        offsets.push_back(total);
        total += elementsOf(shards[i]);
      }
      auto flat = mlir::RankedTensorType::get(
          {total}, llvm::cast<mlir::RankedTensorType>(types.front()).getElementType());
      auto packed = dist::BucketOp::create(builder, loc, flat, inputs,
                                           builder.getDenseI64ArrayAttr(offsets),
                                           builder.getI64IntegerAttr(1), nullptr, nullptr);
      mlir::Value reduced = allReduceLike(builder, like, packed.getResult());
      dist::FreeOp::create(builder, loc, packed.getResult());
      auto unpacked = dist::UnbucketOp::create(builder, loc, types, reduced,
                                               builder.getDenseI64ArrayAttr(offsets),
                                               builder.getI64IntegerAttr(1), nullptr, nullptr);
      llvm::SmallVector<Member> members;
      for (size_t i : indices) members.push_back(bucket[i]);
      setResultPlacements(unpacked, members, /*beforeFollowUp=*/false);
      for (auto [i, shard] : llvm::zip_equal(indices, unpacked.getResults())) shards[i] = shard;
    }
  }

  // An unbucket's results would take the flat buffer's placement (what the
  // exporter gives ops without a placement rule); these are the members'
  // gradient shards: each returned gradient's placement, partial over its
  // all-reduce's axes while that is still to come (`beforeFollowUp`).
  static void setResultPlacements(dist::UnbucketOp unbucket, llvm::ArrayRef<Member> members,
                                  bool beforeFollowUp) {
    llvm::SmallVector<mlir::Attribute> placements;
    for (const Member& member : members) {
      if (!member.placement) return;
      llvm::SmallVector<dist::AxisPlacement> entries(member.placement.getAxes());
      if (beforeFollowUp && member.chain.size() == 2) {
        auto reduce = llvm::cast<dist::AllReduceOp>(member.chain[1]);
        auto mesh = mlir::SymbolTable::lookupNearestSymbolFrom<dist::MeshOp>(
            reduce, reduce.getMeshAttr());
        if (!mesh) return;
        for (mlir::Attribute axis : reduce.getMeshAxes()) {
          const auto* it = llvm::find(mesh.getAxes(), axis);
          const size_t index = static_cast<size_t>(it - mesh.getAxes().begin());
          if (index < entries.size()) {
            entries[index] = dist::AxisPlacement::partial(reduce.getReduction());
          }
        }
      }
      placements.push_back(
          dist::PlacementAttr::get(unbucket.getContext(), member.placement.getMesh(), entries));
    }
    unbucket->setAttr(placement::kResultPlacementsAttrName,
                      mlir::ArrayAttr::get(unbucket.getContext(), placements));
  }
};

}  // namespace
}  // namespace loom::planner::bucketing
