// Element conversions between safetensors' dtypes and float, apart from the
// parser so the fuzz build (clang 14, no _Float16 on x86) links them from gcc.
#include "runtime/hf/element_codec.h"

#include <cstring>

#include "comm/half_float.h"

namespace loom::runtime::hf {

void decodeElements(StDType dtype, const uint8_t* bytes, int64_t count, float* out) {
  switch (dtype) {
    case StDType::kF32:
      std::memcpy(out, bytes, count * sizeof(float));
      return;
    case StDType::kF16:
    case StDType::kBF16:
      for (int64_t i = 0; i < count; ++i) {
        uint16_t bits;
        std::memcpy(&bits, bytes + 2 * i, 2);
        out[i] = dtype == StDType::kF16 ? comm::halfToFloat(bits) : comm::bfloat16ToFloat(bits);
      }
      return;
  }
}

void encodeElements(StDType dtype, const float* values, int64_t count, uint8_t* bytes) {
  switch (dtype) {
    case StDType::kF32:
      std::memcpy(bytes, values, count * sizeof(float));
      return;
    case StDType::kF16:
    case StDType::kBF16:
      for (int64_t i = 0; i < count; ++i) {
        const uint16_t bits = dtype == StDType::kF16 ? comm::floatToHalf(values[i])
                                                     : comm::floatToBfloat16(values[i]);
        std::memcpy(bytes + 2 * i, &bits, 2);
      }
      return;
  }
}

}  // namespace loom::runtime::hf
