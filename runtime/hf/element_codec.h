// float <-> the element types of a safetensors file (little-endian bytes;
// F16 and BF16 round to nearest even on the way in).
#ifndef LOOM_RUNTIME_HF_ELEMENT_CODEC_H_
#define LOOM_RUNTIME_HF_ELEMENT_CODEC_H_

#include <cstdint>

namespace loom::runtime::hf {

enum class StDType { kF32, kF16, kBF16 };

// `count` elements of `dtype` at `bytes` -> floats at `out`.
void decodeElements(StDType dtype, const uint8_t* bytes, int64_t count, float* out);
// `count` floats -> elements of `dtype` at `bytes`.
void encodeElements(StDType dtype, const float* values, int64_t count, uint8_t* bytes);

}  // namespace loom::runtime::hf

#endif  // LOOM_RUNTIME_HF_ELEMENT_CODEC_H_
