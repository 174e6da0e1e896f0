// Topology validation, presets, the default link table and the host arithmetic
// behind link lookups.

#include "mesh/topology.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"

namespace loom::mesh {
namespace {

// Same bound as DeviceMesh: no cluster is larger, and a larger product is a
// typo.
constexpr int64_t kMaxDevices = int64_t{1} << 24;

constexpr double kGiga = 1e9;
constexpr double kMicro = 1e-6;

// Debian's Abseil has its own string_view type (ABSL_OPTION_USE_STD_STRING_VIEW
// is 0).
absl::string_view asAbsl(std::string_view text) { return {text.data(), text.size()}; }

constexpr LinkClass kAllLinkClasses[] = {LinkClass::kNVLink, LinkClass::kInfiniBand,
                                         LinkClass::kPCIe, LinkClass::kLoopbackTcp,
                                         LinkClass::kMemcpy};

// Bandwidth first, because the bandwidth term dominates the large collectives
// of training; latency only breaks ties.
bool slower(const Link& a, const Link& b) {
  if (a.spec.bandwidth_bytes_per_s != b.spec.bandwidth_bytes_per_s) {
    return a.spec.bandwidth_bytes_per_s < b.spec.bandwidth_bytes_per_s;
  }
  return a.spec.latency_s > b.spec.latency_s;
}

absl::StatusOr<Link> resolveLink(LinkClass link_class, const std::optional<LinkSpec>& spec,
                                 std::string_view where) {
  Link link{link_class, spec.value_or(defaultLinkSpec(link_class))};
  // Written as !(x > 0) so that NaN fails too.
  if (!(link.spec.bandwidth_bytes_per_s > 0) || !std::isfinite(link.spec.latency_s) ||
      link.spec.latency_s < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        asAbsl(where), " link (", asAbsl(linkClassName(link_class)), ") has bandwidth ",
        link.spec.bandwidth_bytes_per_s, " bytes/s and latency ", link.spec.latency_s,
        " s; bandwidth must be greater than 0 and latency at least 0"));
  }
  return link;
}

}  // namespace

std::string_view linkClassName(LinkClass link_class) {
  switch (link_class) {
    case LinkClass::kNVLink:
      return "nvlink";
    case LinkClass::kInfiniBand:
      return "infiniband";
    case LinkClass::kPCIe:
      return "pcie";
    case LinkClass::kLoopbackTcp:
      return "loopback-tcp";
    case LinkClass::kMemcpy:
      return "memcpy";
  }
  return "unknown";
}

absl::StatusOr<LinkClass> linkClassFromName(std::string_view name) {
  for (LinkClass link_class : kAllLinkClasses) {
    if (linkClassName(link_class) == name) return link_class;
  }
  return absl::NotFoundError(
      absl::StrCat("unknown link class '", asAbsl(name),
                   "'; known link classes are nvlink, infiniband, pcie, loopback-tcp"));
}

// Latencies are NCCL's per-hop figures for its ring algorithm with the Simple
// protocol (hwLat in src/graph/tuning.cc: NVLink 3.4 us, PCI 5.7 us, NET 14
// us), the protocol NCCL uses for the large messages that dominate training
// traffic; wire latencies are lower, but a collective pays the protocol's.
LinkSpec defaultLinkSpec(LinkClass link_class) {
  switch (link_class) {
    case LinkClass::kNVLink:
      // NVIDIA H100 datasheet: NVLink 4 gives an SXM GPU 900 GB/s, counting
      // both directions, through NVSwitch to any peer.
      return {.bandwidth_bytes_per_s = 900 * kGiga / 2, .latency_s = 3.4 * kMicro};
    case LinkClass::kInfiniBand:
      // NDR InfiniBand (ConnectX-7): 400 Gb/s per port per direction = 50 GB/s.
      // RoCE at 400 GbE is the same rate.
      return {.bandwidth_bytes_per_s = 400 * kGiga / 8, .latency_s = 14 * kMicro};
    case LinkClass::kPCIe:
      // PCIe Gen5 x16: 32 GT/s x 16 lanes with 128b/130b encoding is about 63
      // GB/s per direction (Gen4 is half).
      return {.bandwidth_bytes_per_s = 32 * kGiga * 16 / 8 * 128 / 130, .latency_s = 5.7 * kMicro};
    case LinkClass::kLoopbackTcp:
      // No spec sheet: the order of magnitude of one TCP stream over loopback
      // on a 2-core x86-64 VM (measured about 2.7 GB/s, and 43 us one way in a
      // Python ping-pong, which overstates it), rounded down. tools:calibrate
      // replaces it.
      return {.bandwidth_bytes_per_s = 2.5 * kGiga, .latency_s = 30 * kMicro};
    case LinkClass::kMemcpy: {
      // The nominal CPU device's (device_specs.cc): a copy reads and writes
      // every byte of its dual-channel DDR4-3200, 51.2 GB/s, so it moves
      // half that.
      const DeviceSpec cpu = *deviceSpec("cpu");
      return {.bandwidth_bytes_per_s = cpu.host_link_bandwidth_bytes_per_s,
              .latency_s = cpu.host_link_latency_s};
    }
  }
  return {};
}

absl::StatusOr<Topology> Topology::create(const TopologyOptions& options) {
  if (options.num_hosts < 1 || options.devices_per_host < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("topology of ", options.num_hosts, " hosts x ", options.devices_per_host,
                     " devices per host is empty; both counts must be at least 1"));
  }
  if (options.num_hosts > kMaxDevices / options.devices_per_host) {
    return absl::InvalidArgumentError(absl::StrCat(
        "topology of ", options.num_hosts, " hosts x ", options.devices_per_host,
        " devices per host has more than ", kMaxDevices, " devices; check for a typo"));
  }
  if (absl::Status status = validateDeviceSpec(options.device); !status.ok()) {
    return status;
  }
  absl::StatusOr<Link> intra =
      resolveLink(options.intra_host_link, options.intra_host_spec, "intra-host");
  if (!intra.ok()) return intra.status();
  absl::StatusOr<Link> inter =
      resolveLink(options.inter_host_link, options.inter_host_spec, "inter-host");
  if (!inter.ok()) return inter.status();
  absl::StatusOr<Link> host = resolveLink(
      options.host_link,
      options.host_link_spec.value_or(
          LinkSpec{.bandwidth_bytes_per_s = options.device.host_link_bandwidth_bytes_per_s,
                   .latency_s = options.device.host_link_latency_s}),
      "host");
  if (!host.ok()) return host.status();
  return Topology(options.num_hosts, options.devices_per_host, options.device, *intra, *inter,
                  *host);
}

absl::StatusOr<Topology> Topology::dgxH100(int64_t num_hosts) {
  return create({.num_hosts = num_hosts,
                 .devices_per_host = 8,
                 .device = *deviceSpec("h100-sxm"),
                 .intra_host_link = LinkClass::kNVLink,
                 .inter_host_link = LinkClass::kInfiniBand});
}

absl::StatusOr<Topology> Topology::hgxH200(int64_t num_hosts) {
  return create({.num_hosts = num_hosts,
                 .devices_per_host = 8,
                 .device = *deviceSpec("h200"),
                 .intra_host_link = LinkClass::kNVLink,
                 .inter_host_link = LinkClass::kInfiniBand});
}

absl::StatusOr<Topology> Topology::dgxA100(int64_t num_hosts) {
  LinkSpec nvlink = defaultLinkSpec(LinkClass::kNVLink);
  LinkSpec infiniband = defaultLinkSpec(LinkClass::kInfiniBand);
  // NVIDIA A100 datasheet: NVLink 3 at 600 GB/s counting both directions; DGX
  // A100 user guide: HDR InfiniBand at 200 Gb/s per port per direction.
  nvlink.bandwidth_bytes_per_s = 600 * kGiga / 2;
  infiniband.bandwidth_bytes_per_s = 200 * kGiga / 8;
  return create({.num_hosts = num_hosts,
                 .devices_per_host = 8,
                 .device = *deviceSpec("a100-80gb"),
                 .intra_host_link = LinkClass::kNVLink,
                 .inter_host_link = LinkClass::kInfiniBand,
                 .intra_host_spec = nvlink,
                 .inter_host_spec = infiniband});
}

absl::StatusOr<Topology> Topology::cpuHost(int64_t num_ranks) {
  return create({.num_hosts = 1,
                 .devices_per_host = num_ranks,
                 .device = *deviceSpec("cpu"),
                 .intra_host_link = LinkClass::kLoopbackTcp,
                 .inter_host_link = LinkClass::kLoopbackTcp,
                 .host_link = LinkClass::kMemcpy});
}

absl::Status Topology::checkRank(int64_t rank) const {
  if (rank >= 0 && rank < worldSize()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("rank ", rank, " is not in ", toString(),
                                                 "; ranks run from 0 to ", worldSize() - 1));
}

absl::StatusOr<int64_t> Topology::hostOf(int64_t rank) const {
  if (absl::Status status = checkRank(rank); !status.ok()) return status;
  return rank / devices_per_host_;
}

absl::StatusOr<int64_t> Topology::localRankOf(int64_t rank) const {
  if (absl::Status status = checkRank(rank); !status.ok()) return status;
  return rank % devices_per_host_;
}

absl::StatusOr<bool> Topology::crossesHosts(const DeviceMesh& mesh, std::string_view axis) const {
  const std::vector<int64_t>& ranks = mesh.ranks();
  int64_t highest = *std::max_element(ranks.begin(), ranks.end());
  if (highest >= worldSize()) {
    return absl::InvalidArgumentError(absl::StrCat(
        mesh.toString(), " holds rank ", highest, " but ", toString(), " has ranks 0 to ",
        worldSize() - 1, "; use a topology with at least ", highest + 1, " devices"));
  }
  absl::StatusOr<std::vector<DeviceMesh::Group>> groups = mesh.groups({std::string(axis)});
  if (!groups.ok()) return groups.status();
  for (const DeviceMesh::Group& group : *groups) {
    for (int64_t rank : group) {
      if (rank / devices_per_host_ != group.front() / devices_per_host_) {
        return true;
      }
    }
  }
  return false;
}

absl::StatusOr<Link> Topology::linkBetween(int64_t rank_a, int64_t rank_b) const {
  if (absl::Status status = checkRank(rank_a); !status.ok()) return status;
  if (absl::Status status = checkRank(rank_b); !status.ok()) return status;
  if (rank_a == rank_b) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", rank_a, " has no link to itself; ask for two distinct ranks"));
  }
  return rank_a / devices_per_host_ == rank_b / devices_per_host_ ? intra_host_link_
                                                                  : inter_host_link_;
}

absl::StatusOr<Link> Topology::slowestLink(const std::vector<int64_t>& group) const {
  std::vector<int64_t> sorted = group;
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 0; i < sorted.size(); ++i) {
    if (absl::Status status = checkRank(sorted[i]); !status.ok()) return status;
    if (i > 0 && sorted[i] == sorted[i - 1]) {
      return absl::InvalidArgumentError(
          absl::StrCat("rank ", sorted[i], " appears twice in the group; list each rank once"));
    }
  }
  if (sorted.size() < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("group [", absl::StrJoin(group, ", "),
                     "] has fewer than 2 ranks and so no links; a collective "
                     "over it costs nothing, so "
                     "skip it"));
  }
  bool shares_a_host = false;
  for (size_t i = 1; i < sorted.size(); ++i) {
    shares_a_host =
        shares_a_host || sorted[i] / devices_per_host_ == sorted[i - 1] / devices_per_host_;
  }
  bool spans_hosts = sorted.front() / devices_per_host_ != sorted.back() / devices_per_host_;
  if (!spans_hosts) return intra_host_link_;
  if (!shares_a_host) return inter_host_link_;
  return slower(intra_host_link_, inter_host_link_) ? intra_host_link_ : inter_host_link_;
}

std::string Topology::toString() const {
  return absl::StrCat("topology<", num_hosts_, num_hosts_ == 1 ? " host x " : " hosts x ",
                      devices_per_host_, " ", device_.name, ", ",
                      asAbsl(linkClassName(intra_host_link_.link_class)), " within hosts, ",
                      asAbsl(linkClassName(inter_host_link_.link_class)), " between hosts>");
}

}  // namespace loom::mesh
