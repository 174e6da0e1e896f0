// The rank side of collective calibration: on every rank of a
// ProcessGroup, time each collective over a sweep of message sizes, and
// carry the results to the driver as JSON.
#ifndef LOOM_TOOLS_CALIBRATE_COLLECTIVE_SWEEP_H_
#define LOOM_TOOLS_CALIBRATE_COLLECTIVE_SWEEP_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "comm/process_group.h"
#include "nlohmann/json.hpp"
#include "tools/calibrate/alpha_beta_fit.h"

namespace loom::calibrate {

struct CollectiveSweepOptions {
  std::vector<CollectiveKind> kinds;
  // Message sizes S in bytes (alpha_beta_fit.h), before rounding down to
  // whole f32 chunks per rank.
  std::vector<int64_t> sizes;
  int iters = 10;   // timed calls per sample
  int warmup = 1;   // untimed calls per size
  int repeats = 5;  // samples per size; the point is their median
};

// min, min*factor, ... up to max; errors name the flag.
absl::StatusOr<std::vector<int64_t>> sweepSizes(int64_t min_bytes, int64_t max_bytes, int factor);

struct MeasuredSeries {
  CollectiveKind kind = CollectiveKind::kAllReduce;
  int group_size = 0;
  std::vector<TimedPoint> points;
};

// Runs the sweep on this rank; every rank of `group` calls it with the same
// options. All calls are blocking f32 collectives (broadcast from rank 0,
// all_gather and reduce_scatter out of place into/from one tensor). A
// sample is the slowest rank's mean time over `iters` calls, started
// together after a barrier. `progress` (rank 0 only, may be empty) gets a
// line per size.
absl::StatusOr<std::vector<MeasuredSeries>> runCollectiveSweep(
    comm::ProcessGroup& group, const CollectiveSweepOptions& options,
    const std::function<void(const std::string&)>& progress);

// The worker-to-driver file: {"series": [{"kind", "group_size", "points":
// [{"bytes", "time_s"}]}]}.
nlohmann::json seriesToJson(const std::vector<MeasuredSeries>& series);
absl::StatusOr<std::vector<MeasuredSeries>> seriesFromJson(const nlohmann::json& json);

}  // namespace loom::calibrate

#endif  // LOOM_TOOLS_CALIBRATE_COLLECTIVE_SWEEP_H_
