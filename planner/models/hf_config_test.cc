// Tests of reading Hugging Face config.json files: the published configs in
// testdata/ give the checkpoints' exact parameter counts, in the config and
// in the built graph, with Hugging Face tensor names; every refusal names
// the file, the field, its value and what is supported.
#include "planner/models/hf_config.h"

#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Location.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "nlohmann/json.hpp"
#include "planner/dialect/nn/ir/nn_dialect.h"
#include "planner/dialect/nn/ir/nn_ops.h"
#include "planner/models/model_config.h"
#include "planner/models/zoo_builder.h"
#include "tests/testing/status_matchers.h"

namespace loom::planner::models {
namespace {

using ::loom::testutil::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;
using json = nlohmann::json;

std::string testdata(const std::string& name) {
  return absl::StrCat(std::getenv("TEST_SRCDIR"), "/loom/planner/models/testdata/", name);
}

struct Published {
  const char* file;
  const char* name;
  int64_t parameters;  // Hugging Face `num_parameters()`
};

constexpr Published kPublished[] = {
    {"llama-3.1-8b.config.json", "meta-llama/Llama-3.1-8B", 8'030'261'248},
    {"mistral-7b-v0.1.config.json", "mistralai/Mistral-7B-v0.1", 7'241'732'096},
    {"qwen2.5-7b.config.json", "Qwen/Qwen2.5-7B", 7'615'616'512},
    {"qwen2.5-0.5b.config.json", "Qwen/Qwen2.5-0.5B", 494'032'768},
    {"gpt2.config.json", "openai-community/gpt2", 124'439'808},
};

TransformerConfig load(const std::string& file) {
  absl::StatusOr<TransformerConfig> config = loadHfConfig(testdata(file));
  EXPECT_TRUE(config.ok()) << config.status();
  return config.ok() ? *config : TransformerConfig{};
}

// A small Llama config that the refusal tests edit one field at a time.
json smallLlama() {
  return json::parse(R"json({
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64,
    "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
    "intermediate_size": 128, "vocab_size": 256, "max_position_embeddings": 64,
    "hidden_act": "silu"})json");
}

absl::Status parseStatus(const json& config) {
  return parseHfConfig(config.dump(), "models/small/config.json").status();
}

class HfConfigTest : public ::testing::Test {
 protected:
  // The built graph's function, verified.
  mlir::func::FuncOp build(const TransformerConfig& config, BatchShape shape) {
    absl::StatusOr<mlir::OwningOpRef<mlir::ModuleOp>> module =
        buildModel(context_, config, shape, mlir::Float32Type::get(&context_));
    EXPECT_TRUE(module.ok()) << module.status();
    if (!module.ok()) return nullptr;
    EXPECT_TRUE(mlir::succeeded(mlir::verify(**module))) << config.name;
    modules_.push_back(std::move(*module));
    return *modules_.back()->getOps<mlir::func::FuncOp>().begin();
  }

  // Parameter name -> element count.
  std::map<std::string, int64_t> params(mlir::func::FuncOp func) {
    std::map<std::string, int64_t> result;
    for (mlir::BlockArgument arg : func.getArguments()) {
      if (!func.getArgAttr(arg.getArgNumber(), nn::NnDialect::kParamAttrName)) continue;
      auto name =
          func.getArgAttrOfType<mlir::StringAttr>(arg.getArgNumber(), nn::NnDialect::kNameAttrName);
      EXPECT_TRUE(name) << "parameter #" << arg.getArgNumber();
      const int64_t n = llvm::cast<mlir::RankedTensorType>(arg.getType()).getNumElements();
      EXPECT_TRUE(result.emplace(name.str(), n).second) << "duplicate " << name.str();
    }
    return result;
  }

  mlir::MLIRContext context_;
  std::vector<mlir::OwningOpRef<mlir::ModuleOp>> modules_;
};

TEST_F(HfConfigTest, PublishedConfigsHaveTheCheckpointsParameterCounts) {
  for (const Published& published : kPublished) {
    const TransformerConfig config = load(published.file);
    EXPECT_EQ(config.name, published.name);
    EXPECT_EQ(parameterCount(config), published.parameters) << published.file;
    mlir::func::FuncOp func = build(config, {.batch = 1, .seq = 8});
    ASSERT_TRUE(func) << published.file;
    int64_t total = 0;
    for (const auto& [name, count] : params(func)) total += count;
    EXPECT_EQ(total, published.parameters) << published.file;
  }
}

TEST_F(HfConfigTest, ReadsTheArchitectureFields) {
  const TransformerConfig llama = load("llama-3.1-8b.config.json");
  EXPECT_EQ(llama.family, ModelFamily::kLlama);
  EXPECT_EQ(llama.names, CheckpointNames::kHuggingFace);
  EXPECT_EQ(llama.num_kv_heads, 8);
  EXPECT_EQ(llama.max_seq, 131072);
  EXPECT_EQ(llama.rope_theta, 500000.0);
  EXPECT_EQ(llama.norm_eps, 1e-5);
  EXPECT_EQ(llama.rope_scaling.factor, 8.0);
  EXPECT_EQ(llama.rope_scaling.low_freq_factor, 1.0);
  EXPECT_EQ(llama.rope_scaling.high_freq_factor, 4.0);
  EXPECT_EQ(llama.rope_scaling.original_max_positions, 8192);
  EXPECT_FALSE(llama.tie_embeddings);
  EXPECT_FALSE(llama.qkv_bias);

  EXPECT_EQ(load("mistral-7b-v0.1.config.json").sliding_window, 4096);

  const TransformerConfig qwen = load("qwen2.5-7b.config.json");
  EXPECT_TRUE(qwen.qkv_bias);
  EXPECT_FALSE(qwen.tie_embeddings);
  EXPECT_EQ(qwen.sliding_window, 0) << "use_sliding_window is false";
  EXPECT_EQ(qwen.norm_eps, 1e-6);
  EXPECT_EQ(qwen.rope_theta, 1e6);
  EXPECT_EQ(qwen.rope_scaling.factor, 1.0);
  EXPECT_TRUE(load("qwen2.5-0.5b.config.json").tie_embeddings);

  const TransformerConfig gpt2 = load("gpt2.config.json");
  EXPECT_EQ(gpt2.family, ModelFamily::kGpt2);
  EXPECT_EQ(gpt2.ffn_hidden, 3072) << "n_inner null is 4 * n_embd";
  EXPECT_EQ(gpt2.max_seq, 1024);
  EXPECT_TRUE(gpt2.tie_embeddings);
}

TEST_F(HfConfigTest, GraphsCarryHuggingFaceNamesBiasesAndTiedHeads) {
  const auto small = params(build(load("qwen2.5-0.5b.config.json"), {.batch = 1, .seq = 4}));
  EXPECT_EQ(small.at("model.embed_tokens.weight"), 151936 * 896);
  EXPECT_EQ(small.at("model.layers.0.self_attn.q_proj.bias"), 896);
  EXPECT_EQ(small.at("model.layers.23.self_attn.k_proj.bias"), 128);
  EXPECT_EQ(small.at("model.layers.23.self_attn.v_proj.weight"), 896 * 128);
  EXPECT_EQ(small.at("model.layers.5.mlp.gate_proj.weight"), 896 * 4864);
  EXPECT_EQ(small.at("model.layers.5.post_attention_layernorm.weight"), 896);
  EXPECT_EQ(small.at("model.norm.weight"), 896);
  EXPECT_EQ(small.count("model.layers.0.self_attn.o_proj.bias"), 0u);
  EXPECT_EQ(small.count("lm_head.weight"), 0u) << "tied to model.embed_tokens.weight";

  const auto large = params(build(load("qwen2.5-7b.config.json"), {.batch = 1, .seq = 4}));
  EXPECT_EQ(large.at("lm_head.weight"), 3584 * 152064);
}

// Layer ops are located at "model.layers.<N>.<module>", the pattern the
// layer grouping reads, and rope carries Llama 3.1's scaling.
TEST_F(HfConfigTest, OpsKeepTheirLayerPathsAndRopeItsScaling) {
  TransformerConfig config = load("llama-3.1-8b.config.json");
  config.num_layers = 2;
  config.vocab = 512;
  std::vector<std::string> attention;
  int ropes = 0;
  build(config, {.batch = 1, .seq = 4}).walk([&](mlir::Operation* op) {
    if (auto rope = llvm::dyn_cast<nn::RopeOp>(op)) {
      ++ropes;
      const plan::RopeScaling scaling = rope.getScaling();
      EXPECT_EQ(scaling.factor, 8.0);
      EXPECT_EQ(scaling.original_max_positions, 8192);
    }
    if (llvm::isa<nn::AttentionOp>(op)) {
      attention.push_back(llvm::cast<mlir::NameLoc>(op->getLoc()).getName().str());
    }
  });
  EXPECT_EQ(ropes, 4);
  EXPECT_EQ(attention,
            (std::vector<std::string>{"model.layers.0.self_attn", "model.layers.1.self_attn"}));
}

TEST_F(HfConfigTest, SequencesBeyondTheSlidingWindowAreRefused) {
  const TransformerConfig mistral = load("mistral-7b-v0.1.config.json");
  EXPECT_THAT(
      buildModel(context_, mistral, {.batch = 1, .seq = 8192}, mlir::Float32Type::get(&context_))
          .status(),
      StatusIs(absl::StatusCode::kInvalidArgument,
               AllOf(HasSubstr("mistralai/Mistral-7B-v0.1: seq 8192 exceeds the model's "
                               "sliding_window 4096"),
                     HasSubstr("plan with --seq <= 4096"))));
}

TEST(HfConfigParseTest, QwenWindowAppliesOnlyWhenSomeLayerUsesIt) {
  json qwen = smallLlama();
  qwen["model_type"] = "qwen2";
  qwen["architectures"] = {"Qwen2ForCausalLM"};
  qwen["sliding_window"] = 32;
  qwen["use_sliding_window"] = true;
  qwen["max_window_layers"] = 1;
  EXPECT_EQ(parseHfConfig(qwen.dump(), "q/config.json")->sliding_window, 32);
  qwen["max_window_layers"] = 2;
  EXPECT_EQ(parseHfConfig(qwen.dump(), "q/config.json")->sliding_window, 0);
}

TEST(HfConfigParseTest, LinearRopeScalingAndDefaults) {
  json config = smallLlama();
  config["rope_scaling"] = {{"type", "linear"}, {"factor", 2.0}};
  config.erase("num_key_value_heads");
  absl::StatusOr<TransformerConfig> parsed = parseHfConfig(config.dump(), "x/config.json");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->rope_scaling.factor, 2.0);
  EXPECT_EQ(parsed->rope_scaling.original_max_positions, 0);
  EXPECT_EQ(parsed->num_kv_heads, 4) << "num_key_value_heads defaults to the heads";
  EXPECT_EQ(parsed->norm_eps, 1e-6);
  EXPECT_EQ(parsed->rope_theta, 10000.0);
}

TEST(HfConfigParseTest, NameComesFromNameOrPathElseTheDirectory) {
  json config = smallLlama();
  EXPECT_EQ(parseHfConfig(config.dump(), "hub/Llama-3.2-1B/config.json")->name, "Llama-3.2-1B");
  EXPECT_EQ(parseHfConfig(config.dump(), "config.json")->name, "hf-model");
  config["_name_or_path"] = "org/model";
  EXPECT_EQ(parseHfConfig(config.dump(), "hub/Llama-3.2-1B/config.json")->name, "org/model");
}

TEST(HfConfigParseTest, UnsupportedModelsAreRefused) {
  json moe = smallLlama();
  moe["model_type"] = "mixtral";
  moe["architectures"] = {"MixtralForCausalLM"};
  moe["num_local_experts"] = 8;
  EXPECT_THAT(parseStatus(moe),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("config 'models/small/config.json': num_local_experts = 8 "
                                       "is not supported; mixture-of-experts"),
                             HasSubstr("LlamaForCausalLM (llama)"))));
  json unknown = smallLlama();
  unknown["model_type"] = "falcon";
  EXPECT_THAT(parseStatus(unknown),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("model_type = \"falcon\" is not supported; supported are "
                                       "LlamaForCausalLM (llama), MistralForCausalLM (mistral), "
                                       "Qwen2ForCausalLM (qwen2), GPT2LMHeadModel (gpt2)"))));
  json head = smallLlama();
  head["architectures"] = {"LlamaForSequenceClassification"};
  EXPECT_THAT(
      parseStatus(head),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("architectures = [\"LlamaForSequenceClassification\"] is not "
                         "supported; model_type \"llama\" is planned as LlamaForCausalLM")));
  json nameless = smallLlama();
  nameless.erase("model_type");
  nameless.erase("architectures");
  EXPECT_THAT(parseStatus(nameless), StatusIs(absl::StatusCode::kInvalidArgument,
                                              HasSubstr("missing field 'model_type' (or "
                                                        "architectures; supported are")));
}

TEST(HfConfigParseTest, UnsupportedOptionsAreRefused) {
  struct Case {
    const char* key;
    json value;
    const char* message;
  };
  const Case cases[] = {
      {"hidden_act", "gelu", "hidden_act = \"gelu\" is not supported; the Llama family's SwiGLU"},
      {"attention_bias", true, "attention_bias = true is not supported; only false is"},
      {"mlp_bias", true, "mlp_bias = true is not supported; only false is (the graph's MLP"},
      {"head_dim", 32,
       "head_dim = 32 is not supported; the graph's heads are hidden_size / "
       "num_attention_heads = 64 / 4 wide"},
      {"rope_scaling", json{{"rope_type", "yarn"}, {"factor", 4.0}},
       "rope_scaling.rope_type = \"yarn\" is not supported; supported rope scalings are "
       "\"linear\" and \"llama3\""},
  };
  for (const Case& c : cases) {
    json config = smallLlama();
    config[c.key] = c.value;
    EXPECT_THAT(parseStatus(config),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(c.message)))
        << c.key;
  }
  json gpt2 = json::parse(R"json({"model_type": "gpt2", "n_layer": 2, "n_embd": 64,
      "n_head": 4, "vocab_size": 100, "n_positions": 32, "activation_function": "relu"})json");
  EXPECT_THAT(parseStatus(gpt2), StatusIs(absl::StatusCode::kInvalidArgument,
                                          HasSubstr("activation_function = \"relu\" is not "
                                                    "supported; supported are \"gelu_new\"")));
}

TEST(HfConfigParseTest, BadFieldsNameTheFileTheFieldAndTheExpectation) {
  json missing = smallLlama();
  missing.erase("hidden_size");
  EXPECT_THAT(parseStatus(missing),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("config 'models/small/config.json': missing field "
                                 "'hidden_size' (a positive integer)")));
  json wrong = smallLlama();
  wrong["hidden_size"] = "64";
  EXPECT_THAT(parseStatus(wrong),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("config 'models/small/config.json': field 'hidden_size' must "
                                 "be a positive integer, got \"64\"")));
  json nested = smallLlama();
  nested["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", "8"}};
  EXPECT_THAT(parseStatus(nested),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("field 'rope_scaling.factor' must be a positive number, "
                                 "got \"8\"")));
  json flag = smallLlama();
  flag["tie_word_embeddings"] = 1;
  EXPECT_THAT(parseStatus(flag), StatusIs(absl::StatusCode::kInvalidArgument,
                                          HasSubstr("field 'tie_word_embeddings' must be true "
                                                    "or false, got 1")));
  json indivisible = smallLlama();
  indivisible["num_attention_heads"] = 6;
  indivisible["num_key_value_heads"] = 6;
  EXPECT_THAT(parseStatus(indivisible),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("config 'models/small/config.json': model small: hidden 64 is "
                                 "not divisible by heads 6")));
}

TEST(HfConfigParseTest, UnreadableAndMalformedFilesAreRefused) {
  EXPECT_THAT(loadHfConfig("/nonexistent/config.json").status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("cannot read config '/nonexistent/config.json': No such file")));
  EXPECT_THAT(parseHfConfig("{\"model_type\": ", "a/config.json").status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("config 'a/config.json' is not valid JSON")));
  EXPECT_THAT(parseHfConfig("[1, 2]", "a/config.json").status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("expected a JSON object at the top level, got [1,2]")));
}

}  // namespace
}  // namespace loom::planner::models
