// initDeviceMesh: world group (made or given), mesh parsed over it, groups.
#include "comm/init_device_mesh.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "comm/errors.h"
#include "mesh/device_mesh.h"

namespace loom::comm {

absl::StatusOr<MeshGroups> initDeviceMesh(std::string_view mesh_spec,
                                          const InitDeviceMeshOptions& options) {
  std::shared_ptr<ProcessGroup> world = options.world;
  if (world == nullptr) {
    absl::StatusOr<std::shared_ptr<ProcessGroup>> made = initProcessGroup(options.init);
    if (!made.ok()) return made.status();
    world = *std::move(made);
  }
  absl::StatusOr<mesh::DeviceMesh> mesh = mesh::DeviceMesh::parse(mesh_spec, world->size());
  if (!mesh.ok()) {
    return invalidArgumentError(absl::StrCat("init_device_mesh in group ", world->name(), " (rank ",
                                             world->rank(), " of ", world->size(),
                                             "): ", mesh.status().message()));
  }
  return MeshGroups::create(std::move(world), *mesh, options.axis_sets, options.prefix,
                            options.backend_override);
}

}  // namespace loom::comm
