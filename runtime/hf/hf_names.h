// Where each of the zoo's parameters lives in a Hugging Face checkpoint:
// the tensor's name and how its layout differs (docs/runtime_hf.md has the
// table). The zoo names Llama after Meta (layers.N.attention.wq.weight) or,
// for a plan made from a config.json, after Hugging Face; GPT-2 after
// Hugging Face with c_attn split into its q, k and v column slices.
#ifndef LOOM_RUNTIME_HF_HF_NAMES_H_
#define LOOM_RUNTIME_HF_HF_NAMES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/hf/safetensors.h"

namespace loom::runtime::hf {

struct HfSource {
  std::string tensor;  // the Hugging Face name
  // An nn.Linear weight: Hugging Face stores [out, in], the zoo [in, out].
  bool transpose = false;
  // GPT-2's fused c_attn: the parameter is [slice_begin, slice_end) of the
  // tensor's dim slice_dim (-1: the whole tensor).
  int64_t slice_dim = -1;
  int64_t slice_begin = 0;
  int64_t slice_end = 0;
  // A head Hugging Face may tie to the embedding: read this tensor when
  // `tensor` is absent (lm_head.weight -> model.embed_tokens.weight).
  std::string tied_to;
};

// InvalidArgument for a name neither family's table knows.
absl::StatusOr<HfSource> hfSourceOf(const std::string& zoo_name);

// The box of the Hugging Face tensor that holds `box` of the parameter.
Box hfBoxOf(const HfSource& source, const Box& box);

// The Hugging Face tensor's shape, given the parameter's: reversed for a
// transposed weight; for a slice, the slice dim reaches `extent`.
std::vector<int64_t> hfShapeOf(const HfSource& source, const std::vector<int64_t>& shape,
                               int64_t extent);

// Reads `box` of the parameter `source` describes into `out` (row-major
// over box.sizes): the matching Hugging Face box, transposed back where
// the layouts differ, converted to float.
absl::Status readParameterBox(const SafetensorsSet& set, const HfSource& source,
                              const std::string& tensor, const Box& box, std::span<float> out);

// Writes `values`, `box` of the parameter `source` describes, into its
// Hugging Face tensor.
absl::Status writeParameterBox(SafetensorsWriter& writer, const HfSource& source, const Box& box,
                               std::span<const float> values);

}  // namespace loom::runtime::hf

#endif  // LOOM_RUNTIME_HF_HF_NAMES_H_
