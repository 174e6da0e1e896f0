// Tests for the device spec table: lookups, the figures' derivations and
// validation.

#include "mesh/device_specs.h"

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace loom::mesh {
namespace {

using ::loom::testutil::StatusIs;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr int64_t kGiB = int64_t{1} << 30;

TEST(DeviceSpecsTest, TableHoldsTheKnownDevicesInOrder) {
  std::vector<std::string> names;
  for (const DeviceSpec& spec : knownDeviceSpecs()) {
    names.push_back(spec.name);
    EXPECT_TRUE(validateDeviceSpec(spec).ok()) << spec.name;
    EXPECT_EQ(deviceSpec(spec.name).value(), spec);
  }
  EXPECT_THAT(names, ElementsAre("a100-40gb", "a100-80gb", "h100-sxm", "h200", "cpu"));
}

TEST(DeviceSpecsTest, DatasheetFigures) {
  DeviceSpec a100 = deviceSpec("a100-40gb").value();
  EXPECT_DOUBLE_EQ(a100.peak_flops_bf16, 312e12);
  EXPECT_DOUBLE_EQ(a100.peak_flops_fp32, 19.5e12);
  EXPECT_EQ(a100.memory_bytes, 40 * kGiB);
  EXPECT_DOUBLE_EQ(a100.memory_bandwidth_bytes_per_s, 1555e9);
  EXPECT_DOUBLE_EQ(deviceSpec("a100-80gb").value().memory_bandwidth_bytes_per_s, 2039e9);

  DeviceSpec h100 = deviceSpec("h100-sxm").value();
  EXPECT_DOUBLE_EQ(h100.peak_flops_bf16, 989.5e12);
  EXPECT_DOUBLE_EQ(h100.peak_flops_fp32, 67e12);
  EXPECT_EQ(h100.memory_bytes, 80 * kGiB);
  EXPECT_DOUBLE_EQ(h100.memory_bandwidth_bytes_per_s, 3.35e12);

  DeviceSpec h200 = deviceSpec("h200").value();
  EXPECT_DOUBLE_EQ(h200.peak_flops_bf16, h100.peak_flops_bf16);
  EXPECT_DOUBLE_EQ(h200.peak_flops_fp32, h100.peak_flops_fp32);
  EXPECT_EQ(h200.memory_bytes, 141 * kGiB);
  EXPECT_DOUBLE_EQ(h200.memory_bandwidth_bytes_per_s, 4.8e12);

  DeviceSpec cpu = deviceSpec("cpu").value();
  EXPECT_DOUBLE_EQ(cpu.peak_flops_fp32, 192e9);
  EXPECT_LE(cpu.peak_flops_bf16, cpu.peak_flops_fp32);
}

TEST(DeviceSpecsTest, HostFigures) {
  // PCIe Gen5 x16 as achieved (about 55 of 63 GB/s), a DGX H100's 2 TB and
  // 614.4 GB/s of DDR5 shared by its 8 GPUs.
  for (const char* name : {"h100-sxm", "h200"}) {
    const DeviceSpec spec = deviceSpec(name).value();
    EXPECT_DOUBLE_EQ(spec.host_link_bandwidth_bytes_per_s, 55e9) << name;
    EXPECT_EQ(spec.host_memory_bytes, 256 * kGiB) << name;
    EXPECT_DOUBLE_EQ(spec.host_memory_bandwidth_bytes_per_s, 76.8e9) << name;
  }
  // PCIe Gen4 on the A100 hosts: half as fast.
  EXPECT_DOUBLE_EQ(deviceSpec("a100-80gb").value().host_link_bandwidth_bytes_per_s, 25e9);
  EXPECT_EQ(deviceSpec("a100-40gb").value().host_memory_bytes, 128 * kGiB);
  // The CPU device's "host link" is a memcpy: half its memory bandwidth.
  const DeviceSpec cpu = deviceSpec("cpu").value();
  EXPECT_DOUBLE_EQ(cpu.host_link_bandwidth_bytes_per_s, cpu.memory_bandwidth_bytes_per_s / 2);
  EXPECT_EQ(cpu.host_memory_bytes, cpu.memory_bytes);
}

TEST(DeviceSpecsTest, LookupIgnoresCaseAndAcceptsH100) {
  EXPECT_EQ(deviceSpec("H100-SXM").value().name, "h100-sxm");
  EXPECT_EQ(deviceSpec("h100").value().name, "h100-sxm");
  EXPECT_EQ(deviceSpec("A100-80GB").value().name, "a100-80gb");
}

TEST(DeviceSpecsTest, UnknownDeviceListsTheKnownNames) {
  EXPECT_THAT(deviceSpec("v100").status(),
              StatusIs(absl::StatusCode::kNotFound,
                       AllOf(HasSubstr("unknown device 'v100'"),
                             HasSubstr("a100-40gb, a100-80gb, h100-sxm, h200, cpu"))));
  EXPECT_THAT(deviceSpec("a100").status(),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("'a100'")));
}

TEST(DeviceSpecsTest, ValidateRejectsMissingNameAndNonPositiveFigures) {
  EXPECT_THAT(validateDeviceSpec(DeviceSpec{}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("has no name")));
  DeviceSpec spec = deviceSpec("cpu").value();
  spec.memory_bytes = 0;
  EXPECT_THAT(validateDeviceSpec(spec),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("'cpu'"), HasSubstr("memory 0 bytes"))));
  spec = deviceSpec("cpu").value();
  spec.peak_flops_bf16 = std::numeric_limits<double>::quiet_NaN();
  EXPECT_THAT(validateDeviceSpec(spec),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("bf16 nan")));
  spec = deviceSpec("h100").value();
  spec.host_link_bandwidth_bytes_per_s = 0;
  EXPECT_THAT(validateDeviceSpec(spec),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("'h100-sxm'"), HasSubstr("host link 0 bytes/s"))));
}

}  // namespace
}  // namespace loom::mesh
