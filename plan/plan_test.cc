// The plan library: a planned layout reads, writes back to the same text
// and reads again; every inconsistency is refused with the JSON path of the
// field at fault; an old format version says how to re-plan.
#include "plan/plan.h"

#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "plan/lifetimes.h"
#include "plan/scope.h"
#include "plan/shard_box.h"
#include "plan/testing/gradient_swap.h"
#include "plan/testing/two_stage.h"
#include "tests/testing/status_matchers.h"

namespace loom::plan {
namespace {

using ::loom::testutil::StatusIs;
using ::nlohmann::json;
using ::testing::AllOf;
using ::testing::HasSubstr;

std::string planPath(const std::string& name) {
  return absl::StrCat(std::getenv("TEST_SRCDIR"), "/loom/runtime/executor/testdata/", name,
                      "/plan.json");
}

std::string readText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(PlanTest, LoadsAPlannedLayout) {
  absl::StatusOr<Plan> plan = loadPlan(planPath("llama_fsdp2_tp2"));
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->worldSize(), 4);
  EXPECT_EQ(plan->mesh.axisNames(), (std::vector<std::string>{"fsdp", "tp"}));
  ASSERT_EQ(plan->programs.size(), 1u);
  const std::vector<const Instruction*> order = plan->programs[0].instructions();
  EXPECT_GT(order.size(), 100u);
  EXPECT_EQ(order.front()->phase, Phase::kForward);
  EXPECT_EQ(order.back()->op, "dist.optimizer_step");
  EXPECT_EQ(order.back()->attrs.beta2, 0.999);
  for (size_t i = 0; i < order.size(); ++i) EXPECT_EQ(order[i]->order, static_cast<int64_t>(i));
  EXPECT_EQ(plan->buffers[plan->interface.ids].dtype, comm::DType::kInt32);
  EXPECT_TRUE(plan->buffers[plan->interface.loss].global_shape.empty());
  EXPECT_GT(plan->predicted.peak_bytes, 0);
  EXPECT_TRUE(checkPlanForJob(*plan, 4).ok());
  EXPECT_THAT(checkPlanForJob(*plan, 8),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("the plan is for 4 ranks"), HasSubstr("--nproc=4"))));
}

// One reader, one writer: what the planner wrote is what the library
// writes back, byte for byte.
TEST(PlanTest, WritesBackTheTextItRead) {
  for (const char* name : {"llama_fsdp2_tp2", "gpt2_v251_bf16_fsdp2_tp2",
                           "llama_bf16_gradf32_hsdp2x2", "llama_sel_fsdp2_tp2"}) {
    const std::string text = readText(planPath(name));
    absl::StatusOr<Plan> plan = parsePlan(text, name);
    ASSERT_TRUE(plan.ok()) << plan.status();
    EXPECT_EQ(writePlan(*plan), text) << name;
  }
}

// Recomputed ops are compute ops of the backward; the check refuses the
// flag anywhere else.
TEST(PlanTest, RecomputeMarksBackwardComputeOnly) {
  absl::StatusOr<Plan> plan = loadPlan(planPath("llama_full_fsdp4"));
  ASSERT_TRUE(plan.ok()) << plan.status();
  int recomputed = 0;
  for (const Instruction* in : plan->programs[0].instructions()) {
    if (!in->recompute) continue;
    ++recomputed;
    EXPECT_EQ(in->phase, Phase::kBackward) << in->where();
    EXPECT_EQ(in->info->family, OpFamily::kCompute) << in->where();
  }
  EXPECT_GT(recomputed, 0);
  plan->programs[0].blocks.front().instructions.front().recompute = true;
  EXPECT_THAT(checkPlan(*plan),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("only compute ops of the backward pass are recomputed")));
}

// An accumulating plan: every model block once per micro-batch, kept
// gathers in the first micro-step, deferred reductions in the last, and the
// buffers carried between them (the sums and the kept copies).
TEST(PlanTest, AccumulatingPlansSayWhatRunsInWhichMicroStep) {
  absl::StatusOr<Plan> plan = loadPlan(planPath("accum_llama_both_hsdp2x2_m2"));
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->micro_batches, 2);
  const Program& program = plan->programs[0];
  ASSERT_EQ(program.schedule.size(), 5u);
  EXPECT_EQ(program.schedule[2].block, "forward");
  EXPECT_EQ(program.schedule[2].micro_batch, 1);
  EXPECT_EQ(program.schedule[4].block, "optimizer");
  const std::vector<bool> carried = carriedBuffers(*plan, program);
  int first = 0, last = 0, sums = 0, kept = 0;
  for (const Instruction* in : program.instructions()) {
    first += in->micro_step == MicroStep::kFirst;
    last += in->micro_step == MicroStep::kLast;
    if (in->op == "dist.accumulate") {
      ++sums;
      EXPECT_TRUE(carried[in->results[0]]) << in->where();
    }
    if (in->micro_step == MicroStep::kLast) {
      EXPECT_NE(in->info->family, OpFamily::kCompute) << in->where();
    }
  }
  for (const Buffer& b : plan->buffers) kept += carried[b.id] && b.role == BufferRole::kGathered;
  EXPECT_GT(first, 0);
  EXPECT_GT(last, 0);
  EXPECT_GT(sums, 0);
  EXPECT_GT(kept, 0);
  EXPECT_TRUE(runsIn(MicroStep::kFirst, 0, 2) && !runsIn(MicroStep::kFirst, 1, 2));
  EXPECT_TRUE(runsIn(MicroStep::kLast, 1, 2) && !runsIn(MicroStep::kLast, 0, 2));
  // The report's collectives are the step's: they sum to its bytes.
  int64_t total = 0;
  for (const CommVolume& v : plan->predicted.comm_volume) total += v.bytes;
  EXPECT_EQ(total, plan->predicted.comm_bytes_per_rank);
  // What the planner wrote, the library writes back.
  const std::string text = readText(planPath("accum_llama_both_hsdp2x2_m2"));
  EXPECT_EQ(writePlan(*parsePlan(text, "p.json")), text);
}

// A carried buffer is held from the start of every micro-step but the
// first and to the end of the backward in every one but the last; what a
// skipped instruction would make is not held.
TEST(PlanTest, MicroStepLifetimes) {
  const Lifetime live{.first = 10, .last = 20};
  EXPECT_EQ(microStepLifetime(live, MicroStep::kEvery, true, 0, 4, 30), (Lifetime{10, 30}));
  EXPECT_EQ(microStepLifetime(live, MicroStep::kEvery, true, 1, 4, 30), (Lifetime{-1, 30}));
  EXPECT_EQ(microStepLifetime(live, MicroStep::kEvery, true, 3, 4, 30), (Lifetime{-1, 20}));
  EXPECT_EQ(microStepLifetime(live, MicroStep::kFirst, false, 1, 4, 30), std::nullopt);
  EXPECT_EQ(microStepLifetime(live, MicroStep::kLast, false, 2, 4, 30), std::nullopt);
  EXPECT_EQ(microStepLifetime(live, MicroStep::kLast, false, 3, 4, 30), live);
  EXPECT_EQ(microStepLifetime(live, MicroStep::kFirst, false, -1, 4, 30), live);
}

TEST(PlanTest, LifetimesEndAtTheWaitOfAnAsyncStart) {
  absl::StatusOr<Plan> plan = loadPlan(planPath("llama_fsdp4"));
  ASSERT_TRUE(plan.ok()) << plan.status();
  const std::vector<const Instruction*> order = plan->programs[0].instructions();
  int checked = 0;
  for (const Instruction* in : order) {
    if (!in->info->async_start) continue;
    const int64_t operand = in->operands[0];
    int64_t waitAt = -1;
    for (const Instruction* other : order) {
      if (other->info->family == OpFamily::kWait &&
          other->attrs.async_handle == in->attrs.async_handle) {
        waitAt = other->order;
      }
    }
    EXPECT_GE(plan->buffers[operand].live.last, waitAt) << plan->buffers[operand].name;
    ++checked;
  }
  EXPECT_GT(checked, 5);
  EXPECT_EQ(computeLifetimes(*plan, plan->programs[0])[plan->interface.ids].first, -1);
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

json& instructions(json& plan, const char* block) {
  for (json& b : plan["programs"][0]["blocks"]) {
    if (b["name"] == block) return b["instructions"];
  }
  return plan["programs"][0]["blocks"][0]["instructions"];
}

json& firstOp(json& plan, const std::string& op) {
  for (json& in : instructions(plan, "forward")) {
    if (in["op"] == op) return in;
  }
  return instructions(plan, "forward")[0];
}

TEST_P(CorruptPlanTest, IsRefusedNamingTheField) {
  json plan = json::parse(readText(planPath("llama_fsdp2_tp2")));
  GetParam().corrupt(plan);
  EXPECT_THAT(parsePlan(plan.dump(), "p.json").status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("p.json: "), HasSubstr(GetParam().message))));
}

constexpr char kForward0[] = "$.programs[0].blocks[0].instructions[0]";

INSTANTIATE_TEST_SUITE_P(
    Corruptions, CorruptPlanTest,
    ::testing::Values(
        Corruption{"OldVersion", [](json& p) { p["format_version"] = 1; },
                   "$.format_version: is 1; this build reads version 2. Re-plan the model"},
        Corruption{"NoMesh", [](json& p) { p.erase("mesh"); }, "$.mesh: is missing"},
        Corruption{"Strategies", [](json& p) { p["strategies"] = {"fsdp"}; },
                   "$.strategies: has 1 entries for a mesh of 2 axes"},
        Corruption{"BufferId", [](json& p) { p["buffers"][3]["id"] = 4; },
                   "$.buffers[3].id: is 4; ids must equal the index 3"},
        Corruption{"Dtype", [](json& p) { p["buffers"][2]["dtype"] = "f8"; }, "$.buffers[2].dtype"},
        Corruption{
            "LocalShape", [](json& p) { p["buffers"][2]["local_shape"] = {256, 32}; },
            "$.buffers[2].local_shape: dim 0 is 256, but global size 256 split 2 ways gives 128"},
        Corruption{"Bytes", [](json& p) { p["buffers"][2]["bytes"] = 7; },
                   "$.buffers[2].bytes: is 7"},
        Corruption{"Placement", [](json& p) { p["buffers"][2]["placement"][0] = "shard(x)"; },
                   "$.buffers[2].placement[0]: bad placement 'shard(x)'"},
        Corruption{"PlacementDim", [](json& p) { p["buffers"][2]["placement"][0] = "shard(5)"; },
                   "shards dim 5 of a rank-2 tensor"},
        Corruption{"ParamWithoutInit", [](json& p) { p["buffers"][2]["init"] = nullptr; },
                   "$.buffers[2].init: is null, but a param needs an init spec"},
        Corruption{"Live", [](json& p) { p["buffers"][40]["live"][1] = 3; },
                   "$.buffers[40].live: is ["},
        Corruption{"UnknownOp", [](json& p) { instructions(p, "forward")[0]["op"] = "nn.conv2d"; },
                   absl::StrCat(kForward0, ".op: 'nn.conv2d' is not an op of this plan format")},
        Corruption{"OperandRange",
                   [](json& p) { instructions(p, "forward")[0]["operands"][0] = 99999; },
                   absl::StrCat(kForward0, ".operands[0]: buffer 99999 does not exist")},
        Corruption{"Arity", [](json& p) { firstOp(p, "nn.add")["operands"].push_back(0); },
                   "nn.add takes 2 operands and 1 result; this one has 3 and 1"},
        Corruption{"UnknownAttr", [](json& p) { firstOp(p, "nn.add")["attrs"]["epsilon"] = 1e-5; },
                   ".attrs.epsilon: is not an attribute of nn.add"},
        Corruption{"AttrType",
                   [](json& p) { firstOp(p, "nn.rms_norm")["attrs"]["epsilon"] = "small"; },
                   ".attrs.epsilon: must be a number, got \"small\""},
        Corruption{"MissingAttr",
                   [](json& p) { firstOp(p, "nn.rms_norm")["attrs"].erase("epsilon"); },
                   ".attrs.epsilon: is missing; nn.rms_norm needs it"},
        Corruption{
            "AxisNotInMesh",
            [](json& p) { firstOp(p, "dist.all_gather_start")["attrs"]["mesh_axes"] = {"dp"}; },
            "'dp' is not an axis of the mesh"},
        Corruption{"GroupSize",
                   [](json& p) { firstOp(p, "dist.all_gather_start")["attrs"]["group_size"] = 3; },
                   ".attrs.group_size: is 3 but the axes' sizes multiply to 2"},
        Corruption{"Reduction",
                   [](json& p) {
                     for (json& in : instructions(p, "backward")) {
                       if (in["attrs"].contains("reduction")) {
                         in["attrs"]["reduction"] = 0;
                         return;
                       }
                     }
                   },
                   ".attrs.reduction: must be \"sum\", \"avg\", \"max\" or \"min\", got 0"},
        Corruption{"UseBeforeDef",
                   [](json& p) { firstOp(p, "nn.add")["operands"][0] = p["interface"]["loss"]; },
                   "is used before any instruction defines it"},
        Corruption{"DefinedTwice",
                   [](json& p) {
                     json& first = instructions(p, "forward")[0];
                     firstOp(p, "nn.add")["results"][0] = first["results"][0];
                   },
                   "is defined twice"},
        Corruption{
            "WaitWithoutStart",
            [](json& p) { firstOp(p, "dist.all_gather_start")["attrs"]["async_handle"] = "h999"; },
            "'h0' is waited without a start"},
        Corruption{"Stream", [](json& p) { instructions(p, "forward")[0]["stream"] = "gpu"; },
                   ".stream: is 'gpu'; dist.bucket runs on the compute stream"},
        Corruption{
            "OptimizerInForward",
            [](json& p) { instructions(p, "forward").push_back(instructions(p, "optimizer")[0]); },
            "dist.optimizer_step cannot run in a forward block"},
        Corruption{"UnscheduledBlock", [](json& p) { p["programs"][0]["schedule"].erase(2); },
                   "'optimizer' never runs: the schedule does not name it"},
        Corruption{"MicroBatch",
                   [](json& p) { p["programs"][0]["schedule"][0]["micro_batch"] = 1; },
                   "$.programs[0].schedule[0].micro_batch: is 1; micro-batches are 0 to 0"},
        Corruption{
            "MicroStepName",
            [](json& p) { instructions(p, "forward")[0]["micro_step"] = "second"; },
            absl::StrCat(kForward0, ".micro_step: is 'second'; expected every, first or last")},
        Corruption{"MicroStepOnCompute",
                   [](json& p) { firstOp(p, "nn.add")["micro_step"] = "first"; },
                   "runs nn.add in the first micro-step only; only the collectives and buffer "
                   "ops of a forward or backward block are kept or deferred"},
        Corruption{"MicroBatchNeverRun",
                   [](json& p) {
                     p["micro_batches"] = 2;
                     p["programs"][0]["schedule"][1]["micro_batch"] = 1;
                   },
                   "never runs forward for micro-batch 1 of 2; every model block runs once per "
                   "micro-batch"},
        Corruption{"MicroBatchTwice",
                   [](json& p) {
                     json& schedule = p["programs"][0]["schedule"];
                     schedule.insert(schedule.begin(), schedule[0]);
                   },
                   "runs forward twice for micro-batch 0"},
        Corruption{"Programs", [](json& p) { p["programs"].push_back(p["programs"][0]); },
                   "$.programs: has 2 programs; a plan with 1 pipeline stage has one per stage"},
        Corruption{"NoInterface", [](json& p) { p.erase("interface"); }, "$.interface: is missing"},
        Corruption{"LossNotScalar", [](json& p) { p["interface"]["loss"] = 2; },
                   "$.interface.loss: the loss must be a scalar"}),
    [](const auto& info) { return info.param.name; });

// Offload (docs/planner_offload.md): the states and master copies live in
// host memory, each gradient goes there and each parameter comes back by a
// copy on the copy stream, the steps read host buffers only, and the
// prediction counts host memory apart.
TEST(PlanTest, OffloadedPlansHoldHostStatesAndTheirCopies) {
  const std::string text = readText(planPath("llama_offload_fsdp2"));
  absl::StatusOr<Plan> plan = parsePlan(text, "offload.json");
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(writePlan(*plan), text);
  int params = 0, masters = 0;
  int64_t stateBytes = 0;
  for (const Buffer& b : plan->buffers) {
    if (b.role == BufferRole::kParam) {
      ++params;
      EXPECT_FALSE(b.onHost()) << b.name;
    }
    if (b.role == BufferRole::kOptimizerState) {
      EXPECT_TRUE(b.onHost()) << b.name;
      stateBytes += b.bytes;
      masters += b.name.rfind("master:", 0) == 0;
    }
  }
  // An f32 parameter gets a master copy on the host too.
  EXPECT_EQ(masters, params);
  std::map<std::string, int> ops;
  for (const Instruction* in : plan->programs[0].instructions()) {
    ++ops[in->op];
    if (in->info->family == OpFamily::kOptimizer) {
      for (int64_t id : in->operands) EXPECT_TRUE(plan->buffers[id].onHost()) << in->where();
    }
    if (in->info->family == OpFamily::kCopy) {
      EXPECT_EQ(in->info->stream, Stream::kCopy);
      EXPECT_EQ(in->phase, in->op == "dist.copy_to_host_start" ? Phase::kBackward
                                                                : Phase::kOptimizer);
    }
  }
  EXPECT_EQ(ops["dist.copy_to_host_start"], params);
  EXPECT_EQ(ops["dist.copy_into_device_start"], params);
  EXPECT_EQ(ops["dist.optimizer_step"], params);
  ASSERT_TRUE(plan->predicted.offload.has_value());
  EXPECT_GE(plan->predicted.offload->host_peak_bytes, stateBytes);
  EXPECT_GT(plan->predicted.offload->to_host_bytes, 0);
  EXPECT_GT(plan->predicted.offload->copy_s, 0);
  EXPECT_GT(plan->topology.host.bandwidth_bytes_per_s, 0);
  EXPECT_EQ(plan->predicted.breakdown.at("optimizer_state"), 0);
}

// With several micro-steps the gradients go to the host once, in the last,
// and the parameters come back once, in the optimizer block: an f32 plan
// moves as many bytes each way per step.
TEST(PlanTest, OffloadedCopiesRunOncePerStep) {
  for (const char* name : {"accum_llama_offload_fsdp4_m2", "pipe_offload_pp2_fsdp2"}) {
    absl::StatusOr<Plan> plan = loadPlan(planPath(name));
    ASSERT_TRUE(plan.ok()) << plan.status();
    ASSERT_GT(plan->micro_batches, 1) << name;
    ASSERT_TRUE(plan->predicted.offload.has_value()) << name;
    EXPECT_EQ(plan->predicted.offload->to_host_bytes, plan->predicted.offload->to_device_bytes)
        << name;
    for (const Instruction* in : plan->programs[0].instructions()) {
      if (in->op == "dist.copy_to_host_start") {
        EXPECT_EQ(in->micro_step, MicroStep::kLast) << name;
      }
    }
  }
}

class CorruptOffloadTest : public ::testing::TestWithParam<Corruption> {};

// The first instruction of `op` in any block.
json& anyOp(json& plan, const std::string& op) {
  for (json& block : plan["programs"][0]["blocks"]) {
    for (json& in : block["instructions"]) {
      if (in["op"] == op) return in;
    }
  }
  return plan["programs"][0]["blocks"][0]["instructions"][0];
}

// The wait of the first instruction of `op`.
json& waitOf(json& plan, const std::string& op) {
  const json handle = anyOp(plan, op)["attrs"]["async_handle"];
  for (json& block : plan["programs"][0]["blocks"]) {
    for (json& in : block["instructions"]) {
      if (in["op"] == "dist.wait" && in["attrs"]["async_handle"] == handle) return in;
    }
  }
  return plan["programs"][0]["blocks"][0]["instructions"][0];
}

TEST_P(CorruptOffloadTest, IsRefusedNamingTheField) {
  json plan = json::parse(readText(planPath("llama_offload_fsdp2")));
  GetParam().corrupt(plan);
  EXPECT_THAT(parsePlan(plan.dump(), "p.json").status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("p.json: "), HasSubstr(GetParam().message))));
}

INSTANTIATE_TEST_SUITE_P(
    Corruptions, CorruptOffloadTest,
    ::testing::Values(
        Corruption{"MemoryName",
                   [](json& p) { p["buffers"][2]["memory"] = "disk"; },
                   "$.buffers[2].memory: is 'disk'; expected device or host"},
        Corruption{"HostOperandOfCompute",
                   [](json& p) {
                     const int64_t id = anyOp(p, "nn.add")["operands"][0];
                     p["buffers"][id]["memory"] = "host";
                   },
                   "only copies and the optimizer steps of offloaded states touch host memory"},
        Corruption{"CopyLandsOnTheDevice",
                   [](json& p) {
                     const int64_t id = anyOp(p, "dist.copy_to_host_start")["results"][0];
                     p["buffers"][id].erase("memory");
                   },
                   "copies device to host but reads device buffer"},
        Corruption{"StepMixesMemories",
                   [](json& p) {
                     const int64_t id = anyOp(p, "dist.optimizer_step")["operands"][2];
                     p["buffers"][id].erase("memory");
                   },
                   "dist.optimizer_step mixes host and device buffers"},
        Corruption{"NoHostLink",
                   [](json& p) { p["topology"]["links"].erase("host"); },
                   "$.topology: the plan holds host buffers but its topology has no host link"},
        Corruption{"CopyBytes",
                   [](json& p) { anyOp(p, "dist.copy_to_host_start")["attrs"]["bytes"] = 3; },
                   ".attrs.bytes: is 3 but the copy moves"},
        Corruption{"CopyStream",
                   [](json& p) { anyOp(p, "dist.copy_into_device_start")["stream"] = "comm"; },
                   ".stream: is 'comm'; dist.copy_into_device_start runs on the copy stream"},
        Corruption{"InPlaceWaitElsewhere",
                   [](json& p) {
                     waitOf(p, "dist.copy_into_device_start")["results"][0] =
                         anyOp(p, "dist.optimizer_step")["operands"][1];
                   },
                   "in place; its wait yields that buffer"}),
    [](const auto& info) { return info.param.name; });

// Point-to-point between two stages (plan/testing/gradient_swap.h): the
// swap plan checks and round-trips through JSON; each broken pairing,
// peer or axis is refused naming the instruction.
class PointToPointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<Plan> base = loadPlan(planPath("llama_fsdp2_tp2"));
    ASSERT_TRUE(base.ok()) << base.status();
    absl::StatusOr<Plan> swap = testing::gradientSwapPlan(*base, "layers.0.attention.wq.weight");
    ASSERT_TRUE(swap.ok()) << swap.status();
    plan_ = *std::move(swap);
  }
  // The n-th point-to-point instruction of stage s's program.
  Instruction& p2p(int64_t s, int n) {
    for (Block& block : plan_.programs[s].blocks) {
      for (Instruction& in : block.instructions) {
        if (in.info->family == OpFamily::kPointToPoint && n-- == 0) return in;
      }
    }
    ADD_FAILURE() << "no point-to-point instruction " << n;
    return plan_.programs[s].blocks[0].instructions[0];
  }
  Plan plan_;
};

TEST_F(PointToPointTest, ASwapBetweenStagesChecksAndRoundTrips) {
  EXPECT_TRUE(checkPlan(plan_).ok()) << checkPlan(plan_);
  absl::StatusOr<Plan> back = parsePlan(writePlan(plan_), "swap.json");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(writePlan(*back), writePlan(plan_));
  const Instruction& send = p2p(1, 0);
  EXPECT_EQ(send.op, "dist.send_start");
  EXPECT_EQ(*send.attrs.peer, 0);
  EXPECT_EQ(*send.attrs.tag, 1);
  EXPECT_EQ(send.attrs.mesh_axes, std::vector<std::string>{"fsdp"});
}

TEST_F(PointToPointTest, AReceiveWithoutItsSendIsRefused) {
  p2p(1, 1).attrs.tag = 5;
  EXPECT_THAT(checkPlan(plan_),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("receives tag 5 from stage 0, which sends nothing with it")));
}

TEST_F(PointToPointTest, TypesMustAgree) {
  for (Buffer& b : plan_.buffers) {
    if (b.name != "recv_handle:grad") continue;
    b.dtype = comm::DType::kBFloat16;
    b.bytes /= 2;
  }
  EXPECT_THAT(checkPlan(plan_),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("receives bf16["), HasSubstr("sends f32["))));
}

TEST_F(PointToPointTest, ThePeerIsAnotherStage) {
  p2p(0, 0).attrs.peer = 0;
  EXPECT_THAT(checkPlan(plan_),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr(".attrs.peer"),
                             HasSubstr("is 0; stage 0 exchanges with another of stages 0 to 1"))));
}

TEST_F(PointToPointTest, OnlyAPipelineAxisCarriesThem) {
  p2p(0, 0).attrs.mesh_axes = {"tp"};
  EXPECT_THAT(checkPlan(plan_),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("'tp' is a tp axis; point-to-point ops connect pipeline stages")));
}

// Replicas of a tied parameter (plan/testing/two_stage.h, tied): the copy
// on stage 1 of the table, its states and its summed gradient name stage
// 0's; the plan checks and round-trips, and a replica that is not the same
// tensor as its primary on a lower stage is refused.
class ReplicaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::TwoStageOptions options;
    options.tied = true;
    absl::StatusOr<Plan> plan = testing::twoStagePlan(options);
    ASSERT_TRUE(plan.ok()) << plan.status();
    plan_ = *std::move(plan);
    for (const Buffer& b : plan_.buffers) {
      if (b.replica_of >= 0) replicas_.push_back(b.id);
    }
  }
  Buffer& replica(const std::string& name) {
    for (int64_t id : replicas_) {
      if (plan_.buffers[id].name == name) return plan_.buffers[id];
    }
    ADD_FAILURE() << "no replica named " << name;
    return plan_.buffers[0];
  }
  Plan plan_;
  std::vector<int64_t> replicas_;
};

TEST_F(ReplicaTest, CopiesOnALaterStageCheckAndRoundTrip) {
  std::vector<std::string> names;
  for (int64_t id : replicas_) names.push_back(plan_.buffers[id].name);
  EXPECT_THAT(names,
              ::testing::UnorderedElementsAre("embed.weight", "exp_avg:embed.weight",
                                              "exp_avg_sq:embed.weight", "grad:embed.weight"));
  const std::string text = writePlan(plan_);
  EXPECT_THAT(text, HasSubstr("\"replica_of\":"));
  absl::StatusOr<Plan> back = parsePlan(text, "tied.json");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->buffers[replicas_[0]].replica_of, plan_.buffers[replicas_[0]].replica_of);
  EXPECT_EQ(writePlan(*back), text);
}

TEST_F(ReplicaTest, ThePrimaryIsAnotherBuffer) {
  Buffer& copy = replica("embed.weight");
  copy.replica_of = copy.id;
  EXPECT_THAT(checkPlan(plan_),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr(absl::StrCat("$.buffers[", copy.id, "].replica_of: is ")),
                             HasSubstr("a replica names another buffer"))));
}

TEST_F(ReplicaTest, ThePrimaryIsNoReplica) {
  const Buffer& state = replica("exp_avg:embed.weight");
  plan_.buffers[replica("embed.weight").replica_of].replica_of = state.id;
  EXPECT_THAT(checkPlan(plan_),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr(absl::StrCat("is ", state.id, ", itself a replica of ",
                                              state.replica_of, "; name the primary"))));
}

TEST_F(ReplicaTest, ReplicasAreTheSameTensor) {
  replica("grad:embed.weight").placement[0] = *AxisPlacement::parse("partial(sum)");
  EXPECT_THAT(checkPlan(plan_), StatusIs(absl::StatusCode::kInvalidArgument,
                                         HasSubstr("whose placement differs from this copy's")));
}

TEST_F(ReplicaTest, ThePrimaryIsOnALowerStage) {
  Buffer& copy = replica("embed.weight");
  const int64_t primary = copy.replica_of;
  copy.replica_of = -1;
  plan_.buffers[primary].replica_of = copy.id;
  EXPECT_THAT(checkPlan(plan_), StatusIs(absl::StatusCode::kInvalidArgument,
                                         HasSubstr("held from stage 1, not below this copy's "
                                                   "stage 0; the lowest stage's copy is the "
                                                   "primary")));
}

TEST_F(ReplicaTest, AStageHoldsOneCopy) {
  Buffer& copy = replica("embed.weight");
  for (const Buffer& b : plan_.buffers) {
    if (b.name == "dh") copy.replica_of = b.id;
  }
  EXPECT_THAT(checkPlan(plan_),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("stage 1's program holds both copies of embed.weight")));
}

TEST(PlanTest, ShardBoxesFollowThePaddingRule) {
  absl::StatusOr<mesh::DeviceMesh> mesh = mesh::DeviceMesh::create({4, 2}, {"fsdp", "tp"});
  ASSERT_TRUE(mesh.ok());
  Buffer b;
  b.global_shape = {10, 6};
  b.local_shape = {3, 3};
  b.placement = {*AxisPlacement::parse("shard(0,padded)"), *AxisPlacement::parse("shard(1)")};
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

TEST(PlanTest, PlacementsPrintAsTheyParse) {
  for (const char* text :
       {"replicate", "shard(0)", "shard(3,padded)", "partial(sum)", "partial(max)"}) {
    absl::StatusOr<AxisPlacement> p = AxisPlacement::parse(text);
    ASSERT_TRUE(p.ok()) << text;
    EXPECT_EQ(p->toString(), text);
  }
  for (const char* bad :
       {"shard()", "shard(1,pad)", "partial(prod)", "Replicate", "shard(99999999999)"}) {
    EXPECT_FALSE(AxisPlacement::parse(bad).ok()) << bad;
  }
}

TEST(ScopeTest, RepeatedBlocksAreTheFirstNumberedComponent) {
  EXPECT_EQ(repeatedBlockOf("layers.3.attention.wq"),
            (RepeatedBlock{.stack = "layers", .index = 3}));
  EXPECT_EQ(repeatedBlockOf("transformer.h.11.mlp.c_fc"),
            (RepeatedBlock{.stack = "transformer.h", .index = 11}));
  EXPECT_EQ(repeatedBlockOf("model.layers.0"),
            (RepeatedBlock{.stack = "model.layers", .index = 0}));
  EXPECT_FALSE(repeatedBlockOf("tok_embeddings").has_value());
  EXPECT_FALSE(repeatedBlockOf("").has_value());
  EXPECT_FALSE(repeatedBlockOf("3.weight").has_value());      // no stack name
  EXPECT_FALSE(repeatedBlockOf("layers.3a.wq").has_value());  // not a number
}

}  // namespace
}  // namespace loom::plan
