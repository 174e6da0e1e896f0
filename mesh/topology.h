// Topology: the machines a mesh runs on (hosts, devices per host, the device
// kind) and the links between ranks, so the cost model can price a collective
// over a group of ranks.

#ifndef LOOM_MESH_TOPOLOGY_H_
#define LOOM_MESH_TOPOLOGY_H_

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "mesh/device_mesh.h"
#include "mesh/device_specs.h"

namespace loom::mesh {

enum class LinkClass {
  // NVLink through NVSwitch: every GPU of a host reaches every other at full
  // rate.
  kNVLink,
  // InfiniBand or RoCE, one NIC per GPU (rail-optimized, as in DGX systems).
  kInfiniBand,
  kPCIe,
  // TCP, over loopback between CPU ranks on one machine or over Ethernet
  // between machines.
  kLoopbackTcp,
  // A copy within one machine's memory: the CPU device's link to "host"
  // memory, which is its own.
  kMemcpy,
};

// "nvlink", "infiniband", "pcie", "loopback-tcp", "memcpy": the names
// plan.json and flags use.
std::string_view linkClassName(LinkClass link_class);
absl::StatusOr<LinkClass> linkClassFromName(std::string_view name);

// The alpha-beta figures of one link, as seen by one device.
struct LinkSpec {
  // Per direction, per device: what one rank can send while receiving as much.
  double bandwidth_bytes_per_s = 0;
  // Per message or per step of a collective algorithm (alpha).
  double latency_s = 0;

  friend bool operator==(const LinkSpec&, const LinkSpec&) = default;
};

// Spec-sheet figures for the current generation of each class (NVLink 4, NDR
// InfiniBand, PCIe Gen5 x16); older systems and calibration profiles override
// them.
LinkSpec defaultLinkSpec(LinkClass link_class);

struct Link {
  LinkClass link_class = LinkClass::kLoopbackTcp;
  LinkSpec spec;

  friend bool operator==(const Link&, const Link&) = default;
};

struct TopologyOptions {
  int64_t num_hosts = 1;
  int64_t devices_per_host = 1;
  DeviceSpec device;
  LinkClass intra_host_link = LinkClass::kLoopbackTcp;
  LinkClass inter_host_link = LinkClass::kLoopbackTcp;
  // Replace defaultLinkSpec() of the class, e.g. with calibrated figures or an
  // older generation's.
  std::optional<LinkSpec> intra_host_spec = std::nullopt;
  std::optional<LinkSpec> inter_host_spec = std::nullopt;
  // Each device's link to its host's memory (offloaded optimizer states and
  // the copies to and from them): PCIe for a GPU, memcpy for the CPU
  // device. Its figures are the device spec's host link unless given.
  LinkClass host_link = LinkClass::kPCIe;
  std::optional<LinkSpec> host_link_spec = std::nullopt;
};

// A homogeneous cluster: `num_hosts` hosts with `devices_per_host` identical
// devices each. Ranks are placed host-major, as torchrun, mpirun and srun do by
// default: rank r runs on host r / devices_per_host as local rank r %
// devices_per_host. A launcher that places ranks otherwise must renumber them
// before the topology is consulted.
class Topology {
 public:
  static absl::StatusOr<Topology> create(const TopologyOptions& options);

  // DGX H100: 8 H100 SXM per host on NVLink 4 (900 GB/s bidirectional per GPU),
  // one 400 Gb/s NDR ConnectX-7 per GPU between hosts.
  static absl::StatusOr<Topology> dgxH100(int64_t num_hosts);
  // HGX H200: 8 H200 per host, the same NVLink 4 and NDR fabric as DGX H100.
  static absl::StatusOr<Topology> hgxH200(int64_t num_hosts);
  // DGX A100 (640 GB): 8 A100 80GB per host on NVLink 3 (600 GB/s bidirectional
  // per GPU), one 200 Gb/s HDR ConnectX-6 per GPU between hosts.
  static absl::StatusOr<Topology> dgxA100(int64_t num_hosts);
  // `num_ranks` CPU ranks on this machine talking TCP over loopback (Gloo,
  // local MPI).
  static absl::StatusOr<Topology> cpuHost(int64_t num_ranks);

  int64_t numHosts() const { return num_hosts_; }
  int64_t devicesPerHost() const { return devices_per_host_; }
  int64_t worldSize() const { return num_hosts_ * devices_per_host_; }
  const DeviceSpec& device() const { return device_; }
  const Link& intraHostLink() const { return intra_host_link_; }
  const Link& interHostLink() const { return inter_host_link_; }
  // A device's link to its host's memory, per direction.
  const Link& hostLink() const { return host_link_; }

  absl::StatusOr<int64_t> hostOf(int64_t rank) const;
  absl::StatusOr<int64_t> localRankOf(int64_t rank) const;

  // Whether any group along `axis` of `mesh` holds ranks of more than one host,
  // i.e. whether a collective over that axis leaves the host.
  absl::StatusOr<bool> crossesHosts(const DeviceMesh& mesh, std::string_view axis) const;

  // The link two distinct ranks talk over.
  absl::StatusOr<Link> linkBetween(int64_t rank_a, int64_t rank_b) const;

  // The lowest-bandwidth link (higher latency breaks ties) between any two
  // ranks of `group`, which bounds a ring or tree collective over it. A group
  // needs two distinct ranks; a group of one does no communication, so callers
  // skip it.
  absl::StatusOr<Link> slowestLink(const std::vector<int64_t>& group) const;

  // "topology<2 hosts x 8 h100-sxm, nvlink within hosts, infiniband between
  // hosts>".
  std::string toString() const;

  friend bool operator==(const Topology&, const Topology&) = default;
  friend std::ostream& operator<<(std::ostream& os, const Topology& topology) {
    return os << topology.toString();
  }

 private:
  Topology(int64_t num_hosts, int64_t devices_per_host, DeviceSpec device, Link intra_host_link,
           Link inter_host_link, Link host_link)
      : num_hosts_(num_hosts),
        devices_per_host_(devices_per_host),
        device_(std::move(device)),
        intra_host_link_(intra_host_link),
        inter_host_link_(inter_host_link),
        host_link_(host_link) {}

  absl::Status checkRank(int64_t rank) const;

  int64_t num_hosts_;
  int64_t devices_per_host_;
  DeviceSpec device_;
  Link intra_host_link_;
  Link inter_host_link_;
  Link host_link_;
};

}  // namespace loom::mesh

#endif  // LOOM_MESH_TOPOLOGY_H_
