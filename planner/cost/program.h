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
    kWait,        // compute waits for the async collective `start`
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
  // Waits: the index of the collective they wait for.
  int32_t start = -1;
};

struct Timing {
  // Busy time of the compute stream and of all comm streams; the time
  // compute stalled on communication; the end of the step.
  double compute_s = 0;
  double comm_s = 0;
  double exposed_comm_s = 0;
  double step_time_s = 0;
};

// Simulates `program` in order: compute ops back to back, each collective
// starting when compute issues it and its stream is free. When `starts` is
// not null it receives each instruction's start (waits: when compute
// resumes). `tail_s` of compute (the optimizer step) runs after every
// collective has finished.
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
