// Tests of the cost model's pricing rules against hand calculations on a
// DGX H100 (989.5 TFLOP/s bf16, 67 TFLOP/s fp32, 3.35 TB/s; NVLink 450 GB/s
// and 3.4 us per step, InfiniBand 50 GB/s and 14 us per step).
#include "planner/cost/cost_model.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "mesh/device_mesh.h"
#include "mesh/topology.h"
#include "planner/cost/machine_profile.h"
#include "tests/testing/status_matchers.h"

namespace loom::planner::cost {
namespace {

using ::loom::testutil::StatusIs;
using ::testing::HasSubstr;

constexpr double kBf16Peak = 1979e12 / 2;
constexpr double kNvlinkBw = 450e9;
constexpr double kNvlinkLat = 3.4e-6;
constexpr double kIbBw = 50e9;
constexpr double kIbLat = 14e-6;

CostModel model(int64_t hosts, const MachineProfile* profile = nullptr) {
  absl::StatusOr<mesh::Topology> topology = mesh::Topology::dgxH100(hosts);
  EXPECT_TRUE(topology.ok()) << topology.status();
  absl::StatusOr<CostModel> cost = CostModel::create(*topology, {}, profile);
  EXPECT_TRUE(cost.ok()) << cost.status();
  return *cost;
}

TEST(CostModelTest, GemmTimeIsFlopsOverPeakTimesTheShapeEfficiency) {
  const CostModel cost = model(1);
  const double flops = 2.0 * 8192 * 8192 * 8192;
  EXPECT_DOUBLE_EQ(cost.computeSeconds({.op_class = OpClass::kGemm,
                                        .dtype = Dtype::kBF16,
                                        .flops = flops,
                                        .bytes = 3 * 8192.0 * 8192 * 2,
                                        .m = 8192,
                                        .n = 8192,
                                        .k = 8192}),
                   flops / (kBf16Peak * 0.5));
  // Medium (min dim 1024): 0.85 of that rate.
  const double medium = 2.0 * 8192 * 1024 * 8192;
  EXPECT_DOUBLE_EQ(cost.computeSeconds({.op_class = OpClass::kGemm,
                                        .dtype = Dtype::kBF16,
                                        .flops = medium,
                                        .m = 8192,
                                        .n = 1024,
                                        .k = 8192}),
                   medium / (kBf16Peak * 0.5 * 0.85));
  // f32 runs at the fp32 peak.
  EXPECT_DOUBLE_EQ(cost.computeSeconds({.op_class = OpClass::kGemm,
                                        .dtype = Dtype::kF32,
                                        .flops = flops,
                                        .m = 8192,
                                        .n = 8192,
                                        .k = 8192}),
                   flops / (67e12 * 0.5));
  // Attention: 0.7 of the large-GEMM rate.
  EXPECT_DOUBLE_EQ(
      cost.computeSeconds({.op_class = OpClass::kAttention, .dtype = Dtype::kBF16, .flops = 1e12}),
      1e12 / (kBf16Peak * 0.5 * 0.7));
}

TEST(CostModelTest, MemoryBoundOpsTakeTheirBytesAtTheBandwidth) {
  const CostModel cost = model(1);
  EXPECT_DOUBLE_EQ(
      cost.computeSeconds(
          {.op_class = OpClass::kMemoryBound, .dtype = Dtype::kBF16, .flops = 1e6, .bytes = 1e9}),
      1e9 / (3.35e12 * 0.7));
  EXPECT_EQ(cost.computeSeconds({.op_class = OpClass::kFree, .bytes = 1e9}), 0);
  EXPECT_DOUBLE_EQ(cost.streamSeconds(1e9), 1e9 / (3.35e12 * 0.7));
}

// Offload: copies over the host link (PCIe Gen5 on a DGX H100: 55 GB/s and
// 5 us per direction), AdamW on the host at 0.7 of each GPU's share of the
// host's DDR5 bandwidth (614.4 GB/s / 8).
TEST(CostModelTest, HostCopiesTakeTheHostLinkAndHostStepsTheHostMemory) {
  const CostModel cost = model(1);
  EXPECT_DOUBLE_EQ(cost.hostCopySeconds(1e9), 5e-6 + 1e9 / 55e9);
  EXPECT_DOUBLE_EQ(cost.hostStreamSeconds(1e9), 1e9 / (76.8e9 * 0.7));
}

TEST(CostModelTest, CollectivesPayLatencyPerRingStepAndBytesOnTheSlowestLink) {
  const CostModel cost = model(2);
  // All-gather over the 8 GPUs of a host: 7 NVLink steps.
  EXPECT_DOUBLE_EQ(cost.collectiveSeconds(CollectiveKind::kAllGather, {8, 1}, 7e9),
                   7 * kNvlinkLat + 7e9 / kNvlinkBw);
  // All-reduce over 16 ranks on 2 hosts: 30 steps, 2 of them between hosts,
  // bytes at the InfiniBand rate.
  EXPECT_DOUBLE_EQ(cost.collectiveSeconds(CollectiveKind::kAllReduce, {16, 2}, 1e9),
                   28 * kNvlinkLat + 2 * kIbLat + 1e9 / kIbBw);
  EXPECT_EQ(cost.collectiveSeconds(CollectiveKind::kAllReduce, {1, 1}, 1e9), 0);
  EXPECT_EQ(ringSteps(CollectiveKind::kAllReduce, 8), 14);
  EXPECT_EQ(ringSteps(CollectiveKind::kReduceScatter, 8), 7);
  EXPECT_EQ(interHostSteps(CollectiveKind::kAllGather, 4), 3);
}

TEST(CostModelTest, PointToPointIsOneHopOnTheLinkThePipelineCrosses) {
  const CostModel cost = model(2);
  EXPECT_DOUBLE_EQ(cost.pointToPointSeconds({2, 1}, 1e8), kNvlinkLat + 1e8 / kNvlinkBw);
  EXPECT_DOUBLE_EQ(cost.pointToPointSeconds({2, 2}, 1e8), kIbLat + 1e8 / kIbBw);
  EXPECT_EQ(cost.pointToPointSeconds({1, 1}, 1e8), 0);
}

TEST(CostModelTest, GroupsKnowTheHostsTheySpan) {
  const CostModel cost = model(2);
  const mesh::DeviceMesh mesh = *mesh::DeviceMesh::create({2, 8}, {"dp", "tp"});
  absl::StatusOr<GroupShape> tp = cost.groupOf(mesh, {"tp"});
  ASSERT_TRUE(tp.ok()) << tp.status();
  EXPECT_EQ(tp->size, 8);
  EXPECT_EQ(tp->hosts, 1);
  absl::StatusOr<GroupShape> dp = cost.groupOf(mesh, {"dp"});
  EXPECT_EQ(dp->size, 2);
  EXPECT_EQ(dp->hosts, 2);
  EXPECT_DOUBLE_EQ(cost.peakFlops(Dtype::kF16), kBf16Peak);
}

TEST(CostModelTest, AProfileReplacesGemmRatesMemoryAndCollectives) {
  MachineProfile profile;
  profile.name = "lab";
  profile.device_name = "h100";
  profile.memory_bytes = 64LL << 30;
  profile.memory_bandwidth_bytes_per_s = 2e12;
  profile.gemm.push_back({.dtype = "bf16",
                          .shape_class = ShapeClass::kLarge,
                          .m = 8192,
                          .n = 8192,
                          .k = 8192,
                          .flops_per_s = 6e14});
  profile.collectives.push_back({.backend = "nccl",
                                 .kind = "all_gather",
                                 .group_size = 8,
                                 .link_class = LinkScope::kIntraHost,
                                 .latency_s = 2e-5,
                                 .bus_bandwidth_bytes_per_s = 3e11,
                                 .points = {}});
  const CostModel cost = model(2, &profile);
  EXPECT_EQ(cost.memoryBytes(), 64LL << 30);
  EXPECT_DOUBLE_EQ(cost.computeSeconds({.op_class = OpClass::kGemm,
                                        .dtype = Dtype::kBF16,
                                        .flops = 6e14,
                                        .m = 4096,
                                        .n = 4096,
                                        .k = 4096}),
                   1.0);
  // No medium entry: the datasheet rate.
  EXPECT_DOUBLE_EQ(cost.computeSeconds({.op_class = OpClass::kGemm,
                                        .dtype = Dtype::kBF16,
                                        .flops = 1e12,
                                        .m = 1024,
                                        .n = 1024,
                                        .k = 1024}),
                   1e12 / (kBf16Peak * 0.5 * 0.85));
  EXPECT_DOUBLE_EQ(cost.computeSeconds({.op_class = OpClass::kMemoryBound, .bytes = 1e9}),
                   1e9 / (2e12 * 0.7));
  // The 8-rank entry priced for 4 ranks: latency scaled by 3 / 7 steps.
  EXPECT_DOUBLE_EQ(cost.collectiveSeconds(CollectiveKind::kAllGather, {4, 1}, 3e9),
                   2e-5 * 3 / 7 + 3e9 / 3e11);
  // No inter-host entry: the datasheet.
  EXPECT_DOUBLE_EQ(cost.collectiveSeconds(CollectiveKind::kAllGather, {16, 2}, 1e9),
                   14 * kNvlinkLat + 1 * kIbLat + 1e9 / kIbBw);
  EXPECT_EQ(cost.backend(), "nccl");
}

TEST(CostModelTest, RefusesBadEfficienciesAndAProfileOfAnotherDevice) {
  const mesh::Topology topology = *mesh::Topology::dgxH100(1);
  EXPECT_THAT(CostModel::create(topology, {.gemm = 1.5}).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("efficiency 'gemm' must be in (0, 1], got: 1.5")));
  MachineProfile cpu;
  cpu.name = "laptop";
  cpu.device_name = "cpu";
  cpu.memory_bytes = 1;
  cpu.memory_bandwidth_bytes_per_s = 1;
  EXPECT_THAT(CostModel::create(topology, {}, &cpu).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("machine profile 'laptop' was measured on device 'cpu' but the "
                                 "plan is for 'h100-sxm'; pass --device=cpu")));
}

}  // namespace
}  // namespace loom::planner::cost
