// Human-readable report of a device mesh laid over a cluster topology: for
// every axis, its groups, whether they cross hosts and the link they run on.
// This is what `bazel run //tools:mesh-info` prints.
#ifndef LOOM_TOOLS_MESH_REPORT_H_
#define LOOM_TOOLS_MESH_REPORT_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "mesh/device_mesh.h"
#include "mesh/topology.h"

namespace loom::tools {

// The topology named by `preset` that holds `world_size` ranks: "dgx-h100",
// "hgx-h200" or "dgx-a100" (8 GPUs per host, so world_size / 8 hosts), or
// "cpu" (one host running every rank).
absl::StatusOr<mesh::Topology> topologyFromPreset(std::string_view preset, int64_t world_size);

// The report: a header line for the mesh and topology, then one row per mesh
// axis (size, group count, crosses hosts, slowest link with its bandwidth
// and latency, the first groups). Fails if the mesh and topology disagree on
// the world size.
absl::StatusOr<std::string> meshReport(const mesh::DeviceMesh& mesh,
                                       const mesh::Topology& topology);

}  // namespace loom::tools

#endif  // LOOM_TOOLS_MESH_REPORT_H_
