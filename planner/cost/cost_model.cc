// Pricing rules of the cost model (see cost_model.h).
#include "planner/cost/cost_model.h"

#include <algorithm>
#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "mesh/device_specs.h"

namespace loom::planner::cost {
namespace {

bool inUnitInterval(double value) { return value > 0 && value <= 1; }

// The spec name a profile's device.name stands for ("h100" -> "h100-sxm").
std::string canonicalDevice(const std::string& name) {
  absl::StatusOr<mesh::DeviceSpec> spec = mesh::deviceSpec(name);
  return spec.ok() ? spec->name : absl::AsciiStrToLower(name);
}

}  // namespace

std::string_view collectiveKindName(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::kAllGather:
      return "all_gather";
    case CollectiveKind::kReduceScatter:
      return "reduce_scatter";
    case CollectiveKind::kAllReduce:
      return "all_reduce";
    case CollectiveKind::kAllToAll:
      return "all_to_all";
    case CollectiveKind::kBroadcast:
      return "broadcast";
  }
  return "all_reduce";
}

int64_t ringSteps(CollectiveKind kind, int64_t size) {
  return kind == CollectiveKind::kAllReduce ? 2 * (size - 1) : size - 1;
}

int64_t interHostSteps(CollectiveKind kind, int64_t hosts) {
  return kind == CollectiveKind::kAllReduce ? 2 * (hosts - 1) : hosts - 1;
}

CostModel::CostModel(const mesh::Topology& topology, const Efficiency& efficiency,
                     const MachineProfile* profile)
    : topology_(topology), efficiency_(efficiency), profile_(profile) {
  memory_bandwidth_ = profile ? profile->memory_bandwidth_bytes_per_s
                              : topology.device().memory_bandwidth_bytes_per_s;
  memory_bytes_ = profile ? profile->memory_bytes : topology.device().memory_bytes;
  backend_ = topology.device().name == "cpu" ? "gloo" : "nccl";
}

absl::StatusOr<CostModel> CostModel::create(const mesh::Topology& topology,
                                            const Efficiency& efficiency,
                                            const MachineProfile* profile) {
  for (const auto& [name, value] :
       std::vector<std::pair<const char*, double>>{{"gemm", efficiency.gemm},
                                                   {"medium_ratio", efficiency.medium_ratio},
                                                   {"small_ratio", efficiency.small_ratio},
                                                   {"attention_ratio", efficiency.attention_ratio},
                                                   {"memory", efficiency.memory}}) {
    if (!inUnitInterval(value)) {
      return absl::InvalidArgumentError(
          absl::StrCat("cost model efficiency '", name, "' must be in (0, 1], got: ", value));
    }
  }
  if (profile) {
    const std::string measured = canonicalDevice(profile->device_name);
    if (measured != topology.device().name) {
      return absl::InvalidArgumentError(absl::StrCat(
          "machine profile '", profile->name, "' was measured on device '", profile->device_name,
          "' but the plan is for '", topology.device().name, "'; pass --device=",
          profile->device_name, " or a profile measured on ", topology.device().name));
    }
  }
  return CostModel(topology, efficiency, profile);
}

double CostModel::peakFlops(Dtype dtype) const {
  const mesh::DeviceSpec& device = topology_.device();
  return dtype == Dtype::kF32 ? device.peak_flops_fp32 : device.peak_flops_bf16;
}

double CostModel::gemmRate(Dtype dtype, int64_t m, int64_t n, int64_t k) const {
  if (profile_) {
    if (const GemmMeasurement* entry = profile_->gemmFor(dtypeName(dtype), m, n, k)) {
      return entry->flops_per_s;
    }
  }
  double ratio = 1;
  switch (shapeClassOf(m, n, k)) {
    case ShapeClass::kSmall:
      ratio = efficiency_.small_ratio;
      break;
    case ShapeClass::kMedium:
      ratio = efficiency_.medium_ratio;
      break;
    case ShapeClass::kLarge:
      break;
  }
  return peakFlops(dtype) * efficiency_.gemm * ratio;
}

double CostModel::computeSeconds(const ComputeCost& cost) const {
  if (cost.op_class == OpClass::kFree) return 0;
  const double memoryTime = cost.bytes / (memory_bandwidth_ * efficiency_.memory);
  double rate = 0;
  switch (cost.op_class) {
    case OpClass::kGemm:
      rate = gemmRate(cost.dtype, std::max<int64_t>(cost.m, 1), std::max<int64_t>(cost.n, 1),
                      std::max<int64_t>(cost.k, 1));
      break;
    case OpClass::kAttention:
      // The rate of a large GEMM of the dtype (measured or datasheet),
      // scaled: flash kernels reach a fixed share of it.
      rate = gemmRate(cost.dtype, 4096, 4096, 4096) * efficiency_.attention_ratio;
      break;
    case OpClass::kMemoryBound:
    case OpClass::kFree:
      // Vector units, not tensor cores: the fp32 peak.
      rate = peakFlops(Dtype::kF32) * efficiency_.gemm;
      break;
  }
  return std::max(cost.flops / rate, memoryTime);
}

double CostModel::collectiveSeconds(CollectiveKind kind, const GroupShape& group,
                                    double bytes_per_rank) const {
  if (group.size <= 1) return 0;
  const LinkScope scope = group.hosts > 1 ? LinkScope::kInterHost : LinkScope::kIntraHost;
  const int64_t steps = ringSteps(kind, group.size);
  if (profile_) {
    if (const CollectiveMeasurement* entry =
            profile_->collectiveFor(collectiveKindName(kind), scope, group.size, backend_)) {
      const double latency = entry->latency_s * static_cast<double>(steps) /
                             static_cast<double>(ringSteps(kind, entry->group_size));
      return latency + bytes_per_rank / entry->bus_bandwidth_bytes_per_s;
    }
  }
  const mesh::LinkSpec& intra = topology_.intraHostLink().spec;
  const mesh::LinkSpec& inter = topology_.interHostLink().spec;
  const int64_t interSteps = group.hosts > 1 ? interHostSteps(kind, group.hosts) : 0;
  const double latency = static_cast<double>(steps - interSteps) * intra.latency_s +
                         static_cast<double>(interSteps) * inter.latency_s;
  const double bandwidth =
      group.hosts > 1 ? inter.bandwidth_bytes_per_s : intra.bandwidth_bytes_per_s;
  return latency + bytes_per_rank / bandwidth;
}

double CostModel::pointToPointSeconds(const GroupShape& group, double bytes) const {
  if (group.size <= 1) return 0;
  const mesh::LinkSpec& link =
      group.hosts > 1 ? topology_.interHostLink().spec : topology_.intraHostLink().spec;
  return link.latency_s + bytes / link.bandwidth_bytes_per_s;
}

double CostModel::streamSeconds(double bytes) const {
  return bytes / (memory_bandwidth_ * efficiency_.memory);
}

double CostModel::hostCopySeconds(double bytes) const {
  const mesh::LinkSpec& link = topology_.hostLink().spec;
  return link.latency_s + bytes / link.bandwidth_bytes_per_s;
}

double CostModel::hostStreamSeconds(double bytes) const {
  return bytes / (topology_.device().host_memory_bandwidth_bytes_per_s * efficiency_.memory);
}

absl::StatusOr<GroupShape> CostModel::groupOf(const mesh::DeviceMesh& mesh,
                                              const std::vector<std::string>& axes) const {
  absl::StatusOr<mesh::DeviceMesh::Group> group = mesh.groupOf(mesh.ranks().front(), axes);
  if (!group.ok()) return group.status();
  std::set<int64_t> hosts;
  for (int64_t rank : *group) {
    absl::StatusOr<int64_t> host = topology_.hostOf(rank);
    if (!host.ok()) return host.status();
    hosts.insert(*host);
  }
  return GroupShape{.size = static_cast<int64_t>(group->size()),
                    .hosts = static_cast<int64_t>(hosts.size())};
}

}  // namespace loom::planner::cost
