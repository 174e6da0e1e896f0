// Tests for the mesh-info report: axis rows, host crossing, links, errors.
#include "tools/mesh_report.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "mesh/device_mesh.h"
#include "tests/testing/status_matchers.h"

namespace loom::tools {
namespace {

using ::loom::mesh::DeviceMesh;
using ::loom::testutil::StatusIs;
using ::testing::AllOf;
using ::testing::ContainsRegex;
using ::testing::HasSubstr;

TEST(MeshReportTest, TwoDgxHostsTensorParallelInsideDataParallelAcross) {
  const DeviceMesh mesh = DeviceMesh::parse("dp=2,tp=8").value();
  const std::string report =
      meshReport(mesh, topologyFromPreset("dgx-h100", mesh.size()).value()).value();
  // dp pairs rank r with r + 8 on the other host: InfiniBand.
  EXPECT_THAT(report, ContainsRegex("dp +2 +8 +yes +infiniband +50\\.0 .*\\[0,8\\] \\[1,9\\]"));
  // tp stays on one host: NVLink.
  EXPECT_THAT(report, ContainsRegex("tp +8 +2 +no +nvlink +450\\.0 .*\\[0,1,2,3,4,5,6,7\\]"));
}

TEST(MeshReportTest, CpuHostAndSizeOneAxis) {
  const DeviceMesh mesh = DeviceMesh::parse("pp=1,dp=4").value();
  const std::string report =
      meshReport(mesh, topologyFromPreset("cpu", mesh.size()).value()).value();
  EXPECT_THAT(report, ContainsRegex("pp +1 +4 +no +- "));
  EXPECT_THAT(report, ContainsRegex("dp +4 +1 +no +loopback"));
}

TEST(MeshReportTest, ManyGroupsAreElided) {
  const DeviceMesh mesh = DeviceMesh::parse("dp=16,tp=1").value();
  const std::string report =
      meshReport(mesh, topologyFromPreset("cpu", mesh.size()).value()).value();
  EXPECT_THAT(report, HasSubstr("[0] [1] [2] [3] ..."));
}

TEST(MeshReportTest, RejectsUnknownPresetAndBadSizes) {
  EXPECT_THAT(topologyFromPreset("tpu-v5", 8).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("tpu-v5"), HasSubstr("dgx-h100"))));
  EXPECT_THAT(topologyFromPreset("dgx-h100", 12).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("12 devices"), HasSubstr("multiple of 8"))));
  const DeviceMesh mesh = DeviceMesh::parse("dp=4").value();
  EXPECT_THAT(meshReport(mesh, topologyFromPreset("cpu", 8).value()).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("4 devices"), HasSubstr("has 8"))));
}

}  // namespace
}  // namespace loom::tools
