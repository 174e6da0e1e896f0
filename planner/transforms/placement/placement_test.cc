// Tests of plan-placement on the model zoo's published Llama 3 8B graph: the
// storage and compute placement of every parameter under fsdp=8 and under
// fsdp=8 x tp=8, checked against the ZeRO-3 and Megatron rules; and the time
// it takes to place Llama 3 405B on 1024 devices (printed, not asserted).
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "llvm/Support/raw_ostream.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/Pass/PassManager.h"
#include "planner/dialect/dist/ir/dist_dialect.h"
#include "planner/dialect/nn/ir/nn_dialect.h"
#include "planner/dialect/nn/ir/nn_ops.h"
#include "planner/models/model_config.h"
#include "planner/models/zoo_builder.h"
#include "planner/transforms/placement/passes.h"

namespace loom::planner::placement {
namespace {

std::string str(mlir::Attribute attr) {
  std::string text;
  llvm::raw_string_ostream os(text);
  attr.print(os);
  return text;
}

std::string placement(const std::string& axes) { return "#dist.placement<@mesh, [" + axes + "]>"; }

class LlamaPlacementTest : public ::testing::Test {
 protected:
  // Builds `model` for `batch` sequences of 16 tokens and runs plan-placement
  // with `mesh` and `axes`; returns the model function.
  mlir::func::FuncOp place(const std::string& model, int64_t batch, const std::string& mesh,
                           const std::string& axes, double* seconds = nullptr) {
    context_.loadDialect<dist::DistDialect>();
    auto config = models::publishedConfig(model);
    EXPECT_TRUE(config.ok()) << config.status();
    auto built =
        models::buildModel(context_, *config, {batch, 16}, mlir::Float32Type::get(&context_));
    EXPECT_TRUE(built.ok()) << built.status();
    module_ = std::move(*built);
    mlir::PassManager pm(&context_);
    pm.addPass(createPlanPlacement(PlanPlacementOptions{mesh, axes, 0}));
    const auto start = std::chrono::steady_clock::now();
    EXPECT_TRUE(succeeded(pm.run(*module_)));
    if (seconds) {
      *seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    }
    return *module_->getOps<mlir::func::FuncOp>().begin();
  }

  // The storage placement of every parameter, by checkpoint name.
  static std::map<std::string, std::string> storage(mlir::func::FuncOp func) {
    std::map<std::string, std::string> placements;
    for (int64_t arg = 0; arg < func.getNumArguments(); ++arg) {
      auto name = func.getArgAttrOfType<mlir::StringAttr>(arg, nn::NnDialect::kNameAttrName);
      if (!name) continue;
      placements[name.str()] = str(func.getArgAttr(arg, kPlacementAttrName));
    }
    return placements;
  }

  // For every nn.linear: (weight name, weight operand placement, result
  // placement).
  struct LinearUse {
    std::string weight;
    std::string weightPlacement;
    std::string resultPlacement;
  };
  static std::vector<LinearUse> linears(mlir::func::FuncOp func) {
    std::vector<LinearUse> uses;
    func.walk([&](nn::LinearOp op) {
      auto arg = llvm::cast<mlir::BlockArgument>(op.getWeight());
      auto operands = op->getAttrOfType<mlir::ArrayAttr>(kOperandPlacementsAttrName);
      auto results = op->getAttrOfType<mlir::ArrayAttr>(kResultPlacementsAttrName);
      uses.push_back(
          {func.getArgAttrOfType<mlir::StringAttr>(arg.getArgNumber(), nn::NnDialect::kNameAttrName)
               .str(),
           str(operands[1]), str(results[0])});
    });
    return uses;
  }

  static bool endsWithAny(const std::string& name, const std::vector<std::string>& suffixes) {
    for (const std::string& suffix : suffixes) {
      if (absl::EndsWith(name, suffix)) return true;
    }
    return false;
  }

  mlir::MLIRContext context_;
  mlir::OwningOpRef<mlir::ModuleOp> module_;
};

const std::vector<std::string> kColumn = {"attention.wq.weight", "attention.wk.weight",
                                          "attention.wv.weight", "feed_forward.w1.weight",
                                          "feed_forward.w3.weight"};
const std::vector<std::string> kRow = {"attention.wo.weight", "feed_forward.w2.weight"};

TEST_F(LlamaPlacementTest, Llama3_8bUnderFsdpShardsEveryParameterOnDim0) {
  mlir::func::FuncOp func = place("llama3-8b", 8, "fsdp=8", "fsdp");
  const auto params = storage(func);
  ASSERT_EQ(params.size(), 2u + 32u * 9u + 1u);
  for (const auto& [name, stored] : params) {
    EXPECT_EQ(stored, placement("shard<0>")) << name;
  }
  for (const LinearUse& use : linears(func)) {
    EXPECT_EQ(use.weightPlacement, placement("replicate")) << use.weight;
    EXPECT_EQ(use.resultPlacement, placement("shard<0>")) << use.weight;
  }
  func.walk([&](nn::CrossEntropyOp op) {
    EXPECT_EQ(str(op->getAttrOfType<mlir::ArrayAttr>(kResultPlacementsAttrName)[0]),
              placement("partial<avg>"));
  });
}

TEST_F(LlamaPlacementTest, Llama3_8bUnderFsdpAndTpFollowsMegatron) {
  mlir::func::FuncOp func = place("llama3-8b", 8, "fsdp=8,tp=8", "fsdp,tp");
  int64_t column = 0, row = 0, norms = 0;
  for (const auto& [name, stored] : storage(func)) {
    if (endsWithAny(name, kColumn) || name == "output.weight") {
      EXPECT_EQ(stored, placement("shard<0>, shard<1>")) << name;
      ++column;
    } else if (endsWithAny(name, kRow)) {
      EXPECT_EQ(stored, placement("shard<1>, shard<0>")) << name;
      ++row;
    } else if (absl::EndsWith(name, "norm.weight")) {
      EXPECT_EQ(stored, placement("shard<0>, replicate")) << name;
      ++norms;
    } else {
      EXPECT_EQ(name, "tok_embeddings.weight");
      EXPECT_EQ(stored, placement("shard<1>, shard<0>")) << name;
    }
  }
  EXPECT_EQ(column, 32 * 5 + 1);
  EXPECT_EQ(row, 32 * 2);
  EXPECT_EQ(norms, 32 * 2 + 1);
  for (const LinearUse& use : linears(func)) {
    if (endsWithAny(use.weight, kRow)) {
      EXPECT_EQ(use.weightPlacement, placement("replicate, shard<0>")) << use.weight;
      EXPECT_EQ(use.resultPlacement, placement("shard<0>, partial<sum>")) << use.weight;
    } else {
      EXPECT_EQ(use.weightPlacement, placement("replicate, shard<1>")) << use.weight;
      EXPECT_EQ(use.resultPlacement, placement("shard<0>, shard<2>")) << use.weight;
    }
  }
  int64_t attentions = 0;
  func.walk([&](nn::AttentionOp op) {
    for (mlir::Attribute operand : op->getAttrOfType<mlir::ArrayAttr>(kOperandPlacementsAttrName)) {
      EXPECT_EQ(str(operand), placement("shard<0>, shard<2>"));
    }
    ++attentions;
  });
  EXPECT_EQ(attentions, 32);
  func.walk([&](nn::EmbeddingOp op) {
    EXPECT_EQ(str(op->getAttrOfType<mlir::ArrayAttr>(kResultPlacementsAttrName)[0]),
              placement("shard<0>, partial<sum>"));
  });
  func.walk([&](nn::CrossEntropyOp op) {
    EXPECT_EQ(str(op->getAttrOfType<mlir::ArrayAttr>(kOperandPlacementsAttrName)[0]),
              placement("shard<0>, replicate"));
  });
}

TEST_F(LlamaPlacementTest, Llama3_405bOn1024DevicesTiming) {
  double seconds = 0;
  mlir::func::FuncOp func = place("llama3-405b", 128, "fsdp=128,tp=8", "fsdp,tp", &seconds);
  int64_t ops = 0;
  func.walk([&](mlir::Operation*) { ++ops; });
  std::printf(
      "plan-placement of llama3-405b (%lld ops) on fsdp=128 x tp=8: "
      "%.3f s\n",
      static_cast<long long>(ops), seconds);
  EXPECT_EQ(storage(func).at("layers.125.attention.wo.weight"), placement("shard<1>, shard<0>"));
}

}  // namespace
}  // namespace loom::planner::placement
