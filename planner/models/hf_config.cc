// Hugging Face config.json -> TransformerConfig: one table row per supported
// architecture, one reader per family, and a field reader whose first
// failure names the file, the field and what was expected.
#include "planner/models/hf_config.h"

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "nlohmann/json.hpp"
#include "plan/rope_frequency.h"
#include "planner/models/model_config.h"

namespace loom::planner::models {
namespace {

using json = nlohmann::json;

// A JSON value for a message, cut short.
std::string shown(const json& value) {
  std::string text = value.dump();
  if (text.size() > 60) text = text.substr(0, 57) + "...";
  return text;
}

// Typed reads of one JSON object of a config file (the top level, or a
// nested object such as rope_scaling). The first failure is kept in the
// status the reader shares with its nested readers; reads after it return
// their fallback, so a family's reader reads straight through and checks
// once at the end. Absent and null fields take the fallback (HF's default).
class Fields {
 public:
  Fields(const json& object, const std::string& path, absl::Status& status, std::string prefix = "")
      : object_(object), path_(path), status_(status), prefix_(std::move(prefix)) {}

  bool has(const char* key) const {
    auto it = object_.find(key);
    return it != object_.end() && !it->is_null();
  }

  // A required positive integer.
  int64_t positiveInt(const char* key) {
    if (!has(key)) {
      missing(key, "a positive integer");
      return 0;
    }
    return positiveInt(key, 0);
  }
  int64_t positiveInt(const char* key, int64_t fallback) {
    if (!has(key)) return fallback;
    const json& value = object_.at(key);
    if (!value.is_number_integer() || value.get<int64_t>() < 1) {
      wrongType(key, "a positive integer", value);
      return fallback;
    }
    return value.get<int64_t>();
  }

  // A required positive number, or one with a fallback.
  double positiveNumber(const char* key) {
    if (!has(key)) {
      missing(key, "a positive number");
      return 1.0;
    }
    return positiveNumber(key, 1.0);
  }
  double positiveNumber(const char* key, double fallback) {
    if (!has(key)) return fallback;
    const json& value = object_.at(key);
    if (!value.is_number() || !(value.get<double>() > 0)) {
      wrongType(key, "a positive number", value);
      return fallback;
    }
    return value.get<double>();
  }

  bool flag(const char* key, bool fallback) {
    if (!has(key)) return fallback;
    const json& value = object_.at(key);
    if (!value.is_boolean()) {
      wrongType(key, "true or false", value);
      return fallback;
    }
    return value.get<bool>();
  }

  std::string text(const char* key, const std::string& fallback) {
    if (!has(key)) return fallback;
    const json& value = object_.at(key);
    if (!value.is_string()) {
      wrongType(key, "a string", value);
      return fallback;
    }
    return value.get<std::string>();
  }

  // A list of strings (absent or null: an empty one).
  std::vector<std::string> strings(const char* key) {
    std::vector<std::string> result;
    if (!has(key)) return result;
    const json& value = object_.at(key);
    const bool all_strings =
        value.is_array() && std::all_of(value.begin(), value.end(),
                                        [](const json& entry) { return entry.is_string(); });
    if (!all_strings) {
      wrongType(key, "a list of strings", value);
      return result;
    }
    for (const json& entry : value) result.push_back(entry.get<std::string>());
    return result;
  }

  // The nested object `key` (absent or null: an empty one).
  Fields object(const char* key) {
    static const json* const kEmpty = new json(json::object());
    if (!has(key)) return Fields(*kEmpty, path_, status_, prefix_ + key + ".");
    const json& value = object_.at(key);
    if (!value.is_object()) wrongType(key, "an object", value);
    return Fields(value.is_object() ? value : *kEmpty, path_, status_, prefix_ + key + ".");
  }

  // Refuses field `key`, whose value the planner cannot honour; `supported`
  // says what it can.
  void refuse(const char* key, std::string_view supported) {
    const json& value = has(key) ? object_.at(key) : json(nullptr);
    fail(absl::StrCat("config '", path_, "': ", prefix_, key, " = ", shown(value),
                      " is not supported; ", std::string(supported)));
  }

  void missing(const char* key, std::string_view expected) {
    fail(absl::StrCat("config '", path_, "': missing field '", prefix_, key, "' (",
                      std::string(expected), ")"));
  }
  void wrongType(const char* key, const char* expected, const json& got) {
    fail(absl::StrCat("config '", path_, "': field '", prefix_, key, "' must be ", expected,
                      ", got ", shown(got)));
  }

 private:
  void fail(std::string message) {
    if (status_.ok()) status_ = absl::InvalidArgumentError(std::move(message));
  }

  const json& object_;
  const std::string& path_;
  absl::Status& status_;
  const std::string prefix_;
};

// Mixture-of-experts fields (Mixtral, Qwen2-MoE, DeepSeek): the zoo builds
// dense MLPs only.
constexpr const char* kMoeFields[] = {
    "num_local_experts",   "num_experts",
    "num_experts_per_tok", "n_routed_experts",
    "n_shared_experts",    "moe_intermediate_size",
    "moe_layer_freq",      "shared_expert_intermediate_size",
};

// A boolean option that the graph supports in one setting only, which is
// also Hugging Face's default.
struct FixedFlag {
  const char* key;
  bool supported;
  const char* why;
};

constexpr FixedFlag kLlamaFlags[] = {
    {"attention_bias", false, "the graph has no biases on the q, k, v and o projections"},
    {"mlp_bias", false, "the graph's MLP has no biases"},
};

constexpr FixedFlag kGpt2Flags[] = {
    {"scale_attn_weights", true, "nn.attention always scales scores by 1/sqrt(head_dim)"},
    {"scale_attn_by_inverse_layer_idx", false, "nn.attention has no per-layer score scale"},
    {"add_cross_attention", false, "the graph is a decoder without cross-attention"},
};

void checkFlags(Fields& f, std::span<const FixedFlag> flags) {
  for (const FixedFlag& flag : flags) {
    if (f.flag(flag.key, flag.supported) != flag.supported) {
      f.refuse(flag.key,
               absl::StrCat("only ", flag.supported ? "true" : "false", " is (", flag.why, ")"));
    }
  }
}

// `rope_scaling`: absent, null or "default" is none; "linear" and "llama3"
// are what nn.rope implements. Older configs name the kind `type`.
plan::RopeScaling readRopeScaling(Fields& top) {
  if (!top.has("rope_scaling")) return {};
  Fields s = top.object("rope_scaling");
  const char* kind_key = s.has("rope_type") ? "rope_type" : "type";
  const std::string kind = s.text(kind_key, "default");
  if (kind == "default") return {};
  if (kind == "linear") return {.factor = s.positiveNumber("factor")};
  if (kind == "llama3") {
    return {.factor = s.positiveNumber("factor"),
            .low_freq_factor = s.positiveNumber("low_freq_factor"),
            .high_freq_factor = s.positiveNumber("high_freq_factor"),
            .original_max_positions = s.positiveInt("original_max_position_embeddings")};
  }
  s.refuse(kind_key,
           "supported rope scalings are \"linear\" and \"llama3\" (or no rope_scaling); the "
           "others change the frequencies in ways nn.rope does not implement");
  return {};
}

// What Llama, Mistral and Qwen2 share: sizes, GQA, RMSNorm, rotary
// embeddings, a SwiGLU MLP. Defaults are those of LlamaConfig.
void readLlamaCommon(Fields& f, TransformerConfig& c) {
  c.family = ModelFamily::kLlama;
  c.names = CheckpointNames::kHuggingFace;
  c.hidden = f.positiveInt("hidden_size");
  c.num_layers = f.positiveInt("num_hidden_layers");
  c.num_heads = f.positiveInt("num_attention_heads");
  c.num_kv_heads = f.positiveInt("num_key_value_heads", c.num_heads);
  c.ffn_hidden = f.positiveInt("intermediate_size");
  c.vocab = f.positiveInt("vocab_size");
  c.max_seq = f.positiveInt("max_position_embeddings");
  c.norm_eps = f.positiveNumber("rms_norm_eps", 1e-6);
  c.rope_theta = f.positiveNumber("rope_theta", 10000.0);
  c.rope_scaling = readRopeScaling(f);
  c.tie_embeddings = f.flag("tie_word_embeddings", false);
  if (f.text("hidden_act", "silu") != "silu") {
    f.refuse("hidden_act", "the Llama family's SwiGLU MLP is built with \"silu\" only");
  }
  // Some checkpoints (Gemma, Mistral Nemo) decouple head_dim from hidden.
  if (f.has("head_dim") && f.positiveInt("head_dim", 0) * c.num_heads != c.hidden) {
    f.refuse("head_dim", absl::StrCat("the graph's heads are hidden_size / num_attention_heads = ",
                                      c.hidden, " / ", c.num_heads, " wide"));
  }
}

void readLlama(Fields& f, TransformerConfig& c) {
  readLlamaCommon(f, c);
  checkFlags(f, kLlamaFlags);
}

void readMistral(Fields& f, TransformerConfig& c) {
  readLlamaCommon(f, c);
  c.sliding_window = f.positiveInt("sliding_window", 0);
}

// Qwen2: q, k and v carry biases. Its window, when use_sliding_window is
// set, applies to the layers from max_window_layers on; the config keeps it
// when any layer uses it, so that seq <= window keeps every layer exact.
void readQwen2(Fields& f, TransformerConfig& c) {
  readLlamaCommon(f, c);
  c.qkv_bias = true;
  const int64_t window = f.positiveInt("sliding_window", 0);
  const int64_t full_layers = f.positiveInt("max_window_layers", c.num_layers);
  if (f.flag("use_sliding_window", false) && window > 0 && full_layers < c.num_layers) {
    c.sliding_window = window;
  }
}

// GPT2LMHeadModel; defaults are those of GPT2Config.
void readGpt2(Fields& f, TransformerConfig& c) {
  c.family = ModelFamily::kGpt2;
  c.names = CheckpointNames::kHuggingFace;
  c.num_layers = f.positiveInt("n_layer");
  c.hidden = f.positiveInt("n_embd");
  c.num_heads = f.positiveInt("n_head");
  c.num_kv_heads = c.num_heads;
  c.ffn_hidden = f.positiveInt("n_inner", 4 * c.hidden);
  c.vocab = f.positiveInt("vocab_size");
  c.max_seq = f.positiveInt("n_positions");
  c.norm_eps = f.positiveNumber("layer_norm_epsilon", 1e-5);
  c.tie_embeddings = f.flag("tie_word_embeddings", true);
  // nn.gelu is the tanh form ("gelu_new"); the exact "gelu" differs from it
  // by under 1e-3 and costs the same, so it is planned as nn.gelu too.
  const std::string act = f.text("activation_function", "gelu_new");
  if (act != "gelu_new" && act != "gelu" && act != "gelu_pytorch_tanh") {
    f.refuse("activation_function",
             "supported are \"gelu_new\", \"gelu_pytorch_tanh\" and \"gelu\" (nn.gelu)");
  }
  checkFlags(f, kGpt2Flags);
}

struct Architecture {
  const char* model_type;
  const char* architecture;
  void (*read)(Fields&, TransformerConfig&);
};

constexpr Architecture kArchitectures[] = {
    {"llama", "LlamaForCausalLM", readLlama},
    {"mistral", "MistralForCausalLM", readMistral},
    {"qwen2", "Qwen2ForCausalLM", readQwen2},
    {"gpt2", "GPT2LMHeadModel", readGpt2},
};

std::string supportedList() { return absl::StrJoin(supportedHfArchitectures(), ", "); }

// The row for `model_type`, else for the first of `architectures`; every
// listed architecture must be the row's causal LM.
const Architecture* findArchitecture(Fields& f) {
  const std::string model_type = f.text("model_type", "");
  const std::vector<std::string> architectures = f.strings("architectures");
  if (model_type.empty() && architectures.empty()) {
    f.missing("model_type", absl::StrCat("or architectures; supported are ", supportedList()));
    return nullptr;
  }
  const Architecture* row = nullptr;
  for (const Architecture& a : kArchitectures) {
    if (model_type.empty() ? architectures[0] == a.architecture : model_type == a.model_type) {
      row = &a;
    }
  }
  const char* key = model_type.empty() ? "architectures" : "model_type";
  if (row == nullptr) {
    f.refuse(key, absl::StrCat("supported are ", supportedList()));
    return nullptr;
  }
  for (const std::string& architecture : architectures) {
    if (architecture != row->architecture) {
      f.refuse("architectures", absl::StrCat("model_type \"", row->model_type, "\" is planned as ",
                                             row->architecture, " (the causal LM) only"));
      return nullptr;
    }
  }
  return row;
}

// `_name_or_path`, else the file's directory, else "hf-model".
std::string modelName(const json& config, std::string_view path) {
  if (auto it = config.find("_name_or_path"); it != config.end() && it->is_string()) {
    if (!it->get<std::string>().empty()) return it->get<std::string>();
  }
  const std::string dir = std::filesystem::path(path).parent_path().filename().string();
  return dir.empty() || dir == "." || dir == ".." ? "hf-model" : dir;
}

}  // namespace

std::vector<std::string> supportedHfArchitectures() {
  std::vector<std::string> names;
  for (const Architecture& a : kArchitectures) {
    names.push_back(absl::StrCat(a.architecture, " (", a.model_type, ")"));
  }
  return names;
}

absl::StatusOr<TransformerConfig> parseHfConfig(std::string_view text, std::string_view path) {
  const std::string where(path);
  const json config = json::parse(text, /*cb=*/nullptr, /*allow_exceptions=*/false);
  if (config.is_discarded()) {
    return absl::InvalidArgumentError(
        absl::StrCat("config '", where, "' is not valid JSON; give a Hugging Face config.json"));
  }
  if (!config.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "config '", where, "': expected a JSON object at the top level, got ", shown(config)));
  }
  absl::Status status;
  Fields f(config, where, status);
  for (const char* key : kMoeFields) {
    const json* value = f.has(key) ? &config.at(key) : nullptr;
    if (value != nullptr && *value != json(0) && *value != json(false)) {
      f.refuse(key, absl::StrCat("mixture-of-experts models cannot be planned (the graphs have "
                                 "dense MLPs); supported are ",
                                 supportedList()));
    }
  }
  const Architecture* row = status.ok() ? findArchitecture(f) : nullptr;
  TransformerConfig result;
  result.name = modelName(config, path);
  if (row != nullptr) row->read(f, result);
  if (!status.ok()) return status;
  if (absl::Status valid = validateConfig(result); !valid.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("config '", where, "': ", valid.message()));
  }
  return result;
}

absl::StatusOr<TransformerConfig> loadHfConfig(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  const std::string text = in ? std::string(std::istreambuf_iterator<char>(in), {}) : "";
  if (!in.is_open() || in.bad()) {
    const std::error_code error(errno, std::generic_category());
    return absl::InvalidArgumentError(
        absl::StrCat("cannot read config '", path, "': ", error.message(),
                     "; give the path of a Hugging Face config.json"));
  }
  return parseHfConfig(text, path);
}

}  // namespace loom::planner::models
