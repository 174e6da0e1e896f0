// Measurements of the host CPU for the machine profile: f32 GEMM throughput
// through OpenBLAS, STREAM-style memory bandwidth, and what the machine is
// (memory size, CPU model, host name).
#ifndef LOOM_TOOLS_CALIBRATE_CPU_MEASURE_H_
#define LOOM_TOOLS_CALIBRATE_CPU_MEASURE_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "tools/calibrate/measure_util.h"

namespace loom::calibrate {

struct SampleOptions {
  // Timed samples; the result is their median.
  int repeats = 5;
  // Each sample repeats the operation until it has run this long (at least
  // once), so short operations are not timed at the clock's resolution.
  double min_time_s = 0.05;
};

// FLOP/s (2 m n k per call) of a row-major C = A B in f32 with
// cblas_sgemm, on OpenBLAS's own threads, after one untimed warm-up call.
absl::StatusOr<double> measureCpuGemmF32(const GemmShape& shape, const SampleOptions& options);

struct StreamBandwidth {
  // STREAM's byte counts: copy c = a moves 2 arrays, triad a = b + s c 3.
  double copy_bytes_per_s = 0;
  double triad_bytes_per_s = 0;
};

// STREAM-like copy and triad over three arrays of `bytes_per_array` bytes
// of doubles, split evenly over `threads` threads (each first touches its
// own part). Arrays should be far larger than the last-level cache.
absl::StatusOr<StreamBandwidth> measureCpuStream(int64_t bytes_per_array, int threads,
                                                 const SampleOptions& options);

// Physical memory, capped by the cgroup's memory.max when that is lower.
int64_t cpuMemoryBytes();

// "hostname/CPU model name (N cores)".
std::string cpuDescription();

// Logical CPUs this process may run on.
int cpuCount();

}  // namespace loom::calibrate

#endif  // LOOM_TOOLS_CALIBRATE_CPU_MEASURE_H_
