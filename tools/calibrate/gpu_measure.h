// Measurements of the first CUDA GPU for the machine profile: GEMM
// throughput through cuBLAS in f32, bf16 and f16, and STREAM-style device
// memory bandwidth. Compiled by nvcc everywhere; at run time every call
// reports why it cannot run when no GPU is usable. The interface is plain
// C++ (no CUDA or Abseil types) so host code and nvcc both read it.
#ifndef LOOM_TOOLS_CALIBRATE_GPU_MEASURE_H_
#define LOOM_TOOLS_CALIBRATE_GPU_MEASURE_H_

#include <cstdint>
#include <string>

namespace loom::calibrate::gpu {

struct GpuDevice {
  // Empty when device 0 is usable, else why not (no driver, no device).
  std::string unavailable_reason;
  std::string name;  // as the driver reports it, e.g. "NVIDIA H200"
  int64_t memory_bytes = 0;
  int compute_capability = 0;  // major * 10 + minor
};

GpuDevice probeGpu();

// A measured rate, or the error that stopped the measurement.
struct GpuRate {
  double per_s = 0;
  std::string error;  // empty on success
};

// FLOP/s (2 m n k per call) of C = A B on device 0 with cublasGemmEx:
// dtype "f32" (FP32 compute, no TF32), "bf16" or "f16" (inputs and output
// in that type, FP32 accumulation). The median of `repeats` samples, each
// of at least `min_time_s`, timed with CUDA events after one warm-up call.
GpuRate measureGpuGemm(const std::string& dtype, int64_t m, int64_t n, int64_t k, int repeats,
                       double min_time_s);

// STREAM triad a = b + s c on device memory, three arrays of
// `bytes_per_array` bytes of floats: 3 arrays' bytes per call / time.
GpuRate measureGpuTriad(int64_t bytes_per_array, int repeats, double min_time_s);

}  // namespace loom::calibrate::gpu

#endif  // LOOM_TOOLS_CALIBRATE_GPU_MEASURE_H_
