// One call to the world group, a 2-d mesh and its axis groups, as
// torch.distributed.device_mesh.init_device_mesh("cpu", (2, 2),
// mesh_dim_names=("dp", "tp")), then an all-reduce along each axis. Run
// under the launcher on 4 ranks:
//   bazel-bin/tools/launch/launch --nproc=4 -- bazel-bin/examples/comm/device_mesh
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "comm/init_device_mesh.h"
#include "comm/process_group.h"

namespace {

using loom::comm::MeshGroups;
using loom::comm::ProcessGroup;
using loom::comm::Tensor;

absl::Status run(const MeshGroups& mesh) {
  const int rank = mesh.world()->rank();
  for (const std::shared_ptr<ProcessGroup>& group : mesh.allGroups()) {
    std::vector<int64_t> value = {rank};
    if (absl::Status s = group->allReduceSync(Tensor::of(value)); !s.ok()) return s;
    std::printf("%s: sum of global ranks %ld\n", group->name().c_str(),
                static_cast<long>(value[0]));
  }
  return absl::OkStatus();
}

}  // namespace

int main() {
  loom::comm::InitDeviceMeshOptions options;
  options.init.backend = "gloo";
  absl::StatusOr<MeshGroups> mesh = loom::comm::initDeviceMesh("dp=2,tp=2", options);
  const absl::Status status = mesh.ok() ? run(*mesh) : mesh.status();
  if (!status.ok()) {
    std::fprintf(stderr, "device_mesh: %s\n", std::string(status.message()).c_str());
    return 1;
  }
  return 0;
}
