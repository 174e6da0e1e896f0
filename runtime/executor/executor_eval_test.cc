// Forward-only evaluation (Executor::evaluate): on every layout it gives the
// 1-rank run's loss, equals the loss a training step computes on the same
// batch, leaves parameters and optimizer states bit for bit as they were,
// and does not change the training that follows.
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "comm/testing/process_group_testing.h"
#include "gtest/gtest.h"
#include "runtime/executor/executor.h"
#include "runtime/executor/testing/step_tokens.h"

namespace loom::runtime {
namespace {

constexpr int kSteps = 4;

std::string planPath(const std::string& name) {
  return absl::StrCat(std::getenv("TEST_SRCDIR"), "/loom/runtime/executor/testdata/", name,
                      "/plan.json");
}

// A snapshot of every parameter and optimizer-state shard this rank saves.
std::vector<std::vector<char>> snapshot(const Executor& e) {
  absl::StatusOr<std::vector<checkpoint::ShardView>> shards = e.checkpointShards();
  EXPECT_TRUE(shards.ok()) << shards.status();
  std::vector<std::vector<char>> bytes;
  if (!shards.ok()) return bytes;
  for (const checkpoint::ShardView& v : *shards) {
    int64_t n = 1;
    for (int64_t d : v.local_shape) n *= d;
    const char* p = static_cast<const char*>(v.data);
    bytes.emplace_back(p, p + n * sizeof(float));
  }
  return bytes;
}

struct EvalRun {
  std::vector<double> train;  // rank 0's step losses
  std::vector<double> eval;   // rank 0's: before step 1, then after every step
  bool params_unchanged = true;
};

// Trains `name` for kSteps steps on synthetic batches; with `evaluate`, the
// held-out batch (a step index training never reads) is evaluated before
// the first step and after each, and step 1's batch once before step 1.
EvalRun train(const std::string& name, bool evaluate) {
  absl::StatusOr<plan::Plan> plan = plan::loadPlan(planPath(name));
  EXPECT_TRUE(plan.ok()) << plan.status();
  EvalRun run;
  if (!plan.ok()) return run;
  std::mutex mu;
  comm::ProcessGroupOptions pgOptions;
  pgOptions.checks = comm::CollectiveChecks::kCheap;
  comm::testing::runRanksShared(
      static_cast<int>(plan->worldSize()),
      [&](std::shared_ptr<comm::ProcessGroup> group) {
        absl::StatusOr<std::unique_ptr<Executor>> executor = Executor::create(*plan, group);
        ASSERT_TRUE(executor.ok()) << executor.status();
        Executor& e = **executor;
        absl::StatusOr<testing::StepTokens> tokens = testing::StepTokens::create(e);
        ASSERT_TRUE(tokens.ok()) << tokens.status();
        auto fill = [&](int64_t step) { ASSERT_TRUE(tokens->fill(step).ok()); };
        std::vector<double> trainLosses, evalLosses;
        bool unchanged = true;
        auto evalHeldOut = [&](int64_t after) {
          const std::vector<std::vector<char>> before = snapshot(e);
          fill(1000);
          absl::StatusOr<EvalResult> r = e.evaluate(after, tokens->ids(), tokens->labels());
          ASSERT_TRUE(r.ok()) << r.status();
          evalLosses.push_back(r->loss);
          unchanged = unchanged && snapshot(e) == before;
        };
        if (evaluate) {
          evalHeldOut(0);
          fill(1);
          absl::StatusOr<EvalResult> first = e.evaluate(0, tokens->ids(), tokens->labels());
          ASSERT_TRUE(first.ok()) << first.status();
          evalLosses.push_back(first->loss);
        }
        for (int step = 1; step <= kSteps; ++step) {
          fill(step);
          absl::StatusOr<StepResult> r = e.step(step, tokens->ids(), tokens->labels());
          ASSERT_TRUE(r.ok()) << r.status();
          trainLosses.push_back(r->loss);
          if (evaluate) evalHeldOut(step);
        }
        if (group->rank() != 0) return;
        std::lock_guard<std::mutex> lock(mu);
        run.train = trainLosses;
        run.eval = evalLosses;
        run.params_unchanged = unchanged;
      },
      pgOptions);
  return run;
}

// (the 1-rank plan, the layout)
class EvalTest : public ::testing::TestWithParam<std::pair<std::string, std::string>> {};

TEST_P(EvalTest, MatchesTheUnshardedRunAndLeavesTrainingAlone) {
  const auto& [reference, layout] = GetParam();
  const EvalRun single = train(reference, true);
  ASSERT_EQ(single.eval.size(), static_cast<size_t>(kSteps + 2));
  const EvalRun with = train(layout, true);
  const EvalRun without = train(layout, false);
  ASSERT_EQ(with.eval.size(), single.eval.size());
  // Training is the same bits with evaluation in between.
  EXPECT_EQ(with.train, without.train);
  EXPECT_TRUE(with.params_unchanged);
  // Evaluating step 1's batch gives step 1's training loss: the same forward.
  EXPECT_DOUBLE_EQ(with.eval[1], with.train[0]);
  for (size_t i = 0; i < single.eval.size(); ++i) {
    EXPECT_LE(std::abs(with.eval[i] - single.eval[i]), 1e-5 * std::abs(single.eval[i]))
        << layout << " eval " << i << ": " << with.eval[i] << " vs " << single.eval[i];
  }
  // The held-out loss moves as the model trains, so equal figures mean
  // something.
  EXPECT_NE(with.eval.front(), with.eval.back());
}

INSTANTIATE_TEST_SUITE_P(Layouts, EvalTest,
                         ::testing::Values(std::pair{"llama_single", "llama_single"},
                                           std::pair{"llama_single", "llama_fsdp4"},
                                           std::pair{"llama_single", "llama_hsdp2x2"},
                                           std::pair{"llama_single", "llama_tp2"},
                                           std::pair{"llama_single", "llama_fsdp2_tp2"},
                                           std::pair{"llama_single", "llama_sp_fsdp2_tp2"},
                                           std::pair{"llama_single", "llama_full_fsdp4"},
                                           std::pair{"accum_llama_single",
                                                     "accum_llama_both_fsdp4_m2"}));

}  // namespace
}  // namespace loom::runtime
