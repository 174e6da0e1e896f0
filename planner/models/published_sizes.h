// The exact parameter counts of the released checkpoints of every published
// model in the zoo, shared by the tests of the config formula and of the
// built graphs so both are checked against one table.
#ifndef LOOM_PLANNER_MODELS_PUBLISHED_SIZES_H_
#define LOOM_PLANNER_MODELS_PUBLISHED_SIZES_H_

#include <cstdint>

namespace loom::planner::models {

struct PublishedSize {
  const char* name;
  int64_t parameters;
};

// Exact trainable-parameter counts of the released checkpoints, as Hugging
// Face transformers' `model.num_parameters()` reports them for
// openai-community/gpt2{,-medium,-large,-xl} (tied LM head counted once),
// meta-llama/Llama-2-{7b,13b,70b}-hf, meta-llama/Meta-Llama-3-{8B,70B} and
// meta-llama/Llama-3.1-405B. The model names round these (124M, 355M, 774M,
// 1.5B, 7B, 13B, 70B, 8B, 70B, 405B).
inline constexpr PublishedSize kPublishedSizes[] = {
    {"gpt2", 124'439'808},          {"gpt2-medium", 354'823'168},
    {"gpt2-large", 774'030'080},    {"gpt2-xl", 1'557'611'200},
    {"llama2-7b", 6'738'415'616},   {"llama2-13b", 13'015'864'320},
    {"llama2-70b", 68'976'648'192}, {"llama3-8b", 8'030'261'248},
    {"llama3-70b", 70'553'706'496}, {"llama3-405b", 405'853'388'800},
};

}  // namespace loom::planner::models

#endif  // LOOM_PLANNER_MODELS_PUBLISHED_SIZES_H_
