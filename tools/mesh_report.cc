// Formats the mesh-over-topology report printed by //tools:mesh-info.
#include "tools/mesh_report.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace loom::tools {
namespace {

constexpr int64_t kGpusPerHost = 8;
// Groups listed per axis before the rest are summarised as "...".
constexpr size_t kGroupsShown = 4;

std::string groupsCell(const std::vector<mesh::DeviceMesh::Group>& groups) {
  std::vector<std::string> shown;
  for (size_t i = 0; i < std::min(groups.size(), kGroupsShown); ++i) {
    shown.push_back(absl::StrCat("[", absl::StrJoin(groups[i], ","), "]"));
  }
  if (groups.size() > kGroupsShown) shown.push_back("...");
  return absl::StrJoin(shown, " ");
}

}  // namespace

absl::StatusOr<mesh::Topology> topologyFromPreset(std::string_view preset, int64_t world_size) {
  if (preset == "cpu") return mesh::Topology::cpuHost(world_size);
  const bool gpu_preset = preset == "dgx-h100" || preset == "hgx-h200" || preset == "dgx-a100";
  if (!gpu_preset) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown topology '", std::string(preset),
                     "'; choose one of dgx-h100, hgx-h200, dgx-a100 (8 GPUs per host) or cpu"));
  }
  if (world_size <= 0 || world_size % kGpusPerHost != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("topology ", std::string(preset), " has ", kGpusPerHost,
                     " GPUs per host, but the mesh has ", world_size,
                     " devices; use a mesh whose size is a multiple of ", kGpusPerHost));
  }
  const int64_t hosts = world_size / kGpusPerHost;
  if (preset == "dgx-h100") return mesh::Topology::dgxH100(hosts);
  if (preset == "hgx-h200") return mesh::Topology::hgxH200(hosts);
  return mesh::Topology::dgxA100(hosts);
}

absl::StatusOr<std::string> meshReport(const mesh::DeviceMesh& mesh,
                                       const mesh::Topology& topology) {
  if (mesh.size() != topology.worldSize()) {
    return absl::InvalidArgumentError(
        absl::StrCat("mesh ", mesh.toString(), " has ", mesh.size(), " devices but topology ",
                     topology.toString(), " has ", topology.worldSize(),
                     "; make the mesh's axis sizes multiply to the topology's device count"));
  }
  std::string out = absl::StrCat(mesh.toString(), " on ", topology.toString(), "\n");
  absl::StrAppendFormat(&out, "%-8s %5s %7s %-13s %-12s %10s %9s  %s\n", "axis", "size", "groups",
                        "crosses hosts", "link", "GB/s/dir", "latency", "groups");
  for (const std::string& axis : mesh.axisNames()) {
    absl::StatusOr<std::vector<mesh::DeviceMesh::Group>> groups = mesh.groups({axis});
    if (!groups.ok()) return groups.status();
    absl::StatusOr<bool> crosses = topology.crossesHosts(mesh, axis);
    if (!crosses.ok()) return crosses.status();
    std::string link = "-", bandwidth = "-", latency = "-";
    // A size-1 axis does no communication, so it has no link.
    if (groups->front().size() > 1) {
      absl::StatusOr<mesh::Link> slowest = topology.slowestLink(groups->front());
      if (!slowest.ok()) return slowest.status();
      link = std::string(mesh::linkClassName(slowest->link_class));
      bandwidth = absl::StrFormat("%.1f", slowest->spec.bandwidth_bytes_per_s / 1e9);
      latency = absl::StrFormat("%.1f us", slowest->spec.latency_s * 1e6);
    }
    absl::StrAppendFormat(&out, "%-8s %5d %7d %-13s %-12s %10s %9s  %s\n", axis,
                          groups->front().size(), groups->size(), *crosses ? "yes" : "no", link,
                          bandwidth, latency, groupsCell(*groups));
  }
  return out;
}

}  // namespace loom::tools
