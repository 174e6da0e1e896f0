// Stage programs in the executor: the hand-made two-stage pipeline of
// plan/testing/two_stage.h on 2 ranks as threads over Gloo against the same
// model as one program on 1 rank. Each stage feeds only the inputs it
// reads, holds only its own parameter, and every rank reports the loss the
// last stage computes; with 1, 2 and 4 micro-batches in GPipe and 1F1B
// order the losses and parameters are the one program's bit for bit.
// Clipping sees the global norm and evaluation runs across the stages. A
// tied table (the head reading the embedding) has a replica on each stage:
// both stay bit-identical, are saved and counted in the norm once.
// The measured trace shows each stage's bubbles where its schedule waits.
#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "comm/testing/process_group_testing.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "plan/testing/two_stage.h"
#include "runtime/executor/executor.h"
#include "runtime/executor/trace_recorder.h"
#include "tests/testing/status_matchers.h"

namespace loom::runtime {
namespace {

using ::loom::testutil::StatusIs;
using ::loom::plan::testing::PipelineOrder;
using ::loom::plan::testing::TwoStageOptions;
using ::testing::UnorderedElementsAre;

constexpr int kSteps = 5;

struct Rank {
  std::vector<double> losses, grad_norms, eval_losses, bubble_seconds;
  std::map<std::string, std::vector<float>> params;  // the ones this rank holds
  std::vector<std::string> saved;                    // checkpointShards()'s names
  // Rank 0, with options.trace: the merged trace.
  nlohmann::json trace;
};

// Trains the plan for kSteps steps on fixed tokens (a different batch per
// step and micro-batch), evaluating after each; every rank a thread.
std::vector<Rank> train(const TwoStageOptions& shape, ExecutorOptions options = {}) {
  absl::StatusOr<plan::Plan> plan = plan::testing::twoStagePlan(shape);
  EXPECT_TRUE(plan.ok()) << plan.status();
  if (!plan.ok()) return {};
  std::vector<Rank> ranks(plan->worldSize());
  std::mutex mu;
  comm::ProcessGroupOptions pgOptions;
  pgOptions.checks = comm::CollectiveChecks::kOff;
  comm::testing::runRanksShared(
      static_cast<int>(plan->worldSize()),
      [&](std::shared_ptr<comm::ProcessGroup> group) {
        absl::StatusOr<std::unique_ptr<Executor>> executor =
            Executor::create(*plan, group, options);
        ASSERT_TRUE(executor.ok()) << executor.status();
        Executor& e = **executor;
        // Every stage sees the same rows: pp coordinates do not split the batch.
        ASSERT_EQ(e.batchRows().begin, 0);
        ASSERT_EQ(e.batchRows().count, shape.batch);
        Rank r;
        const int64_t tokens = shape.batch * shape.seq;
        std::vector<int32_t> ids(e.microBatches() * tokens), labels(ids.size());
        for (int step = 1; step <= kSteps; ++step) {
          for (size_t t = 0; t < ids.size(); ++t) {
            ids[t] = static_cast<int32_t>((t * 7 + step * 3) % shape.vocab);
            labels[t] = static_cast<int32_t>((t * 5 + step) % shape.vocab);
          }
          absl::StatusOr<StepResult> result = e.step(step, ids.data(), labels.data());
          ASSERT_TRUE(result.ok()) << result.status();
          r.losses.push_back(result->loss);
          r.grad_norms.push_back(result->grad_norm);
          r.bubble_seconds.push_back(result->bubble_seconds);
          absl::StatusOr<EvalResult> eval = e.evaluate(step, ids.data(), labels.data());
          ASSERT_TRUE(eval.ok()) << eval.status();
          r.eval_losses.push_back(eval->loss);
        }
        std::set<std::string> names;
        for (const plan::Buffer& b : plan->buffers) {
          if (b.role == plan::BufferRole::kParam) names.insert(b.name);
        }
        for (const std::string& name : names) {
          absl::StatusOr<std::vector<float>> values = e.localValues(name);
          if (values.ok()) {
            r.params[name] = *std::move(values);
          } else {
            EXPECT_THAT(values.status(), StatusIs(absl::StatusCode::kFailedPrecondition, ::testing::HasSubstr("is not held between steps")));
          }
        }
        absl::StatusOr<std::vector<checkpoint::ShardView>> shards = e.checkpointShards();
        ASSERT_TRUE(shards.ok()) << shards.status();
        for (const checkpoint::ShardView& view : *shards) r.saved.push_back(view.name);
        if (options.trace) {
          absl::StatusOr<nlohmann::json> trace = e.trace().merge(*group);
          ASSERT_TRUE(trace.ok()) << trace.status();
          r.trace = *std::move(trace);
        }
        std::lock_guard<std::mutex> lock(mu);
        ranks[group->rank()] = std::move(r);
      },
      pgOptions);
  return ranks;
}

TwoStageOptions shapeOf(int64_t stages, int64_t micro_batches, PipelineOrder order,
                        bool tied = false) {
  TwoStageOptions shape;
  shape.stages = stages;
  shape.micro_batches = micro_batches;
  shape.order = order;
  shape.tied = tied;
  return shape;
}

// Relative distance of b from a, element-wise at most.
double maxRelative(const std::vector<float>& a, const std::vector<float>& b) {
  double worst = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    worst =
        std::max(worst, std::abs(double{a[i]} - b[i]) / std::max(1e-30, std::abs(double{a[i]})));
  }
  return a.size() == b.size() ? worst : 1.0;
}

struct Case {
  int64_t micro_batches;
  PipelineOrder order;
};

std::string caseName(const ::testing::TestParamInfo<Case>& info) {
  return absl::StrCat(info.param.order == PipelineOrder::kGPipe ? "GPipe" : "OneFOneB",
                      info.param.micro_batches);
}

class TwoStageTest : public ::testing::TestWithParam<Case> {};

TEST_P(TwoStageTest, GivesTheOneProgramLossesAndParameters) {
  const auto [micro_batches, order] = GetParam();
  const std::vector<Rank> one = train(shapeOf(1, micro_batches, order));
  const std::vector<Rank> two = train(shapeOf(2, micro_batches, order));
  ASSERT_EQ(one.size(), 1u);
  ASSERT_EQ(two.size(), 2u);
  ASSERT_EQ(one[0].losses.size(), static_cast<size_t>(kSteps));
  EXPECT_NE(one[0].losses.front(), one[0].losses.back());
  for (int rank = 0; rank < 2; ++rank) {
    // Stage 0 does not compute the loss, yet reports it.
    EXPECT_EQ(two[rank].losses, one[0].losses) << "rank " << rank;
    EXPECT_EQ(two[rank].eval_losses, one[0].eval_losses) << "rank " << rank;
  }
  // Each stage holds, steps and saves its own parameter only.
  EXPECT_THAT(two[0].saved,
              UnorderedElementsAre("embed.weight", "exp_avg:embed.weight", "exp_avg_sq:embed.weight"));
  EXPECT_THAT(two[1].saved,
              UnorderedElementsAre("head.weight", "exp_avg:head.weight", "exp_avg_sq:head.weight"));
  ASSERT_EQ(two[0].params.size(), 1u);
  ASSERT_EQ(two[1].params.size(), 1u);
  EXPECT_EQ(two[0].params.at("embed.weight"), one[0].params.at("embed.weight"));
  EXPECT_EQ(two[1].params.at("head.weight"), one[0].params.at("head.weight"));
}

INSTANTIATE_TEST_SUITE_P(Schedules, TwoStageTest,
                         ::testing::Values(Case{1, PipelineOrder::kGPipe},
                                           Case{2, PipelineOrder::kGPipe},
                                           Case{4, PipelineOrder::k1F1B},
                                           Case{4, PipelineOrder::kGPipe}),
                         caseName);

// Trains `shape` (two stages) and its one program, clipped at a threshold
// the norm exceeds; expects every rank's norms and losses to be the one
// program's within rounding (the norm's sum is taken in another order).
// Returns the two stages' ranks.
std::vector<Rank> expectClippedAsOneProgram(TwoStageOptions shape) {
  ExecutorOptions options;
  options.max_grad_norm = 0.005;
  const std::vector<Rank> two = train(shape, options);
  shape.stages = 1;
  const std::vector<Rank> one = train(shape, options);
  EXPECT_EQ(two.size(), 2u);
  if (one.size() != 1u || two.size() != 2u) return two;
  EXPECT_GT(one[0].grad_norms.front(), options.max_grad_norm);
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_EQ(two[rank].grad_norms.size(), one[0].grad_norms.size());
    for (size_t s = 0; s < one[0].grad_norms.size() && s < two[rank].grad_norms.size(); ++s) {
      EXPECT_NEAR(two[rank].grad_norms[s], one[0].grad_norms[s], 1e-9 * one[0].grad_norms[s])
          << "rank " << rank << " step " << s + 1;
      EXPECT_NEAR(two[rank].losses[s], one[0].losses[s], 1e-6 * one[0].losses[s])
          << "rank " << rank << " step " << s + 1;
    }
  }
  return two;
}

// Every stage's gradients count once in the norm, so the two stages clip
// as the one program does.
TEST(TwoStageTest, ClipsByTheGlobalNorm) {
  expectClippedAsOneProgram(shapeOf(2, 2, PipelineOrder::k1F1B));
}

class TiedTest : public ::testing::TestWithParam<Case> {};

// The head reads the embedding table: stage 1 holds a replica, each stage
// accumulates its part of the gradient, the optimizer block adds the
// parts. The replicas stay bit-identical and only stage 0 saves the table.
// With one micro-batch the sum is the one program's bit for bit (it adds
// the same two parts, and a + b == b + a); with several, the one program
// adds the parts per micro-batch and the stages after accumulating them,
// so the results agree within rounding.
TEST_P(TiedTest, ReplicasStayIdenticalAndTrainAsOneProgram) {
  const auto [micro_batches, order] = GetParam();
  const std::vector<Rank> one = train(shapeOf(1, micro_batches, order, true));
  const std::vector<Rank> two = train(shapeOf(2, micro_batches, order, true));
  ASSERT_EQ(one.size(), 1u);
  ASSERT_EQ(two.size(), 2u);
  EXPECT_NE(one[0].losses.front(), one[0].losses.back());
  const std::vector<float>& table = one[0].params.at("embed.weight");
  ASSERT_EQ(two[0].params.size(), 1u);
  ASSERT_EQ(two[1].params.size(), 1u);
  EXPECT_EQ(two[0].params.at("embed.weight"), two[1].params.at("embed.weight"));
  EXPECT_NE(two[0].params.at("embed.weight"), std::vector<float>(table.size(), 0.0f));
  EXPECT_THAT(two[0].saved, UnorderedElementsAre("embed.weight", "exp_avg:embed.weight",
                                                 "exp_avg_sq:embed.weight"));
  EXPECT_THAT(two[1].saved, ::testing::IsEmpty());
  for (int rank = 0; rank < 2; ++rank) {
    if (micro_batches == 1) {
      EXPECT_EQ(two[rank].losses, one[0].losses) << "rank " << rank;
      EXPECT_EQ(two[rank].params.at("embed.weight"), table) << "rank " << rank;
      continue;
    }
    for (size_t s = 0; s < one[0].losses.size(); ++s) {
      EXPECT_NEAR(two[rank].losses[s], one[0].losses[s], 1e-6 * one[0].losses[s])
          << "rank " << rank << " step " << s + 1;
    }
    EXPECT_LT(maxRelative(table, two[rank].params.at("embed.weight")), 1e-4) << "rank " << rank;
  }
}

INSTANTIATE_TEST_SUITE_P(Schedules, TiedTest,
                         ::testing::Values(Case{1, PipelineOrder::kGPipe},
                                           Case{4, PipelineOrder::k1F1B},
                                           Case{4, PipelineOrder::kGPipe}),
                         caseName);

// The summed table gradient is one tensor held by two stages: the norm
// counts it once, as the one program does.
TEST(TiedTest, ClipsByTheGlobalNorm) {
  const std::vector<Rank> two =
      expectClippedAsOneProgram(shapeOf(2, 1, PipelineOrder::k1F1B, true));
  ASSERT_EQ(two.size(), 2u);
  EXPECT_EQ(two[0].params.at("embed.weight"), two[1].params.at("embed.weight"));
}

// A slice of the merged trace.
struct Slice {
  std::string name, block;
  int64_t micro_batch = -1;
  double start = 0, end = 0;
};

// Rank `rank`'s slices of one step: the compute ops and the bubbles, each
// in time order.
struct StepSlices {
  std::vector<Slice> compute, bubbles;
};

StepSlices slicesOf(const nlohmann::json& trace, int rank, int64_t step) {
  std::map<int, std::string> tracks;
  for (const nlohmann::json& e : trace["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "thread_name" && e["pid"] == rank) {
      tracks[e["tid"].get<int>()] = e["args"]["name"].get<std::string>();
    }
  }
  StepSlices out;
  for (const nlohmann::json& e : trace["traceEvents"]) {
    if (e["ph"] != "X" || e["pid"] != rank || e["args"]["step"] != step) continue;
    const nlohmann::json& args = e["args"];
    const Slice slice{.name = e["name"].get<std::string>(),
                      .block = args.value("block", ""),
                      .micro_batch = args.value("micro_batch", int64_t{-1}),
                      .start = e["ts"].get<double>(),
                      .end = e["ts"].get<double>() + e["dur"].get<double>()};
    const std::string& track = tracks[e["tid"].get<int>()];
    // A wait for a transfer sits on the compute track too; it has the
    // transfer's axes.
    if (track == "compute" && !args.contains("axes")) out.compute.push_back(slice);
    if (track == kBubbleTrack) out.bubbles.push_back(slice);
  }
  for (std::vector<Slice>* list : {&out.compute, &out.bubbles}) {
    std::sort(list->begin(), list->end(),
              [](const Slice& a, const Slice& b) { return a.start < b.start; });
  }
  return out;
}

// The compute of one block run.
std::vector<Slice> runOf(const StepSlices& slices, const std::string& block, int64_t micro) {
  std::vector<Slice> run;
  for (const Slice& s : slices.compute) {
    if (s.block == block && s.micro_batch == micro) run.push_back(s);
  }
  return run;
}

// The first bubble of block run (block, micro), or null.
const Slice* bubbleOf(const StepSlices& slices, const std::string& block, int64_t micro) {
  for (const Slice& s : slices.bubbles) {
    if (s.block == block && s.micro_batch == micro) return &s;
  }
  return nullptr;
}

// A block run: its block and micro-batch.
struct Run {
  std::string block;
  int64_t micro_batch = 0;
};

// Expects `wait` after every compute op of run `after` and before every
// one of run `before`.
void expectBetween(const StepSlices& slices, const Slice& wait, const Run& after,
                   const Run& before) {
  const std::vector<Slice> earlier = runOf(slices, after.block, after.micro_batch);
  const std::vector<Slice> later = runOf(slices, before.block, before.micro_batch);
  ASSERT_FALSE(earlier.empty()) << after.block << " mb" << after.micro_batch;
  ASSERT_FALSE(later.empty()) << before.block << " mb" << before.micro_batch;
  EXPECT_GE(wait.start, earlier.back().end) << wait.name;
  EXPECT_LE(wait.end, later.front().start) << wait.name;
}

ExecutorOptions traced() {
  ExecutorOptions options;
  options.trace = true;
  return options;
}

// GPipe: stage 0 runs every forward, then waits for micro-batch 0's
// gradient, which stage 1 sends only after its last forward and first
// backward; stage 1 starts each step waiting for micro-batch 0's
// activation.
TEST(TwoStageTest, TracesGPipeBubblesWhereTheScheduleWaits) {
  const std::vector<Rank> ranks = train(shapeOf(2, 4, PipelineOrder::kGPipe), traced());
  ASSERT_EQ(ranks.size(), 2u);
  const nlohmann::json& trace = ranks[0].trace;
  for (int64_t step = 1; step <= kSteps; ++step) {
    SCOPED_TRACE(absl::StrCat("step ", step));
    const StepSlices first = slicesOf(trace, 0, step);
    const Slice* wait = bubbleOf(first, "backward", 0);
    ASSERT_NE(wait, nullptr);
    EXPECT_EQ(wait->name, "bubble backward mb0 (recv from stage 1)");
    expectBetween(first, *wait, {"forward", 3}, {"backward", 0});
    // Stage 1 has to run a forward and a backward before the gradient
    // exists, so the wait cannot be empty.
    EXPECT_GT(wait->end, wait->start);
    EXPECT_GT(ranks[0].bubble_seconds[step - 1], 0);

    const StepSlices last = slicesOf(trace, 1, step);
    ASSERT_FALSE(last.bubbles.empty());
    ASSERT_FALSE(last.compute.empty());
    EXPECT_EQ(last.bubbles.front().name, "bubble forward mb0 (recv from stage 0)");
    EXPECT_LE(last.bubbles.front().end, last.compute.front().start);
    // The step ends in a wait for the stage still running.
    EXPECT_EQ(last.bubbles.back().name, "bubble: waits for the other stages to end the step");
  }
  for (const nlohmann::json& rank : trace["loomSummary"]["ranks"]) {
    EXPECT_GT(rank["bubble_ms"].get<double>(), 0) << rank;
  }
}

// 1F1B: stage 0 runs one forward ahead, so micro-batch 0's gradient is
// waited for between the forwards of micro-batches 1 and 2.
TEST(TwoStageTest, Traces1F1BBubblesWhereTheScheduleWaits) {
  const std::vector<Rank> ranks = train(shapeOf(2, 4, PipelineOrder::k1F1B), traced());
  ASSERT_EQ(ranks.size(), 2u);
  for (int64_t step = 1; step <= kSteps; ++step) {
    SCOPED_TRACE(absl::StrCat("step ", step));
    const StepSlices first = slicesOf(ranks[0].trace, 0, step);
    const Slice* wait = bubbleOf(first, "backward", 0);
    ASSERT_NE(wait, nullptr);
    expectBetween(first, *wait, {"forward", 1}, {"forward", 2});
  }
}

// One program waits for no stage: no bubble, in the trace or the step.
TEST(TwoStageTest, OneProgramHasNoBubble) {
  const std::vector<Rank> one = train(shapeOf(1, 4, PipelineOrder::kGPipe), traced());
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].bubble_seconds, std::vector<double>(kSteps, 0.0));
  const StepSlices slices = slicesOf(one[0].trace, 0, 1);
  EXPECT_FALSE(slices.compute.empty());
  EXPECT_TRUE(slices.bubbles.empty());
  EXPECT_EQ(one[0].trace["loomSummary"]["ranks"][0]["bubble_ms"], 0.0);
}

}  // namespace
}  // namespace loom::runtime
