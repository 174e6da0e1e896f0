// exp(x) in plain float arithmetic that `omp simd` vectorises, for the CPU
// kernels' inner loops (attention's softmax tiles, silu). glibc's vector
// expf needs -ffast-math; this is Cephes' expf polynomial, within 2 ulp.
#ifndef LOOM_RUNTIME_KERNELS_CPU_SIMD_EXP_H_
#define LOOM_RUNTIME_KERNELS_CPU_SIMD_EXP_H_

#include <bit>
#include <cstdint>

namespace loom::runtime::cpu {

// exp(x) for x in [-87, 88]: outside, 2^n leaves the normal floats. Callers
// clamp in a loop of their own: a clamp's constant arm inside the exp loop
// makes GCC split the loop into two paths and vectorise neither.
inline float expClamped(float x) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693359375f;
  constexpr float kLn2Lo = -2.12194440e-4f;
  // Adding and subtracting 1.5 * 2^23 rounds to the nearest integer.
  constexpr float kRound = 12582912.0f;
  const float n = (x * kLog2e + kRound) - kRound;
  const float r = (x - n * kLn2Hi) - n * kLn2Lo;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  return p * std::bit_cast<float>((static_cast<int32_t>(n) + 127) << 23);
}

}  // namespace loom::runtime::cpu

#endif  // LOOM_RUNTIME_KERNELS_CPU_SIMD_EXP_H_
