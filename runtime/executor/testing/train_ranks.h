// Test helper: a plan trained on synthetic tokens with every rank a thread
// over Gloo (collective checks off), as the executor tests train it, with
// each rank's losses, the buffers asked for afterwards and the memory peaks.
#ifndef LOOM_RUNTIME_EXECUTOR_TESTING_TRAIN_RANKS_H_
#define LOOM_RUNTIME_EXECUTOR_TESTING_TRAIN_RANKS_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "plan/plan.h"
#include "runtime/executor/executor.h"

namespace loom::runtime::testing {

struct RankRuns {
  std::vector<std::vector<double>> losses;  // per rank, per step
  // Per rank after the last step: the local values of the buffers asked
  // for that its program holds (a pipeline stage's are its own), by name.
  std::vector<std::map<std::string, std::vector<float>>> values;
  // Over ranks, steps and phases: the device's peak and the host arena's.
  int64_t peak_bytes = 0;
  int64_t host_peak_bytes = 0;
};

struct TrainRanksOptions {
  int steps = 1;
  ExecutorOptions executor = {};
  // The feed's batch of step s (1-based).
  std::function<int64_t(int step)> batch = [](int step) { return step; };
  // Whether to read a buffer's local values after the last step.
  std::function<bool(const plan::Buffer&)> read = [](const plan::Buffer&) { return false; };
};

// Trains `plan`; a failure inside fails the calling test (gtest assertions).
RankRuns trainRanks(const plan::Plan& plan, const TrainRanksOptions& options);

}  // namespace loom::runtime::testing

#endif  // LOOM_RUNTIME_EXECUTOR_TESTING_TRAIN_RANKS_H_
