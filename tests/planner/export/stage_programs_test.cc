// Tests of the export of pipeline stages: the chunk functions of
// plan-split-stages become one program per stage, whose blocks run in the
// schedule's order, each parameter in exactly one program with the init
// stream it has without stages, and the runtime's inputs and loss in the
// stage that reads or makes them.
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "mesh/topology.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "plan/plan.h"
#include "planner/dialect/dist/ir/dist_dialect.h"
#include "planner/export/plan_json.h"
#include "planner/export/stage_functions.h"
#include "planner/models/model_config.h"
#include "planner/models/zoo_builder.h"
#include "planner/pipeline/plan_pipeline.h"

namespace loom::planner::exporter {
namespace {

class StageProgramsTest : public ::testing::Test {
 protected:
  StageProgramsTest() { context_.loadDialect<dist::DistDialect>(); }

  // Tiny Llama (or GPT-2) with 4 layers, planned on the one-axis `mesh`
  // ("pp=2"; its name is its strategy) in four micro-batches of 2 sequences.
  mlir::OwningOpRef<mlir::ModuleOp> planned(
      const std::string& mesh, int64_t virtualStages = 1, const std::string& schedule = "",
      models::ModelFamily family = models::ModelFamily::kLlama) {
    models::TinyOptions tiny;
    tiny.family = family;
    tiny.num_layers = 4;
    // GPT-2's attention is multi-head: a key and value head per query head.
    if (family == models::ModelFamily::kGpt2) tiny.num_kv_heads = tiny.num_heads;
    auto config = models::tinyConfig(tiny);
    EXPECT_TRUE(config.ok()) << config.status();
    auto built = models::buildModel(context_, *config, {2, 16}, mlir::Float32Type::get(&context_));
    EXPECT_TRUE(built.ok()) << built.status();
    mlir::OwningOpRef<mlir::ModuleOp> module = std::move(*built);
    pipeline::PlanPipelineOptions options;
    options.mesh = mesh;
    options.axes = mesh.substr(0, mesh.find('='));
    options.microSteps = 4;
    options.virtualStages = virtualStages;
    options.schedule = schedule;
    mlir::PassManager pm(&context_);
    pipeline::addPlanPipeline(pm, options);
    EXPECT_TRUE(mlir::succeeded(pm.run(*module)));
    return module;
  }

  plan::Plan exported(mlir::ModuleOp module, int64_t ranks) {
    auto topology = mesh::Topology::cpuHost(ranks);
    EXPECT_TRUE(topology.ok()) << topology.status();
    auto plan = exportPlan(module, *topology, {.model = "tiny"});
    EXPECT_TRUE(plan.ok()) << plan.status();
    return plan.ok() ? *std::move(plan) : plan::Plan{};
  }

  // The program that uses each buffer (-1: none), failing on a buffer two
  // programs use.
  static std::vector<int64_t> programOfBuffers(const plan::Plan& plan) {
    std::vector<int64_t> owner(plan.buffers.size(), -1);
    for (size_t p = 0; p < plan.programs.size(); ++p) {
      for (const plan::Instruction* in : plan.programs[p].instructions()) {
        for (const std::vector<int64_t>* ids : {&in->operands, &in->results}) {
          for (int64_t id : *ids) {
            EXPECT_TRUE(owner[id] < 0 || owner[id] == static_cast<int64_t>(p))
                << plan.buffers[id].name << " is used by programs " << owner[id] << " and " << p;
            owner[id] = static_cast<int64_t>(p);
          }
        }
      }
    }
    return owner;
  }

  mlir::MLIRContext context_;
};

std::vector<std::pair<std::string, int64_t>> runs(const plan::Program& program) {
  std::vector<std::pair<std::string, int64_t>> out;
  for (const plan::ScheduleEntry& entry : program.schedule) {
    out.emplace_back(entry.block, entry.micro_batch);
  }
  return out;
}

TEST_F(StageProgramsTest, OneProgramPerStageInTheScheduleOrder) {
  mlir::OwningOpRef<mlir::ModuleOp> module = planned("pp=2");
  const plan::Plan plan = exported(*module, 2);
  EXPECT_EQ(plan.function, "tiny");
  ASSERT_EQ(plan.programs.size(), 2u);
  using Runs = std::vector<std::pair<std::string, int64_t>>;
  // 1F1B: the first stage runs one forward ahead.
  EXPECT_EQ(runs(plan.programs[0]),
            (Runs{{"forward", 0}, {"forward", 1}, {"backward", 0}, {"forward", 2}, {"backward", 1},
                  {"forward", 3}, {"backward", 2}, {"backward", 3}, {"optimizer", -1}}));
  EXPECT_EQ(runs(plan.programs[1]),
            (Runs{{"forward", 0}, {"backward", 0}, {"forward", 1}, {"backward", 1}, {"forward", 2},
                  {"backward", 2}, {"forward", 3}, {"backward", 3}, {"optimizer", -1}}));
  for (const plan::Program& program : plan.programs) {
    std::set<std::string> blocks;
    for (const plan::Block& block : program.blocks) blocks.insert(block.name);
    EXPECT_EQ(blocks, (std::set<std::string>{"forward", "backward", "optimizer"}));
  }
  // The first stage's forward sends the activation, its backward receives
  // the gradient; the last stage the other way round.
  auto p2p = [&](size_t program, const std::string& block) {
    std::vector<std::string> ops;
    for (const plan::Instruction& in : plan.programs[program].block(block)->instructions) {
      if (in.info->family == plan::OpFamily::kPointToPoint) ops.push_back(in.op);
    }
    return ops;
  };
  EXPECT_EQ(p2p(0, "forward"), (std::vector<std::string>{"dist.recv_start", "dist.send_start"}));
  EXPECT_EQ(p2p(0, "backward"), std::vector<std::string>{});
  EXPECT_EQ(p2p(1, "forward"), (std::vector<std::string>{"dist.recv_start"}));
  EXPECT_EQ(p2p(1, "backward"), (std::vector<std::string>{"dist.send_start"}));
}

TEST_F(StageProgramsTest, GPipeRunsEveryForwardFirst) {
  mlir::OwningOpRef<mlir::ModuleOp> module = planned("pp=2", 1, "gpipe");
  const plan::Plan plan = exported(*module, 2);
  ASSERT_EQ(plan.programs.size(), 2u);
  using Runs = std::vector<std::pair<std::string, int64_t>>;
  for (const plan::Program& program : plan.programs) {
    EXPECT_EQ(runs(program),
              (Runs{{"forward", 0}, {"forward", 1}, {"forward", 2}, {"forward", 3}, {"backward", 0},
                    {"backward", 1}, {"backward", 2}, {"backward", 3}, {"optimizer", -1}}));
  }
}

TEST_F(StageProgramsTest, ParametersKeepTheirStreamsAndLiveInOneStage) {
  mlir::OwningOpRef<mlir::ModuleOp> single = planned("fsdp=1");
  mlir::OwningOpRef<mlir::ModuleOp> staged = planned("pp=2");
  const plan::Plan reference = exported(*single, 1);
  const plan::Plan plan = exported(*staged, 2);
  std::map<std::string, uint64_t> streams;
  for (const plan::Buffer& b : reference.buffers) {
    if (b.role == plan::BufferRole::kParam) streams[b.name] = b.init->stream_id;
  }
  const std::vector<int64_t> owner = programOfBuffers(plan);
  std::map<int64_t, int64_t> paramsPerStage;
  size_t params = 0;
  for (const plan::Buffer& b : plan.buffers) {
    if (b.role != plan::BufferRole::kParam) continue;
    ++params;
    ASSERT_TRUE(streams.count(b.name)) << b.name;
    EXPECT_EQ(b.init->stream_id, streams[b.name]) << b.name;
    ++paramsPerStage[owner[b.id]];
  }
  EXPECT_EQ(params, streams.size());
  EXPECT_EQ(paramsPerStage.size(), 2u);
  // Inputs and outputs in the stage that reads or makes them.
  EXPECT_EQ(owner[plan.interface.ids], 0);
  EXPECT_EQ(owner[plan.interface.labels], 1);
  EXPECT_EQ(owner[plan.interface.loss_grad_seed], 1);
  EXPECT_EQ(owner[plan.interface.loss], 1);
}

// GPT-2's token embedding is its LM head: both stages hold a replica of it
// (with the one-program plan's init stream), stage 1's copy of the table,
// its AdamW states and its summed gradient name stage 0's as their
// primary, and each optimizer block exchanges and adds the stages' parts
// (the lower stage's first) before the table's AdamW step.
TEST_F(StageProgramsTest, ATiedTableHasAReplicaPerStage) {
  const std::string table = "transformer.wte.weight";
  mlir::OwningOpRef<mlir::ModuleOp> single = planned("fsdp=1", 1, "", models::ModelFamily::kGpt2);
  mlir::OwningOpRef<mlir::ModuleOp> staged = planned("pp=2", 1, "", models::ModelFamily::kGpt2);
  const plan::Plan reference = exported(*single, 1);
  const plan::Plan plan = exported(*staged, 2);
  uint64_t stream = 0;
  for (const plan::Buffer& b : reference.buffers) {
    if (b.name == table) stream = b.init->stream_id;
  }
  std::map<std::string, std::vector<const plan::Buffer*>> copies;
  for (const plan::Buffer& b : plan.buffers) {
    if (b.name.ends_with(table)) copies[b.name].push_back(&b);
  }
  ASSERT_EQ(copies.size(), 4u);  // the table, its two states and its gradient
  for (const auto& [name, buffers] : copies) {
    ASSERT_EQ(buffers.size(), 2u) << name;
    EXPECT_EQ(buffers[0]->replica_of, -1) << name;
    EXPECT_EQ(buffers[1]->replica_of, buffers[0]->id) << name;
  }
  EXPECT_EQ(copies[table][0]->init->stream_id, stream);
  EXPECT_EQ(copies[table][1]->init->stream_id, stream);
  for (int64_t stage = 0; stage < 2; ++stage) {
    const plan::Block& optimizer = *plan.programs[stage].block("optimizer");
    std::vector<std::string> exchange;
    for (const plan::Instruction& in : optimizer.instructions) {
      if (in.op == "dist.optimizer_step") break;
      exchange.push_back(in.op);
    }
    EXPECT_EQ(exchange, (std::vector<std::string>{"dist.recv_start", "dist.send_start", "dist.wait",
                                                  "nn.add", "dist.wait"}))
        << "stage " << stage;
    const plan::Instruction& add = optimizer.instructions[3];
    const plan::Instruction& received = optimizer.instructions[2];
    const int64_t own = optimizer.instructions[1].operands[0];
    EXPECT_EQ(add.operands, (stage == 0 ? std::vector<int64_t>{own, received.results[0]}
                                        : std::vector<int64_t>{received.results[0], own}));
    EXPECT_EQ(add.results[0], copies["grad:" + table][stage]->id);
  }
}

TEST_F(StageProgramsTest, InterleavedStagesRunABlockPairPerChunk) {
  mlir::OwningOpRef<mlir::ModuleOp> module = planned("pp=2", 2);
  const plan::Plan plan = exported(*module, 2);
  ASSERT_EQ(plan.programs.size(), 2u);
  std::set<std::string> blocks;
  for (const plan::Block& block : plan.programs[0].blocks) blocks.insert(block.name);
  EXPECT_EQ(blocks, (std::set<std::string>{"forward.0", "backward.0", "forward.2", "backward.2",
                                           "optimizer"}));
  // Megatron-LM's warm-up on the first stage: chunk 0 of the first two
  // micro-batches, then chunk 2 of them.
  const std::vector<std::pair<std::string, int64_t>> order = runs(plan.programs[0]);
  ASSERT_GE(order.size(), 5u);
  EXPECT_EQ(order[0], (std::pair<std::string, int64_t>{"forward.0", 0}));
  EXPECT_EQ(order[1], (std::pair<std::string, int64_t>{"forward.0", 1}));
  EXPECT_EQ(order[2], (std::pair<std::string, int64_t>{"forward.2", 0}));
  EXPECT_EQ(order[3], (std::pair<std::string, int64_t>{"forward.2", 1}));
}

TEST_F(StageProgramsTest, RefusesChunksThatDoNotMakeAStep) {
  mlir::OwningOpRef<mlir::ModuleOp> module = planned("pp=2");
  // Dropping the last chunk leaves chunk 0 of 2 stages alone.
  for (auto func : llvm::make_early_inc_range(module->getOps<mlir::func::FuncOp>())) {
    if (func.getSymName().ends_with(".chunk1")) func.erase();
  }
  absl::StatusOr<ExportedStep> step = exportedStep(*module);
  ASSERT_FALSE(step.ok());
  EXPECT_NE(step.status().message().find("has 1 chunks, not a multiple of its 2 stages"),
            std::string::npos)
      << step.status();
}

}  // namespace
}  // namespace loom::planner::exporter
