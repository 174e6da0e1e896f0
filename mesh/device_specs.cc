// The device spec table, with the vendor datasheet behind every figure.

#include "mesh/device_specs.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"

namespace loom::mesh {
namespace {

constexpr double kTera = 1e12;
constexpr double kGiga = 1e9;
// Datasheets quote HBM capacity in "GB" that are binary: nvidia-smi reports
// 40960 MiB and 81920 MiB for the A100 SXM4 40GB and 80GB. Some of it goes to
// the CUDA context, so the memory planner keeps headroom instead of trusting
// these to the byte.
constexpr int64_t kGiB = int64_t{1} << 30;

std::vector<DeviceSpec> buildTable() {
  return {
      // NVIDIA A100 Tensor Core GPU datasheet, A100 40GB SXM column: BF16
      // Tensor Core 312 TFLOPS (624 with sparsity), FP32 19.5 TFLOPS, 40GB HBM2
      // at 1,555 GB/s.
      {.name = "a100-40gb",
       .peak_flops_bf16 = 312 * kTera,
       .peak_flops_fp32 = 19.5 * kTera,
       .memory_bytes = 40 * kGiB,
       .memory_bandwidth_bytes_per_s = 1555 * kGiga,
       // DGX A100 user guide, 320GB system: 2 AMD EPYC 7742 with 1 TB of
       // DDR4-3200, 8 channels per socket (2 x 204.8 GB/s), for 8 GPUs. Each
       // GPU sits on PCIe Gen4 x16: 31.5 GB/s per direction raw, about 25
       // GB/s measured by CUDA's bandwidthTest with pinned memory; a few
       // microseconds to start a copy.
       .host_memory_bytes = 1024 * kGiB / 8,
       .host_memory_bandwidth_bytes_per_s = 2 * 204.8 * kGiga / 8,
       .host_link_bandwidth_bytes_per_s = 25 * kGiga,
       .host_link_latency_s = 5e-6},
      // Same datasheet, A100 80GB SXM column: same compute, 80GB HBM2e at 2,039
      // GB/s.
      {.name = "a100-80gb",
       .peak_flops_bf16 = 312 * kTera,
       .peak_flops_fp32 = 19.5 * kTera,
       .memory_bytes = 80 * kGiB,
       .memory_bandwidth_bytes_per_s = 2039 * kGiga,
       // DGX A100 user guide, 640GB system: the same host with 2 TB.
       .host_memory_bytes = 2048 * kGiB / 8,
       .host_memory_bandwidth_bytes_per_s = 2 * 204.8 * kGiga / 8,
       .host_link_bandwidth_bytes_per_s = 25 * kGiga,
       .host_link_latency_s = 5e-6},
      // NVIDIA H100 Tensor Core GPU datasheet, H100 SXM column: BF16 Tensor
      // Core 1,979 TFLOPS is quoted with sparsity, so dense is half; FP32 67
      // TFLOPS; 80GB HBM3 at 3.35 TB/s.
      {.name = "h100-sxm",
       .peak_flops_bf16 = 1979 * kTera / 2,
       .peak_flops_fp32 = 67 * kTera,
       .memory_bytes = 80 * kGiB,
       .memory_bandwidth_bytes_per_s = 3.35 * kTera,
       // DGX H100 user guide: 2 Intel Xeon Platinum 8480C with 2 TB of
       // DDR5-4800, 8 channels per socket (2 x 307.2 GB/s), for 8 GPUs. Each
       // GPU sits on PCIe Gen5 x16: 63 GB/s per direction raw, about 55 GB/s
       // achieved by pinned cudaMemcpyAsync (nvbandwidth's
       // host_to_device_memcpy_ce on Gen5 hosts); a few microseconds to
       // start a copy.
       .host_memory_bytes = 2048 * kGiB / 8,
       .host_memory_bandwidth_bytes_per_s = 2 * 307.2 * kGiga / 8,
       .host_link_bandwidth_bytes_per_s = 55 * kGiga,
       .host_link_latency_s = 5e-6},
      // NVIDIA H200 Tensor Core GPU datasheet, H200 SXM column: the H100 SXM's
      // compute (BF16 1,979 TFLOPS with sparsity, FP32 67 TFLOPS) with 141GB
      // HBM3e at 4.8 TB/s.
      {.name = "h200",
       .peak_flops_bf16 = 1979 * kTera / 2,
       .peak_flops_fp32 = 67 * kTera,
       .memory_bytes = 141 * kGiB,
       .memory_bandwidth_bytes_per_s = 4.8 * kTera,
       // DGX H200 user guide: the DGX H100's host (2 Xeon Platinum 8480C, 2
       // TB of DDR5-4800) and PCIe Gen5 x16 per GPU, as above.
       .host_memory_bytes = 2048 * kGiB / 8,
       .host_memory_bandwidth_bytes_per_s = 2 * 307.2 * kGiga / 8,
       .host_link_bandwidth_bytes_per_s = 55 * kGiga,
       .host_link_latency_s = 5e-6},
      // No datasheet: a nominal small x86-64 host for local CPU runs, to be
      // replaced by tools:calibrate. FP32 = 2 cores x 2 AVX2 FMA ports x 8 fp32
      // lanes x 2 FLOP per FMA x 3 GHz = 192 GFLOP/s. AVX2 has no bf16
      // arithmetic, so bf16 kernels convert to fp32 and at best reach the fp32
      // rate. Memory: 16 GiB of dual-channel DDR4-3200, 2 x 25.6 GB/s.
      {.name = "cpu",
       .peak_flops_bf16 = 2 * 2 * 8 * 2 * 3 * kGiga,
       .peak_flops_fp32 = 2 * 2 * 8 * 2 * 3 * kGiga,
       .memory_bytes = 16 * kGiB,
       .memory_bandwidth_bytes_per_s = 2 * 25.6 * kGiga,
       // The device is the host: "host memory" is the same 16 GiB and
       // bandwidth, and a copy between the two arenas is a memcpy, which
       // reads and writes every byte: half the bandwidth, 25.6 GB/s, and
       // about a microsecond to start.
       .host_memory_bytes = 16 * kGiB,
       .host_memory_bandwidth_bytes_per_s = 2 * 25.6 * kGiga,
       .host_link_bandwidth_bytes_per_s = 25.6 * kGiga,
       .host_link_latency_s = 1e-6},
  };
}

}  // namespace

const std::vector<DeviceSpec>& knownDeviceSpecs() {
  static const std::vector<DeviceSpec>* const kTable = new std::vector<DeviceSpec>(buildTable());
  return *kTable;
}

absl::StatusOr<DeviceSpec> deviceSpec(std::string_view name) {
  std::string key = absl::AsciiStrToLower(absl::string_view(name.data(), name.size()));
  if (key == "h100") key = "h100-sxm";
  std::vector<std::string> names;
  for (const DeviceSpec& spec : knownDeviceSpecs()) {
    if (spec.name == key) return spec;
    names.push_back(spec.name);
  }
  return absl::NotFoundError(absl::StrCat(
      "unknown device '", absl::string_view(name.data(), name.size()), "'; known devices are ",
      absl::StrJoin(names, ", "), " (and h100 for h100-sxm)"));
}

absl::Status validateDeviceSpec(const DeviceSpec& spec) {
  if (spec.name.empty()) {
    return absl::InvalidArgumentError(
        "device spec has no name; name it, e.g. after its deviceSpec() entry");
  }
  // Written as !(x > 0) so that NaN fails too.
  if (!(spec.peak_flops_bf16 > 0) || !(spec.peak_flops_fp32 > 0) || spec.memory_bytes <= 0 ||
      !(spec.memory_bandwidth_bytes_per_s > 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "device spec '", spec.name, "' has a figure that is not positive (bf16 ",
        spec.peak_flops_bf16, " FLOP/s, fp32 ", spec.peak_flops_fp32, " FLOP/s, memory ",
        spec.memory_bytes, " bytes, bandwidth ", spec.memory_bandwidth_bytes_per_s,
        " bytes/s); every figure must be greater than 0"));
  }
  if (spec.host_memory_bytes <= 0 || !(spec.host_memory_bandwidth_bytes_per_s > 0) ||
      !(spec.host_link_bandwidth_bytes_per_s > 0) || !(spec.host_link_latency_s >= 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "device spec '", spec.name, "' has a host figure out of range (host memory ",
        spec.host_memory_bytes, " bytes, host bandwidth ", spec.host_memory_bandwidth_bytes_per_s,
        " bytes/s, host link ", spec.host_link_bandwidth_bytes_per_s, " bytes/s and ",
        spec.host_link_latency_s,
        " s); memory and bandwidths must be greater than 0 and the latency at least 0"));
  }
  return absl::OkStatus();
}

}  // namespace loom::mesh
