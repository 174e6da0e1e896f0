// Schedules whose micro-batches interleave: accumulating plans of tiny
// Llama (kept gathers, deferred reductions) with their schedules rewritten
// into 1F1B and GPipe order give the losses and parameters of the
// consecutive order bit for bit, on 1 rank and on 2 and 4 ranks as threads
// over Gloo (each block still runs its micro-batches in order, so the
// gradient sums are the same), and hold more memory the more micro-batches
// are in flight.
#include <algorithm>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "comm/testing/process_group_testing.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "plan/plan.h"
#include "runtime/executor/executor.h"
#include "runtime/executor/testing/train_ranks.h"
#include "tests/testing/status_matchers.h"

namespace loom::runtime {
namespace {

using ::loom::testutil::StatusIs;
using ::testing::HasSubstr;

constexpr int kSteps = 4;

absl::StatusOr<plan::Plan> loadTestPlan(const std::string& name) {
  return plan::loadPlan(absl::StrCat(std::getenv("TEST_SRCDIR"),
                                     "/loom/runtime/executor/testdata/", name, "/plan.json"));
}

// The one-program plan's schedule with `warmup` forwards before the first
// backward, then one forward and one backward in turn: 0 is the
// consecutive order (F0 B0 F1 B1 ...), 1 the 1F1B order of a last stage
// (F0 F1 B0 F2 B1 ...), micro_batches GPipe (every forward, then every
// backward).
plan::Plan interleave(plan::Plan plan, int64_t warmup) {
  plan::Program& program = plan.programs.at(0);
  std::string forward, backward, optimizer;
  for (const plan::Block& block : program.blocks) {
    (block.phase == plan::Phase::kForward    ? forward
     : block.phase == plan::Phase::kBackward ? backward
                                             : optimizer) = block.name;
  }
  const int64_t m = plan.micro_batches;
  std::vector<plan::ScheduleEntry> schedule;
  for (int64_t k = 0; k < warmup && k < m; ++k) schedule.push_back({forward, k});
  for (int64_t k = 0; k < m; ++k) {
    if (warmup == 0) schedule.push_back({forward, k});
    if (warmup > 0 && k + warmup < m) schedule.push_back({forward, k + warmup});
    schedule.push_back({backward, k});
  }
  schedule.push_back({optimizer, -1});
  program.schedule = schedule;
  return plan;
}

// Trains `plan` for kSteps steps on synthetic tokens, every rank a thread,
// and reads the parameters after.
testing::RankRuns train(const plan::Plan& plan) {
  return testing::trainRanks(plan, {.steps = kSteps, .read = [](const plan::Buffer& b) {
                                      return b.role == plan::BufferRole::kParam;
                                    }});
}

struct Case {
  std::string plan;
  std::vector<int64_t> warmups;  // the orders to compare with the consecutive one
};

class InterleavedScheduleTest : public ::testing::TestWithParam<Case> {};

TEST_P(InterleavedScheduleTest, IsBitIdenticalToTheConsecutiveOrder) {
  absl::StatusOr<plan::Plan> plan = loadTestPlan(GetParam().plan);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_GT(plan->micro_batches, 1);
  const testing::RankRuns consecutive = train(interleave(*plan, 0));
  ASSERT_EQ(consecutive.losses.at(0).size(), static_cast<size_t>(kSteps));
  // Training moves the parameters, or equal ones would prove little.
  EXPECT_NE(consecutive.losses[0].front(), consecutive.losses[0].back());
  int64_t previous_peak = consecutive.peak_bytes;
  for (int64_t warmup : GetParam().warmups) {
    const plan::Plan reordered = interleave(*plan, warmup);
    ASSERT_TRUE(plan::checkPlan(reordered).ok()) << plan::checkPlan(reordered);
    const testing::RankRuns run = train(reordered);
    const std::string name = absl::StrCat(GetParam().plan, " with ", warmup, " forwards ahead");
    EXPECT_EQ(run.losses, consecutive.losses) << name;
    EXPECT_EQ(run.values, consecutive.values) << name;
    // More micro-batches in flight hold more activations.
    EXPECT_GT(run.peak_bytes, previous_peak) << name;
    previous_peak = run.peak_bytes;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Plans, InterleavedScheduleTest,
    ::testing::Values(
        // 1F1B, then GPipe.
        Case{"accum_llama_single_m4", {1, 4}},
        // Kept gathers and deferred reductions.
        Case{"accum_llama_both_fsdp2_m4", {1, 4}},
        Case{"accum_llama_both_fsdp4_m2", {2}},
        // tp's all-reduces inside the blocks; deferred reductions.
        Case{"accum_llama_defer_tp2_m4", {1}}),
    [](const auto& info) { return info.param.plan; });

// dist.accumulate starts its sum in micro-batch 0 and the deferred
// reductions read it in the last: a block running its micro-batches out
// of order is refused, as is an optimizer before the last backward.
TEST(InterleavedScheduleTest, RefusesOrdersTheGradientSumsCannotFollow) {
  absl::StatusOr<plan::Plan> plan = loadTestPlan("accum_llama_single_m4");
  ASSERT_TRUE(plan.ok()) << plan.status();
  plan::Plan swapped = interleave(*plan, 4);
  std::swap(swapped.programs[0].schedule[0], swapped.programs[0].schedule[1]);
  plan::Plan early = interleave(*plan, 0);
  std::vector<plan::ScheduleEntry>& schedule = early.programs[0].schedule;
  std::rotate(schedule.rbegin(), schedule.rbegin() + 1, schedule.rbegin() + 2);
  ASSERT_EQ(schedule[schedule.size() - 2].micro_batch, -1);
  comm::testing::runRanksShared(1, [&](std::shared_ptr<comm::ProcessGroup> group) {
    EXPECT_THAT(Executor::create(swapped, group).status(),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         HasSubstr("runs forward for micro-batch 1 after none")));
    EXPECT_THAT(Executor::create(early, group).status(),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         HasSubstr("with 1 model block runs still to come")));
  });
}

}  // namespace
}  // namespace loom::runtime
