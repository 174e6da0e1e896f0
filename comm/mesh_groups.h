// MeshGroups: the process groups of a DeviceMesh. For every mesh axis (and
// every requested set of axes) each rank gets the group of the ranks it
// shares that slice of the mesh with, numbered by mesh coordinate, so that a
// collective "over tp" is a call on groupFor("tp").
#ifndef LOOM_COMM_MESH_GROUPS_H_
#define LOOM_COMM_MESH_GROUPS_H_

#include <initializer_list>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "comm/process_group.h"
#include "mesh/device_mesh.h"

namespace loom::comm {

class MeshGroups {
 public:
  // Builds the groups over `world`, whose ranks the mesh's ranks are. Every
  // rank of `world` calls this with the same arguments (the groups are made
  // with newGroup, a collective over `world`), including ranks outside the
  // mesh. Each axis gets its groups; `axis_sets` adds groups spanning
  // several axes, ranks ordered row-major over the axes in the listed order
  // (DeviceMesh::groups). Groups are named "<prefix>/<axes>/<index>", e.g.
  // "mesh/tp/1" or "mesh/dp+tp/0", the index counting the groups of those
  // axes in DeviceMesh::groups order; the prefix keeps the names of two
  // MeshGroups on one world apart. `backend_override` gives an axis's
  // groups their own backend string (initProcessGroup's form, e.g. "gloo"),
  // as init_device_mesh's backend_override.
  static absl::StatusOr<MeshGroups> create(
      std::shared_ptr<ProcessGroup> world, const mesh::DeviceMesh& mesh,
      std::vector<std::vector<std::string>> axis_sets = {}, const std::string& prefix = "mesh",
      const std::map<std::string, std::string>& backend_override = {});

  // A 1-d mesh over an existing group, whose one axis `axis` is that group
  // itself (c10d's DeviceMesh.from_group); no group is created.
  static absl::StatusOr<MeshGroups> fromGroup(std::shared_ptr<ProcessGroup> group,
                                              const std::string& axis = "d0");

  const mesh::DeviceMesh& mesh() const { return mesh_; }
  const std::shared_ptr<ProcessGroup>& world() const { return world_; }
  // Whether this rank is one of the mesh's.
  bool inMesh() const { return mesh_.contains(world_->rank()); }

  // This rank's group along `axis`, or over `axes` (a single axis or a set
  // passed to create, in the same order). Fails naming what exists when
  // there is no such group, or when this rank is outside the mesh.
  absl::StatusOr<std::shared_ptr<ProcessGroup>> groupFor(const std::string& axis) const;
  absl::StatusOr<std::shared_ptr<ProcessGroup>> groupFor(
      const std::vector<std::string>& axes) const;
  // So that groupFor({"dp", "tp"}) means a set of axes, not a std::string
  // built from two pointers.
  absl::StatusOr<std::shared_ptr<ProcessGroup>> groupFor(
      std::initializer_list<std::string> axes) const {
    return groupFor(std::vector<std::string>(axes));
  }
  // This rank's group of every axis, in mesh order (c10d's
  // DeviceMesh.get_all_groups); empty outside the mesh.
  std::vector<std::shared_ptr<ProcessGroup>> allGroups() const;

 private:
  MeshGroups(std::shared_ptr<ProcessGroup> world, mesh::DeviceMesh mesh)
      : world_(std::move(world)), mesh_(std::move(mesh)) {}

  std::shared_ptr<ProcessGroup> world_;
  mesh::DeviceMesh mesh_;
  // (axes, this rank's group over them; null outside the mesh).
  std::vector<std::pair<std::vector<std::string>, std::shared_ptr<ProcessGroup>>> groups_;
};

}  // namespace loom::comm

#endif  // LOOM_COMM_MESH_GROUPS_H_
