// Conversions between float and the two 16-bit float formats (IEEE binary16
// and bfloat16), kept as raw uint16_t storage: the mpi backend's reduction
// ops (MPI has no 16-bit float types), the gloo backend and the runtime's
// bf16 buffers convert through float with these.
#ifndef LOOM_COMM_HALF_FLOAT_H_
#define LOOM_COMM_HALF_FLOAT_H_

#include <bit>
#include <cstdint>

namespace loom::comm {

// GCC 12 supports _Float16 on x86-64 (conversions go through libgcc or
// F16C), which rounds to nearest-even and keeps infinities and NaNs.
inline float halfToFloat(uint16_t bits) { return std::bit_cast<_Float16>(bits); }
inline uint16_t floatToHalf(float value) {
  return std::bit_cast<uint16_t>(static_cast<_Float16>(value));
}

// bfloat16 is the top half of a float32.
inline float bfloat16ToFloat(uint16_t bits) {
  return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16);
}
inline uint16_t floatToBfloat16(float value) {
  const uint32_t bits = std::bit_cast<uint32_t>(value);
  // Truncating a NaN could leave only zero mantissa bits (an infinity);
  // force a quiet NaN instead.
  if ((bits & 0x7f800000u) == 0x7f800000u && (bits & 0x007fffffu) != 0) {
    return static_cast<uint16_t>((bits >> 16) | 0x0040u);
  }
  // Round to nearest, ties to even, as PyTorch's c10::BFloat16 does.
  const uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

}  // namespace loom::comm

#endif  // LOOM_COMM_HALF_FLOAT_H_
