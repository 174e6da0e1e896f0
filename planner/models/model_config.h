// Architecture hyper-parameters of the transformer families in the model zoo
// (GPT-2, Llama 2, Llama 3) with their published sizes, plus a configurable
// `tiny` variant for tests; hf_config.h reads them from a Hugging Face
// config.json. The zoo builder turns a config into an `nn` graph.
#ifndef LOOM_PLANNER_MODELS_MODEL_CONFIG_H_
#define LOOM_PLANNER_MODELS_MODEL_CONFIG_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "plan/rope_frequency.h"

namespace loom::planner::models {

enum class ModelFamily {
  // Pre-LayerNorm, GELU MLP, learned positions, biases everywhere, LM head
  // tied to the token embedding (Radford et al. 2019, HF `GPT2LMHeadModel`).
  kGpt2,
  // RMSNorm, RoPE, SwiGLU MLP, no biases, untied LM head, grouped-query
  // attention where num_kv_heads < num_heads (Touvron et al. 2023; Meta 2024).
  // Mistral and Qwen2 are this family with the options below.
  kLlama,
};

// Which checkpoint's tensor names the graph's parameters carry. GPT-2 has
// one set (Hugging Face's); the Llama family has Meta's reference names
// ("layers.0.attention.wq.weight") or Hugging Face's
// ("model.layers.0.self_attn.q_proj.weight").
enum class CheckpointNames { kMeta, kHuggingFace };

struct TransformerConfig {
  std::string name;
  ModelFamily family = ModelFamily::kLlama;
  int64_t num_layers = 0;
  int64_t hidden = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  // Inner width of the MLP (GPT-2: 4 * hidden; Llama: the SwiGLU width).
  int64_t ffn_hidden = 0;
  int64_t vocab = 0;
  // Longest sequence the model supports; GPT-2's learned position table has
  // this many rows.
  int64_t max_seq = 0;
  double norm_eps = 1e-5;
  double rope_theta = 10000.0;
  // Llama family: the long-context frequency scaling of nn.rope (the
  // defaults: none).
  plan::RopeScaling rope_scaling = {};
  // Llama family: biases on the q, k and v projections (Qwen2); the output
  // projection and the MLP have none. GPT-2 has biases everywhere anyway.
  bool qkv_bias = false;
  // The LM head reads the token embedding table instead of a weight of its
  // own (GPT-2, small Qwen2 models).
  bool tie_embeddings = false;
  // Sliding-window attention width (Mistral, Qwen2); 0: full causal
  // attention. The graph's attention is causal over the whole sequence,
  // which equals the windowed one only when seq <= sliding_window, so
  // buildModel refuses longer sequences.
  int64_t sliding_window = 0;
  CheckpointNames names = CheckpointNames::kMeta;

  int64_t headDim() const { return hidden / num_heads; }
};

// The shapes of one training step: the batch the graph is built for.
struct BatchShape {
  int64_t batch = 1;
  int64_t seq = 0;
};

// The published configurations: gpt2 (124M), gpt2-medium, gpt2-large,
// gpt2-xl, llama2-7b, llama2-13b, llama2-70b, llama3-8b, llama3-70b,
// llama3-405b. Names are case-insensitive.
absl::StatusOr<TransformerConfig> publishedConfig(std::string_view name);
std::vector<std::string> publishedConfigNames();

// Options of the `tiny` test model; every field may be set from a spec string
// "tiny:layers=2,hidden=64,heads=4,kv_heads=2,ffn=128,vocab=256,seq=16".
struct TinyOptions {
  ModelFamily family = ModelFamily::kLlama;
  int64_t num_layers = 2;
  int64_t hidden = 64;
  int64_t num_heads = 4;
  int64_t num_kv_heads = 2;
  int64_t ffn_hidden = 128;
  int64_t vocab = 256;
  int64_t max_seq = 16;
};
absl::StatusOr<TransformerConfig> tinyConfig(const TinyOptions& options);

// A published name, or a "tiny[:key=value,...]" spec (keys: family=gpt2|llama,
// layers, hidden, heads, kv_heads, ffn, vocab, seq).
absl::StatusOr<TransformerConfig> configFromSpec(std::string_view spec);

// Checks the divisibility and positivity every builder relies on, and the
// rope scaling's parameters; the message names the field and the values.
absl::Status validateConfig(const TransformerConfig& config);

// Trainable parameters, counted from the architecture (tied weights once,
// q/k/v biases included).
int64_t parameterCount(const TransformerConfig& config);

}  // namespace loom::planner::models

#endif  // LOOM_PLANNER_MODELS_MODEL_CONFIG_H_
