// A per-rank step as the cost model sees it: compute ops, collectives on
// their communication streams, waits, and the buffers they hold.
// cost::pricePlan (plan_price.h) converts a plan's instructions into one and
// simulates it here, for the exported plan and for the mesh search's
// candidates alike.
#ifndef LOOM_PLANNER_COST_PROGRAM_H_
#define LOOM_PLANNER_COST_PROGRAM_H_

#include <array>
#include <cstdint>
#include <vector>

namespace loom::planner::cost {

struct Instruction {
  enum class Kind {
    kCompute,     // runs on the compute stream for `seconds`
    kCollective,  // runs on comm stream `stream` for `seconds`
    kWait,        // compute waits for the async collective or copy `start`
    // A copy between device and host memory (offload), always async, on
    // the one copy stream for `seconds`.
    kCopy,
  };
  Kind kind = Kind::kCompute;
  double seconds = 0;
  // Collectives: a blocking one stalls compute until it ends; an async one
  // (a `*_start`) runs from when compute issues it.
  bool async = false;
  // One stream per group of mesh axes: collectives over the same axes run
  // one after another (c10d's one stream per process group), different
  // groups run at once.
  int32_t stream = 0;
  // Waits: the index of the collective or copy they wait for.
  int32_t start = -1;
  // Runs after the tail (the device's optimizer steps): offload's steps on
  // the host (as compute: the host thread issues nothing meanwhile), the
  // copies of their results to the device and those copies' waits. Such
  // instructions end the program.
  bool after_tail = false;
};

struct Timing {
  // Busy time of the compute stream and of all comm streams; the time
  // compute stalled on communication; the end of the step.
  double compute_s = 0;
  double comm_s = 0;
  double exposed_comm_s = 0;
  double step_time_s = 0;
  // The copy stream's busy time and the time compute stalled on copies.
  double copy_s = 0;
  double exposed_copy_s = 0;
  // When the tail began: every collective and copy issued before it done.
  double tail_start_s = 0;
};

// Simulates `program` in order: compute ops back to back, each collective
// starting when compute issues it and its stream is free, each copy when
// compute issues it and the copy stream is free. When `starts` is not null
// it receives each instruction's start (waits: when compute resumes).
// `tail_s` of compute (the optimizer steps on the device) runs after every
// collective and copy has finished, before the instructions marked
// after_tail (which need that barrier whether or not there is a tail).
Timing simulate(const std::vector<Instruction>& program, double tail_s = 0,
                std::vector<double>* starts = nullptr);

// Roles as the memory plan names them (planner_memory.md).
enum class Role { kParam, kGrad, kOptimizerState, kActivation, kGathered };
inline constexpr int kNumRoles = 5;

struct Buffer {
  int64_t bytes = 0;
  Role role = Role::kActivation;
  // Live at every instruction in [first, last]; -1 is the entry.
  int32_t first = -1;
  int32_t last = -1;
};

struct MemoryPeak {
  int64_t peak_bytes = 0;
  // The instruction at the peak (-1: the entry; the first reaching it wins).
  int32_t at = -1;
  std::array<int64_t, kNumRoles> breakdown{};
};

// The largest sum of live buffers over the instructions, plus `resident`
// bytes (optimizer states) counted everywhere under their role.
MemoryPeak peakMemory(const std::vector<Buffer>& buffers, int32_t num_instructions,
                      const std::array<int64_t, kNumRoles>& resident = {});

// The peak within each span of consecutive instructions: span k runs from
// instruction starts[k] to the one before starts[k + 1] (the last span to
// the end, the step's end slot included; the entry slot belongs to the
// first span). `starts` begins with 0 and increases.
std::vector<MemoryPeak> spanPeaks(const std::vector<Buffer>& buffers, int32_t num_instructions,
                                  const std::vector<int32_t>& starts);

}  // namespace loom::planner::cost

#endif  // LOOM_PLANNER_COST_PROGRAM_H_
