// Spec-sheet figures for the accelerators the planner's cost model knows: peak
// FLOP/s per dtype, memory capacity and bandwidth. Calibration profiles replace
// them with measurements.

#ifndef LOOM_MESH_DEVICE_SPECS_H_
#define LOOM_MESH_DEVICE_SPECS_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace loom::mesh {

struct DeviceSpec {
  std::string name;
  // Dense (no structured sparsity) tensor-core peak, FLOP/s.
  double peak_flops_bf16 = 0;
  // IEEE fp32 peak without TF32, FLOP/s: the correctness contract runs true
  // fp32.
  double peak_flops_fp32 = 0;
  int64_t memory_bytes = 0;
  double memory_bandwidth_bytes_per_s = 0;
  // The host a device of this kind is built into, per device: its share of
  // the host's memory and of the host's memory bandwidth (the host's
  // figures divided by its devices). Offloaded optimizer states live there
  // and the host's AdamW streams them (docs/planner_offload.md).
  int64_t host_memory_bytes = 0;
  double host_memory_bandwidth_bytes_per_s = 0;
  // The device's link to that memory, per direction: what a copy between
  // device and host memory moves per second, and what starting one costs.
  double host_link_bandwidth_bytes_per_s = 0;
  double host_link_latency_s = 0;

  friend bool operator==(const DeviceSpec&, const DeviceSpec&) = default;
};

// Every entry of the table, in a stable order: a100-40gb, a100-80gb, h100-sxm,
// h200, cpu.
const std::vector<DeviceSpec>& knownDeviceSpecs();

// Looks `name` up, ignoring case. "h100" is accepted for "h100-sxm", the part
// DGX and HGX systems carry. An unknown name is NotFound, and the message lists
// the known names.
absl::StatusOr<DeviceSpec> deviceSpec(std::string_view name);

// Checks that a spec (for example one read from a calibration profile) has a
// name and positive figures, the host's included.
absl::Status validateDeviceSpec(const DeviceSpec& spec);

}  // namespace loom::mesh

#endif  // LOOM_MESH_DEVICE_SPECS_H_
