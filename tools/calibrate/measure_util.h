// Small helpers shared by the calibration measurements: the median of
// repeated samples, byte-size flags ("64M") and GEMM shape flags ("MxNxK").
#ifndef LOOM_TOOLS_CALIBRATE_MEASURE_UTIL_H_
#define LOOM_TOOLS_CALIBRATE_MEASURE_UTIL_H_

#include <cstdint>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace loom::calibrate {

// The median (mean of the middle two for an even count); 0 when empty.
double median(std::vector<double> samples);

// "4096", "4K", "64M", "1G" (powers of 1024) -> bytes; errors name the text.
absl::StatusOr<int64_t> parseBytes(std::string_view text);

struct GemmShape {
  int64_t m = 0;
  int64_t n = 0;
  int64_t k = 0;
};

// "MxNxK" (or one number N for NxNxN) -> shape; errors name the text.
absl::StatusOr<GemmShape> parseGemmShape(std::string_view text);

// A comma-separated list of shapes.
absl::StatusOr<std::vector<GemmShape>> parseGemmShapes(std::string_view text);

}  // namespace loom::calibrate

#endif  // LOOM_TOOLS_CALIBRATE_MEASURE_UTIL_H_
