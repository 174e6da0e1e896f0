// mesh-info: prints how a device mesh maps onto a cluster, i.e. the rank
// groups of every axis and the link each axis's collectives would run on.
//
//   bazel run //tools:mesh-info -- --mesh=dp=2,tp=8 --topology=dgx-h100
#include <cstdio>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "mesh/device_mesh.h"
#include "tools/mesh_report.h"

ABSL_FLAG(std::string, mesh, "dp=2,tp=4",
          "mesh spec: named axes \"dp=2,tp=4\" or sizes \"2x4\"; its size is the world size");
ABSL_FLAG(std::string, topology, "cpu",
          "cluster the mesh runs on: dgx-h100, hgx-h200, dgx-a100 (8 GPUs per host) or cpu");

namespace {

int fail(const absl::Status& status) {
  std::fprintf(stderr, "mesh-info: %s\n", std::string(status.message()).c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "prints the rank groups of every mesh axis and the link they use.\n"
      "  mesh-info --mesh=dp=2,tp=8 --topology=dgx-h100");
  // --help lists the flags defined in this file; absl's default looks for a
  // file named after the binary, whose name has a hyphen.
  absl::FlagsUsageConfig usage;
  usage.contains_help_flags = [](absl::string_view file) { return file == __FILE__; };
  absl::SetFlagsUsageConfig(usage);
  absl::ParseCommandLine(argc, argv);
  absl::StatusOr<loom::mesh::DeviceMesh> mesh =
      loom::mesh::DeviceMesh::parse(absl::GetFlag(FLAGS_mesh));
  if (!mesh.ok()) return fail(mesh.status());
  absl::StatusOr<loom::mesh::Topology> topology =
      loom::tools::topologyFromPreset(absl::GetFlag(FLAGS_topology), mesh->size());
  if (!topology.ok()) return fail(topology.status());
  absl::StatusOr<std::string> report = loom::tools::meshReport(*mesh, *topology);
  if (!report.ok()) return fail(report.status());
  std::fputs(report->c_str(), stdout);
  return 0;
}
