// Tests of plan.json on Llama 3 8B (batch 8 x 16 tokens, f32) under
// fsdp=8 on one DGX H100 host: the schema's required fields, deterministic
// output, init specs, per-instruction bytes that sum to comm_volume, the
// ZeRO-3 figures in the report, and a trace with compute and comm tracks.
#include <cstdint>
#include <set>
#include <string>

#include "gtest/gtest.h"
#include "mesh/topology.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "nlohmann/json.hpp"
#include "plan/plan.h"
#include "planner/dialect/dist/ir/dist_dialect.h"
#include "planner/dialect/nn/ir/nn_dialect.h"
#include "planner/export/plan_json.h"
#include "planner/export/report.h"
#include "planner/models/model_config.h"
#include "planner/models/zoo_builder.h"
#include "planner/transforms/autodiff/passes.h"
#include "planner/transforms/collectives/comm_volume.h"
#include "planner/transforms/collectives/passes.h"
#include "planner/transforms/optimizer/passes.h"
#include "planner/transforms/placement/passes.h"

namespace loom::planner::exporter {
namespace {

using nlohmann::json;

PlanExportOptions options() {
  PlanExportOptions options;
  options.model = "llama3-8b";
  options.seed = 7;
  return options;
}

class PlanJsonTest : public ::testing::Test {
 protected:
  void SetUp() override {
    context_.loadDialect<dist::DistDialect>();
    auto config = models::publishedConfig("llama3-8b");
    ASSERT_TRUE(config.ok()) << config.status();
    auto built = models::buildModel(context_, *config, {8, 16}, mlir::Float32Type::get(&context_));
    ASSERT_TRUE(built.ok()) << built.status();
    module_ = std::move(*built);
    mlir::PassManager pm(&context_);
    pm.addNestedPass<mlir::func::FuncOp>(autodiff::createPlanAutodiff());
    pm.addPass(
        placement::createPlanPlacement(placement::PlanPlacementOptions{"fsdp=8", "fsdp", 0}));
    pm.addPass(collectives::createPlanInsertCollectives());
    pm.addPass(optimizer::createPlanOptimizerStep());
    ASSERT_TRUE(succeeded(pm.run(*module_)));
    auto topology = mesh::Topology::dgxH100(1);
    ASSERT_TRUE(topology.ok()) << topology.status();
    auto plan = exportPlan(*module_, *topology, options());
    ASSERT_TRUE(plan.ok()) << plan.status();
    typed_ = *plan;
    text_ = plan::writePlan(typed_);
    plan_ = json::parse(text_);
  }

  // The instructions of one block of the (single) program, as written.
  const json& block(const char* name) const {
    for (const json& b : plan_["programs"][0]["blocks"]) {
      if (b["name"] == name) return b["instructions"];
    }
    return plan_["programs"][0]["blocks"][0]["instructions"];
  }

  mlir::MLIRContext context_;
  mlir::OwningOpRef<mlir::ModuleOp> module_;
  plan::Plan typed_;
  std::string text_;
  json plan_;
};

TEST_F(PlanJsonTest, ReadsBackAndIsDeterministic) {
  absl::StatusOr<plan::Plan> read = plan::parsePlan(text_, "plan.json");
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(plan::writePlan(*read), text_);
  EXPECT_EQ(plan_["format_version"], plan::kFormatVersion);
  EXPECT_EQ(plan_["mesh"]["shape"], json({8}));
  EXPECT_EQ(plan_["mesh"]["axes"], json({"fsdp"}));
  EXPECT_EQ(plan_["strategies"], json({"fsdp"}));
  EXPECT_EQ(plan_["topology"]["devices_per_host"], 8);
  auto again = exportPlan(*module_, *mesh::Topology::dgxH100(1), options());
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(plan::writePlan(*again), text_);
}

TEST_F(PlanJsonTest, ParametersCarryPlacementsAndInitSpecs) {
  std::set<int64_t> streams;
  int64_t params = 0, states = 0;
  for (const json& buffer : plan_["buffers"]) {
    if (buffer["role"] == "optimizer_state") {
      ++states;
      EXPECT_EQ(buffer["init"]["kind"], "zeros");
      continue;
    }
    if (buffer["role"] != "param") continue;
    ++params;
    EXPECT_EQ(buffer["placement"], json({"shard(0)"}));
    EXPECT_EQ(buffer["init"]["seed"], 7);
    streams.insert(buffer["init"]["stream"].get<int64_t>());
    const std::string name = buffer["name"];
    if (name == "layers.0.ffn_norm.weight") {
      EXPECT_EQ(buffer["init"]["kind"], "ones");
      EXPECT_EQ(buffer["global_shape"], json({4096}));
      EXPECT_EQ(buffer["local_shape"], json({512}));
      EXPECT_EQ(buffer["bytes"], 512 * 4);
    }
    if (name == "tok_embeddings.weight") {
      EXPECT_EQ(buffer["init"]["kind"], "normal");
      EXPECT_DOUBLE_EQ(buffer["init"]["std"].get<double>(), 0.02);
      EXPECT_EQ(buffer["global_shape"], json({128256, 4096}));
    }
  }
  EXPECT_EQ(params, 291);
  EXPECT_EQ(static_cast<int64_t>(streams.size()), params);  // one stream per param
  EXPECT_EQ(states, 2 * params);                            // f32: exp_avg, exp_avg_sq
  EXPECT_EQ(block("optimizer").size(), 291u);
}

TEST_F(PlanJsonTest, AParameterWithoutAnInitIsAnError) {
  auto func = *module_->getOps<mlir::func::FuncOp>().begin();
  unsigned param = 0;
  while (!func.getArgAttr(param, nn::NnDialect::kParamAttrName)) ++param;
  func.removeArgAttr(param, nn::NnDialect::kInitAttrName);
  auto plan = exportPlan(*module_, *mesh::Topology::dgxH100(1), options());
  EXPECT_EQ(std::string(plan.status().message()),
            "argument #" + std::to_string(param) + " ('tok_embeddings.weight') of @" +
                func.getSymName().str() +
                " has no nn.init; give every parameter "
                "one, e.g. {nn.init = {kind = \"normal\", mean = 0.0, std = 0.02}} (the model "
                "zoo and the PyTorch importer set it; optimizer states get theirs from "
                "--plan-optimizer-step)");
}

TEST_F(PlanJsonTest, CollectivesSumToTheZero3VolumeAndTheReportShowsIt) {
  int64_t bytes = 0, comm = 0;
  for (const char* phase : {"forward", "backward"}) {
    for (const json& instruction : block(phase)) {
      if (instruction["stream"] != "comm") continue;
      ++comm;
      bytes += instruction["attrs"]["bytes"].get<int64_t>();
      EXPECT_EQ(instruction["attrs"]["mesh_axes"], json({"fsdp"}));
    }
  }
  auto func = *module_->getOps<mlir::func::FuncOp>().begin();
  EXPECT_EQ(bytes, collectives::computeCommVolume(func).totalBytes());
  EXPECT_EQ(comm, 581 + 291 + 1);
  // Every backward-pass gather of a parameter comes after the loss.
  EXPECT_EQ(block("forward").back()["op"], "dist.all_reduce");

  const std::string report = formatReport(typed_);
  EXPECT_NE(report.find("| fsdp | all_gather | 581 | 54,373,150,720 |"), std::string::npos)
      << report;
  EXPECT_NE(report.find("| fsdp | reduce_scatter | 291 | 28,105,914,368 |"), std::string::npos);
  EXPECT_NE(report.find("| layers.0.ffn_norm.weight | 4096 | 512 | shard(0) | 2,048 |"),
            std::string::npos);
  EXPECT_NE(report.find("| optimizer_state |"), std::string::npos);
  // The terminal's report: one row for a parameter every layer has alike.
  const std::string grouped = formatReport(typed_, {.group_layers = true});
  EXPECT_NE(
      grouped.find("| layers.{0..31}.ffn_norm.weight (x32) | 4096 | 512 | shard(0) | 2,048 |"),
      std::string::npos)
      << grouped;
  EXPECT_EQ(grouped.find("| layers.1.ffn_norm.weight"), std::string::npos);
  EXPECT_NE(grouped.find("| tok_embeddings.weight |"), std::string::npos);
  const json& predicted = plan_["predicted"];
  EXPECT_GT(predicted["step_time_s"].get<double>(), 0);
  // Blocking collectives: every second of communication is exposed.
  EXPECT_DOUBLE_EQ(predicted["exposed_comm_s"].get<double>(), predicted["comm_s"].get<double>());

  const json trace = chromeTrace(typed_);
  int64_t computeEvents = 0, commEvents = 0;
  for (const json& event : trace["traceEvents"]) {
    if (event["ph"] != "X") continue;
    (event["tid"] == 2 ? commEvents : computeEvents) += 1;
  }
  EXPECT_EQ(commEvents, comm);
  EXPECT_GT(computeEvents, 291);
}

}  // namespace
}  // namespace loom::planner::exporter
