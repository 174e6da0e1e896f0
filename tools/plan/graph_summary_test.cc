// Tests of the graph summary: layer rows from locations and parameter names,
// exact parameter and FLOP totals, and the printed form.
#include "tools/plan/graph_summary.h"

#include <iterator>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "planner/dialect/nn/ir/nn_dialect.h"
#include "planner/models/model_config.h"
#include "planner/models/zoo_builder.h"
#include "tests/testing/status_matchers.h"

namespace loom::tools::plan {
namespace {

using ::loom::testutil::StatusIs;
using ::testing::AllOf;
using ::testing::ContainsRegex;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Tokens [2, 8]: 16 tokens, hidden 16, MLP 64, vocab 32. The second block's
// parameter has no name and its ops no location.
constexpr char kModel[] = R"mlir(
func.func @mlp_lm(%ids: tensor<2x8xi32>, %labels: tensor<2x8xi32>,
    %embed: tensor<32x16xf32> {nn.param, nn.name = "embed.weight"},
    %w1: tensor<16x64xf32> {nn.param, nn.name = "blocks.0.fc1.weight"},
    %b1: tensor<64xf32> {nn.param, nn.name = "blocks.0.fc1.bias"},
    %w2: tensor<64x16xf32> {nn.param, nn.name = "blocks.0.fc2.weight"},
    %w3: tensor<16x16xf32> {nn.param},
    %head: tensor<16x32xf32> {nn.param, nn.name = "head.weight"}) -> tensor<f32> {
  %h = nn.embedding %ids, %embed : (tensor<2x8xi32>, tensor<32x16xf32>) -> tensor<2x8x16xf32> loc("embed")
  %a = nn.linear %h, %w1, %b1 : (tensor<2x8x16xf32>, tensor<16x64xf32>, tensor<64xf32>) -> tensor<2x8x64xf32> loc("blocks.0.fc1")
  %g = nn.gelu %a : (tensor<2x8x64xf32>) -> tensor<2x8x64xf32> loc(fused["blocks.0.act", "model.py":3:4])
  %m = nn.linear %g, %w2 : (tensor<2x8x64xf32>, tensor<64x16xf32>) -> tensor<2x8x16xf32> loc("blocks.0.fc2")
  %r = nn.add %h, %m : (tensor<2x8x16xf32>, tensor<2x8x16xf32>) -> tensor<2x8x16xf32> loc("blocks.0")
  %s = nn.linear %r, %w3 : (tensor<2x8x16xf32>, tensor<16x16xf32>) -> tensor<2x8x16xf32>
  %logits = nn.linear %s, %head : (tensor<2x8x16xf32>, tensor<16x32xf32>) -> tensor<2x8x32xf32> loc("head")
  %loss = nn.cross_entropy %logits, %labels : (tensor<2x8x32xf32>, tensor<2x8xi32>) -> tensor<f32> loc("loss")
  return %loss : tensor<f32>
}
)mlir";

class GraphSummaryTest : public ::testing::Test {
 protected:
  GraphSummaryTest() { context_.loadDialect<mlir::func::FuncDialect, planner::nn::NnDialect>(); }

  mlir::func::FuncOp parse(const char* source) {
    module_ = mlir::parseSourceString<mlir::ModuleOp>(source, &context_);
    EXPECT_TRUE(module_) << "invalid test IR";
    return *module_->getOps<mlir::func::FuncOp>().begin();
  }

  mlir::MLIRContext context_;
  mlir::OwningOpRef<mlir::ModuleOp> module_;
};

TEST(LayerOfTest, CutsAfterTheLastNumberedComponent) {
  EXPECT_EQ(layerOf("layers.3.attention.wq"), "layers.3");
  EXPECT_EQ(layerOf("transformer.h.11.mlp.c_fc"), "transformer.h.11");
  EXPECT_EQ(layerOf("encoder.0.layers.2.fc"), "encoder.0.layers.2");
  EXPECT_EQ(layerOf("tok_embeddings"), "tok_embeddings");
  EXPECT_EQ(layerOf("fc1"), "fc1");
}

TEST_F(GraphSummaryTest, CountsParametersFlopsAndBytesPerLayer) {
  absl::StatusOr<GraphSummary> summary = summarizeGraph(parse(kModel));
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_EQ(summary->function, "mlp_lm");
  EXPECT_EQ(summary->tokens, 16);
  EXPECT_EQ(summary->ops, 8);
  std::vector<std::string> names;
  for (const LayerSummary& row : summary->layers) names.push_back(row.name);
  EXPECT_THAT(names, ElementsAre("embed", "blocks.0", "(unnamed)", "head", "loss"));

  const LayerSummary& embed = summary->layers[0];
  EXPECT_EQ(embed.ops, 1);
  EXPECT_EQ(embed.parameters, 32 * 16);
  EXPECT_EQ(embed.flops, 0);
  EXPECT_EQ(embed.activation_bytes, 16 * 16 * 4);

  const LayerSummary& block = summary->layers[1];
  EXPECT_EQ(block.ops, 4);
  EXPECT_EQ(block.parameters, 16 * 64 + 64 + 64 * 16);
  // fc1 with bias, gelu (9 per element), fc2, the residual add.
  EXPECT_EQ(block.flops, (2 * 16 * 16 * 64 + 16 * 64) + 9 * 16 * 64 + 2 * 16 * 64 * 16 + 16 * 16);
  EXPECT_EQ(block.activation_bytes, 4 * (16 * 64 + 16 * 64 + 16 * 16 + 16 * 16));

  // The unnamed parameter joins the row of its first user, an unlocated op.
  EXPECT_EQ(summary->layers[2].parameters, 16 * 16);
  EXPECT_EQ(summary->layers[2].flops, 2 * 16 * 16 * 16);
  EXPECT_EQ(summary->layers[3].flops, 2 * 16 * 16 * 32);
  EXPECT_EQ(summary->layers[4].flops, 4 * 16 * 32);

  EXPECT_EQ(summary->parameters, 512 + 2112 + 256 + 512);
  EXPECT_EQ(summary->parameter_bytes, 4 * summary->parameters);
  EXPECT_EQ(summary->embedding_parameters, 512);
  EXPECT_EQ(summary->num_blocks, 1);
  EXPECT_EQ(summary->block_parameters, 2112);
  int64_t flops = 0;
  for (const LayerSummary& row : summary->layers) flops += row.flops;
  EXPECT_EQ(summary->forward_flops, flops);
}

TEST_F(GraphSummaryTest, PrintsTotalsAndTable) {
  absl::StatusOr<GraphSummary> summary = summarizeGraph(parse(kModel));
  ASSERT_TRUE(summary.ok()) << summary.status();
  const std::string text = formatSummary(*summary);
  EXPECT_THAT(text, HasSubstr("model @mlp_lm: 1 blocks, 8 ops, 16 tokens per step\n"));
  EXPECT_THAT(text, HasSubstr("parameters: 3,392 (3.392 K, 13.25 KiB)\n"));
  EXPECT_THAT(text, HasSubstr("  blocks: 2,112 (1 x 2,112)\n"));
  EXPECT_THAT(text, HasSubstr("  other: 768\n"));
  // (76032 + 8192 + 16384 + 2048) / 16 tokens.
  EXPECT_THAT(text, HasSubstr("FLOPs per token, forward: 6.416 K (2 x parameters = 6.784 K)\n"));
  EXPECT_THAT(text, HasSubstr("forward + backward (3 x forward): 19.25 K\n"));
  EXPECT_THAT(text, ContainsRegex("\nlayer +ops +params +FLOPs/token +act bytes\n"));
  EXPECT_THAT(text, ContainsRegex("\nblocks\\.0 +4 +2,112 +4.752 K +10 KiB\n"));
}

TEST_F(GraphSummaryTest, ZooModelHasOneRowPerBlock) {
  absl::StatusOr<planner::models::TransformerConfig> config =
      planner::models::configFromSpec("tiny:layers=3");
  ASSERT_TRUE(config.ok()) << config.status();
  absl::StatusOr<mlir::OwningOpRef<mlir::ModuleOp>> module = planner::models::buildModel(
      context_, *config, {.batch = 2, .seq = 16}, mlir::Float32Type::get(&context_));
  ASSERT_TRUE(module.ok()) << module.status();
  absl::StatusOr<GraphSummary> summary =
      summarizeGraph(*(*module)->getOps<mlir::func::FuncOp>().begin());
  ASSERT_TRUE(summary.ok()) << summary.status();
  std::vector<std::string> names;
  for (const LayerSummary& row : summary->layers) names.push_back(row.name);
  EXPECT_THAT(names, ElementsAre("tok_embeddings", "layers.0", "layers.1", "layers.2", "norm",
                                 "output", "loss"));
  EXPECT_EQ(summary->tokens, 32);
  EXPECT_EQ(summary->parameters, planner::models::parameterCount(*config));
  EXPECT_EQ(summary->embedding_parameters, config->vocab * config->hidden);
  EXPECT_EQ(summary->num_blocks, 3);
  EXPECT_EQ(summary->layers[1].parameters, summary->layers[3].parameters);
  EXPECT_EQ(summary->layers[1].flops, summary->layers[3].flops);
  EXPECT_THAT(formatSummary(*summary), HasSubstr("(3 x "));
}

TEST_F(GraphSummaryTest, RefusesOpsWithoutACostModel) {
  constexpr char kCall[] = R"mlir(
    func.func private @helper(tensor<4x4xf32>) -> tensor<4x4xf32>
    func.func @caller(%x: tensor<4x4xf32>) -> tensor<4x4xf32> {
      %y = func.call @helper(%x) : (tensor<4x4xf32>) -> tensor<4x4xf32> loc("block.call")
      return %y : tensor<4x4xf32>
    }
  )mlir";
  module_ = mlir::parseSourceString<mlir::ModuleOp>(kCall, &context_);
  ASSERT_TRUE(module_);
  auto funcs = module_->getOps<mlir::func::FuncOp>();
  mlir::func::FuncOp caller = *std::next(funcs.begin());
  EXPECT_THAT(summarizeGraph(caller).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("'func.call' at loc(\"block.call\")"),
                             HasSubstr("covers nn ops only"))));
}

}  // namespace
}  // namespace loom::tools::plan
