// What actually ran on one rank: a compute track (the executor's thread), a
// pipeline-bubble track (the compute thread idle, waiting for another
// pipeline stage) and one communication track per process group, on a clock
// aligned across ranks, merged on rank 0 into a Chrome/Perfetto trace.json
// with a summary of exposed communication, bubbles and stragglers.
#ifndef LOOM_RUNTIME_EXECUTOR_TRACE_RECORDER_H_
#define LOOM_RUNTIME_EXECUTOR_TRACE_RECORDER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "comm/process_group.h"
#include "nlohmann/json.hpp"

namespace loom::runtime {

// The track of the spans in which a pipeline stage's compute thread waits
// for a peer stage (Executor::traceBubble); merged as thread 2 of its rank,
// right under compute.
inline constexpr char kBubbleTrack[] = "pipeline bubble";

struct TraceEvent {
  std::string name;   // op name, e.g. "nn.linear" or "all_gather"
  std::string track;  // "compute", kBubbleTrack or "comm:<group>"
  std::string phase;  // forward, backward, optimizer
  int64_t step = 0;
  int64_t index = -1;  // the op's index in the plan
  // The schedule entry it ran in: the block's name and the micro-batch
  // (-1: the optimizer's run, or outside the schedule).
  std::string block;
  int64_t micro_batch = -1;
  double start_us = 0;
  double duration_us = 0;
  // Collectives: the plan's handle and the axes; for the matching of one
  // collective across ranks (straggler analysis).
  std::string collective;  // "all_gather" ...; empty for compute
  std::string axes;
  int64_t bytes = 0;
  double wait_us = 0;  // compute time blocked in the matching dist.wait
};

class TraceRecorder {
 public:
  // Microseconds on this process's steady clock.
  static double nowUs();

  // Measures this rank's clock offset against rank 0 of `world` (a barrier,
  // then an all-gather of the time each rank left it). A collective over
  // `world`.
  absl::Status alignClocks(comm::ProcessGroup& world);

  // Thread-safe: communication completions are recorded from the groups'
  // worker threads.
  void add(TraceEvent event);
  std::vector<TraceEvent> events() const;
  void clear();

  // Gathers every rank's events on rank 0 (a collective over `world`) and
  // returns, on rank 0, the merged trace: {"traceEvents": [...],
  // "loomSummary": {...}}; other ranks get an empty object.
  absl::StatusOr<nlohmann::json> merge(comm::ProcessGroup& world) const;

  // The summary part alone, from every rank's events (events[r] is rank r's).
  static nlohmann::json summarize(const std::vector<std::vector<TraceEvent>>& events);

 private:
  double offset_us_ = 0;  // subtract to get rank 0's clock
  mutable absl::Mutex mu_;
  std::vector<TraceEvent> events_ ABSL_GUARDED_BY(mu_);
};

}  // namespace loom::runtime

#endif  // LOOM_RUNTIME_EXECUTOR_TRACE_RECORDER_H_
