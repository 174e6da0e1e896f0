// Instruction scopes (Instruction::scope, a module path such as
// "layers.3.attention.wq" or "transformer.h.3.mlp.c_fc"): where a path names
// one of a stack of repeated blocks. The mesh search finds a model's
// repeated layers by it, and reports group them by it.
#ifndef LOOM_PLAN_SCOPE_H_
#define LOOM_PLAN_SCOPE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace loom::plan {

// One block of a repeated stack: the path up to the block's number
// ("layers", "transformer.h") and the number.
struct RepeatedBlock {
  std::string stack;
  int64_t index = 0;
  bool operator==(const RepeatedBlock&) const = default;
};

// The first path component that is a decimal number, with the path before
// it: "transformer.h.3.attn.c_attn" -> {"transformer.h", 3}; nullopt for a
// path without one ("tok_embeddings", "") or one that starts with it.
std::optional<RepeatedBlock> repeatedBlockOf(std::string_view scope);

}  // namespace loom::plan

#endif  // LOOM_PLAN_SCOPE_H_
