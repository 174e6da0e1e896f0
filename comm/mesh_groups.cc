// Builds and looks up the process groups of a DeviceMesh.
#include "comm/mesh_groups.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "comm/errors.h"

namespace loom::comm {

absl::StatusOr<MeshGroups> MeshGroups::create(
    std::shared_ptr<ProcessGroup> world, const mesh::DeviceMesh& mesh,
    std::vector<std::vector<std::string>> axis_sets, const std::string& prefix,
    const std::map<std::string, std::string>& backend_override) {
  if (world == nullptr) return invalidArgumentError("MeshGroups::create: the world group is null");
  const std::string who =
      absl::StrCat("mesh groups of ", mesh.toString(), " over group ", world->name(), ": ");
  for (int64_t rank : mesh.ranks()) {
    if (rank >= world->size()) {
      return invalidArgumentError(absl::StrCat(who, "mesh rank ", rank, " is outside the group's ",
                                               world->size(),
                                               " ranks; build the mesh over ranks of the group"));
    }
  }
  for (const auto& [axis, backend] : backend_override) {
    if (!mesh.hasAxis(axis)) {
      return invalidArgumentError(absl::StrCat(who, "backend_override names axis '", axis,
                                               "', which the mesh does not have"));
    }
  }
  // Single axes first, in mesh order, then the requested sets: the same
  // order on every rank, which newGroup requires.
  std::vector<std::vector<std::string>> all;
  for (const std::string& axis : mesh.axisNames()) all.push_back({axis});
  for (std::vector<std::string>& axes : axis_sets) {
    if (std::find(all.begin(), all.end(), axes) == all.end()) all.push_back(std::move(axes));
  }

  // Every axis set is checked before any group is made, so that a bad one
  // fails every rank alike without leaving half the groups behind.
  std::vector<std::vector<mesh::DeviceMesh::Group>> rank_lists;
  for (const std::vector<std::string>& axes : all) {
    absl::StatusOr<std::vector<mesh::DeviceMesh::Group>> groups = mesh.groups(axes);
    if (!groups.ok()) {
      return invalidArgumentError(absl::StrCat(who, groups.status().message()));
    }
    rank_lists.push_back(*std::move(groups));
  }

  MeshGroups result(std::move(world), mesh);
  const int me = result.world_->rank();
  for (size_t set = 0; set < all.size(); ++set) {
    std::shared_ptr<ProcessGroup> mine;
    for (size_t index = 0; index < rank_lists[set].size(); ++index) {
      const std::vector<int> ranks(rank_lists[set][index].begin(), rank_lists[set][index].end());
      NewGroupOptions options;
      options.name = absl::StrCat(prefix, "/", absl::StrJoin(all[set], "+"), "/", index);
      if (all[set].size() == 1) {
        if (auto it = backend_override.find(all[set][0]); it != backend_override.end()) {
          options.backend = it->second;
        }
      }
      absl::StatusOr<std::shared_ptr<ProcessGroup>> group = result.world_->newGroup(ranks, options);
      if (!group.ok()) return group.status();
      if (std::find(ranks.begin(), ranks.end(), me) != ranks.end()) mine = *std::move(group);
    }
    result.groups_.emplace_back(all[set], std::move(mine));
  }
  return result;
}

absl::StatusOr<MeshGroups> MeshGroups::fromGroup(std::shared_ptr<ProcessGroup> group,
                                                 const std::string& axis) {
  if (group == nullptr) return invalidArgumentError("MeshGroups::fromGroup: the group is null");
  absl::StatusOr<mesh::DeviceMesh> mesh = mesh::DeviceMesh::create({group->size()}, {axis});
  if (!mesh.ok()) {
    return invalidArgumentError(absl::StrCat("MeshGroups::fromGroup over group ", group->name(),
                                             ": ", mesh.status().message()));
  }
  MeshGroups result(group, *std::move(mesh));
  result.groups_.emplace_back(std::vector<std::string>{axis}, std::move(group));
  return result;
}

std::vector<std::shared_ptr<ProcessGroup>> MeshGroups::allGroups() const {
  std::vector<std::shared_ptr<ProcessGroup>> groups;
  if (!inMesh()) return groups;
  for (const std::string& axis : mesh_.axisNames()) {
    for (const auto& [axes, group] : groups_) {
      if (axes.size() == 1 && axes[0] == axis) groups.push_back(group);
    }
  }
  return groups;
}

absl::StatusOr<std::shared_ptr<ProcessGroup>> MeshGroups::groupFor(const std::string& axis) const {
  return groupFor(std::vector<std::string>{axis});
}

absl::StatusOr<std::shared_ptr<ProcessGroup>> MeshGroups::groupFor(
    const std::vector<std::string>& axes) const {
  std::vector<std::string> known;
  for (const auto& [group_axes, group] : groups_) {
    if (group_axes != axes) {
      known.push_back(absl::StrCat("[", absl::StrJoin(group_axes, ", "), "]"));
      continue;
    }
    if (group == nullptr) {
      return invalidArgumentError(absl::StrCat(
          "rank ", world_->rank(), " of group ", world_->name(), " is not in ", mesh_.toString(),
          ", so it has no group over [", absl::StrJoin(axes, ", "), "]"));
    }
    return group;
  }
  return invalidArgumentError(absl::StrCat("no group over axes [", absl::StrJoin(axes, ", "),
                                           "] of ", mesh_.toString(), "; groups exist for ",
                                           absl::StrJoin(known, ", "),
                                           "; pass the axis set to MeshGroups::create"));
}

}  // namespace loom::comm
