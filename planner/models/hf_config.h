// Reads a Hugging Face transformers `config.json` into a TransformerConfig,
// so that a published checkpoint's architecture can be planned without a
// zoo entry: Llama (2, 3, 3.1), Mistral, Qwen2 (2.5) and GPT-2. Whatever
// the zoo builder cannot reproduce exactly (mixture of experts, other
// activations, other rope scalings, biases the graph lacks) is refused with
// the field, its value and what is supported. docs/model_zoo.md, "Hugging
// Face configs", lists the fields read.
#ifndef LOOM_PLANNER_MODELS_HF_CONFIG_H_
#define LOOM_PLANNER_MODELS_HF_CONFIG_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "planner/models/model_config.h"

namespace loom::planner::models {

// Parses the text of a config.json. `path` names the file in messages and,
// when the config has no `_name_or_path`, gives the model its name (the
// file's directory, as in "Llama-3.1-8B/config.json"; "hf-model" when the
// path has no directory). The result is validated (validateConfig), names
// its parameters as Hugging Face checkpoints do, and has max_seq =
// max_position_embeddings (GPT-2: n_positions). Fails with InvalidArgument.
absl::StatusOr<TransformerConfig> parseHfConfig(std::string_view text, std::string_view path);

// Reads and parses the config.json at `path`; an unreadable file is
// InvalidArgument too.
absl::StatusOr<TransformerConfig> loadHfConfig(const std::string& path);

// "LlamaForCausalLM (llama)", ...: what parseHfConfig accepts.
std::vector<std::string> supportedHfArchitectures();

}  // namespace loom::planner::models

#endif  // LOOM_PLANNER_MODELS_HF_CONFIG_H_
