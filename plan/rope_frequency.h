// The rotation frequencies of nn.rope, with the optional frequency scaling
// of long-context checkpoints (Hugging Face's `rope_scaling`: "linear" and
// Meta's "llama3"). Header-only and free of dependencies so that the
// planner's reference kernel, the CPU kernel and the CUDA kernel (in device
// code) all compute the angle from this one definition.
#ifndef LOOM_PLAN_ROPE_FREQUENCY_H_
#define LOOM_PLAN_ROPE_FREQUENCY_H_

#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define LOOM_ROPE_HOST_DEVICE __host__ __device__
#else
#define LOOM_ROPE_HOST_DEVICE
#endif

namespace loom::plan {

// nn.rope's optional attributes (plan.json's `scaling_factor`,
// `low_freq_factor`, `high_freq_factor`, `original_max_positions`). The
// defaults mean no scaling. With only `factor` set, every frequency is
// divided by it (HF "linear"); with `original_max_positions` > 0 as well,
// the bands of Llama 3.1 apply (HF "llama3").
struct RopeScaling {
  double factor = 1.0;
  double low_freq_factor = 0.0;
  double high_freq_factor = 0.0;
  int64_t original_max_positions = 0;
};

// The angle per position of pair i (features i and i + head_dim / 2):
// theta^(-2i / head_dim), then scaled. The llama3 branch is HF
// transformers' `_compute_llama3_parameters`: wavelengths shorter than
// original / high_freq_factor keep their frequency, longer than
// original / low_freq_factor are divided by `factor`, and the band between
// interpolates linearly in original / wavelength.
LOOM_ROPE_HOST_DEVICE inline double ropeInverseFrequency(int64_t i, int64_t head_dim, double theta,
                                                         const RopeScaling& scaling) {
  const double base = pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(head_dim));
  if (scaling.original_max_positions <= 0) return base / scaling.factor;
  const double original = static_cast<double>(scaling.original_max_positions);
  const double wavelength = 2.0 * 3.14159265358979323846 / base;
  if (wavelength < original / scaling.high_freq_factor) return base;
  if (wavelength > original / scaling.low_freq_factor) return base / scaling.factor;
  const double smooth = (original / wavelength - scaling.low_freq_factor) /
                        (scaling.high_freq_factor - scaling.low_freq_factor);
  return (1.0 - smooth) * base / scaling.factor + smooth * base;
}

}  // namespace loom::plan

#endif  // LOOM_PLAN_ROPE_FREQUENCY_H_
