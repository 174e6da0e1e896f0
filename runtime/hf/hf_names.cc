// The name tables and the layout changes between the zoo and Hugging Face.
#include "runtime/hf/hf_names.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace loom::runtime::hf {
namespace {

struct NameRow {
  const char* zoo;  // after "layers.N." for layer rows
  const char* hf;   // after "model.layers.N." for layer rows
  bool transpose;
};

// Meta's Llama names -> Hugging Face's LlamaForCausalLM.
constexpr NameRow kLlamaTop[] = {
    {"tok_embeddings.weight", "model.embed_tokens.weight", false},
    {"norm.weight", "model.norm.weight", false},
    {"output.weight", "lm_head.weight", true},
};
constexpr NameRow kLlamaLayer[] = {
    {"attention_norm.weight", "input_layernorm.weight", false},
    {"ffn_norm.weight", "post_attention_layernorm.weight", false},
    {"attention.wq.weight", "self_attn.q_proj.weight", true},
    {"attention.wk.weight", "self_attn.k_proj.weight", true},
    {"attention.wv.weight", "self_attn.v_proj.weight", true},
    {"attention.wo.weight", "self_attn.o_proj.weight", true},
    {"feed_forward.w1.weight", "mlp.gate_proj.weight", true},
    {"feed_forward.w2.weight", "mlp.down_proj.weight", true},
    {"feed_forward.w3.weight", "mlp.up_proj.weight", true},
};

// "[0:64]" or "[:, 64:128]" after a GPT-2 c_attn name: the slice.
absl::StatusOr<HfSource> parseSlice(const std::string& name, size_t bracket) {
  HfSource source;
  source.tensor = name.substr(0, bracket);
  absl::string_view inside(name);
  inside.remove_prefix(bracket);
  if (!absl::ConsumePrefix(&inside, "[") || !absl::ConsumeSuffix(&inside, "]")) {
    return absl::InvalidArgumentError(absl::StrCat("parameter '", name, "': bad slice"));
  }
  source.slice_dim = absl::ConsumePrefix(&inside, ":, ") ? 1 : 0;
  const std::vector<std::string> ends = absl::StrSplit(inside, ':');
  if (ends.size() != 2 || !absl::SimpleAtoi(ends[0], &source.slice_begin) ||
      !absl::SimpleAtoi(ends[1], &source.slice_end) || source.slice_begin < 0 ||
      source.slice_end < source.slice_begin) {
    return absl::InvalidArgumentError(absl::StrCat("parameter '", name, "': bad slice"));
  }
  return source;
}

}  // namespace

absl::StatusOr<HfSource> hfSourceOf(const std::string& name) {
  HfSource source;
  if (absl::StartsWith(name, "transformer.")) {  // GPT-2: Hugging Face's own names
    const size_t bracket = name.find('[');
    if (bracket != std::string::npos) return parseSlice(name, bracket);
    source.tensor = name;
    return source;
  }
  if (absl::StartsWith(name, "model.") || name == "lm_head.weight") {  // from a config.json
    source.tensor = name;
    source.transpose = absl::EndsWith(name, "_proj.weight") || name == "lm_head.weight";
    if (name == "lm_head.weight") source.tied_to = "model.embed_tokens.weight";
    return source;
  }
  for (const NameRow& row : kLlamaTop) {
    if (name == row.zoo) {
      source.tensor = row.hf;
      source.transpose = row.transpose;
      if (name == "output.weight") source.tied_to = "model.embed_tokens.weight";
      return source;
    }
  }
  absl::string_view rest(name);
  int64_t layer = 0;
  if (absl::ConsumePrefix(&rest, "layers.")) {
    const size_t dot = rest.find('.');
    if (dot != absl::string_view::npos && absl::SimpleAtoi(rest.substr(0, dot), &layer)) {
      rest.remove_prefix(dot + 1);
      for (const NameRow& row : kLlamaLayer) {
        if (rest == row.zoo) {
          source.tensor = absl::StrCat("model.layers.", layer, ".", row.hf);
          source.transpose = row.transpose;
          return source;
        }
      }
    }
  }
  return absl::InvalidArgumentError(
      absl::StrCat("parameter '", name,
                   "' has no Hugging Face name: the mapping knows the "
                   "zoo's Llama (Meta or Hugging Face names) and GPT-2 parameters"));
}

Box hfBoxOf(const HfSource& source, const Box& box) {
  Box hf = box;
  if (source.transpose) {
    std::reverse(hf.offsets.begin(), hf.offsets.end());
    std::reverse(hf.sizes.begin(), hf.sizes.end());
  }
  if (source.slice_dim >= 0) hf.offsets[source.slice_dim] += source.slice_begin;
  return hf;
}

std::vector<int64_t> hfShapeOf(const HfSource& source, const std::vector<int64_t>& shape,
                               int64_t extent) {
  std::vector<int64_t> hf = shape;
  if (source.transpose) std::reverse(hf.begin(), hf.end());
  if (source.slice_dim >= 0) hf[source.slice_dim] = extent;
  return hf;
}

namespace {

// [rows, cols] row-major -> [cols, rows].
void transpose2d(std::span<const float> in, int64_t rows, int64_t cols, std::span<float> out) {
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < cols; ++j) out[j * rows + i] = in[i * cols + j];
  }
}

}  // namespace

absl::Status readParameterBox(const SafetensorsSet& set, const HfSource& source,
                              const std::string& tensor, const Box& box, std::span<float> out) {
  const Box hf = hfBoxOf(source, box);
  if (!source.transpose) return set.readBox(tensor, hf, out);
  if (box.sizes.size() != 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor '", tensor, "' is transposed but not 2-D"));
  }
  std::vector<float> stored(out.size());
  if (absl::Status s = set.readBox(tensor, hf, stored); !s.ok()) return s;
  transpose2d(stored, hf.sizes[0], hf.sizes[1], out);
  return absl::OkStatus();
}

absl::Status writeParameterBox(SafetensorsWriter& writer, const HfSource& source, const Box& box,
                               std::span<const float> values) {
  const Box hf = hfBoxOf(source, box);
  if (!source.transpose) return writer.writeBox(source.tensor, hf, values);
  if (box.sizes.size() != 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor '", source.tensor, "' is transposed but not 2-D"));
  }
  std::vector<float> stored(values.size());
  transpose2d(values, box.sizes[0], box.sizes[1], stored);
  return writer.writeBox(source.tensor, hf, stored);
}

}  // namespace loom::runtime::hf
