// Offload on the CPU runtime (docs/planner_offload.md): tiny Llama plans
// with their AdamW states in the host arena, the gradients copied there and
// the parameters copied back, train bit for bit like the same plans
// without offload (ranks as threads over Gloo): every loss, parameter and
// state; and the host arena and the device memory measure what the plan
// predicts, within 10 %.
#include <cstdlib>
#include <iostream>
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

constexpr int kSteps = 6;

plan::Plan loadTestPlan(const std::string& name) {
  absl::StatusOr<plan::Plan> plan = plan::loadPlan(absl::StrCat(
      std::getenv("TEST_SRCDIR"), "/loom/runtime/executor/testdata/", name, "/plan.json"));
  EXPECT_TRUE(plan.ok()) << plan.status();
  return plan.ok() ? *std::move(plan) : plan::Plan{};
}

// Trains `plan` for kSteps steps, every rank a thread, on two batches in
// turn, and reads every parameter and AdamW moment after (the master
// copies are compared through the parameters they round to).
testing::RankRuns train(const plan::Plan& plan, ExecutorOptions options = {}) {
  return testing::trainRanks(
      plan, {.steps = kSteps,
             .executor = options,
             .batch = [](int step) { return step % 2; },
             .read = [](const plan::Buffer& b) {
               return b.role == plan::BufferRole::kParam || b.name.rfind("exp_avg:", 0) == 0 ||
                      b.name.rfind("exp_avg_sq:", 0) == 0;
             }});
}

// Every rank's losses, parameters and moments, bit for bit.
void expectBitIdentical(const testing::RankRuns& offloaded, const testing::RankRuns& reference,
                        const std::string& name) {
  ASSERT_EQ(offloaded.losses.size(), reference.losses.size()) << name;
  for (size_t r = 0; r < reference.losses.size(); ++r) {
    EXPECT_EQ(offloaded.losses[r], reference.losses[r]) << name << ": rank " << r << "'s losses";
    EXPECT_EQ(offloaded.values[r].size(), reference.values[r].size()) << name;
    for (const auto& [buffer, values] : reference.values[r]) {
      auto it = offloaded.values[r].find(buffer);
      ASSERT_NE(it, offloaded.values[r].end()) << name << ": no " << buffer;
      EXPECT_EQ(it->second, values) << name << ": rank " << r << "'s " << buffer;
    }
  }
  // Training must make progress, or equal losses would prove little.
  EXPECT_LT(reference.losses[0].back(), reference.losses[0].front() - 0.05) << name;
}

class OffloadTest : public ::testing::TestWithParam<std::pair<std::string, std::string>> {};

TEST_P(OffloadTest, TrainsBitForBitLikeThePlanWithoutIt) {
  const auto& [plain, offloaded] = GetParam();
  const plan::Plan offloadedPlan = loadTestPlan(offloaded);
  ASSERT_TRUE(offloadedPlan.predicted.offload.has_value()) << offloaded;
  expectBitIdentical(train(offloadedPlan), train(loadTestPlan(plain)), offloaded);
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, OffloadTest,
    ::testing::Values(std::pair{"llama_single", "llama_offload_single"},
                      std::pair{"llama_fsdp2", "llama_offload_fsdp2"},
                      std::pair{"llama_fsdp4", "llama_offload_fsdp4"},
                      std::pair{"llama_fsdp2_tp2", "llama_offload_fsdp2_tp2"},
                      // bf16 parameters: the f32 master rounded on the host.
                      std::pair{"llama_bf16_single", "llama_bf16_offload_single"},
                      std::pair{"llama_bf16_fsdp4", "llama_bf16_offload_fsdp4"},
                      // Two micro-steps: the gradient copies in the last.
                      std::pair{"accum_llama_fsdp4_m2", "accum_llama_offload_fsdp4_m2"},
                      std::pair{"accum_llama_both_fsdp4_m2", "accum_llama_offload_both_fsdp4_m2"},
                      // Pipeline stages (1F1B over four micro-batches).
                      std::pair{"pipe_pp2_fsdp2", "pipe_offload_pp2_fsdp2"}),
    [](const auto& info) { return info.param.second; });

// Clipping reads the global norm over the host gradients and scales a copy
// of each on the host, as the device step does.
TEST(OffloadClipping, TrainsBitForBitLikeThePlanWithoutIt) {
  ExecutorOptions options;
  options.max_grad_norm = 0.5;
  expectBitIdentical(train(loadTestPlan("llama_offload_fsdp4"), options),
                     train(loadTestPlan("llama_fsdp4"), options), "clipped llama_offload_fsdp4");
}

// The host AdamW's threads split the elements, never an element's
// arithmetic.
TEST(OffloadThreads, DoNotChangeTheBits) {
  const plan::Plan plan = loadTestPlan("llama_offload_fsdp2");
  ExecutorOptions one, three;
  one.host_threads = 1;
  three.host_threads = 3;
  expectBitIdentical(train(plan, three), train(plan, one), "llama_offload_fsdp2, 3 threads");
}

// The host arena holds the states, the master copies and the gradients in
// flight, the device what is left: each measured peak within 10 % of the
// plan's, and the device's below the plan without offload.
TEST(OffloadMemory, HostAndDevicePeaksAreAsPlanned) {
  std::cout << "| plan | device predicted (B) | device measured (B) | host predicted (B) | "
               "host measured (B) | device without offload (B) |\n"
               "| --- | ---: | ---: | ---: | ---: | ---: |\n";
  for (const auto& [plain, name] :
       {std::pair{"llama_fsdp2", "llama_offload_fsdp2"},
        std::pair{"llama_bf16_fsdp4", "llama_bf16_offload_fsdp4"},
        std::pair{"accum_llama_both_fsdp4_m2", "accum_llama_offload_both_fsdp4_m2"}}) {
    const plan::Plan plan = loadTestPlan(name);
    ASSERT_TRUE(plan.predicted.offload.has_value()) << name;
    const testing::RankRuns run = train(plan);
    const testing::RankRuns without = train(loadTestPlan(plain));
    const int64_t device = plan.predicted.peak_bytes;
    const int64_t host = plan.predicted.offload->host_peak_bytes;
    EXPECT_NEAR(static_cast<double>(device), static_cast<double>(run.peak_bytes),
                0.10 * static_cast<double>(run.peak_bytes))
        << name << ": device";
    EXPECT_NEAR(static_cast<double>(host), static_cast<double>(run.host_peak_bytes),
                0.10 * static_cast<double>(run.host_peak_bytes))
        << name << ": host";
    EXPECT_LT(run.peak_bytes, without.peak_bytes) << name;
    EXPECT_EQ(without.host_peak_bytes, 0) << plain;
    std::cout << "| " << name << " | " << device << " | " << run.peak_bytes << " | " << host
              << " | " << run.host_peak_bytes << " | " << without.peak_bytes << " |\n";
  }
}

TEST(OffloadTest, DeterministicModeIsRefused) {
  const plan::Plan plan = loadTestPlan("llama_offload_single");
  comm::testing::runRanksShared(1, [&](std::shared_ptr<comm::ProcessGroup> group) {
    ExecutorOptions options;
    options.deterministic = true;
    EXPECT_THAT(Executor::create(plan, group, options).status(),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         HasSubstr("this plan offloads its optimizer states to the host")));
  });
}

}  // namespace
}  // namespace loom::runtime
