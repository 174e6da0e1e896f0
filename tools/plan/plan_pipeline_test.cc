// Tests of the plan tool's flag handling: --mesh/--axes into the placement
// pass's mesh spec, and the topology a mesh runs on.
#include "tools/plan/plan_pipeline.h"

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

}  // namespace
}  // namespace loom::tools::plan
