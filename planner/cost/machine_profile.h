// A machine profile: measured GEMM throughput and collective alpha-beta
// figures (written by //tools:calibrate) that the cost model uses instead
// of the datasheet. This is the reader: the struct, the JSON loader with
// errors that name the field at fault, and the lookups the cost model
// makes. The schema and the lookup rules are in docs/planner_cost.md.
#ifndef LOOM_PLANNER_COST_MACHINE_PROFILE_H_
#define LOOM_PLANNER_COST_MACHINE_PROFILE_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace loom::planner::cost {

inline constexpr char kMachineProfileFormat[] = "loom.machine_profile";
inline constexpr int kMachineProfileVersion = 1;

// GEMM shapes by min(m, n, k): small < 256 <= medium < 2048 <= large.
enum class ShapeClass { kSmall, kMedium, kLarge };

ShapeClass shapeClassOf(int64_t m, int64_t n, int64_t k);
// "small", "medium", "large".
std::string_view shapeClassName(ShapeClass shape_class);

// Whether a collective's group stays inside one host or spans hosts.
enum class LinkScope { kIntraHost, kInterHost };

// "intra_host", "inter_host".
std::string_view linkScopeName(LinkScope scope);

struct GemmMeasurement {
  // "f32", "bf16" or "f16".
  std::string dtype;
  ShapeClass shape_class = ShapeClass::kLarge;
  int64_t m = 0;
  int64_t n = 0;
  int64_t k = 0;
  double flops_per_s = 0;
};

struct CollectivePoint {
  // The collective's buffer as nccl-tests sizes it (all_reduce and
  // broadcast: the buffer; all_gather: the gathered output;
  // reduce_scatter: the input before the scatter).
  int64_t bytes = 0;
  double time_s = 0;
};

struct CollectiveMeasurement {
  // "gloo", "mpi" or "nccl".
  std::string backend;
  // "all_reduce", "all_gather", "reduce_scatter" or "broadcast".
  std::string kind;
  int64_t group_size = 0;
  LinkScope link_class = LinkScope::kIntraHost;
  // The fitted alpha (whole collective) and bus bandwidth (beta), so a
  // collective moving B bytes per rank (bus factor included) takes
  // latency_s + B / bus_bandwidth_bytes_per_s.
  double latency_s = 0;
  double bus_bandwidth_bytes_per_s = 0;
  // The measurements behind the fit; kept for reports, not priced.
  std::vector<CollectivePoint> points;
};

struct MachineProfile {
  std::string name;
  std::string measured_on;
  std::string date;
  // device.name: "cpu", "h200", ... (a mesh::deviceSpec name or alias).
  std::string device_name;
  int64_t memory_bytes = 0;
  double memory_bandwidth_bytes_per_s = 0;
  std::vector<GemmMeasurement> gemm;
  std::vector<CollectiveMeasurement> collectives;

  // The measured GEMM rate for `dtype` in the class of (m, n, k): among the
  // entries of that dtype and class, the one nearest in shape (sum of
  // |log2| differences of m, n and k; the first listed wins ties). Null
  // when the profile has none, so the caller falls back to the datasheet.
  const GemmMeasurement* gemmFor(std::string_view dtype, int64_t m, int64_t n, int64_t k) const;

  // The entry that prices a `kind` collective over `group_size` ranks on
  // `scope`: entries of that kind and scope, of `backend` when the profile
  // has any of it (else of any backend), nearest in group size by
  // |log2(size) - log2(entry size)|, the larger size winning ties. Null
  // when none matches.
  const CollectiveMeasurement* collectiveFor(std::string_view kind, LinkScope scope,
                                             int64_t group_size, std::string_view backend) const;
};

// Parses a profile. `source` names it in errors ("profile.json: gemm[2].m:
// expected an integer >= 1, got -4"). Unknown keys are ignored, so a newer
// writer's additions do not break this reader.
absl::StatusOr<MachineProfile> parseMachineProfile(std::string_view text, std::string_view source);

// Reads and parses the file at `path`.
absl::StatusOr<MachineProfile> loadMachineProfile(const std::string& path);

}  // namespace loom::planner::cost

#endif  // LOOM_PLANNER_COST_MACHINE_PROFILE_H_
