// End-to-end equality: tiny Llama and tiny GPT-2 trained for 20 steps under
// every planned layout, ranks as threads over Gloo, give the losses of the
// unsharded 1-rank plan within 1e-5 relative.
#include "runtime/executor/executor.h"
#include "runtime/executor/testing/train_ranks.h"

#include <cmath>
#include <cstdlib>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "comm/half_float.h"
#include "comm/testing/process_group_testing.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/data/token_feed.h"
#include "plan/op_table.h"
#include "tests/testing/status_matchers.h"

namespace loom::runtime {
namespace {

using ::loom::testutil::StatusIs;
using ::testing::HasSubstr;

constexpr int kSteps = 20;

std::string planPath(const std::string& name) {
  return absl::StrCat(std::getenv("TEST_SRCDIR"), "/loom/runtime/executor/testdata/", name,
                      "/plan.json");
}

struct RunResult {
  std::vector<double> losses;  // rank 0's
  std::vector<std::vector<double>> per_rank;
  int64_t peak_bytes = 0;  // max over ranks and phases
  int64_t predicted_peak = 0;
};

// Trains `name` for `steps` steps on synthetic tokens, every rank a thread.
RunResult train(const std::string& name, int steps = kSteps, ExecutorOptions options = {}) {
  absl::StatusOr<plan::Plan> plan = plan::loadPlan(planPath(name));
  EXPECT_TRUE(plan.ok()) << plan.status();
  RunResult result;
  if (!plan.ok()) return result;
  result.predicted_peak = plan->predicted.peak_bytes;
  // Two batches in turn, so that training visibly lowers the loss.
  testing::RankRuns runs = testing::trainRanks(
      *plan, {.steps = steps, .executor = options, .batch = [](int step) { return step % 2; }});
  result.per_rank = std::move(runs.losses);
  result.peak_bytes = runs.peak_bytes;
  if (!result.per_rank.empty()) result.losses = result.per_rank[0];
  return result;
}

// Every rank of `run` reports the same losses, each within `tolerance`
// (relative) of `reference`'s; prints the largest difference.
void expectCloseLosses(const RunResult& run, const RunResult& reference, double tolerance,
                       const std::string& name) {
  ASSERT_EQ(run.losses.size(), reference.losses.size()) << name;
  for (size_t r = 0; r < run.per_rank.size(); ++r) {
    EXPECT_EQ(run.per_rank[r], run.losses) << name << ": rank " << r << " disagrees with rank 0";
  }
  double worst = 0;
  for (size_t s = 0; s < reference.losses.size(); ++s) {
    const double rel =
        std::abs(run.losses[s] - reference.losses[s]) / std::abs(reference.losses[s]);
    EXPECT_LE(rel, tolerance) << name << " step " << s + 1 << ": " << run.losses[s] << " vs "
                              << reference.losses[s];
    worst = std::max(worst, rel);
  }
  std::cout << name << ": largest relative loss difference " << worst << "\n";
}

// Trains `layout` against the 1-rank `single` (trained once per name):
// losses within `tolerance`, and the planner's peak memory within 10 % of
// the measured one.
void expectLayoutMatchesSingle(const std::string& single, const std::string& layout,
                               double tolerance) {
  static std::map<std::string, RunResult> singles;
  if (!singles.count(single)) singles[single] = train(single);
  const RunResult& reference = singles[single];
  ASSERT_EQ(reference.losses.size(), static_cast<size_t>(kSteps));
  // Training must make progress, or equal losses would prove little.
  EXPECT_LT(reference.losses.back(), reference.losses.front() - 0.05);
  const RunResult run = train(layout);
  expectCloseLosses(run, reference, tolerance, layout);
  EXPECT_NEAR(static_cast<double>(run.predicted_peak), static_cast<double>(run.peak_bytes),
              0.10 * run.peak_bytes)
      << layout << ": predicted " << run.predicted_peak << " B, measured " << run.peak_bytes
      << " B";
}

class LayoutTest : public ::testing::TestWithParam<std::pair<std::string, std::string>> {};

TEST_P(LayoutTest, MatchesTheUnshardedRun) {
  expectLayoutMatchesSingle(GetParam().first, GetParam().second, 1e-5);
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, LayoutTest,
    ::testing::Values(
        std::pair{"llama_single", "llama_fsdp4"}, std::pair{"llama_single", "llama_tp2"},
        std::pair{"llama_single", "llama_fsdp2_tp2"}, std::pair{"llama_single", "llama_hsdp2x2"},
        std::pair{"gpt2_single", "gpt2_fsdp4"}, std::pair{"gpt2_single", "gpt2_tp2"},
        std::pair{"gpt2_single", "gpt2_fsdp2_tp2"}, std::pair{"gpt2_single", "gpt2_hsdp2x2"},
        std::pair{"gpt2_v251_single", "gpt2_v251_fsdp4"},
        std::pair{"gpt2_v251_single", "gpt2_v251_fsdp2_tp2"},
        // nn.transpose, and the labels resharded by a dist.all_to_all.
        std::pair{"swap_single", "swap_fsdp2"}, std::pair{"swap_single", "swap_hsdp2x2"},
        std::pair{"swap_single", "swap_fsdp2_tp2"},
        // A Hugging Face config: q/k/v biases, tied head, llama3 rope scaling.
        std::pair{"hf_qwen2_single", "hf_qwen2_fsdp2_tp2"}),
    [](const auto& info) { return info.param.second; });

// Deterministic mode: the batch-split layouts reproduce the 1-rank run bit
// for bit, losses and every parameter.
class DeterministicTest : public ::testing::TestWithParam<std::pair<std::string, std::string>> {};

TEST_P(DeterministicTest, IsBitIdenticalToTheUnshardedRun) {
  const auto& [single, layout] = GetParam();
  ExecutorOptions options;
  options.deterministic = true;
  const RunResult reference = train(single, 10, options);
  const RunResult run = train(layout, 10, options);
  ASSERT_EQ(reference.losses.size(), 10u);
  EXPECT_EQ(run.losses, reference.losses) << layout;
  // And without the mode the same layout differs in the last bits, which
  // is what the mode is for. A float loss can hide that difference for many
  // steps (gpt2_hsdp2x2's losses first differ at step 11), so these runs
  // take all kSteps steps.
  const RunResult plainSingle = train(single);
  const RunResult plainRun = train(layout);
  EXPECT_NE(plainRun.losses, plainSingle.losses) << layout;
}

INSTANTIATE_TEST_SUITE_P(Layouts, DeterministicTest,
                         ::testing::Values(std::pair{"llama_single", "llama_fsdp4"},
                                           std::pair{"llama_single", "llama_hsdp2x2"},
                                           std::pair{"gpt2_single", "gpt2_fsdp4"},
                                           std::pair{"gpt2_single", "gpt2_hsdp2x2"}),
                         [](const auto& info) { return info.param.second; });

// Activation recompute (plan-recompute): every layout with each mode gives
// the 1-rank run's losses and its predicted peak within 10 %.
INSTANTIATE_TEST_SUITE_P(Recompute, LayoutTest,
                         ::testing::Values(std::pair{"llama_single", "llama_full_fsdp4"},
                                           std::pair{"llama_single", "llama_full_tp2"},
                                           std::pair{"llama_single", "llama_full_hsdp2x2"},
                                           std::pair{"llama_single", "llama_full_fsdp2_tp2"},
                                           std::pair{"llama_single", "llama_sel_fsdp4"},
                                           std::pair{"llama_single", "llama_sel_fsdp2_tp2"},
                                           std::pair{"gpt2_single", "gpt2_full_fsdp4"},
                                           std::pair{"gpt2_single", "gpt2_full_hsdp2x2"},
                                           std::pair{"gpt2_single", "gpt2_sel_fsdp2_tp2"},
                                           std::pair{"llama_single", "llama_mix_fsdp4"},
                                           std::pair{"llama_single", "llama_mix_fsdp2_tp2"}),
                         [](const auto& info) { return info.param.second; });

// Gradient accumulation (plan-accumulate): batch 8 in micro-steps of 4
// (or 2) gives the losses of the 1-rank plan of batch 8 in one step, with
// the parameters kept gathered and the gradient reductions deferred
// between micro-steps, and the predicted peak within 10 %.
INSTANTIATE_TEST_SUITE_P(
    Accumulation, LayoutTest,
    ::testing::Values(std::pair{"accum_llama_single", "accum_llama_single_m2"},
                      std::pair{"accum_llama_single", "accum_llama_fsdp4_m2"},
                      std::pair{"accum_llama_single", "accum_llama_keep_fsdp4_m2"},
                      std::pair{"accum_llama_single", "accum_llama_defer_fsdp4_m2"},
                      std::pair{"accum_llama_single", "accum_llama_both_hsdp2x2_m2"},
                      std::pair{"accum_llama_single", "accum_llama_both_fsdp2_tp2_m2"},
                      std::pair{"accum_llama_single", "accum_llama_defer_tp2_m4"},
                      std::pair{"accum_llama_single", "accum_llama_full_both_fsdp4_m2"},
                      std::pair{"accum_gpt2_single", "accum_gpt2_both_fsdp4_m2"},
                      std::pair{"accum_gpt2_single", "accum_gpt2_keep_sp_fsdp2_tp2_m2"}),
    [](const auto& info) { return info.param.second; });

// What keeping and deferring cost in memory, predicted and measured, and
// what they save in communication (the plans' bytes per step): a table for
// docs/planner_accumulate.md.
TEST(Accumulation, KeptAndDeferredMemoryIsAsPlanned) {
  const RunResult regather = train("accum_llama_fsdp4_m2", 3);
  absl::StatusOr<plan::Plan> base = plan::loadPlan(planPath("accum_llama_fsdp4_m2"));
  ASSERT_TRUE(base.ok()) << base.status();
  std::cout << "| plan | predicted peak (B) | measured peak (B) | predicted extra | measured "
               "extra | comm bytes per step |\n| --- | ---: | ---: | ---: | ---: | ---: |\n";
  for (const char* name : {"accum_llama_fsdp4_m2", "accum_llama_keep_fsdp4_m2",
                           "accum_llama_defer_fsdp4_m2", "accum_llama_both_fsdp4_m2"}) {
    absl::StatusOr<plan::Plan> plan = plan::loadPlan(planPath(name));
    ASSERT_TRUE(plan.ok()) << plan.status();
    const RunResult run = name == std::string("accum_llama_fsdp4_m2") ? regather : train(name, 3);
    EXPECT_NEAR(static_cast<double>(run.predicted_peak), static_cast<double>(run.peak_bytes),
                0.10 * run.peak_bytes)
        << name;
    const int64_t predictedExtra = run.predicted_peak - regather.predicted_peak;
    const int64_t measuredExtra = run.peak_bytes - regather.peak_bytes;
    EXPECT_NEAR(static_cast<double>(measuredExtra), static_cast<double>(predictedExtra),
                0.10 * regather.peak_bytes)
        << name;
    // Each lever moves less than regathering every micro-step.
    if (name != std::string("accum_llama_fsdp4_m2")) {
      EXPECT_GT(measuredExtra, 0) << name;
      EXPECT_LT(plan->predicted.comm_bytes_per_rank, base->predicted.comm_bytes_per_rank) << name;
    }
    std::cout << "| " << name << " | " << run.predicted_peak << " | " << run.peak_bytes << " | "
              << predictedExtra << " | " << measuredExtra << " | "
              << plan->predicted.comm_bytes_per_rank << " |\n";
  }
}

TEST(Accumulation, DeterministicModeIsRefused) {
  absl::StatusOr<plan::Plan> plan = plan::loadPlan(planPath("accum_llama_fsdp4_m2"));
  ASSERT_TRUE(plan.ok()) << plan.status();
  comm::testing::runRanksShared(4, [&](std::shared_ptr<comm::ProcessGroup> group) {
    ExecutorOptions options;
    options.deterministic = true;
    EXPECT_THAT(Executor::create(*plan, group, options).status(),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         HasSubstr("accumulates 2 micro-batches per step")));
  });
}

// Sequence parallelism (plan-placement's sequence-parallel): each tp
// all-reduce is a reduce-scatter into sequence shards and an all-gather.
INSTANTIATE_TEST_SUITE_P(SequenceParallel, LayoutTest,
                         ::testing::Values(std::pair{"llama_single", "llama_sp_tp2"},
                                           std::pair{"llama_single", "llama_sp_fsdp2_tp2"},
                                           std::pair{"llama_single", "llama_sp_full_fsdp2_tp2"},
                                           std::pair{"gpt2_single", "gpt2_sp_tp2"},
                                           std::pair{"gpt2_single", "gpt2_sp_fsdp2_tp2"},
                                           std::pair{"gpt2_v251_single", "gpt2_v251_sp_fsdp2_tp2"},
                                           std::pair{"llama_single", "llama_sp_hsdp2x2_tp2"},
                                           std::pair{"gpt2_single", "gpt2_sp_hsdp2x2_tp2"}),
                         [](const auto& info) { return info.param.second; });

// Recompute repeats the same ops on the same inputs: under deterministic
// mode the losses are those without it, bit for bit.
class RecomputeTest : public ::testing::TestWithParam<std::pair<std::string, std::string>> {};

TEST_P(RecomputeTest, IsBitIdenticalToNoRecompute) {
  const auto& [plain, recomputed] = GetParam();
  ExecutorOptions options;
  options.deterministic = true;
  const RunResult reference = train(plain, 10, options);
  const RunResult run = train(recomputed, 10, options);
  ASSERT_EQ(reference.losses.size(), 10u);
  EXPECT_EQ(run.losses, reference.losses) << recomputed;
}

INSTANTIATE_TEST_SUITE_P(Layouts, RecomputeTest,
                         ::testing::Values(std::pair{"llama_single", "llama_full_single"},
                                           std::pair{"llama_fsdp4", "llama_full_fsdp4"},
                                           std::pair{"llama_fsdp4", "llama_sel_fsdp4"},
                                           std::pair{"llama_fsdp4", "llama_mix_fsdp4"},
                                           std::pair{"llama_hsdp2x2", "llama_full_hsdp2x2"},
                                           std::pair{"gpt2_fsdp4", "gpt2_full_fsdp4"}),
                         [](const auto& info) { return info.param.second; });

// Where activations are most of the memory (4 x 128 tokens), each mode's
// measured peak is the plan's within 10 %, and lower than without
// recompute by what the plan predicts (within 10 % of the peak without).
// docs/planner_recompute.md records the figures this prints.
TEST(RecomputeMemory, LowersThePeakAsPlanned) {
  const RunResult fsdpNone = train("act_fsdp2", 3);
  const RunResult tpNone = train("act_tp2", 3);
  std::cout << "| plan | predicted peak (B) | measured peak (B) | predicted saving | measured "
               "saving |\n| --- | ---: | ---: | ---: | ---: |\n";
  for (const auto& [name, none] : {std::pair{"act_fsdp2", &fsdpNone},
                                   {"act_full_fsdp2", &fsdpNone},
                                   {"act_sel_fsdp2", &fsdpNone},
                                   {"act_full2_fsdp2", &fsdpNone},
                                   {"act_tp2", &tpNone},
                                   {"act_full_tp2", &tpNone}}) {
    const RunResult run = train(name, 3);
    EXPECT_NEAR(static_cast<double>(run.predicted_peak), static_cast<double>(run.peak_bytes),
                0.10 * run.peak_bytes)
        << name;
    const int64_t predictedSaving = none->predicted_peak - run.predicted_peak;
    const int64_t measuredSaving = none->peak_bytes - run.peak_bytes;
    EXPECT_NEAR(static_cast<double>(measuredSaving), static_cast<double>(predictedSaving),
                0.10 * none->peak_bytes)
        << name;
    if (std::string(name).find("full") != std::string::npos) {
      EXPECT_GT(measuredSaving, 0) << name;
    }
    std::cout << "| " << name << " | " << run.predicted_peak << " | " << run.peak_bytes << " | "
              << predictedSaving << " | " << measuredSaving << " |\n";
  }
}

// Mixed precision: bf16 params, activations and collectives with f32 master
// copies and AdamW states. Every layout gives the 1-rank bf16 run's losses
// within bf16's precision (layouts round partial sums at different points),
// and the bf16 run follows the f32 run as closely.
constexpr double kBf16Tolerance = 2e-3;

class MixedPrecisionTest : public ::testing::TestWithParam<std::pair<std::string, std::string>> {};

TEST_P(MixedPrecisionTest, MatchesTheUnshardedBf16Run) {
  expectLayoutMatchesSingle(GetParam().first, GetParam().second, kBf16Tolerance);
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, MixedPrecisionTest,
    ::testing::Values(std::pair{"llama_bf16_single", "llama_bf16_fsdp4"},
                      std::pair{"llama_bf16_single", "llama_bf16_tp2"},
                      std::pair{"llama_bf16_single", "llama_bf16_fsdp2_tp2"},
                      std::pair{"llama_bf16_single", "llama_bf16_hsdp2x2"},
                      std::pair{"gpt2_v251_bf16_single", "gpt2_v251_bf16_fsdp2_tp2"},
                      std::pair{"llama_bf16_single", "llama_bf16_gradf32_fsdp4"},
                      std::pair{"llama_bf16_single", "llama_bf16_gradf32_hsdp2x2"},
                      std::pair{"llama_bf16_single", "llama_bf16_gradf32_fsdp2_tp2"},
                      std::pair{"llama_bf16_single", "llama_bf16_full_fsdp2_tp2"}),
    [](const auto& info) { return info.param.second; });

// Gradient accumulation in bf16: the sums of bf16 gradients.
TEST(Accumulation, Bf16MatchesTheUnshardedBf16Run) {
  expectLayoutMatchesSingle("accum_llama_bf16_single", "accum_llama_bf16_both_fsdp4_m2",
                            kBf16Tolerance);
}

TEST(MixedPrecision, FollowsTheF32Run) {
  const RunResult f32 = train("llama_single");
  const RunResult bf16 = train("llama_bf16_single");
  expectCloseLosses(bf16, f32, kBf16Tolerance, "llama bf16 against f32");
  // Not the same numbers: the bf16 run does round.
  EXPECT_NE(bf16.losses, f32.losses);
}

TEST(MixedPrecision, ParamsAreTheirMasterCopiesRounded) {
  absl::StatusOr<plan::Plan> plan = plan::loadPlan(planPath("llama_bf16_fsdp4"));
  ASSERT_TRUE(plan.ok()) << plan.status();
  comm::testing::runRanksShared(4, [&](std::shared_ptr<comm::ProcessGroup> group) {
    absl::StatusOr<std::unique_ptr<Executor>> executor = Executor::create(*plan, group);
    ASSERT_TRUE(executor.ok()) << executor.status();
    Executor& e = **executor;
    const data::RowRange rows = e.batchRows();
    std::vector<int32_t> ids(rows.count * e.seqLength()), labels(ids.size());
    for (size_t t = 0; t < ids.size(); ++t) {
      ids[t] = static_cast<int32_t>((t * 7 + group->rank()) % 64);
      labels[t] = static_cast<int32_t>((t * 5 + 1) % 64);
    }
    for (int step = 1; step <= 3; ++step) ASSERT_TRUE(e.step(step, ids.data(), labels.data()).ok());
    int checked = 0;
    for (const plan::Buffer& b : e.plan().buffers) {
      if (b.role != plan::BufferRole::kParam) continue;
      ASSERT_EQ(b.dtype, comm::DType::kBFloat16) << b.name;
      absl::StatusOr<std::vector<float>> param = e.localValues(b.name);
      absl::StatusOr<std::vector<float>> master = e.localValues("master:" + b.name);
      ASSERT_TRUE(param.ok() && master.ok()) << b.name;
      ASSERT_EQ(param->size(), master->size());
      bool moved = false;
      for (size_t i = 0; i < param->size(); ++i) {
        ASSERT_EQ((*param)[i], comm::bfloat16ToFloat(comm::floatToBfloat16((*master)[i])))
            << b.name << "[" << i << "]";
        moved |= (*param)[i] != (*master)[i];
      }
      checked += moved;
    }
    // Master copies hold more than bf16 can: some differ from their param.
    EXPECT_GT(checked, 0);
  });
}

TEST(MixedPrecision, DeterministicModeRefusesBf16Plans) {
  absl::StatusOr<plan::Plan> plan = plan::loadPlan(planPath("llama_bf16_single"));
  ASSERT_TRUE(plan.ok()) << plan.status();
  comm::testing::runRanksShared(1, [&](std::shared_ptr<comm::ProcessGroup> group) {
    ExecutorOptions options;
    options.deterministic = true;
    EXPECT_THAT(Executor::create(*plan, group, options).status(),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("is bf16")));
  });
}

TEST(ExecutorTest, DeterministicModeRefusesAModelThatMovesTheBatchDim) {
  absl::StatusOr<plan::Plan> plan = plan::loadPlan(planPath("swap_fsdp2"));
  ASSERT_TRUE(plan.ok()) << plan.status();
  comm::testing::runRanksShared(2, [&](std::shared_ptr<comm::ProcessGroup> group) {
    ExecutorOptions options;
    options.deterministic = true;
    EXPECT_THAT(Executor::create(*plan, group, options).status(),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("this transpose moves it")));
  });
}

TEST(ExecutorTest, DeterministicModeRefusesTensorParallelism) {
  absl::StatusOr<plan::Plan> plan = plan::loadPlan(planPath("llama_tp2"));
  ASSERT_TRUE(plan.ok()) << plan.status();
  comm::testing::runRanksShared(2, [&](std::shared_ptr<comm::ProcessGroup> group) {
    ExecutorOptions options;
    options.deterministic = true;
    EXPECT_THAT(Executor::create(*plan, group, options).status(),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("tensor parallelism")));
  });
}

// The op table (plan/op_table.h) and the executor's binders list
// the same ops: a plan that loads can be bound.
TEST(ExecutorTest, BindsEveryOpOfTheOpTable) {
  for (const plan::OpInfo& info : plan::opTable()) {
    EXPECT_TRUE(Executor::binds(info.name)) << info.name << " has no binder";
  }
  EXPECT_FALSE(Executor::binds("nn.conv2d"));
}

TEST(ExecutorTest, RefusesAPlanForAnotherWorldSize) {
  absl::StatusOr<plan::Plan> plan = plan::loadPlan(planPath("llama_fsdp4"));
  ASSERT_TRUE(plan.ok()) << plan.status();
  comm::testing::runRanksShared(2, [&](std::shared_ptr<comm::ProcessGroup> group) {
    EXPECT_THAT(Executor::create(*plan, group).status(),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("the plan is for 4 ranks")));
  });
}

TEST(ExecutorTest, ClippingReportsTheSameGlobalNormOnEveryLayout) {
  ExecutorOptions options;
  options.max_grad_norm = 0.5;
  const RunResult single = train("llama_single", 3, options);
  const RunResult sharded = train("llama_fsdp2_tp2", 3, options);
  expectCloseLosses(sharded, single, 1e-5, "llama_fsdp2_tp2 clipped");
}

// A learning-rate schedule scales AdamW's rate per step, the same way on
// every layout: fsdp 4 follows the 1-rank run, and the schedule changes
// the losses.
TEST(ExecutorTest, LearningRateScheduleIsTheSameOnEveryLayout) {
  ExecutorOptions options;
  options.lr_schedule = {
      .warmup_steps = 2, .decay = optim::LrDecay::kCosine, .decay_end_step = 8, .min_ratio = 0.1};
  const RunResult single = train("llama_single", 8, options);
  const RunResult sharded = train("llama_fsdp4", 8, options);
  expectCloseLosses(sharded, single, 1e-5, "llama_fsdp4 with a cosine schedule");
  const RunResult constant = train("llama_single", 8);
  EXPECT_NE(single.losses[1], constant.losses[1]);
}

TEST(ExecutorTest, TracesComputeAndCommunication) {
  absl::StatusOr<plan::Plan> plan = plan::loadPlan(planPath("llama_fsdp4"));
  ASSERT_TRUE(plan.ok()) << plan.status();
  comm::testing::runRanksShared(4, [&](std::shared_ptr<comm::ProcessGroup> group) {
    ExecutorOptions options;
    options.trace = true;
    absl::StatusOr<std::unique_ptr<Executor>> executor = Executor::create(*plan, group, options);
    ASSERT_TRUE(executor.ok()) << executor.status();
    const data::RowRange rows = (*executor)->batchRows();
    std::vector<int32_t> ids(rows.count * (*executor)->seqLength(), 3), labels(ids.size(), 5);
    ASSERT_TRUE((*executor)->step(1, ids.data(), labels.data()).ok());
    absl::StatusOr<nlohmann::json> trace = (*executor)->trace().merge(*group);
    ASSERT_TRUE(trace.ok()) << trace.status();
    if (group->rank() != 0) return;
    int compute = 0, comm = 0;
    for (const nlohmann::json& e : (*trace)["traceEvents"]) {
      if (e["ph"] != "X") continue;
      (e["tid"] == 1 ? compute : comm)++;
    }
    EXPECT_GT(compute, 100);
    EXPECT_GT(comm, 4 * 8);  // every rank's gathers and reduce-scatters
    const nlohmann::json& summary = (*trace)["loomSummary"];
    EXPECT_EQ(summary["ranks"].size(), 4u);
    bool gathers = false;
    for (const nlohmann::json& c : summary["collectives"]) gathers |= c["kind"] == "all_gather";
    EXPECT_TRUE(gathers) << summary.dump();
  });
}

}  // namespace
}  // namespace loom::runtime
