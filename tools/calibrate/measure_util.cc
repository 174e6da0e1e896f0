// Median, byte-size and GEMM-shape parsing for the calibration tool.
#include "tools/calibrate/measure_util.h"

#include <algorithm>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace loom::calibrate {

double median(std::vector<double> samples) {
  if (samples.empty()) return 0;
  std::sort(samples.begin(), samples.end());
  const size_t mid = samples.size() / 2;
  return samples.size() % 2 == 1 ? samples[mid] : (samples[mid - 1] + samples[mid]) / 2;
}

absl::StatusOr<int64_t> parseBytes(std::string_view text) {
  std::string digits(text);
  int64_t unit = 1;
  if (!digits.empty()) {
    switch (digits.back()) {
      case 'K':
      case 'k':
        unit = int64_t{1} << 10;
        break;
      case 'M':
      case 'm':
        unit = int64_t{1} << 20;
        break;
      case 'G':
      case 'g':
        unit = int64_t{1} << 30;
        break;
      default:
        break;
    }
  }
  if (unit != 1) digits.pop_back();
  int64_t value = 0;
  if (!absl::SimpleAtoi(digits, &value) || value <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "size '", std::string(text), "' is not a positive number of bytes (e.g. 4096, 4K, 64M)"));
  }
  return value * unit;
}

absl::StatusOr<GemmShape> parseGemmShape(std::string_view text) {
  const std::vector<std::string> parts = absl::StrSplit(std::string(text), 'x');
  std::vector<int64_t> dims;
  for (const std::string& part : parts) {
    int64_t d = 0;
    if (!absl::SimpleAtoi(part, &d) || d <= 0) break;
    dims.push_back(d);
  }
  if (dims.size() == parts.size() && dims.size() == 1) return GemmShape{dims[0], dims[0], dims[0]};
  if (dims.size() == parts.size() && dims.size() == 3) return GemmShape{dims[0], dims[1], dims[2]};
  return absl::InvalidArgumentError(
      absl::StrCat("GEMM shape '", std::string(text),
                   "' is not MxNxK or N with positive integers (e.g. 1024x1024x1024)"));
}

absl::StatusOr<std::vector<GemmShape>> parseGemmShapes(std::string_view text) {
  std::vector<GemmShape> shapes;
  const std::vector<std::string> items = absl::StrSplit(std::string(text), ',', absl::SkipEmpty());
  for (const std::string& item : items) {
    absl::StatusOr<GemmShape> shape = parseGemmShape(item);
    if (!shape.ok()) return shape.status();
    shapes.push_back(*shape);
  }
  if (shapes.empty()) {
    return absl::InvalidArgumentError("no GEMM shape given; pass e.g. --gemm_shapes=1024,4096");
  }
  return shapes;
}

}  // namespace loom::calibrate
