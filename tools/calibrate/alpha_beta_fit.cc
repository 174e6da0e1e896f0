// Least-squares alpha-beta fit of collective timings (see alpha_beta_fit.h).
#include "tools/calibrate/alpha_beta_fit.h"

#include <cmath>
#include <set>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace loom::calibrate {

std::string_view collectiveKindName(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::kAllReduce:
      return "all_reduce";
    case CollectiveKind::kAllGather:
      return "all_gather";
    case CollectiveKind::kReduceScatter:
      return "reduce_scatter";
    case CollectiveKind::kBroadcast:
      return "broadcast";
  }
  return "unknown";
}

absl::StatusOr<CollectiveKind> collectiveKindFromName(std::string_view name) {
  for (CollectiveKind kind : kAllCollectiveKinds) {
    if (collectiveKindName(kind) == name) return kind;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("collective '", std::string(name),
                   "' is not one of all_reduce, all_gather, reduce_scatter, broadcast"));
}

double busFactor(CollectiveKind kind, int group_size) {
  if (group_size < 2) return 0;
  const double ring = static_cast<double>(group_size - 1) / group_size;
  switch (kind) {
    case CollectiveKind::kAllReduce:
      return 2 * ring;
    case CollectiveKind::kAllGather:
    case CollectiveKind::kReduceScatter:
      return ring;
    case CollectiveKind::kBroadcast:
      return 1;
  }
  return 0;
}

absl::StatusOr<AlphaBetaFit> fitAlphaBeta(const std::vector<TimedPoint>& points,
                                          double bus_factor) {
  if (!(bus_factor > 0)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "alpha-beta fit: bus factor %g must be > 0 (a group of at least 2 ranks)", bus_factor));
  }
  std::set<int64_t> sizes;
  for (const TimedPoint& p : points) {
    if (p.bytes <= 0 || !(p.time_s > 0) || !std::isfinite(p.time_s)) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "alpha-beta fit: point (%d bytes, %g s) needs bytes > 0 and a finite time > 0", p.bytes,
          p.time_s));
    }
    sizes.insert(p.bytes);
  }
  if (sizes.size() < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("alpha-beta fit: needs at least 2 distinct message sizes, got ", sizes.size(),
                     "; widen the sweep (--min_bytes < --max_bytes)"));
  }
  // Weighted normal equations of t = a + b x with weights 1/t^2.
  double s = 0, sx = 0, st = 0, sxx = 0, sxt = 0;
  for (const TimedPoint& p : points) {
    const double x = static_cast<double>(p.bytes) * bus_factor;
    const double w = 1 / (p.time_s * p.time_s);
    s += w;
    sx += w * x;
    st += w * p.time_s;
    sxx += w * x * x;
    sxt += w * x * p.time_s;
  }
  const double det = s * sxx - sx * sx;
  double a = (sxx * st - sx * sxt) / det;
  double b = (s * sxt - sx * st) / det;
  if (a < 0) {
    a = 0;
    b = sxt / sxx;
  }
  if (!(b > 0) || !std::isfinite(b)) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "alpha-beta fit: time does not grow with message size over %d..%d bytes (slope %g s/B); "
        "the sweep is too noisy or too narrow, raise --max_bytes or --repeats",
        *sizes.begin(), *sizes.rbegin(), b));
  }
  AlphaBetaFit fit{.latency_s = a, .bus_bandwidth_bytes_per_s = 1 / b, .rms_relative_error = 0};
  double sq = 0;
  for (const TimedPoint& p : points) {
    const double r = (fit.predict(p.bytes, bus_factor) - p.time_s) / p.time_s;
    sq += r * r;
  }
  fit.rms_relative_error = std::sqrt(sq / points.size());
  return fit;
}

}  // namespace loom::calibrate
