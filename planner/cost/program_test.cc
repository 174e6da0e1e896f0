// Tests of the step simulation (streams, overlap, exposure) and of the
// memory peak over buffer lifetimes, on hand-made programs.
#include "planner/cost/program.h"

#include <vector>

#include "gtest/gtest.h"

namespace loom::planner::cost {
namespace {

using Kind = Instruction::Kind;

TEST(ProgramTest, AsyncCollectivesOverlapComputeUntilTheirWait) {
  // gather(2 s, async) | compute 1 s | wait | compute 1 s
  const std::vector<Instruction> program = {
      {.kind = Kind::kCollective, .seconds = 2, .async = true, .stream = 0},
      {.kind = Kind::kCompute, .seconds = 1},
      {.kind = Kind::kWait, .start = 0},
      {.kind = Kind::kCompute, .seconds = 1},
  };
  std::vector<double> starts;
  const Timing timing = simulate(program, 0, &starts);
  EXPECT_DOUBLE_EQ(timing.compute_s, 2);
  EXPECT_DOUBLE_EQ(timing.comm_s, 2);
  EXPECT_DOUBLE_EQ(timing.exposed_comm_s, 1);  // waited from 1 s to 2 s
  EXPECT_DOUBLE_EQ(timing.step_time_s, 3);
  EXPECT_DOUBLE_EQ(starts[3], 2);
}

TEST(ProgramTest, StreamsSerializeTheirOwnCollectivesOnly) {
  // Two async gathers on stream 0 queue; a blocking all-reduce on stream 1
  // does not wait for them.
  const std::vector<Instruction> program = {
      {.kind = Kind::kCollective, .seconds = 3, .async = true, .stream = 0},
      {.kind = Kind::kCollective, .seconds = 3, .async = true, .stream = 0},
      {.kind = Kind::kCollective, .seconds = 1, .async = false, .stream = 1},
      {.kind = Kind::kCompute, .seconds = 1},
      {.kind = Kind::kWait, .start = 1},
  };
  std::vector<double> starts;
  const Timing timing = simulate(program, /*tail_s=*/0.5, &starts);
  EXPECT_DOUBLE_EQ(starts[1], 3);
  EXPECT_DOUBLE_EQ(starts[2], 0);
  // Blocking 1 s, then compute to 2 s, then the second gather ends at 6 s.
  EXPECT_DOUBLE_EQ(timing.exposed_comm_s, 1 + 4);
  EXPECT_DOUBLE_EQ(timing.step_time_s, 6.5);
  EXPECT_DOUBLE_EQ(timing.compute_s, 1.5);
}

TEST(ProgramTest, CopiesRunOnTheCopyStreamAndStallComputeAtTheirWait) {
  // copy(2 s) | compute 1 s | copy(1 s, queued) | wait first | wait second
  const std::vector<Instruction> program = {
      {.kind = Kind::kCopy, .seconds = 2, .async = true},
      {.kind = Kind::kCompute, .seconds = 1},
      {.kind = Kind::kCopy, .seconds = 1, .async = true},
      {.kind = Kind::kWait, .start = 0},
      {.kind = Kind::kWait, .start = 2},
  };
  std::vector<double> starts;
  const Timing timing = simulate(program, 0, &starts);
  EXPECT_DOUBLE_EQ(starts[2], 2);  // behind the first copy
  EXPECT_DOUBLE_EQ(timing.copy_s, 3);
  EXPECT_DOUBLE_EQ(timing.exposed_copy_s, 2);  // from 1 s to 3 s
  EXPECT_DOUBLE_EQ(timing.exposed_comm_s, 0);
  EXPECT_DOUBLE_EQ(timing.comm_s, 0);
  EXPECT_DOUBLE_EQ(timing.step_time_s, 3);
}

TEST(ProgramTest, HostStepsRunAfterTheTailAndEveryStream) {
  // A gather still running when the device's optimizer tail (1 s) is due;
  // then a host step (2 s) and the copy of its result (1 s) with its wait.
  const std::vector<Instruction> program = {
      {.kind = Kind::kCollective, .seconds = 3, .async = true, .stream = 0},
      {.kind = Kind::kCompute, .seconds = 1},
      {.kind = Kind::kCompute, .seconds = 2, .after_tail = true},
      {.kind = Kind::kCopy, .seconds = 1, .async = true, .after_tail = true},
      {.kind = Kind::kWait, .start = 3, .after_tail = true},
  };
  std::vector<double> starts;
  const Timing timing = simulate(program, 1, &starts);
  EXPECT_DOUBLE_EQ(timing.tail_start_s, 3);  // after the gather
  EXPECT_DOUBLE_EQ(starts[2], 4);            // after the 1 s tail
  EXPECT_DOUBLE_EQ(starts[3], 6);
  EXPECT_DOUBLE_EQ(timing.exposed_copy_s, 1);
  EXPECT_DOUBLE_EQ(timing.compute_s, 4);
  EXPECT_DOUBLE_EQ(timing.step_time_s, 7);
  // Host steps alone still wait for every stream.
  const std::vector<Instruction> hostOnly = {
      {.kind = Kind::kCollective, .seconds = 3, .async = true, .stream = 0},
      {.kind = Kind::kCompute, .seconds = 2, .after_tail = true},
  };
  EXPECT_DOUBLE_EQ(simulate(hostOnly, 0).step_time_s, 5);
}

TEST(ProgramTest, PeakCountsEveryLiveBufferAndTheResidentBytes) {
  const std::vector<Buffer> buffers = {
      {.bytes = 100, .role = Role::kParam, .first = -1, .last = 3},
      {.bytes = 10, .role = Role::kActivation, .first = 0, .last = 2},
      {.bytes = 20, .role = Role::kGathered, .first = 1, .last = 1},
      {.bytes = 25, .role = Role::kGrad, .first = 2, .last = 3},
  };
  std::array<int64_t, kNumRoles> resident{};
  resident[static_cast<int>(Role::kOptimizerState)] = 1000;
  const MemoryPeak peak = peakMemory(buffers, 4, resident);
  // At 1: 100 + 10 + 20; at 2: 100 + 10 + 25 (the later, larger one).
  EXPECT_EQ(peak.peak_bytes, 1135);
  EXPECT_EQ(peak.at, 2);
  EXPECT_EQ(peak.breakdown[static_cast<int>(Role::kGathered)], 0);
  EXPECT_EQ(peak.breakdown[static_cast<int>(Role::kGrad)], 25);
}

TEST(ProgramTest, SpanPeaksAreEachSpansOwnHighest) {
  const std::vector<Buffer> buffers = {
      {.bytes = 100, .role = Role::kParam, .first = -1, .last = 5},
      {.bytes = 10, .role = Role::kActivation, .first = 0, .last = 4},
      {.bytes = 20, .role = Role::kGathered, .first = 1, .last = 1},
      {.bytes = 7, .role = Role::kGrad, .first = 4, .last = 5},
  };
  // Spans: instructions 0-2 (with the entry), 3, and 4-5 with the end.
  const std::vector<MemoryPeak> peaks = spanPeaks(buffers, 6, {0, 3, 4});
  ASSERT_EQ(peaks.size(), 3u);
  EXPECT_EQ(peaks[0].peak_bytes, 130);
  EXPECT_EQ(peaks[0].at, 1);
  EXPECT_EQ(peaks[1].peak_bytes, 110);
  EXPECT_EQ(peaks[1].at, 3);
  EXPECT_EQ(peaks[2].peak_bytes, 117);
  EXPECT_EQ(peaks[2].at, 4);
  EXPECT_EQ(peaks[2].breakdown[static_cast<int>(Role::kGrad)], 7);
  // The whole step's peak is the highest span's.
  EXPECT_EQ(peakMemory(buffers, 6).peak_bytes, 130);
}

}  // namespace
}  // namespace loom::planner::cost
