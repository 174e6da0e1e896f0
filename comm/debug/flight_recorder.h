// A flight recorder per process group: a ring buffer of the last N calls
// (sequence number, op, dtypes, shapes, state and timestamps). When a call
// times out the group dumps it, one JSON file per rank, and
// `comm-flight-analyze` reads every rank's dump to name the lagging rank and
// the first call where the ranks diverged.
#ifndef LOOM_COMM_DEBUG_FLIGHT_RECORDER_H_
#define LOOM_COMM_DEBUG_FLIGHT_RECORDER_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "comm/tensor.h"
#include "comm/work.h"

namespace loom::comm::debug {

struct FlightEntry {
  enum class State : uint8_t { kScheduled, kCompleted, kFailed };
  uint64_t id = 0;  // recorder-local, increasing
  CollectiveInfo info;
  DType dtype = DType::kFloat32;
  std::vector<std::vector<int64_t>> shapes;
  State state = State::kScheduled;
  std::string error;  // the failure message when kFailed
  absl::Time scheduled_at;
  absl::Time finished_at = absl::InfinitePast();  // while scheduled
};

class FlightRecorder {
 public:
  // Keeps the last `capacity` entries (at least 1) of rank `rank` of group
  // `group`; the identity goes into every dump, so that a dump names its
  // rank even before the first call.
  FlightRecorder(std::string group, int rank, int group_size, int capacity);

  // Records a call as scheduled and returns its id.
  uint64_t recordScheduled(const CollectiveInfo& info, DType dtype,
                           std::vector<std::vector<int64_t>> shapes);
  // Marks entry `id` completed or failed; a no-op once it left the buffer.
  void recordFinished(uint64_t id, const absl::Status& status);

  // The entries still held, oldest first.
  std::vector<FlightEntry> snapshot() const;

  // Writes snapshot() as JSON (format in docs/comm_debug.md) to `path`,
  // through a temporary file and a rename so a reader never sees half.
  absl::Status dump(const std::string& path) const;

 private:
  const std::string group_;
  const int rank_;
  const int group_size_;
  const int capacity_;
  mutable absl::Mutex mu_;
  std::vector<FlightEntry> ring_ ABSL_GUARDED_BY(mu_);
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
};

// "<group>_rank<r>.json", the file name under LOOM_FLIGHT_RECORDER_DIR of a
// rank's dump; characters other than [A-Za-z0-9._-] in the group name (the
// '/' of "mesh/tp/1") become '_'.
std::string flightDumpFileName(std::string_view group, int rank);

// One rank's dump read back.
struct FlightDump {
  std::string group;
  int rank = 0;
  int group_size = 0;
  std::vector<FlightEntry> entries;  // oldest first
};

// Reads a dump written by FlightRecorder::dump; an invalid-argument error
// says what is wrong with the file.
absl::StatusOr<FlightDump> readFlightDump(const std::string& path);

// What `comm-flight-analyze` concludes from the dumps of a group's ranks.
struct FlightAnalysis {
  // Ranks whose last scheduled sequence number is the lowest: the ones the
  // others wait for. Empty when all agree.
  std::vector<int> lagging_ranks;
  // The first sequence number at which ranks recorded different calls, and
  // a sentence describing who called what; 0 and "" when none.
  uint64_t first_divergent_seq = 0;
  std::string divergence;
  // Ranks with no dump (expected ranks 0..group_size-1) or an unreadable one.
  std::vector<int> missing_ranks;
  // A human-readable report of all the above.
  std::string report;
};

// Reads the dumps of one group (partial sets too) and analyses them.
absl::StatusOr<FlightAnalysis> analyzeFlightDumps(const std::vector<std::string>& paths);

}  // namespace loom::comm::debug

#endif  // LOOM_COMM_DEBUG_FLIGHT_RECORDER_H_
