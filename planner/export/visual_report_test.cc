// Tests of the HTML pages: a real plan (tiny model, fsdp=2 x tp=2, made by
// //tools:plan) renders to a well-formed page with one rect per device and
// its legends; names are escaped; every missing field is named; meshes of
// other ranks and sizes draw every device; the search page highlights the
// winner and the memory limit.
#include "planner/export/visual_report.h"

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "plan/plan.h"
#include "tests/testing/status_matchers.h"

namespace loom::planner::visual {
namespace {

using ::loom::testutil::StatusIs;
using ::testing::HasSubstr;
using ::testing::Not;

plan::Plan tinyPlan() {
  const std::string path = absl::StrCat(std::getenv("TEST_SRCDIR"),
                                        "/loom/planner/export/testdata/tiny_fsdp2_tp2.plan.json");
  absl::StatusOr<plan::Plan> plan = plan::loadPlan(path);
  EXPECT_TRUE(plan.ok()) << plan.status();
  return plan.ok() ? *plan : plan::Plan();
}

// A plan with only what the page draws: `shape` over `axes`, one forward
// op and one collective per axis.
plan::Plan minimalPlan(const std::vector<int64_t>& shape, const std::vector<std::string>& axes,
                       int64_t devices_per_host) {
  plan::Plan p;
  p.model = "m";
  p.mesh = *mesh::DeviceMesh::create(shape, axes);
  p.topology.hosts = (p.worldSize() + devices_per_host - 1) / devices_per_host;
  p.topology.devices_per_host = devices_per_host;
  p.topology.device = "h100";
  p.topology.memory_bytes = int64_t{80} << 30;
  plan::Buffer& weight = p.buffers.emplace_back();
  weight.name = "w";
  weight.bytes = 1 << 20;
  weight.role = plan::BufferRole::kParam;
  plan::Program& program = p.programs.emplace_back();
  plan::Block& forward = program.blocks.emplace_back();
  forward.name = "forward";
  auto add = [&](const char* op, double start, double duration) -> plan::Instruction& {
    plan::Instruction& in = forward.instructions.emplace_back();
    in.op = op;
    in.info = plan::findOp(op);
    in.start_s = start;
    in.duration_s = duration;
    return in;
  };
  add("nn.linear", 0.0, 0.002);
  double t = 0.002;
  for (const std::string& axis : axes) {
    plan::Instruction& gather = add("dist.all_gather", t, 0.001);
    gather.attrs.bytes = 4096;
    gather.attrs.mesh_axes = {axis};
    t += 0.001;
  }
  program.schedule.push_back({.block = "forward", .micro_batch = 0});
  program.assignOrder();
  p.predicted.step_time_s = t;
  p.predicted.compute_s = 0.002;
  p.predicted.exposed_comm_s = t - 0.002;
  p.predicted.peak_bytes = 1 << 20;
  p.predicted.breakdown = {{"param", 1 << 20}};
  return p;
}

// A tiny well-formedness check: every tag is closed in order (void tags
// written as <x/>), attribute values are quoted, text holds no raw '<' and
// every '&' starts an entity. <style> content is raw text. Returns "" or
// what is wrong and where.
std::string checkWellFormed(const std::string& page) {
  std::vector<std::string> open;
  size_t i = 0;
  auto where = [&](size_t at) {
    return absl::StrCat(" at offset ", at, ": ...", page.substr(at > 40 ? at - 40 : 0, 80), "...");
  };
  while (i < page.size()) {
    const char c = page[i];
    if (c == '&') {
      const size_t semi = page.find(';', i);
      if (semi == std::string::npos || semi - i > 8) return "bare '&'" + where(i);
      const std::string entity = page.substr(i + 1, semi - i - 1);
      const bool numeric = entity.size() > 1 && entity[0] == '#' &&
                           entity.find_first_not_of("0123456789", 1) == std::string::npos;
      if (!numeric && entity != "amp" && entity != "lt" && entity != "gt" && entity != "quot") {
        return "unknown entity &" + entity + ";" + where(i);
      }
      i = semi + 1;
      continue;
    }
    if (c != '<') {
      ++i;
      continue;
    }
    if (page.compare(i, 9, "<!DOCTYPE") == 0) {
      i = page.find('>', i) + 1;
      continue;
    }
    const bool closing = i + 1 < page.size() && page[i + 1] == '/';
    size_t j = i + (closing ? 2 : 1);
    const size_t name_start = j;
    while (j < page.size() && (absl::ascii_isalnum(static_cast<unsigned char>(page[j])) ||
                               page[j] == '-' || page[j] == ':')) {
      ++j;
    }
    if (j == name_start) return "raw '<' in text" + where(i);
    const std::string name = page.substr(name_start, j - name_start);
    // Attributes: name="value" pairs up to '>' or '/>'.
    bool self_closing = false;
    while (j < page.size() && page[j] != '>') {
      if (page[j] == '"') {
        const size_t end = page.find('"', j + 1);
        if (end == std::string::npos) return "unterminated attribute" + where(j);
        if (page.substr(j + 1, end - j - 1).find('<') != std::string::npos) {
          return "raw '<' in an attribute" + where(j);
        }
        j = end + 1;
        continue;
      }
      if (page[j] == '/' && j + 1 < page.size() && page[j + 1] == '>') self_closing = true;
      ++j;
    }
    if (j >= page.size()) return "unterminated tag <" + name + where(i);
    i = j + 1;
    if (closing) {
      if (open.empty() || open.back() != name) {
        return absl::StrCat("</", name, "> closes <", open.empty() ? "nothing" : open.back(), ">",
                            where(i));
      }
      open.pop_back();
    } else if (!self_closing) {
      open.push_back(name);
      if (name == "style") {
        const size_t end = page.find("</style>", i);
        if (end == std::string::npos) return "unterminated <style>";
        i = end;
      }
    }
  }
  if (!open.empty()) return "unclosed <" + open.back() + ">";
  return "";
}

// HasSubstr for whole pages: on failure it shows the text sought, not the
// page.
MATCHER_P(Contains, text, absl::StrCat("contains \"", text, "\"")) {
  *result_listener << "page of " << arg.size() << " bytes";
  return arg.find(text) != std::string::npos;
}

int64_t count(const std::string& haystack, const std::string& needle) {
  int64_t n = 0;
  for (size_t at = haystack.find(needle); at != std::string::npos;
       at = haystack.find(needle, at + needle.size())) {
    ++n;
  }
  return n;
}

TEST(WellFormedCheckerTest, CatchesWhatItShould) {
  EXPECT_EQ(checkWellFormed("<svg><rect x=\"1\"/><text>a &lt; b</text></svg>"), "");
  EXPECT_THAT(checkWellFormed("<svg><text>a < b</text></svg>"), HasSubstr("raw '<'"));
  EXPECT_THAT(checkWellFormed("<svg><g></svg>"), HasSubstr("</svg> closes <g>"));
  EXPECT_THAT(checkWellFormed("<svg>"), HasSubstr("unclosed <svg>"));
  EXPECT_THAT(checkWellFormed("<p>R&D</p>"), HasSubstr("bare '&'"));
}

TEST(PlanPageTest, RendersTheTinyPlan) {
  const plan::Plan plan = tinyPlan();
  absl::StatusOr<std::string> page = renderPlanPage(plan);
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_EQ(checkWellFormed(*page), "");
  EXPECT_THAT(*page, Contains("<!DOCTYPE html>"));
  EXPECT_THAT(*page, Contains("<title>Plan: tiny</title>"));
  // One rect per device of the 2 x 2 mesh, and the mesh's two axes.
  EXPECT_EQ(count(*page, "class=\"device\""), 4);
  EXPECT_THAT(*page, Contains("fsdp (2) "));
  EXPECT_THAT(*page, Contains("tp (2) "));
  // Groups: two tp rows and two fsdp columns are outlined.
  EXPECT_EQ(count(*page, "class=\"group\""), 4);
  // Three SVG pictures: mesh, memory, timeline.
  EXPECT_EQ(count(*page, "<svg "), 3);
  // Legends: roles, compute phases and every collective kind of the plan.
  for (const char* entry :
       {"param", "grad", "optimizer_state", "activation", "gathered", "compute: forward",
        "all_gather", "reduce_scatter", "all_reduce", "device memory"}) {
    EXPECT_THAT(*page, Contains(entry)) << entry;
  }
  // Self-contained: no script, no external resource.
  EXPECT_THAT(*page, Not(Contains("<script")));
  EXPECT_THAT(*page, Not(Contains("href=")));
  EXPECT_THAT(*page, Not(Contains("src=")));
  EXPECT_EQ(count(*page, "http"), 3);  // the three SVG namespaces
  // Every timed instruction but zero-length waits is drawn.
  int64_t timed = 0;
  for (const plan::Instruction* in : plan.programs[0].instructions()) {
    if (!in->start_s) continue;
    if (in->op == "dist.wait" && !(*in->duration_s > 0)) continue;
    ++timed;
  }
  EXPECT_EQ(count(*page, "class=\"event\""), timed);
}

// Offload's copies run on their own stream: a lane of their own.
TEST(PlanPageTest, DrawsTheHostCopiesOnTheirOwnLane) {
  absl::StatusOr<plan::Plan> plan = plan::loadPlan(absl::StrCat(
      std::getenv("TEST_SRCDIR"), "/loom/runtime/executor/testdata/llama_offload_fsdp2/plan.json"));
  ASSERT_TRUE(plan.ok()) << plan.status();
  absl::StatusOr<std::string> page = renderPlanPage(*plan);
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_EQ(checkWellFormed(*page), "");
  EXPECT_THAT(*page, Contains(">host copies<"));
  EXPECT_THAT(*page, Not(Contains("comm (host)")));
  EXPECT_THAT(*page, Contains("dist.copy_to_host_start (backward)"));
}

TEST(PlanPageTest, EscapesNames) {
  plan::Plan plan = tinyPlan();
  plan.model = "<script>alert(\"x\")</script> & co";
  plan.strategies = {"fs<dp", "t'p"};
  plan.topology.device = "gpu<1>";
  absl::StatusOr<std::string> page = renderPlanPage(plan);
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_EQ(checkWellFormed(*page), "");
  EXPECT_THAT(*page, Not(Contains("<script")));
  EXPECT_THAT(*page, Contains("&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; co"));
  EXPECT_THAT(*page, Contains("fs&lt;dp, t&#39;p"));
  EXPECT_THAT(*page, Contains("gpu&lt;1&gt;"));
}

// Reading plan.json, with its errors, is the plan library's (plan/plan_test);
// the page refuses only what it cannot draw.
TEST(PlanPageTest, RefusesMoreDevicesThanItDraws) {
  EXPECT_THAT(renderPlanPage(minimalPlan({512, 256}, {"fsdp", "tp"}, 8)).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("131072 devices are more than the page draws")));
}

TEST(PlanPageTest, DrawsEveryDeviceOfOtherMeshes) {
  struct Case {
    std::vector<int64_t> shape;
    std::vector<std::string> axes;
    int64_t devices_per_host;
  };
  const Case cases[] = {
      {{8}, {"fsdp"}, 8},
      {{2, 2, 2}, {"dp", "fsdp", "tp"}, 4},
      {{2, 2, 2, 2}, {"pp", "dp", "fsdp", "tp"}, 8},
      {{128, 8}, {"fsdp", "tp"}, 8},
  };
  for (const Case& c : cases) {
    absl::StatusOr<std::string> page =
        renderPlanPage(minimalPlan(c.shape, c.axes, c.devices_per_host));
    ASSERT_TRUE(page.ok()) << page.status();
    EXPECT_EQ(checkWellFormed(*page), "");
    int64_t world = 1;
    for (int64_t s : c.shape) world *= s;
    EXPECT_EQ(count(*page, "class=\"device\""), world) << world;
    for (const std::string& axis : c.axes) EXPECT_THAT(*page, Contains(axis));
  }
  absl::StatusOr<std::string> dense = renderPlanPage(minimalPlan({128, 8}, {"fsdp", "tp"}, 8));
  ASSERT_TRUE(dense.ok());
  EXPECT_THAT(*dense, Contains("only rank 0's group of each axis is drawn"));
  EXPECT_EQ(count(*dense, "class=\"group\""), 2);
}

std::vector<SearchPoint> candidates() {
  const int64_t gib = int64_t{1} << 30;
  return {
      {.label = "fsdp=8",
       .step_time_s = 1.9,
       .tokens_per_s_per_device = 4300,
       .mfu = 0.41,
       .peak_bytes = 41 * gib,
       .memory_limit_bytes = 80 * gib,
       .exposed_comm_s = 0.02},
      {.label = "fsdp=4,tp=2",
       .step_time_s = 1.6,
       .tokens_per_s_per_device = 5100,
       .mfu = 0.48,
       .peak_bytes = 52 * gib,
       .memory_limit_bytes = 80 * gib,
       .exposed_comm_s = 0.05,
       .winner = true},
      {.label = "dp=8 <no shard>",
       .step_time_s = 1.4,
       .tokens_per_s_per_device = 5800,
       .mfu = 0.55,
       .peak_bytes = 130 * gib,
       .memory_limit_bytes = 80 * gib,
       .fits = false},
  };
}

TEST(SearchPageTest, ChartsCandidatesWithTheWinnerAndTheLimit) {
  const std::string page = renderSearchPage(candidates(), "llama3-8b on 8 x h100 <search>");
  EXPECT_EQ(checkWellFormed(page), "");
  EXPECT_THAT(page, Contains("<title>llama3-8b on 8 x h100 &lt;search&gt;</title>"));
  EXPECT_EQ(count(page, "class=\"point winner\""), 1);
  EXPECT_EQ(count(page, "class=\"point\""), 1);
  EXPECT_EQ(count(page, "class=\"point nofit\""), 1);
  EXPECT_EQ(count(page, "class=\"limit\""), 1);
  EXPECT_THAT(page, Contains("memory limit 80.0 GiB"));
  EXPECT_THAT(page, Contains("dp=8 &lt;no shard&gt;"));
  EXPECT_THAT(page, Not(Contains("<no shard>")));
  EXPECT_THAT(page, Contains("<tr class=\"winner\"><td class=\"n\">1</td><td>\u2605 fsdp=4,tp=2"));
  EXPECT_THAT(page, Contains("2 fit in memory"));
}

TEST(SearchPageTest, EmptyAndUndrawablePoints) {
  const std::string empty = renderSearchPage({}, "nothing");
  EXPECT_EQ(checkWellFormed(empty), "");
  EXPECT_THAT(empty, Contains("No candidates."));
  const std::string zero = renderSearchPage({{.label = "broken", .step_time_s = 0}}, "zero");
  EXPECT_EQ(checkWellFormed(zero), "");
  EXPECT_THAT(zero, Contains("No candidate has a positive step time to draw."));
  EXPECT_THAT(zero, Contains("broken"));
}

}  // namespace
}  // namespace loom::planner::visual
