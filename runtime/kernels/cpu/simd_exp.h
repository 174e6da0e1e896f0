// exp(x) in plain float arithmetic that `omp simd` vectorises, for the CPU
// kernels' inner loops (attention's softmax tiles, softmax, cross-entropy,
// silu), and the row max and shifted exponentials built on it. glibc's
// vector expf needs -ffast-math; this is Cephes' expf polynomial, within 2
// ulp.
#ifndef LOOM_RUNTIME_KERNELS_CPU_SIMD_EXP_H_
#define LOOM_RUNTIME_KERNELS_CPU_SIMD_EXP_H_

#include <bit>
#include <cstdint>
#include <limits>

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

// The largest of x[0, n); -infinity for an empty row.
inline float rowMax(const float* x, int64_t n) {
  float best = -std::numeric_limits<float>::infinity();
  // A select rather than std::max, which GCC does not vectorise.
#pragma omp simd reduction(max : best)
  for (int64_t j = 0; j < n; ++j) best = x[j] > best ? x[j] : best;
  return best;
}

// y[j] = exp(x[j] - shift) for j < n (y may be x); returns their sum, added
// in the order `omp simd` gives the build, the same for every row.
// Arguments below -87 are clamped there, which keeps 2^n a normal float; the
// 1.6e-38 that such a term gets instead of its exp is invisible beside a row
// whose terms add up to 1 or more (shift is the row's max). The clamp has a
// loop of its own because GCC, seeing its constant arm, splits the exp loop
// into two paths and then vectorises neither.
inline float expShiftedSum(const float* x, float* y, int64_t n, float shift) {
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) {
    const float d = x[j] - shift;
    y[j] = d < -87.0f ? -87.0f : d;
  }
  float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
  for (int64_t j = 0; j < n; ++j) {
    y[j] = expClamped(y[j]);
    sum += y[j];
  }
  return sum;
}

}  // namespace loom::runtime::cpu

#endif  // LOOM_RUNTIME_KERNELS_CPU_SIMD_EXP_H_
