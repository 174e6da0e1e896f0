// Runs the cuBLAS GEMM and triad measurements on the GPU, if there is one;
// reports itself skipped otherwise. Only checks that rates come back
// positive and below physical bounds: timings are recorded in docs, not
// asserted.
#include "tools/calibrate/gpu_measure.h"

#include "gtest/gtest.h"

namespace loom::calibrate::gpu {
namespace {

class GpuMeasureTest : public testing::Test {
 protected:
  void SetUp() override {
    const GpuDevice device = probeGpu();
    if (!device.unavailable_reason.empty()) GTEST_SKIP() << device.unavailable_reason;
  }
};

TEST_F(GpuMeasureTest, ProbeDescribesTheDevice) {
  const GpuDevice device = probeGpu();
  EXPECT_FALSE(device.name.empty());
  EXPECT_GT(device.memory_bytes, 0);
  EXPECT_GE(device.compute_capability, 50);
}

TEST_F(GpuMeasureTest, GemmInEveryDtype) {
  for (const char* dtype : {"f32", "bf16", "f16"}) {
    const GpuRate rate = measureGpuGemm(dtype, 512, 256, 128, 2, 0.001);
    EXPECT_TRUE(rate.error.empty()) << dtype << ": " << rate.error;
    EXPECT_GT(rate.per_s, 1e9) << dtype;
    EXPECT_LT(rate.per_s, 1e16) << dtype;
  }
  EXPECT_NE(measureGpuGemm("f64", 8, 8, 8, 1, 0).error, "");
}

TEST_F(GpuMeasureTest, Triad) {
  const GpuRate rate = measureGpuTriad(64 << 20, 2, 0.001);
  EXPECT_TRUE(rate.error.empty()) << rate.error;
  EXPECT_GT(rate.per_s, 1e9);
  EXPECT_LT(rate.per_s, 1e14);
}

}  // namespace
}  // namespace loom::calibrate::gpu
