// initDeviceMesh: the world group, a DeviceMesh and the groups of its axes
// from one call, as torch.distributed.device_mesh.init_device_mesh.
#ifndef LOOM_COMM_INIT_DEVICE_MESH_H_
#define LOOM_COMM_INIT_DEVICE_MESH_H_

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "comm/init_process_group.h"
#include "comm/mesh_groups.h"
#include "comm/process_group.h"

namespace loom::comm {

struct InitDeviceMeshOptions {
  // An existing world group; when null, initProcessGroup(init) makes one
  // (as init_device_mesh initialises the default group if needed).
  std::shared_ptr<ProcessGroup> world = nullptr;
  InitOptions init = {};
  // A backend string per axis name for that axis's groups (PyTorch's
  // backend_override), e.g. {{"dp", "gloo"}}.
  std::map<std::string, std::string> backend_override = {};
  // Groups over several axes, as MeshGroups::create takes them.
  std::vector<std::vector<std::string>> axis_sets = {};
  std::string prefix = "mesh";
};

// Every rank calls it with the same spec and options. `mesh_spec` is
// DeviceMesh::parse's ("dp=2,tp=2", or "2x2" for axes d0, d1) and must cover
// the world. allGroups() then lists this rank's group per axis.
absl::StatusOr<MeshGroups> initDeviceMesh(std::string_view mesh_spec,
                                          const InitDeviceMeshOptions& options = {});

}  // namespace loom::comm

#endif  // LOOM_COMM_INIT_DEVICE_MESH_H_
