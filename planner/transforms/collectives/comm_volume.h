// Bytes each rank moves through the collectives of a per-rank (dist)
// function, summed per mesh-axis group and collective kind: what the plan
// report prints and the cost model prices.
#ifndef LOOM_PLANNER_TRANSFORMS_COLLECTIVES_COMM_VOLUME_H_
#define LOOM_PLANNER_TRANSFORMS_COLLECTIVES_COMM_VOLUME_H_

#include <cstdint>
#include <map>
#include <string>
#include <utility>

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Operation.h"

namespace loom::planner::collectives {

enum class CollectiveKind { kAllGather, kReduceScatter, kAllReduce, kAllToAll };

// "all_gather", "reduce_scatter", "all_reduce" or "all_to_all".
const char* collectiveKindName(CollectiveKind kind);

// The number of ranks in a collective's group: the product of the sizes of
// `axes` on the dist.mesh `mesh` that `op` refers to (1 when the mesh does
// not resolve).
int64_t groupSize(mlir::Operation* op, mlir::FlatSymbolRefAttr mesh, mlir::ArrayAttr axes);

// Per rank, with g the group size and e the wire element size in bytes
// (bit width rounded up to bytes); blocking and `*_start` forms alike:
// * all_gather: receives (g - 1) * |input| * e (the padded shards of the
//   others, padding included: it travels);
// * reduce_scatter: sends (g - 1) * |result| * e;
// * all_reduce: 2 * (g - 1) * ceil(|input| / g) * e, a reduce-scatter then
//   an all-gather of padded chunks (the ring algorithm);
// * all_to_all: sends (g - 1) * |input| / g * e.
// Groups are keyed by their axes joined with "," in the op's order
// ("fsdp", "dp,fsdp").
struct CommVolume {
  struct Entry {
    int64_t count = 0;
    int64_t bytes = 0;
  };
  std::map<std::pair<std::string, CollectiveKind>, Entry> entries;

  // Sums over every group of `kind`.
  Entry of(CollectiveKind kind) const;
  // Sums over everything.
  int64_t totalBytes() const;
};

// Sums the collectives directly in `func`'s body. Every collective's mesh
// must resolve (a verified module guarantees it).
CommVolume computeCommVolume(mlir::func::FuncOp func);

}  // namespace loom::planner::collectives

#endif  // LOOM_PLANNER_TRANSFORMS_COLLECTIVES_COMM_VOLUME_H_
