// Tests for Topology: validation, presets, host placement, which mesh axes
// leave a host, and link lookups.

#include "mesh/topology.h"

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "mesh/device_mesh.h"
#include "mesh/device_specs.h"
#include "tests/testing/status_matchers.h"

namespace loom::mesh {
namespace {

using ::loom::testutil::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr absl::StatusCode kInvalid = absl::StatusCode::kInvalidArgument;

TopologyOptions twoGpuHosts() {
  return {.num_hosts = 2,
          .devices_per_host = 8,
          .device = deviceSpec("h100-sxm").value(),
          .intra_host_link = LinkClass::kNVLink,
          .inter_host_link = LinkClass::kInfiniBand};
}

TEST(LinkClassTest, NamesRoundTrip) {
  for (LinkClass link_class :
       {LinkClass::kNVLink, LinkClass::kInfiniBand, LinkClass::kPCIe, LinkClass::kLoopbackTcp,
        LinkClass::kMemcpy}) {
    EXPECT_EQ(linkClassFromName(linkClassName(link_class)).value(), link_class);
  }
  EXPECT_EQ(linkClassName(LinkClass::kLoopbackTcp), "loopback-tcp");
  EXPECT_THAT(linkClassFromName("ethernet").status(),
              StatusIs(absl::StatusCode::kNotFound,
                       AllOf(HasSubstr("'ethernet'"), HasSubstr("nvlink, infiniband"))));
}

TEST(LinkClassTest, DefaultSpecs) {
  LinkSpec nvlink = defaultLinkSpec(LinkClass::kNVLink);
  EXPECT_DOUBLE_EQ(nvlink.bandwidth_bytes_per_s, 450e9);
  EXPECT_DOUBLE_EQ(nvlink.latency_s, 3.4e-6);
  EXPECT_DOUBLE_EQ(defaultLinkSpec(LinkClass::kInfiniBand).bandwidth_bytes_per_s, 50e9);
  EXPECT_NEAR(defaultLinkSpec(LinkClass::kPCIe).bandwidth_bytes_per_s, 63e9, 0.1e9);
  // The classes are ordered fastest first, which the cost model relies on when
  // it has nothing better than the defaults.
  EXPECT_GT(nvlink.bandwidth_bytes_per_s, defaultLinkSpec(LinkClass::kPCIe).bandwidth_bytes_per_s);
  EXPECT_GT(defaultLinkSpec(LinkClass::kPCIe).bandwidth_bytes_per_s,
            defaultLinkSpec(LinkClass::kInfiniBand).bandwidth_bytes_per_s);
  EXPECT_GT(defaultLinkSpec(LinkClass::kInfiniBand).bandwidth_bytes_per_s,
            defaultLinkSpec(LinkClass::kLoopbackTcp).bandwidth_bytes_per_s);
}

TEST(TopologyTest, CreateAndAccessors) {
  Topology topology = Topology::create(twoGpuHosts()).value();
  EXPECT_EQ(topology.numHosts(), 2);
  EXPECT_EQ(topology.devicesPerHost(), 8);
  EXPECT_EQ(topology.worldSize(), 16);
  EXPECT_EQ(topology.device().name, "h100-sxm");
  EXPECT_EQ(topology.intraHostLink(),
            (Link{LinkClass::kNVLink, defaultLinkSpec(LinkClass::kNVLink)}));
  EXPECT_EQ(topology.interHostLink().link_class, LinkClass::kInfiniBand);
  EXPECT_EQ(topology.toString(),
            "topology<2 hosts x 8 h100-sxm, nvlink within hosts, infiniband "
            "between hosts>");
  EXPECT_EQ(topology, Topology::dgxH100(2).value());
}

TEST(TopologyTest, SpecOverridesReplaceDefaults) {
  TopologyOptions options = twoGpuHosts();
  options.inter_host_spec = LinkSpec{.bandwidth_bytes_per_s = 12.5e9, .latency_s = 20e-6};
  Topology topology = Topology::create(options).value();
  EXPECT_DOUBLE_EQ(topology.interHostLink().spec.bandwidth_bytes_per_s, 12.5e9);
  EXPECT_DOUBLE_EQ(topology.intraHostLink().spec.bandwidth_bytes_per_s, 450e9);
}

TEST(TopologyTest, HostLinkIsTheDevicesUnlessGiven) {
  Topology h100 = Topology::dgxH100(1).value();
  EXPECT_EQ(h100.hostLink().link_class, LinkClass::kPCIe);
  EXPECT_DOUBLE_EQ(h100.hostLink().spec.bandwidth_bytes_per_s, 55e9);
  EXPECT_DOUBLE_EQ(h100.hostLink().spec.latency_s, 5e-6);
  Topology cpu = Topology::cpuHost(2).value();
  EXPECT_EQ(cpu.hostLink(), (Link{LinkClass::kMemcpy, defaultLinkSpec(LinkClass::kMemcpy)}));
  EXPECT_DOUBLE_EQ(cpu.hostLink().spec.bandwidth_bytes_per_s, 25.6e9);

  TopologyOptions options = twoGpuHosts();
  options.host_link_spec = LinkSpec{.bandwidth_bytes_per_s = 20e9, .latency_s = 1e-5};
  EXPECT_DOUBLE_EQ(Topology::create(options).value().hostLink().spec.bandwidth_bytes_per_s, 20e9);
  options.host_link_spec = LinkSpec{.bandwidth_bytes_per_s = 0, .latency_s = 1e-5};
  EXPECT_THAT(Topology::create(options).status(),
              StatusIs(kInvalid, AllOf(HasSubstr("host link (pcie)"), HasSubstr("bandwidth 0"))));
}

TEST(TopologyTest, Presets) {
  Topology a100 = Topology::dgxA100(4).value();
  EXPECT_EQ(a100.worldSize(), 32);
  EXPECT_EQ(a100.device().name, "a100-80gb");
  EXPECT_DOUBLE_EQ(a100.intraHostLink().spec.bandwidth_bytes_per_s, 300e9);
  EXPECT_DOUBLE_EQ(a100.interHostLink().spec.bandwidth_bytes_per_s, 25e9);

  Topology h200 = Topology::hgxH200(1).value();
  EXPECT_EQ(h200.device().name, "h200");
  EXPECT_EQ(h200.intraHostLink().link_class, LinkClass::kNVLink);

  Topology cpu = Topology::cpuHost(4).value();
  EXPECT_EQ(cpu.numHosts(), 1);
  EXPECT_EQ(cpu.worldSize(), 4);
  EXPECT_EQ(cpu.device().name, "cpu");
  EXPECT_EQ(cpu.intraHostLink().link_class, LinkClass::kLoopbackTcp);
  EXPECT_EQ(cpu.toString(),
            "topology<1 host x 4 cpu, loopback-tcp within hosts, loopback-tcp "
            "between hosts>");

  EXPECT_THAT(Topology::dgxH100(0).status(), StatusIs(kInvalid, HasSubstr("0 hosts")));
  EXPECT_THAT(Topology::cpuHost(0).status(), StatusIs(kInvalid, HasSubstr("0 devices per host")));
}

TEST(TopologyTest, CreateRejectsBadOptions) {
  TopologyOptions options = twoGpuHosts();
  options.num_hosts = -1;
  EXPECT_THAT(Topology::create(options).status(),
              StatusIs(kInvalid, AllOf(HasSubstr("-1 hosts"), HasSubstr("at least 1"))));

  options = twoGpuHosts();
  options.num_hosts = int64_t{1} << 40;
  EXPECT_THAT(Topology::create(options).status(),
              StatusIs(kInvalid, HasSubstr("more than 16777216 devices")));

  options = twoGpuHosts();
  options.device = DeviceSpec{};
  EXPECT_THAT(Topology::create(options).status(), StatusIs(kInvalid, HasSubstr("no name")));

  options = twoGpuHosts();
  options.intra_host_spec = LinkSpec{.bandwidth_bytes_per_s = 0, .latency_s = 1e-6};
  EXPECT_THAT(
      Topology::create(options).status(),
      StatusIs(kInvalid, AllOf(HasSubstr("intra-host link (nvlink)"), HasSubstr("bandwidth 0"))));

  options = twoGpuHosts();
  options.inter_host_spec = LinkSpec{.bandwidth_bytes_per_s = 1e9, .latency_s = -1};
  EXPECT_THAT(Topology::create(options).status(),
              StatusIs(kInvalid,
                       AllOf(HasSubstr("inter-host link (infiniband)"), HasSubstr("latency -1"))));

  options.inter_host_spec =
      LinkSpec{.bandwidth_bytes_per_s = 1e9, .latency_s = std::numeric_limits<double>::infinity()};
  EXPECT_THAT(Topology::create(options).status(), StatusIs(kInvalid, HasSubstr("latency inf")));
}

TEST(TopologyTest, RanksArePlacedHostMajor) {
  Topology topology = Topology::dgxH100(2).value();
  EXPECT_EQ(topology.hostOf(0).value(), 0);
  EXPECT_EQ(topology.hostOf(7).value(), 0);
  EXPECT_EQ(topology.hostOf(8).value(), 1);
  EXPECT_EQ(topology.hostOf(15).value(), 1);
  EXPECT_EQ(topology.localRankOf(13).value(), 5);
  auto out_of_range = [](int64_t rank) {
    return StatusIs(kInvalid, AllOf(HasSubstr("rank " + std::to_string(rank) + " is not in"),
                                    HasSubstr("0 to 15")));
  };
  EXPECT_THAT(topology.hostOf(16).status(), out_of_range(16));
  EXPECT_THAT(topology.hostOf(-1).status(), out_of_range(-1));
  EXPECT_THAT(topology.localRankOf(16).status(), out_of_range(16));
}

TEST(TopologyTest, TensorParallelStaysInsideHostsDataParallelCrosses) {
  Topology topology = Topology::dgxH100(2).value();
  DeviceMesh mesh = DeviceMesh::parse("dp=2,tp=8", 16).value();
  EXPECT_FALSE(topology.crossesHosts(mesh, "tp").value());
  EXPECT_TRUE(topology.crossesHosts(mesh, "dp").value());

  // The other way round every tp group spans both hosts and dp stays inside
  // one.
  DeviceMesh swapped = DeviceMesh::parse("tp=8,dp=2", 16).value();
  EXPECT_TRUE(topology.crossesHosts(swapped, "tp").value());
  EXPECT_FALSE(topology.crossesHosts(swapped, "dp").value());

  // A group of 4 that straddles no host boundary in a 4x4 mesh over 2 hosts of
  // 8.
  DeviceMesh square = DeviceMesh::parse("a=4,b=4", 16).value();
  EXPECT_FALSE(topology.crossesHosts(square, "b").value());
  EXPECT_TRUE(topology.crossesHosts(square, "a").value());
}

TEST(TopologyTest, CrossesHostsRejectsBadMeshOrAxis) {
  Topology topology = Topology::dgxH100(1).value();
  DeviceMesh mesh = DeviceMesh::parse("dp=2,tp=8", 16).value();
  EXPECT_THAT(topology.crossesHosts(mesh, "tp").status(),
              StatusIs(kInvalid, AllOf(HasSubstr("rank 15"), HasSubstr("ranks 0 to 7"),
                                       HasSubstr("at least 16 devices"))));
  DeviceMesh small = DeviceMesh::parse("tp=8", 8).value();
  EXPECT_THAT(topology.crossesHosts(small, "dp").status(),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("no axis 'dp'")));
}

TEST(TopologyTest, LinkBetweenRanks) {
  Topology topology = Topology::dgxH100(2).value();
  EXPECT_EQ(topology.linkBetween(0, 7).value().link_class, LinkClass::kNVLink);
  EXPECT_EQ(topology.linkBetween(7, 8).value().link_class, LinkClass::kInfiniBand);
  EXPECT_EQ(topology.linkBetween(15, 3).value(), topology.interHostLink());
  EXPECT_THAT(topology.linkBetween(3, 3).status(),
              StatusIs(kInvalid, HasSubstr("rank 3 has no link to itself")));
  EXPECT_THAT(topology.linkBetween(3, 16).status(),
              StatusIs(kInvalid, HasSubstr("rank 16 is not in")));
}

TEST(TopologyTest, SlowestLinkOfGroups) {
  Topology topology = Topology::dgxH100(2).value();
  DeviceMesh mesh = DeviceMesh::parse("dp=2,tp=8", 16).value();
  EXPECT_EQ(topology.slowestLink(mesh.groupOf(3, {"tp"}).value()).value().link_class,
            LinkClass::kNVLink);
  EXPECT_EQ(topology.slowestLink(mesh.groupOf(3, {"dp"}).value()).value().link_class,
            LinkClass::kInfiniBand);
  EXPECT_EQ(topology.slowestLink(mesh.ranks()).value().link_class, LinkClass::kInfiniBand);
}

TEST(TopologyTest, SlowestLinkComparesBandwidthWhenAGroupUsesBothLinks) {
  // A PCIe box whose network is faster than its PCIe fabric: a group that mixes
  // intra- and inter-host pairs is bounded by PCIe.
  Topology topology = Topology::create({.num_hosts = 2,
                                        .devices_per_host = 4,
                                        .device = deviceSpec("a100-40gb").value(),
                                        .intra_host_link = LinkClass::kPCIe,
                                        .inter_host_link = LinkClass::kInfiniBand,
                                        .intra_host_spec = LinkSpec{32e9, 5.7e-6},
                                        .inter_host_spec = LinkSpec{50e9, 14e-6}})
                          .value();
  EXPECT_EQ(topology.slowestLink({0, 1, 4, 5}).value().link_class, LinkClass::kPCIe);
  // Only inter-host pairs: the network is all it uses.
  EXPECT_EQ(topology.slowestLink({0, 4}).value().link_class, LinkClass::kInfiniBand);
}

TEST(TopologyTest, SlowestLinkRejectsBadGroups) {
  Topology topology = Topology::dgxH100(1).value();
  EXPECT_THAT(topology.slowestLink({}).status(),
              StatusIs(kInvalid, HasSubstr("group [] has fewer than 2 ranks")));
  EXPECT_THAT(topology.slowestLink({3}).status(),
              StatusIs(kInvalid, HasSubstr("group [3] has fewer than 2 ranks")));
  EXPECT_THAT(topology.slowestLink({1, 2, 1}).status(),
              StatusIs(kInvalid, HasSubstr("rank 1 appears twice")));
  EXPECT_THAT(topology.slowestLink({1, 8}).status(),
              StatusIs(kInvalid, HasSubstr("rank 8 is not in")));
}

}  // namespace
}  // namespace loom::mesh
