// Simulation of a per-rank step's time and memory (see program.h).
#include "planner/cost/program.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

namespace loom::planner::cost {

Timing simulate(const std::vector<Instruction>& program, double tail_s,
                std::vector<double>* starts) {
  Timing timing;
  int32_t streams = 0;
  bool after = false;
  for (const Instruction& instruction : program) {
    if (instruction.kind == Instruction::Kind::kCollective) {
      streams = std::max(streams, instruction.stream + 1);
    }
    after |= instruction.after_tail;
  }
  std::vector<double> streamFree(streams, 0.0);
  double copyFree = 0;
  std::vector<double> done(program.size(), 0.0);
  if (starts) starts->assign(program.size(), 0.0);
  double compute = 0;
  bool tailDone = false;
  // The tail waits for every stream, then runs its compute.
  auto runTail = [&] {
    tailDone = true;
    if (tail_s <= 0 && !after) {
      timing.tail_start_s = compute;
      return;
    }
    for (double free : streamFree) compute = std::max(compute, free);
    compute = std::max(compute, copyFree);
    timing.tail_start_s = compute;
    compute += tail_s;
    timing.compute_s += tail_s;
  };
  for (size_t i = 0; i < program.size(); ++i) {
    const Instruction& instruction = program[i];
    if (instruction.after_tail && !tailDone) runTail();
    switch (instruction.kind) {
      case Instruction::Kind::kCompute:
        if (starts) (*starts)[i] = compute;
        compute += instruction.seconds;
        timing.compute_s += instruction.seconds;
        break;
      case Instruction::Kind::kCollective: {
        double& free = streamFree[instruction.stream];
        const double start = std::max(compute, free);
        if (starts) (*starts)[i] = start;
        free = start + instruction.seconds;
        done[i] = free;
        timing.comm_s += instruction.seconds;
        if (!instruction.async) {
          timing.exposed_comm_s += free - compute;
          compute = free;
        }
        break;
      }
      case Instruction::Kind::kCopy: {
        const double start = std::max(compute, copyFree);
        if (starts) (*starts)[i] = start;
        copyFree = start + instruction.seconds;
        done[i] = copyFree;
        timing.copy_s += instruction.seconds;
        break;
      }
      case Instruction::Kind::kWait: {
        const double ready = instruction.start >= 0 ? done[instruction.start] : 0;
        if (ready > compute) {
          const bool copy =
              instruction.start >= 0 && program[instruction.start].kind == Instruction::Kind::kCopy;
          (copy ? timing.exposed_copy_s : timing.exposed_comm_s) += ready - compute;
          compute = ready;
        }
        if (starts) (*starts)[i] = compute;
        break;
      }
    }
  }
  if (!tailDone) runTail();
  timing.step_time_s = std::max(compute, copyFree);
  for (double free : streamFree) timing.step_time_s = std::max(timing.step_time_s, free);
  return timing;
}

namespace {

// Calls visit(slot, live by role, total) for every slot of the step: slot 0
// is the entry (-1), slot i + 1 instruction i, the last the step's end. A
// difference array over the lifetimes.
template <typename Visit>
void sweepLiveBytes(const std::vector<Buffer>& buffers, int32_t num_instructions,
                    const std::array<int64_t, kNumRoles>& resident, Visit visit) {
  // Reused: the search asks for thousands of peaks of programs this long,
  // and a fresh array each time is mostly page faults.
  static thread_local std::vector<std::array<int64_t, kNumRoles>> delta;
  delta.assign(static_cast<size_t>(num_instructions) + 2, {});
  for (const Buffer& buffer : buffers) {
    const int r = static_cast<int>(buffer.role);
    delta[buffer.first + 1][r] += buffer.bytes;
    delta[std::min(buffer.last, num_instructions - 1) + 2][r] -= buffer.bytes;
  }
  std::array<int64_t, kNumRoles> live = resident;
  for (int32_t slot = 0; slot <= num_instructions; ++slot) {
    int64_t total = 0;
    for (int r = 0; r < kNumRoles; ++r) {
      live[r] += delta[slot][r];
      total += live[r];
    }
    visit(slot, live, total);
  }
}

}  // namespace

MemoryPeak peakMemory(const std::vector<Buffer>& buffers, int32_t num_instructions,
                      const std::array<int64_t, kNumRoles>& resident) {
  MemoryPeak peak;
  peak.peak_bytes = -1;
  sweepLiveBytes(buffers, num_instructions, resident,
                 [&](int32_t slot, const std::array<int64_t, kNumRoles>& live, int64_t total) {
                   if (total <= peak.peak_bytes) return;
                   peak.peak_bytes = total;
                   peak.at = slot - 1;
                   peak.breakdown = live;
                 });
  return peak;
}

std::vector<MemoryPeak> spanPeaks(const std::vector<Buffer>& buffers, int32_t num_instructions,
                                  const std::vector<int32_t>& starts) {
  std::vector<MemoryPeak> peaks(starts.size(), MemoryPeak{.peak_bytes = -1});
  size_t span = 0;
  sweepLiveBytes(buffers, num_instructions, {},
                 [&](int32_t slot, const std::array<int64_t, kNumRoles>& live, int64_t total) {
                   // Slot s + 1 is instruction s; the entry slot is the first span's.
                   while (span + 1 < starts.size() && slot - 1 >= starts[span + 1]) ++span;
                   MemoryPeak& peak = peaks[span];
                   if (total <= peak.peak_bytes) return;
                   peak.peak_bytes = total;
                   peak.at = slot - 1;
                   peak.breakdown = live;
                 });
  return peaks;
}

}  // namespace loom::planner::cost
