#include "runtime/executor/testing/train_ranks.h"

#include <algorithm>
#include <memory>
#include <mutex>
#include <utility>

#include "comm/testing/process_group_testing.h"
#include "gtest/gtest.h"
#include "plan/lifetimes.h"
#include "runtime/executor/testing/step_tokens.h"

namespace loom::runtime::testing {

RankRuns trainRanks(const plan::Plan& plan, const TrainRanksOptions& options) {
  const int world = static_cast<int>(plan.worldSize());
  RankRuns runs;
  runs.losses.resize(world);
  runs.values.resize(world);
  std::mutex mu;
  comm::ProcessGroupOptions groupOptions;
  groupOptions.checks = comm::CollectiveChecks::kOff;
  comm::testing::runRanksShared(
      world,
      [&](std::shared_ptr<comm::ProcessGroup> group) {
        absl::StatusOr<std::unique_ptr<Executor>> executor =
            Executor::create(plan, group, options.executor);
        ASSERT_TRUE(executor.ok()) << executor.status();
        Executor& e = **executor;
        absl::StatusOr<StepTokens> tokens = StepTokens::create(e);
        ASSERT_TRUE(tokens.ok()) << tokens.status();
        std::vector<double> losses;
        int64_t peak = 0, hostPeak = 0;
        for (int step = 1; step <= options.steps; ++step) {
          ASSERT_TRUE(tokens->fill(options.batch(step)).ok());
          absl::StatusOr<StepResult> r = e.step(step, tokens->ids(), tokens->labels());
          ASSERT_TRUE(r.ok()) << r.status();
          losses.push_back(r->loss);
          for (const PhaseMemory& m : e.phaseMemory()) {
            peak = std::max(peak, m.peak_bytes);
            hostPeak = std::max(hostPeak, m.host_peak_bytes);
          }
        }
        // A pipeline stage holds only the buffers its own program uses.
        absl::StatusOr<std::vector<int64_t>> coords = plan.mesh.coordinateOf(group->rank());
        ASSERT_TRUE(coords.ok()) << coords.status();
        const std::vector<plan::Lifetime> live =
            plan::computeLifetimes(plan, plan::programFor(plan, *coords));
        std::map<std::string, std::vector<float>> values;
        for (const plan::Buffer& b : plan.buffers) {
          if (!options.read(b) || live[b.id] == plan::Lifetime{}) continue;
          absl::StatusOr<std::vector<float>> local = e.localValues(b.name);
          ASSERT_TRUE(local.ok()) << local.status();
          values[b.name] = *std::move(local);
        }
        std::lock_guard<std::mutex> lock(mu);
        runs.losses[group->rank()] = std::move(losses);
        runs.values[group->rank()] = std::move(values);
        runs.peak_bytes = std::max(runs.peak_bytes, peak);
        runs.host_peak_bytes = std::max(runs.host_peak_bytes, hostPeak);
      },
      groupOptions);
  return runs;
}

}  // namespace loom::runtime::testing
