// Enums and attributes of the `dist` dialect: the reduction kinds and the
// per-mesh-axis placement of a tensor (#dist.placement).
#ifndef LOOM_PLANNER_DIALECT_DIST_IR_DIST_ATTRS_H_
#define LOOM_PLANNER_DIALECT_DIST_IR_DIST_ATTRS_H_

#include <cstdint>
#include <string>

#include "llvm/ADT/Hashing.h"
#include "llvm/Support/raw_ostream.h"
#include "mlir/IR/Attributes.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/OpImplementation.h"

// mlir-tblgen emits parameters it does not always use; only the generated
// code is exempt from -Wunused-parameter.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#include "planner/dialect/dist/ir/dist_enums.h.inc"
#pragma GCC diagnostic pop

namespace loom::planner::dist {

// The placement of a tensor along one mesh axis: one entry of
// #dist.placement. The factories keep the fields a kind does not use at their
// defaults, so equal placements compare and hash equal.
struct AxisPlacement {
  enum class Kind { kReplicate, kShard, kPartial };

  static AxisPlacement replicate() { return {}; }
  static AxisPlacement shard(int64_t dim, bool padded = false) {
    return {Kind::kShard, dim, padded, ReductionKind::Sum};
  }
  static AxisPlacement partial(ReductionKind reduction) {
    return {Kind::kPartial, 0, false, reduction};
  }

  bool isReplicate() const { return kind == Kind::kReplicate; }
  bool isShard() const { return kind == Kind::kShard; }
  bool isPartial() const { return kind == Kind::kPartial; }

  // "replicate", "shard<0>", "shard<0, padded>" or "partial<sum>", as in IR.
  std::string toString() const;

  friend bool operator==(const AxisPlacement&, const AxisPlacement&) = default;

  Kind kind = Kind::kReplicate;
  // kShard: the tensor dim split along the mesh axis.
  int64_t dim = 0;
  // kShard: the dim is zero-padded at its end to a multiple of the number of
  // ranks that split it, because it does not divide.
  bool padded = false;
  // kPartial: how the ranks' partial values combine into the full value.
  ReductionKind reduction = ReductionKind::Sum;
};

// Lets PlacementAttr's storage hash its ArrayRef<AxisPlacement> parameter.
llvm::hash_code hash_value(const AxisPlacement& placement);

}  // namespace loom::planner::dist

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#define GET_ATTRDEF_CLASSES
#include "planner/dialect/dist/ir/dist_attrs.h.inc"
#pragma GCC diagnostic pop

#endif  // LOOM_PLANNER_DIALECT_DIST_IR_DIST_ATTRS_H_
