// The machine profile that //tools:calibrate writes and the planner's cost
// model reads instead of datasheet figures: GEMM throughput per dtype and
// shape class, memory bandwidth, and alpha-beta parameters per collective
// and group size. docs/calibrate.md documents the JSON format; the reader is
// planner/cost/machine_profile.h.
#ifndef LOOM_TOOLS_CALIBRATE_MACHINE_PROFILE_WRITER_H_
#define LOOM_TOOLS_CALIBRATE_MACHINE_PROFILE_WRITER_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "nlohmann/json.hpp"

namespace loom::calibrate {

inline constexpr char kProfileFormat[] = "loom.machine_profile";
inline constexpr int kProfileVersion = 1;

// "small" when min(m, n, k) < 256, "medium" when < 2048, else "large".
std::string_view shapeClass(int64_t m, int64_t n, int64_t k);

struct ProfileDevice {
  std::string name;  // "cpu", "h200", ...
  int64_t memory_bytes = 0;
  double memory_bandwidth_bytes_per_s = 0;
};

struct ProfileGemm {
  std::string dtype;        // "f32", "bf16", "f16"
  std::string shape_class;  // shapeClass(m, n, k)
  int64_t m = 0;
  int64_t n = 0;
  int64_t k = 0;
  double flops_per_s = 0;  // 2 m n k per call
};

struct ProfilePoint {
  int64_t bytes = 0;  // the message size S (alpha_beta_fit.h)
  double time_s = 0;
};

struct ProfileCollective {
  std::string backend;  // "gloo", "mpi", "nccl"
  std::string kind;     // "all_reduce", "all_gather", "reduce_scatter", "broadcast"
  int group_size = 0;
  std::string link_class;  // "intra_host", "inter_host"
  double latency_s = 0;
  double bus_bandwidth_bytes_per_s = 0;
  std::vector<ProfilePoint> points;
};

struct MachineProfile {
  std::string name;
  std::string measured_on;  // "hostname/cpu model"
  std::string date;         // YYYY-MM-DD
  ProfileDevice device;
  std::vector<ProfileGemm> gemm;
  std::vector<ProfileCollective> collectives;
};

// Checks what a reader relies on: non-empty names, a YYYY-MM-DD date, known
// dtypes, kinds, backends and link classes, shape classes that follow
// shapeClass, positive sizes and rates, latency >= 0, group sizes >= 2, no
// duplicate (dtype, m, n, k) or (backend, kind, group size, link class).
// The error names the entry and the field.
absl::Status validateProfile(const MachineProfile& profile);

// The profile as JSON (format, version, then the fields of MachineProfile).
nlohmann::json profileToJson(const MachineProfile& profile);

// Validates, then writes the JSON (indented) to `path` through a temporary
// file and a rename, so a reader never sees half a profile.
absl::Status writeProfile(const MachineProfile& profile, const std::string& path);

}  // namespace loom::calibrate

#endif  // LOOM_TOOLS_CALIBRATE_MACHINE_PROFILE_WRITER_H_
