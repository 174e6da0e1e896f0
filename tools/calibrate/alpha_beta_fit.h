// The alpha-beta model of a collective, time(S) = alpha + S * f(kind, g) /
// bus_bandwidth, and its least-squares fit over a message-size sweep.
#ifndef LOOM_TOOLS_CALIBRATE_ALPHA_BETA_FIT_H_
#define LOOM_TOOLS_CALIBRATE_ALPHA_BETA_FIT_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace loom::calibrate {

// The collectives a machine profile describes.
enum class CollectiveKind { kAllReduce, kAllGather, kReduceScatter, kBroadcast };

inline constexpr CollectiveKind kAllCollectiveKinds[] = {
    CollectiveKind::kAllReduce, CollectiveKind::kAllGather, CollectiveKind::kReduceScatter,
    CollectiveKind::kBroadcast};

// "all_reduce", "all_gather", "reduce_scatter", "broadcast".
std::string_view collectiveKindName(CollectiveKind kind);
absl::StatusOr<CollectiveKind> collectiveKindFromName(std::string_view name);

// nccl-tests' bus-bandwidth factor: the fraction of the message size S (the
// largest buffer one rank holds) that crosses each rank's busiest link in an
// optimal algorithm. 2(g-1)/g for all_reduce, (g-1)/g for all_gather and
// reduce_scatter, 1 for broadcast. Group sizes below 2 give 0.
double busFactor(CollectiveKind kind, int group_size);

// One measured call: message size S in bytes and its time.
struct TimedPoint {
  int64_t bytes = 0;
  double time_s = 0;
};

struct AlphaBetaFit {
  // alpha: the fixed cost of one call, whatever its size.
  double latency_s = 0;
  // 1 / beta: bytes on the busiest link per second.
  double bus_bandwidth_bytes_per_s = 0;
  // Root mean square of (fitted - measured) / measured over the points.
  double rms_relative_error = 0;

  double predict(int64_t bytes, double bus_factor) const {
    return latency_s + static_cast<double>(bytes) * bus_factor / bus_bandwidth_bytes_per_s;
  }
};

// Fits time = latency + bytes * bus_factor / bus_bandwidth by least squares
// on relative residuals (each point weighted by 1/time^2), so the small
// messages that fix the latency count as much as the large ones that fix the
// bandwidth. Points that lie exactly on such a line are recovered exactly. A
// negative intercept (noise at the small end) is clamped to 0 and the slope
// refitted through the origin. Fails on fewer than two distinct sizes,
// non-positive times or bytes, a bus factor <= 0, or times that do not grow
// with size.
absl::StatusOr<AlphaBetaFit> fitAlphaBeta(const std::vector<TimedPoint>& points, double bus_factor);

}  // namespace loom::calibrate

#endif  // LOOM_TOOLS_CALIBRATE_ALPHA_BETA_FIT_H_
