// DeviceMesh: an n-d arrangement of ranks with named axes, the shared
// vocabulary in which the planner states shardings and the runtime builds its
// communication groups.

#ifndef LOOM_MESH_DEVICE_MESH_H_
#define LOOM_MESH_DEVICE_MESH_H_

#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace loom::mesh {

// An immutable n-d grid of ranks, stored row-major (the last axis varies
// fastest), with one unique identifier-like name per axis. A mesh built by
// `create` holds ranks 0..N-1; slicing and sub-meshes keep the original ranks,
// so `slice("dp", 1)` of `mesh<dp=2, tp=4>` is the 1-d mesh `tp=4` holding
// ranks 4, 5, 6, 7.
//
// A 0-d mesh (no axes) holds exactly one rank; it is what slicing the last axis
// away gives.
//
// Functions that take a list of axes (`groups`, `groupOf`, `subMesh`,
// `flatten`) refuse unknown or repeated names; the order of the list matters
// where documented.
class DeviceMesh {
 public:
  using Group = std::vector<int64_t>;

  // Ranks 0..N-1 laid out row-major over `shape`. Every size must be at least
  // 1, there must be one name per axis, and names must be unique identifiers
  // ([A-Za-z_][A-Za-z0-9_]*) so that `toString` output parses back.
  static absl::StatusOr<DeviceMesh> create(std::vector<int64_t> shape,
                                           std::vector<std::string> axis_names);

  // Like `create`, but with an explicit row-major rank array: one unique
  // non-negative rank per device. The ranks need not be 0..N-1 (a mesh over a
  // subset of the world is fine).
  static absl::StatusOr<DeviceMesh> createWithRanks(std::vector<int64_t> shape,
                                                    std::vector<std::string> axis_names,
                                                    std::vector<int64_t> ranks);

  // Parses a mesh spec for `world_size` ranks 0..world_size-1. Two forms are
  // accepted, with whitespace allowed around every token:
  //   "dp=2,tp=4"  named axes;
  //   "2x4"        unnamed axes, named d0, d1, ... by position.
  // Positional names imply no parallelism strategy: which strategy an axis
  // carries is the planner's call. The product of the sizes must equal
  // `world_size`. Errors name the offending token and its 1-based column.
  static absl::StatusOr<DeviceMesh> parse(std::string_view spec, int64_t world_size);
  // Like parse(spec, world_size), for ranks 0..N-1 where N is whatever the
  // product of the spec's sizes is.
  static absl::StatusOr<DeviceMesh> parse(std::string_view spec);

  int64_t ndim() const { return static_cast<int64_t>(shape_.size()); }
  int64_t size() const { return static_cast<int64_t>(ranks_.size()); }
  const std::vector<int64_t>& shape() const { return shape_; }
  const std::vector<std::string>& axisNames() const { return axis_names_; }
  // ranks()[i] is the rank at the coordinate whose row-major index is i.
  const std::vector<int64_t>& ranks() const { return ranks_; }

  bool hasAxis(std::string_view name) const;
  absl::StatusOr<int64_t> axisIndex(std::string_view name) const;
  absl::StatusOr<int64_t> axisSize(std::string_view name) const;
  bool contains(int64_t rank) const;

  absl::StatusOr<std::vector<int64_t>> coordinateOf(int64_t rank) const;
  absl::StatusOr<int64_t> rankAt(const std::vector<int64_t>& coordinate) const;

  // Every group of ranks that varies only along `axes`, i.e. the communicator
  // set of a collective over those axes. Within a group, ranks are ordered
  // row-major over `axes` in the order they are listed; groups are ordered
  // row-major over the remaining axes. For mesh<dp=2, tp=4>: groups({"tp"}) is
  // [[0,1,2,3],[4,5,6,7]] and groups({"dp"}) is [[0,4],[1,5],[2,6],[3,7]].
  absl::StatusOr<std::vector<Group>> groups(const std::vector<std::string>& axes) const;

  // The one group of `groups(axes)` that contains `rank`.
  absl::StatusOr<Group> groupOf(int64_t rank, const std::vector<std::string>& axes) const;

  // The mesh at `index` along `axis`, with that axis removed and the ranks
  // kept.
  absl::StatusOr<DeviceMesh> slice(std::string_view axis, int64_t index) const;

  // The mesh spanned by `axes` (in the listed order) that contains `rank`; its
  // ranks are `groupOf(rank, axes)`.
  absl::StatusOr<DeviceMesh> subMesh(int64_t rank, const std::vector<std::string>& axes) const;

  // Merges `axes` into one axis called `new_name`. The axes must be neighbours
  // listed in mesh order, as in PyTorch's DeviceMesh._flatten: only then does
  // the merged axis keep the row-major rank order, so the ranks array is
  // unchanged. `new_name` may reuse one of the merged names but not a name of
  // an axis that remains.
  absl::StatusOr<DeviceMesh> flatten(const std::vector<std::string>& axes,
                                     std::string new_name) const;

  // "mesh<dp=2, tp=4>"; when the ranks are not 0..N-1 they follow, as in
  // "mesh<tp=4>[4, 5, 6, 7]".
  std::string toString() const;

  friend bool operator==(const DeviceMesh& a, const DeviceMesh& b) {
    return a.shape_ == b.shape_ && a.axis_names_ == b.axis_names_ && a.ranks_ == b.ranks_;
  }
  friend std::ostream& operator<<(std::ostream& os, const DeviceMesh& mesh) {
    return os << mesh.toString();
  }

 private:
  DeviceMesh(std::vector<int64_t> shape, std::vector<std::string> axis_names,
             std::vector<int64_t> ranks);

  // Resolves `axes` to axis indices, refusing unknown and repeated names.
  absl::StatusOr<std::vector<int64_t>> resolveAxes(const std::vector<std::string>& axes) const;
  absl::StatusOr<int64_t> indexOf(int64_t rank) const;
  // Row-major index offset of the position whose coordinates on `axes` (in that
  // order) are the row-major unravelling of `flat`, and zero on every other
  // axis.
  int64_t offsetAlong(const std::vector<int64_t>& axes, int64_t flat) const;
  // The ranks reached from row-major index `base` by moving along `axes` only.
  Group collectGroup(int64_t base, const std::vector<int64_t>& axes) const;

  std::vector<int64_t> shape_;
  std::vector<std::string> axis_names_;
  std::vector<int64_t> ranks_;
  std::vector<int64_t> strides_;
  // (rank, row-major index) sorted by rank, so a rank is found by binary search
  // whatever subset of the world the mesh holds; empty when the ranks are
  // 0..n-1 in order, each its own index.
  std::vector<std::pair<int64_t, int64_t>> index_by_rank_;
};

}  // namespace loom::mesh

#endif  // LOOM_MESH_DEVICE_MESH_H_
