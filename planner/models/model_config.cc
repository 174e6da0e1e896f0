// Published transformer configurations and the parameter-count formula.
#include "planner/models/model_config.h"

#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

namespace loom::planner::models {
namespace {

TransformerConfig gpt2(std::string name, int64_t layers, int64_t hidden, int64_t heads) {
  return {.name = std::move(name),
          .family = ModelFamily::kGpt2,
          .num_layers = layers,
          .hidden = hidden,
          .num_heads = heads,
          .num_kv_heads = heads,
          .ffn_hidden = 4 * hidden,
          .vocab = 50257,
          .max_seq = 1024,
          .norm_eps = 1e-5,
          .tie_embeddings = true,
          .names = CheckpointNames::kHuggingFace};
}

TransformerConfig llama(std::string name, int64_t layers, int64_t hidden, int64_t heads,
                        int64_t kv_heads, int64_t ffn, int64_t vocab, int64_t max_seq,
                        double rope_theta) {
  return {.name = std::move(name),
          .family = ModelFamily::kLlama,
          .num_layers = layers,
          .hidden = hidden,
          .num_heads = heads,
          .num_kv_heads = kv_heads,
          .ffn_hidden = ffn,
          .vocab = vocab,
          .max_seq = max_seq,
          .norm_eps = 1e-5,
          .rope_theta = rope_theta};
}

// Sources: GPT-2 from the released checkpoints' config.json (n_layer, n_embd,
// n_head; n_positions 1024, vocab 50257). Llama 2 from Touvron et al. 2023,
// Table 1 and the released params.json (dim, n_layers, n_heads, n_kv_heads;
// ffn widths 11008/13824/28672 follow from ffn_dim_multiplier and
// multiple_of). Llama 3 from Meta's "The Llama 3 Herd of Models" (2024),
// Table 3 (layers, model dim, FFN dim, heads, KV heads, vocab 128,256, RoPE
// base 500,000); the 405B model shipped as Llama 3.1 with 128K context.
std::vector<TransformerConfig> buildPublished() {
  return {
      gpt2("gpt2", 12, 768, 12),
      gpt2("gpt2-medium", 24, 1024, 16),
      gpt2("gpt2-large", 36, 1280, 20),
      gpt2("gpt2-xl", 48, 1600, 25),
      llama("llama2-7b", 32, 4096, 32, 32, 11008, 32000, 4096, 10000.0),
      llama("llama2-13b", 40, 5120, 40, 40, 13824, 32000, 4096, 10000.0),
      llama("llama2-70b", 80, 8192, 64, 8, 28672, 32000, 4096, 10000.0),
      llama("llama3-8b", 32, 4096, 32, 8, 14336, 128256, 8192, 500000.0),
      llama("llama3-70b", 80, 8192, 64, 8, 28672, 128256, 8192, 500000.0),
      llama("llama3-405b", 126, 16384, 128, 8, 53248, 128256, 131072, 500000.0),
  };
}

const std::vector<TransformerConfig>& published() {
  static const std::vector<TransformerConfig>* const kPublished =
      new std::vector<TransformerConfig>(buildPublished());
  return *kPublished;
}

absl::Status positive(std::string_view model, std::string_view field, int64_t value) {
  if (value > 0) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "model ", std::string(model), ": ", std::string(field), " must be positive, got ", value));
}

// The conditions nn.rope's verifier puts on its scaling attributes, checked
// here so that a bad config fails with the config's name, not an IR error.
absl::Status validateRopeScaling(std::string_view model, const plan::RopeScaling& s) {
  auto bad = [&](std::string_view what) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model ", std::string(model), ": rope scaling ", std::string(what), " (factor ", s.factor,
        ", low_freq_factor ", s.low_freq_factor, ", high_freq_factor ", s.high_freq_factor,
        ", original_max_positions ", s.original_max_positions,
        "); Llama 3.1 uses factor 8, low 1, high 4, original 8192"));
  };
  if (!(s.factor > 0) || !std::isfinite(s.factor)) return bad("needs a positive finite factor");
  if (s.original_max_positions < 0) return bad("needs original_max_positions >= 0");
  if (s.original_max_positions == 0) return absl::OkStatus();
  if (!(s.low_freq_factor > 0) || !(s.high_freq_factor > s.low_freq_factor) ||
      !std::isfinite(s.high_freq_factor)) {
    return bad("needs 0 < low_freq_factor < high_freq_factor");
  }
  return absl::OkStatus();
}

}  // namespace

std::vector<std::string> publishedConfigNames() {
  std::vector<std::string> names;
  for (const TransformerConfig& config : published()) names.push_back(config.name);
  return names;
}

absl::StatusOr<TransformerConfig> publishedConfig(std::string_view name) {
  const std::string key = absl::AsciiStrToLower(absl::string_view(name.data(), name.size()));
  for (const TransformerConfig& config : published()) {
    if (config.name == key) return config;
  }
  return absl::NotFoundError(absl::StrCat("unknown model '", key, "'; known models are ",
                                          absl::StrJoin(publishedConfigNames(), ", "),
                                          ", or tiny[:layers=..,hidden=..,...]"));
}

absl::Status validateConfig(const TransformerConfig& config) {
  const std::string_view model = config.name;
  for (const auto& [field, value] :
       std::vector<std::pair<std::string_view, int64_t>>{{"layers", config.num_layers},
                                                         {"hidden", config.hidden},
                                                         {"heads", config.num_heads},
                                                         {"kv_heads", config.num_kv_heads},
                                                         {"ffn", config.ffn_hidden},
                                                         {"vocab", config.vocab},
                                                         {"seq", config.max_seq}}) {
    if (absl::Status status = positive(model, field, value); !status.ok()) return status;
  }
  if (config.hidden % config.num_heads != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model ", std::string(model), ": hidden ", config.hidden, " is not divisible by heads ",
        config.num_heads, "; pick a head count that divides the hidden size"));
  }
  if (config.num_heads % config.num_kv_heads != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model ", std::string(model), ": heads ", config.num_heads,
        " is not a multiple of kv_heads ", config.num_kv_heads,
        "; grouped-query attention shares each kv head among heads / kv_heads query heads"));
  }
  if (config.family == ModelFamily::kGpt2 && config.num_kv_heads != config.num_heads) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model ", std::string(model), ": gpt2 uses multi-head attention, so kv_heads (",
        config.num_kv_heads, ") must equal heads (", config.num_heads, ")"));
  }
  if (config.family == ModelFamily::kLlama && config.headDim() % 2 != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model ", std::string(model), ": head dim ", config.headDim(),
        " is odd; rotary embeddings rotate pairs of features, so hidden / heads must be even"));
  }
  if (config.sliding_window < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("model ", std::string(model),
                     ": sliding_window must be 0 (none) or positive, got ", config.sliding_window));
  }
  return validateRopeScaling(model, config.rope_scaling);
}

absl::StatusOr<TransformerConfig> tinyConfig(const TinyOptions& options) {
  TransformerConfig config = {.name = "tiny",
                              .family = options.family,
                              .num_layers = options.num_layers,
                              .hidden = options.hidden,
                              .num_heads = options.num_heads,
                              .num_kv_heads = options.num_kv_heads,
                              .ffn_hidden = options.ffn_hidden,
                              .vocab = options.vocab,
                              .max_seq = options.max_seq,
                              .tie_embeddings = options.family == ModelFamily::kGpt2,
                              .names = options.family == ModelFamily::kGpt2
                                           ? CheckpointNames::kHuggingFace
                                           : CheckpointNames::kMeta};
  if (absl::Status status = validateConfig(config); !status.ok()) return status;
  return config;
}

absl::StatusOr<TransformerConfig> configFromSpec(std::string_view spec) {
  const absl::string_view text(spec.data(), spec.size());
  if (!absl::StartsWith(absl::AsciiStrToLower(text), "tiny")) return publishedConfig(spec);
  TinyOptions options;
  const absl::string_view rest = text.substr(4);
  if (rest.empty()) return tinyConfig(options);
  if (rest[0] != ':') {
    return absl::InvalidArgumentError(absl::StrCat(
        "model spec '", text, "': expected ':' after 'tiny', e.g. tiny:layers=2,hidden=64"));
  }
  for (absl::string_view item : absl::StrSplit(rest.substr(1), ',', absl::SkipWhitespace())) {
    const std::vector<absl::string_view> kv = absl::StrSplit(item, absl::MaxSplits('=', 1));
    const absl::string_view key = absl::StripAsciiWhitespace(kv[0]);
    const absl::string_view value = kv.size() == 2 ? absl::StripAsciiWhitespace(kv[1]) : "";
    if (key == "family") {
      if (value == "gpt2") {
        options.family = ModelFamily::kGpt2;
      } else if (value == "llama") {
        options.family = ModelFamily::kLlama;
      } else {
        return absl::InvalidArgumentError(
            absl::StrCat("model spec '", text, "': family '", value, "' is not gpt2 or llama"));
      }
      continue;
    }
    int64_t* field = key == "layers"     ? &options.num_layers
                     : key == "hidden"   ? &options.hidden
                     : key == "heads"    ? &options.num_heads
                     : key == "kv_heads" ? &options.num_kv_heads
                     : key == "ffn"      ? &options.ffn_hidden
                     : key == "vocab"    ? &options.vocab
                     : key == "seq"      ? &options.max_seq
                                         : nullptr;
    if (field == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("model spec '", text, "': unknown key '", key,
                       "'; keys are family, layers, hidden, heads, kv_heads, ffn, vocab, seq"));
    }
    if (!absl::SimpleAtoi(value, field)) {
      return absl::InvalidArgumentError(
          absl::StrCat("model spec '", text, "': ", key, "='", value, "' is not an integer"));
    }
  }
  if (options.family == ModelFamily::kGpt2 && rest.find("kv_heads") == absl::string_view::npos) {
    options.num_kv_heads = options.num_heads;
  }
  return tinyConfig(options);
}

int64_t parameterCount(const TransformerConfig& c) {
  const int64_t h = c.hidden;
  const int64_t kv_width = c.num_kv_heads * c.headDim();
  const int64_t head = c.tie_embeddings ? 0 : c.vocab * h;
  if (c.family == ModelFamily::kGpt2) {
    // Per layer: two LayerNorms (scale + bias), fused QKV and output
    // projections with biases, a 2-layer GELU MLP with biases.
    const int64_t per_layer = 2 * (2 * h) + (h * 3 * h + 3 * h) + (h * h + h) +
                              (h * c.ffn_hidden + c.ffn_hidden) + (c.ffn_hidden * h + h);
    // Token and position tables, final LayerNorm, and the LM head unless
    // it is tied (it is in every released GPT-2).
    return c.vocab * h + c.max_seq * h + c.num_layers * per_layer + 2 * h + head;
  }
  // Per layer: two RMSNorm scales, q/o projections, k/v projections of the
  // kv heads, and the SwiGLU gate/up/down projections; biases only on q, k
  // and v where qkv_bias says.
  const int64_t q_width = c.num_heads * c.headDim();
  const int64_t biases = c.qkv_bias ? q_width + 2 * kv_width : 0;
  const int64_t per_layer =
      2 * h + 2 * h * q_width + 2 * h * kv_width + biases + 3 * h * c.ffn_hidden;
  // Token embedding, LM head unless tied, final RMSNorm.
  return c.vocab * h + head + c.num_layers * per_layer + h;
}

}  // namespace loom::planner::models
