// Tests of the zoo's graph builder: every published graph verifies and has
// exactly the published parameter count, its FLOPs match the analytic
// estimate, and the tiny graphs evaluate to the loss of an untrained model.
#include "planner/models/zoo_builder.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <map>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "llvm/ADT/STLExtras.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Location.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "planner/dialect/nn/eval/evaluator.h"
#include "planner/dialect/nn/ir/nn_dialect.h"
#include "planner/dialect/nn/ir/nn_interfaces.h"
#include "planner/dialect/nn/ir/nn_ops.h"
#include "planner/models/model_config.h"
#include "planner/models/published_sizes.h"
#include "tests/testing/status_matchers.h"

namespace loom::planner::models {
namespace {

using ::loom::testutil::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;

mlir::func::FuncOp onlyFunc(mlir::ModuleOp module) {
  auto funcs = module.getOps<mlir::func::FuncOp>();
  EXPECT_EQ(std::distance(funcs.begin(), funcs.end()), 1);
  return *funcs.begin();
}

int64_t numElements(mlir::Type type) {
  return llvm::cast<mlir::RankedTensorType>(type).getNumElements();
}

// The parameter names of `func` mapped to their shapes.
std::map<std::string, std::vector<int64_t>> paramShapes(mlir::func::FuncOp func) {
  std::map<std::string, std::vector<int64_t>> shapes;
  for (mlir::BlockArgument arg : func.getArguments()) {
    auto name =
        func.getArgAttrOfType<mlir::StringAttr>(arg.getArgNumber(), nn::NnDialect::kNameAttrName);
    if (!name) continue;
    auto shape = llvm::cast<mlir::RankedTensorType>(arg.getType()).getShape();
    shapes[name.str()] = {shape.begin(), shape.end()};
  }
  return shapes;
}

class ZooBuilderTest : public ::testing::Test {
 protected:
  mlir::OwningOpRef<mlir::ModuleOp> build(const TransformerConfig& config, BatchShape shape,
                                          mlir::Type element = nullptr) {
    if (!element) element = mlir::Float32Type::get(&context_);
    absl::StatusOr<mlir::OwningOpRef<mlir::ModuleOp>> module =
        buildModel(context_, config, shape, element);
    EXPECT_TRUE(module.ok()) << module.status();
    if (!module.ok()) return nullptr;
    EXPECT_TRUE(mlir::succeeded(mlir::verify(**module))) << config.name << " does not verify";
    return std::move(*module);
  }

  mlir::MLIRContext context_;
};

TEST_F(ZooBuilderTest, PublishedGraphsHaveThePublishedParameterCounts) {
  for (const PublishedSize& expected : kPublishedSizes) {
    absl::StatusOr<TransformerConfig> config = publishedConfig(expected.name);
    ASSERT_TRUE(config.ok()) << config.status();
    mlir::OwningOpRef<mlir::ModuleOp> module = build(*config, {.batch = 1, .seq = 8});
    ASSERT_TRUE(module);
    mlir::func::FuncOp func = onlyFunc(*module);
    EXPECT_EQ(func.getSymName(), modelFunctionName(*config));
    int64_t parameters = 0;
    std::set<std::string> names;
    for (mlir::BlockArgument arg : func.getArguments()) {
      if (!func.getArgAttr(arg.getArgNumber(), nn::NnDialect::kParamAttrName)) continue;
      parameters += numElements(arg.getType());
      auto name =
          func.getArgAttrOfType<mlir::StringAttr>(arg.getArgNumber(), nn::NnDialect::kNameAttrName);
      ASSERT_TRUE(name) << expected.name << ": parameter #" << arg.getArgNumber();
      EXPECT_TRUE(names.insert(name.str()).second) << "duplicate name " << name.str();
    }
    EXPECT_EQ(parameters, expected.parameters) << expected.name;
  }
}

TEST_F(ZooBuilderTest, ParametersCarryCheckpointNamesAndShapes) {
  auto gpt2 = build(*publishedConfig("gpt2"), {.batch = 1, .seq = 8});
  ASSERT_TRUE(gpt2);
  const auto gpt2_params = paramShapes(onlyFunc(*gpt2));
  EXPECT_EQ(gpt2_params.at("transformer.wte.weight"), (std::vector<int64_t>{50257, 768}));
  EXPECT_EQ(gpt2_params.at("transformer.wpe.weight"), (std::vector<int64_t>{1024, 768}));
  EXPECT_EQ(gpt2_params.at("transformer.h.0.attn.c_attn.weight[:, 768:1536]"),
            (std::vector<int64_t>{768, 768}));
  EXPECT_EQ(gpt2_params.at("transformer.h.11.attn.c_attn.bias[1536:2304]"),
            (std::vector<int64_t>{768}));
  EXPECT_EQ(gpt2_params.at("transformer.h.11.mlp.c_fc.weight"), (std::vector<int64_t>{768, 3072}));
  EXPECT_EQ(gpt2_params.count("lm_head.weight"), 0u) << "the LM head is tied";

  auto llama = build(*publishedConfig("llama3-8b"), {.batch = 1, .seq = 8});
  ASSERT_TRUE(llama);
  const auto llama_params = paramShapes(onlyFunc(*llama));
  EXPECT_EQ(llama_params.at("tok_embeddings.weight"), (std::vector<int64_t>{128256, 4096}));
  EXPECT_EQ(llama_params.at("layers.0.attention.wq.weight"), (std::vector<int64_t>{4096, 4096}));
  EXPECT_EQ(llama_params.at("layers.31.attention.wk.weight"), (std::vector<int64_t>{4096, 1024}));
  EXPECT_EQ(llama_params.at("layers.31.feed_forward.w2.weight"),
            (std::vector<int64_t>{14336, 4096}));
  EXPECT_EQ(llama_params.at("output.weight"), (std::vector<int64_t>{4096, 128256}));
}

// Every op is located at the module path of the layer it belongs to.
TEST_F(ZooBuilderTest, OpsAreLocatedAtTheirModulePath) {
  auto module = build(*configFromSpec("tiny"), {.batch = 1, .seq = 4});
  ASSERT_TRUE(module);
  std::vector<std::string> attention_locs;
  bool all_named = true;
  onlyFunc(*module).walk([&](mlir::Operation* op) {
    if (llvm::isa<mlir::func::FuncOp>(op)) return;
    auto loc = llvm::dyn_cast<mlir::NameLoc>(op->getLoc());
    all_named &= static_cast<bool>(loc);
    if (loc && llvm::isa<nn::AttentionOp>(op)) attention_locs.push_back(loc.getName().str());
  });
  EXPECT_TRUE(all_named);
  EXPECT_EQ(attention_locs, (std::vector<std::string>{"layers.0.attention", "layers.1.attention"}));
}

// Forward FLOPs of one step against the analytic estimate. Convention (as
// Kaplan et al. 2020, Table 1, "C_forward ~ 2N + 2 n_layer n_ctx d_attn"):
// 2 FLOPs per multiply-add, so each weight that enters a matrix product costs
// 2 per token, with N_matmul = every projection, the MLP and the LM head
// (input/position embeddings, norms and biases excluded, a tied head counted
// once); a bias adds 1 per output. Attention is causal: QK^T and PV each
// cost 2 * d_attn per unmasked (query, key) pair, S(S+1)/2 pairs per
// sequence. The products must match this exactly; the whole graph (norms,
// activations, residuals, the loss) may add at most 1% on top.
TEST_F(ZooBuilderTest, ForwardFlopsMatchTheAnalyticEstimate) {
  for (const PublishedSize& published : kPublishedSizes) {
    const TransformerConfig c = *publishedConfig(published.name);
    const BatchShape shape = {.batch = 2, .seq = std::min<int64_t>(c.max_seq, 2048)};
    auto module = build(c, shape);
    ASSERT_TRUE(module);
    const int64_t h = c.hidden;
    const int64_t q = c.num_heads * c.headDim();
    const int64_t kv = c.num_kv_heads * c.headDim();
    const int64_t f = c.ffn_hidden;
    const bool gpt2 = c.family == ModelFamily::kGpt2;
    const int64_t n_matmul =
        c.num_layers * (gpt2 ? h * 3 * h + h * h + 2 * h * f : 2 * h * q + 2 * h * kv + 3 * h * f) +
        h * c.vocab;
    const int64_t bias_per_token = gpt2 ? c.num_layers * (3 * h + h + f + h) : 0;
    const int64_t tokens = shape.batch * shape.seq;
    const int64_t pairs = shape.batch * shape.seq * (shape.seq + 1) / 2;
    const int64_t analytic =
        tokens * (2 * n_matmul + bias_per_token) + c.num_layers * 2 * (2 * q) * pairs;

    int64_t products = 0;
    int64_t total = 0;
    module->walk([&](nn::CostOpInterface op) {
      total += op.getFlops();
      if (llvm::isa<nn::LinearOp, nn::MatmulOp, nn::AttentionOp>(op)) products += op.getFlops();
    });
    EXPECT_EQ(products, analytic) << published.name;
    EXPECT_GE(total, analytic) << published.name;
    EXPECT_LT(static_cast<double>(total), 1.01 * static_cast<double>(analytic)) << published.name;
  }
}

// Fills the arguments of a zoo graph for the evaluator: random ids and
// labels, positions 0..S-1, N(0, 0.02) weights and biases of 0, norm scales
// of 1 (as GPT-2's and Llama's initialisers).
std::vector<nn::eval::Tensor> randomArguments(mlir::func::FuncOp func, int64_t vocab,
                                              std::mt19937_64& rng) {
  std::vector<nn::eval::Tensor> arguments;
  std::normal_distribution<double> weight(0.0, 0.02);
  std::uniform_int_distribution<int64_t> id(0, vocab - 1);
  for (mlir::BlockArgument arg : func.getArguments()) {
    auto type = llvm::cast<mlir::RankedTensorType>(arg.getType());
    nn::eval::Tensor tensor({type.getShape().begin(), type.getShape().end()});
    auto name =
        func.getArgAttrOfType<mlir::StringAttr>(arg.getArgNumber(), nn::NnDialect::kNameAttrName);
    const std::string input = llvm::cast<mlir::NameLoc>(arg.getLoc()).getName().str();
    for (int64_t i = 0; i < tensor.numElements(); ++i) {
      double& value = tensor.values[i];
      if (!name) {
        value = input == "position_ids" ? static_cast<double>(i % type.getShape().back())
                                        : static_cast<double>(id(rng));
      } else if (type.getRank() == 1) {
        value = name.getValue().ends_with(".weight") ? 1.0 : 0.0;
      } else {
        value = weight(rng);
      }
    }
    arguments.push_back(std::move(tensor));
  }
  return arguments;
}

// An untrained model with small weights predicts nearly uniform logits, so
// its loss is close to ln(vocab): logits have a spread of about
// 0.02 * sqrt(hidden) = 0.16, which adds ~0.013 to ln(vocab).
TEST_F(ZooBuilderTest, TinyGraphsEvaluateToTheUntrainedLoss) {
  for (const char* spec : {"tiny:family=llama,layers=2,hidden=64,heads=4,kv_heads=2",
                           "tiny:family=gpt2,layers=2,hidden=64,heads=4,ffn=256"}) {
    const TransformerConfig config = *configFromSpec(spec);
    auto module = build(config, {.batch = 2, .seq = 8});
    ASSERT_TRUE(module);
    std::mt19937_64 rng(7);
    mlir::func::FuncOp func = onlyFunc(*module);
    absl::StatusOr<std::vector<nn::eval::Tensor>> loss =
        nn::eval::evaluate(func, randomArguments(func, config.vocab, rng));
    ASSERT_TRUE(loss.ok()) << spec << ": " << loss.status();
    ASSERT_EQ(loss->size(), 1u);
    const double value = (*loss)[0].values.at(0);
    EXPECT_TRUE(std::isfinite(value)) << spec;
    EXPECT_NEAR(value, std::log(static_cast<double>(config.vocab)), 0.05) << spec;
  }
}

// The options of Hugging Face configs (Qwen2's q/k/v biases and tied head,
// Llama 3.1's rope scaling, HF names) evaluate like the zoo's own graphs.
TEST_F(ZooBuilderTest, TinyHuggingFaceStyleGraphEvaluatesToTheUntrainedLoss) {
  TransformerConfig config = *configFromSpec("tiny:family=llama,layers=2,hidden=64,heads=4");
  config.qkv_bias = true;
  config.tie_embeddings = true;
  config.names = CheckpointNames::kHuggingFace;
  config.rope_scaling = {
      .factor = 4.0, .low_freq_factor = 1.0, .high_freq_factor = 4.0, .original_max_positions = 8};
  auto module = build(config, {.batch = 2, .seq = 8});
  ASSERT_TRUE(module);
  mlir::func::FuncOp func = onlyFunc(*module);
  const auto params = paramShapes(func);
  EXPECT_EQ(params.at("model.layers.1.self_attn.k_proj.bias"), (std::vector<int64_t>{32}));
  EXPECT_EQ(params.count("lm_head.weight"), 0u);
  int64_t parameters = 0;
  for (const auto& [name, shape] : params) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    parameters += n;
  }
  EXPECT_EQ(parameters, parameterCount(config));
  std::mt19937_64 rng(11);
  absl::StatusOr<std::vector<nn::eval::Tensor>> loss =
      nn::eval::evaluate(func, randomArguments(func, config.vocab, rng));
  ASSERT_TRUE(loss.ok()) << loss.status();
  // As TinyGraphsEvaluateToTheUntrainedLoss, plus the tied head's logit of
  // each position's own token, |e|^2 / rms(e) ~ 1.3 (+0.01); the mean over 16
  // tokens of label logits of spread 0.16 moves by about 0.04 either way.
  EXPECT_NEAR((*loss)[0].values.at(0), std::log(static_cast<double>(config.vocab)), 0.1);
}

TEST_F(ZooBuilderTest, UntiedGpt2HasItsOwnHead) {
  TransformerConfig config = *configFromSpec("tiny:family=gpt2,layers=1,hidden=32,heads=2");
  config.tie_embeddings = false;
  auto module = build(config, {.batch = 1, .seq = 4});
  ASSERT_TRUE(module);
  EXPECT_EQ(paramShapes(onlyFunc(*module)).at("lm_head.weight"),
            (std::vector<int64_t>{32, config.vocab}));
}

TEST_F(ZooBuilderTest, Bf16GraphKeepsAnF32Loss) {
  auto module = build(*configFromSpec("tiny:family=gpt2"), {.batch = 2, .seq = 4},
                      mlir::BFloat16Type::get(&context_));
  ASSERT_TRUE(module);
  mlir::func::FuncOp func = onlyFunc(*module);
  EXPECT_TRUE(func.getResultTypes()[0] ==
              mlir::RankedTensorType::get({}, mlir::Float32Type::get(&context_)));
  EXPECT_TRUE(
      llvm::cast<mlir::RankedTensorType>(func.getArgument(3).getType()).getElementType().isBF16());
}

TEST_F(ZooBuilderTest, BadShapesAndTypesAreRefused) {
  const TransformerConfig gpt2 = *publishedConfig("gpt2");
  const mlir::Type f32 = mlir::Float32Type::get(&context_);
  EXPECT_THAT(buildModel(context_, gpt2, {.batch = 1, .seq = 2048}, f32).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("seq 2048 exceeds"), HasSubstr("max_seq 1024"),
                             HasSubstr("choose seq <= 1024"))));
  EXPECT_THAT(buildModel(context_, gpt2, {.batch = 0, .seq = 8}, f32).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("got batch 0, seq 8")));
  EXPECT_THAT(
      buildModel(context_, gpt2, {.batch = 1, .seq = 8}, mlir::IntegerType::get(&context_, 32))
          .status(),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("must be f32, bf16 or f16, got i32")));
  TransformerConfig broken = gpt2;
  broken.num_heads = 7;
  EXPECT_THAT(buildModel(context_, broken, {.batch = 1, .seq = 8}, f32).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("heads 7")));
}

}  // namespace
}  // namespace loom::planner::models
