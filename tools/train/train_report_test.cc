// The training report page from a made-up run: every section is there,
// the curves carry the figures, and the page needs nothing from outside.
#include "tools/train/train_report.h"

#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace loom::train {
namespace {

std::string planPath() {
  return absl::StrCat(std::getenv("TEST_SRCDIR"),
                      "/loom/runtime/executor/testdata/llama_fsdp4/plan.json");
}

ReportInput input(const plan::Plan& plan) {
  ReportInput in;
  in.plan = &plan;
  in.title = "tiny on mesh<fsdp=4>, 4 ranks, cpu, gloo";
  for (int s = 1; s <= 6; ++s) {
    StepMetrics m;
    m.step = s;
    m.loss = 6.0 - 0.1 * s;
    m.lr = 1e-3;
    m.tokens_per_s = 1000 + s;
    m.step_s = 0.05;
    m.exposed_comm_s = 0.01;
    if (s % 3 == 0) m.eval_loss = 5.9 - 0.1 * s;
    in.steps.push_back(m);
  }
  in.memory = {{"predicted_peak_bytes", 1000000},
               {"ranks",
                {{{"rank", 0}, {"forward", 900000}, {"backward", 1000000}, {"peak", 1000000}}}}};
  return in;
}

TEST(TrainReport, DrawsEverySectionSelfContained) {
  absl::StatusOr<plan::Plan> plan = plan::loadPlan(planPath());
  ASSERT_TRUE(plan.ok()) << plan.status();
  const std::string page = renderTrainReport(input(*plan));
  for (const char* part :
       {"<!DOCTYPE html>", "Training report", "tiny on mesh&lt;fsdp=4&gt;", "<h2>Loss</h2>",
        "held-out loss", "<h2>Learning rate</h2>", "<h2>Throughput</h2>",
        "predicted and measured", "Memory per phase against the plan", "plan: 977 KiB",
        "held-out loss at step 6", "--trace=FILE"}) {
    EXPECT_NE(page.find(part), std::string::npos) << part;
  }
  // Two evaluations drawn as dots with their figures.
  EXPECT_NE(page.find("step 3: 5.6"), std::string::npos);
  EXPECT_NE(page.find("step 6: 5.3"), std::string::npos);
  // Nothing fetched: no scripts or style sheets by URL, no links out (the
  // one URL is SVG's namespace name).
  EXPECT_EQ(page.find("<script src"), std::string::npos);
  EXPECT_EQ(page.find("<link"), std::string::npos);
  size_t urls = 0;
  for (size_t at = page.find("http"); at != std::string::npos; at = page.find("http", at + 1)) {
    EXPECT_EQ(page.compare(at, 26, "http://www.w3.org/2000/svg"), 0) << page.substr(at, 60);
    ++urls;
  }
  EXPECT_GT(urls, 0u);
  // Without pipeline stages there is no bubble to show.
  EXPECT_EQ(page.find("Pipeline bubble"), std::string::npos);
}

TEST(TrainReport, DrawsTheMeasuredStepFromATrace) {
  absl::StatusOr<plan::Plan> plan = plan::loadPlan(planPath());
  ASSERT_TRUE(plan.ok()) << plan.status();
  ReportInput in = input(*plan);
  in.trace = nlohmann::json{
      {"traceEvents",
       {{{"ph", "M"}, {"name", "thread_name"}, {"pid", 0}, {"tid", 1},
         {"args", {{"name", "compute"}}}},
        {{"ph", "M"}, {"name", "thread_name"}, {"pid", 0}, {"tid", 2},
         {"args", {{"name", "comm:fsdp"}}}},
        {{"ph", "X"}, {"name", "nn.linear"}, {"cat", "forward"}, {"pid", 0}, {"tid", 1},
         {"ts", 1000.0}, {"dur", 500.0}, {"args", {{"step", 2}}}},
        {{"ph", "X"}, {"name", "all_gather"}, {"cat", "forward"}, {"pid", 0}, {"tid", 2},
         {"ts", 1100.0}, {"dur", 300.0}, {"args", {{"step", 2}}}},
        {{"ph", "M"}, {"name", "thread_name"}, {"pid", 0}, {"tid", 3},
         {"args", {{"name", "pipeline bubble"}}}},
        {{"ph", "X"}, {"name", "bubble backward mb0 (recv from stage 1)"}, {"cat", "bubble"},
         {"pid", 0}, {"tid", 3}, {"ts", 1200.0}, {"dur", 100.0}, {"args", {{"step", 2}}}},
        // An earlier step and another rank: not drawn.
        {{"ph", "X"}, {"name", "nn.old"}, {"pid", 0}, {"tid", 1}, {"ts", 0.0}, {"dur", 10.0},
         {"args", {{"step", 1}}}},
        {{"ph", "X"}, {"name", "nn.rank1"}, {"pid", 1}, {"tid", 1}, {"ts", 1000.0},
         {"dur", 10.0}, {"args", {{"step", 2}}}}}}};
  const std::string page = renderTrainReport(in);
  EXPECT_NE(page.find("measured, the last traced step (500 us"), std::string::npos);
  EXPECT_NE(page.find("nn.linear at 0 s, 500 us"), std::string::npos);
  EXPECT_NE(page.find("all_gather at 100 us, 300 us"), std::string::npos);
  EXPECT_NE(page.find(">comm:fsdp<"), std::string::npos);
  // The bubbles get their own row, under compute and above the groups,
  // whatever their thread.
  const size_t bubbleRow = page.find(">pipeline bubble<");
  ASSERT_NE(bubbleRow, std::string::npos);
  EXPECT_LT(page.find(">compute<"), bubbleRow);
  EXPECT_LT(bubbleRow, page.find(">comm:fsdp<"));
  EXPECT_NE(page.find("bubble backward mb0 (recv from stage 1) at 200 us, 100 us"),
            std::string::npos);
  EXPECT_EQ(page.find("nn.old"), std::string::npos);
  EXPECT_EQ(page.find("nn.rank1"), std::string::npos);
}

// Two stages of pp 2: each stage's bubble as a share of its step beside
// the plan's share, and rank 0's per-step bubble beside the step time.
TEST(TrainReport, DrawsEachStagesBubbleAgainstThePlan) {
  absl::StatusOr<plan::Plan> plan = plan::loadPlan(planPath());
  ASSERT_TRUE(plan.ok()) << plan.status();
  ReportInput in = input(*plan);
  for (StepMetrics& m : in.steps) m.bubble_s = 0.02;
  in.bubbles = {{"predicted_bubble_s", 0.001},
                {"predicted_step_s", 0.004},
                {"stages",
                 {{{"stage", 0}, {"ranks", {0}}, {"bubble_s", 0.3}, {"step_s", 1.0}},
                  {{"stage", 1}, {"ranks", {1}}, {"bubble_s", 0.1}, {"step_s", 1.0}}}}};
  const std::string page = renderTrainReport(in);
  for (const char* part :
       {"Pipeline bubble per stage against the plan", "the plan predicts 1 ms of a 4 ms step",
        "plan: 25.0 %", "stage 0: 30.0 % (300 ms)", "stage 1: 10.0 % (100 ms)", "300x", "100x",
        "pipeline bubble (waiting for other stages)"}) {
    EXPECT_NE(page.find(part), std::string::npos) << part;
  }
}

}  // namespace
}  // namespace loom::train
