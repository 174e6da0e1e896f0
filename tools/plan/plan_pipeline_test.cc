// Tests of the plan tool's flag handling: --mesh/--axes into the placement
// pass's mesh spec, the topology a mesh runs on, and the checks of a given
// mesh (--devices, tp across hosts).
#include "tools/plan/plan_pipeline.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace loom::tools::plan {
namespace {

TEST(PlanPipelineTest, MeshSpecNamesSizesByAxes) {
  EXPECT_EQ(*meshSpec("8x8", "fsdp,tp"), "fsdp=8,tp=8");
  EXPECT_EQ(*meshSpec("fsdp=4,tp=2", ""), "fsdp=4,tp=2");
  EXPECT_EQ(meshSpec("8x8", "fsdp").status().message(),
            "--mesh=8x8 has 2 axes but --axes='fsdp' names 1; give one strategy per mesh axis, "
            "e.g. --mesh=8x8 --axes=fsdp,tp");
  EXPECT_EQ(meshSpec("0x2", "fsdp,tp").status().message(),
            "--mesh=0x2: axis size '0' is not a positive integer; write sizes joined by x, e.g. "
            "--mesh=8x8");
}

TEST(PlanPipelineTest, TopologyFillsWholeHosts) {
  PlanRequest request;
  auto topology = topologyFor(request, 64);
  ASSERT_TRUE(topology.ok()) << topology.status();
  EXPECT_EQ(topology->numHosts(), 8);
  EXPECT_EQ(topology->devicesPerHost(), 8);
  auto small = topologyFor(request, 4);  // fewer devices than a host holds
  ASSERT_TRUE(small.ok());
  EXPECT_EQ(small->numHosts(), 1);
  EXPECT_EQ(small->devicesPerHost(), 4);
  EXPECT_EQ(topologyFor(request, 12).status().message(),
            "the mesh has 12 devices, not a multiple of --devices-per-host=8; change the mesh so "
            "its product fills whole hosts");
  request.device = "tpu";
  EXPECT_FALSE(topologyFor(request, 8).ok());
}

TEST(PlanPipelineTest, AMeshMustHaveTheGivenDeviceCount) {
  PlanRequest request{.mesh = "8x8", .axes = "fsdp,tp"};
  EXPECT_TRUE(checkMesh(request, 64, false).ok());
  EXPECT_TRUE(checkMesh(request, 0, false).ok());  // no --devices: nothing to compare
  EXPECT_EQ(checkMesh(request, 128, false).status().message(),
            "--mesh=8x8 has 8 x 8 = 64 devices but --devices=128; make the mesh's product equal "
            "the device count, or let the planner choose with --mesh=auto --devices=128");
}

TEST(PlanPipelineTest, TensorParallelismAcrossHostsIsRefusedOrWarned) {
  // tp innermost and within a host: fine.
  PlanRequest request{.mesh = "4x8", .axes = "fsdp,tp"};
  absl::StatusOr<std::vector<std::string>> warnings = checkMesh(request, 0, false);
  ASSERT_TRUE(warnings.ok()) << warnings.status();
  EXPECT_TRUE(warnings->empty());
  // tp outermost: each tp group takes one rank of every host.
  request.axes = "tp,fsdp";
  request.mesh = "4x8";
  const std::string what =
      "the tp axis 'tp' (size 4) spans 4 hosts of 8 devices, so its all-reduces cross "
      "infiniband (50 GB/s per device instead of 450 GB/s on nvlink)";
  EXPECT_EQ(checkMesh(request, 32, false).status().message(),
            what + "; keep tp inside a host (a size dividing 8, as the last mesh axis) or pass "
                   "--allow-tp-across-hosts");
  warnings = checkMesh(request, 32, true);
  ASSERT_TRUE(warnings.ok()) << warnings.status();
  EXPECT_EQ(*warnings, std::vector<std::string>{"warning: " + what});
  // Named axes: the strategy is the name when --axes is empty.
  request = {.mesh = "fsdp=2,tp=16"};
  EXPECT_FALSE(checkMesh(request, 0, false).ok());
}

}  // namespace
}  // namespace loom::tools::plan
