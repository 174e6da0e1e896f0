// The plan loader: a real plan loads; every inconsistency is refused with
// the JSON path of the field at fault.
#include "runtime/plan/plan.h"

#include <cstdlib>
#include <fstream>
#include <functional>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace loom::runtime {
namespace {

using ::loom::testutil::StatusIs;
using ::nlohmann::json;
using ::testing::AllOf;
using ::testing::HasSubstr;

std::string planPath(const std::string& name) {
  return absl::StrCat(std::getenv("TEST_SRCDIR"), "/loom/runtime/executor/testdata/", name,
                      "/plan.json");
}

json readJson(const std::string& path) {
  std::ifstream in(path);
  return json::parse(in);
}

TEST(PlanTest, LoadsAPlannedLayout) {
  absl::StatusOr<Plan> plan = loadPlan(planPath("llama_fsdp2_tp2"));
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->worldSize(), 4);
  EXPECT_EQ(plan->mesh.axisNames(), (std::vector<std::string>{"fsdp", "tp"}));
  EXPECT_GT(plan->instructions.size(), 100u);
  EXPECT_EQ(plan->instructions.front().phase, Phase::kForward);
  EXPECT_EQ(plan->instructions.back().op, "dist.optimizer_step");
  EXPECT_EQ(plan->buffers[plan->interface.ids].dtype, comm::DType::kInt32);
  EXPECT_TRUE(plan->buffers[plan->interface.loss].global_shape.empty());
  EXPECT_GT(plan->predicted.peak_bytes, 0);
  EXPECT_TRUE(checkPlanForJob(*plan, 4).ok());
  EXPECT_THAT(checkPlanForJob(*plan, 8),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("the plan is for 4 ranks"), HasSubstr("--nproc=4"))));
}

TEST(PlanTest, MissingFileSaysHowToMakeOne) {
  EXPECT_THAT(loadPlan("/nonexistent/plan.json").status(),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("//tools:plan")));
}

struct Corruption {
  std::string name;
  std::function<void(json&)> corrupt;
  std::string message;
};

class CorruptPlanTest : public ::testing::TestWithParam<Corruption> {};

TEST_P(CorruptPlanTest, IsRefusedNamingTheField) {
  json plan = readJson(planPath("llama_fsdp2_tp2"));
  GetParam().corrupt(plan);
  EXPECT_THAT(parsePlan(plan, "p.json").status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("p.json: "), HasSubstr(GetParam().message))));
}

json& firstOp(json& plan, const std::string& op) {
  for (json& in : plan["phases"]["forward"]) {
    if (in["op"] == op) return in;
  }
  return plan["phases"]["forward"][0];
}

INSTANTIATE_TEST_SUITE_P(
    Corruptions, CorruptPlanTest,
    ::testing::Values(
        Corruption{"Version", [](json& p) { p["format_version"] = 2; },
                   "$.format_version: is 2; this runtime reads version 1"},
        Corruption{"NoMesh", [](json& p) { p.erase("mesh"); }, "$.mesh: missing"},
        Corruption{"Strategies", [](json& p) { p["strategies"] = {"fsdp"}; },
                   "$.strategies: has 1 entries for a mesh of 2 axes"},
        Corruption{"BufferId", [](json& p) { p["buffers"][3]["id"] = 4; },
                   "$.buffers[3].id: is 4; ids must equal the index 3"},
        Corruption{"Dtype", [](json& p) { p["buffers"][2]["dtype"] = "f8"; }, "$.buffers[2].dtype"},
        Corruption{"LocalShape", [](json& p) { p["buffers"][2]["local_shape"] = {256, 32}; },
                   "$.buffers[2].local_shape: dim 0 is 256, but global size 256 split 2 ways gives 128"},
        Corruption{"Bytes", [](json& p) { p["buffers"][2]["bytes"] = 7; }, "$.buffers[2].bytes: is 7"},
        Corruption{"Placement", [](json& p) { p["buffers"][2]["placement"][0] = "shard(x)"; },
                   "$.buffers[2].placement[0]: bad placement 'shard(x)'"},
        Corruption{"PlacementDim", [](json& p) { p["buffers"][2]["placement"][0] = "shard(5)"; },
                   "shards dim 5 of a rank-2 tensor"},
        Corruption{"ParamWithoutInit", [](json& p) { p["buffers"][2]["init"] = nullptr; },
                   "$.buffers[2].init: is null, but a param needs an init spec"},
        Corruption{"UnknownOp", [](json& p) { p["phases"]["forward"][0]["op"] = "nn.conv2d"; },
                   "$.phases.forward[0].op: 'nn.conv2d' is not an op this runtime executes"},
        Corruption{"OperandRange",
                   [](json& p) { p["phases"]["forward"][0]["operands"][0] = 99999; },
                   "$.phases.forward[0].operands[0]: buffer 99999 does not exist"},
        Corruption{"Arity",
                   [](json& p) { firstOp(p, "nn.add")["operands"].push_back(0); },
                   "nn.add takes 2 operands and 1 result; this one has 3 operands and 1 result"},
        Corruption{"BucketWithoutResult",
                   [](json& p) {
                     for (json& in : p["phases"]["backward"]) {
                       if (in["op"] == "dist.bucket") {
                         in["results"] = json::array();
                         return;
                       }
                     }
                   },
                   "dist.bucket takes 1 or more operands and 1 result; this one has"},
        Corruption{"UseBeforeDef",
                   [](json& p) {
                     json& add = firstOp(p, "nn.add");
                     add["operands"][0] = p["interface"]["loss"];
                   },
                   "is used before any instruction defines it"},
        Corruption{"DefinedTwice",
                   [](json& p) {
                     json& first = p["phases"]["forward"][0];
                     firstOp(p, "nn.add")["results"][0] = first["results"][0];
                   },
                   "is defined twice"},
        Corruption{"WaitWithoutStart",
                   [](json& p) { firstOp(p, "dist.all_gather_start")["attrs"]["async_handle"] = "h999"; },
                   "'h0' is waited without a start"},
        Corruption{"Stream", [](json& p) { p["phases"]["forward"][0]["stream"] = "gpu"; },
                   "$.phases.forward[0].stream: must be \"compute\" or \"comm\""},
        Corruption{"NoInterface", [](json& p) { p.erase("interface"); }, "$.interface: missing"},
        Corruption{"LossNotScalar", [](json& p) { p["interface"]["loss"] = 2; },
                   "$.interface.loss: the loss must be a scalar"}),
    [](const auto& info) { return info.param.name; });

TEST(PlanTest, ShardBoxesFollowThePaddingRule) {
  absl::StatusOr<mesh::DeviceMesh> mesh = mesh::DeviceMesh::create({4, 2}, {"fsdp", "tp"});
  ASSERT_TRUE(mesh.ok());
  BufferSpec b;
  b.global_shape = {10, 6};
  b.local_shape = {3, 3};
  AxisPlacement fsdp{.kind = AxisPlacement::Kind::kShard, .dim = 0, .padded = true, .reduction = ""};
  AxisPlacement tp{.kind = AxisPlacement::Kind::kShard, .dim = 1, .padded = false, .reduction = ""};
  b.placement = {fsdp, tp};
  // 10 rows over 4: 3, 3, 3, 1 real rows.
  absl::StatusOr<ShardBox> box = shardBoxOf(b, *mesh, {3, 1});
  ASSERT_TRUE(box.ok()) << box.status();
  EXPECT_EQ(box->offsets, (std::vector<int64_t>{9, 3}));
  EXPECT_EQ(box->valid, (std::vector<int64_t>{1, 3}));
  box = shardBoxOf(b, *mesh, {1, 0});
  ASSERT_TRUE(box.ok());
  EXPECT_EQ(box->offsets, (std::vector<int64_t>{3, 0}));
  EXPECT_EQ(box->valid, (std::vector<int64_t>{3, 3}));
}

}  // namespace
}  // namespace loom::runtime
