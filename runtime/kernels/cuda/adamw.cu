// AdamW over a whole flat bucket in one launch (cuda_kernels.h). The scalars
// are computed on the host in double exactly as optim::adamwStep does, and
// each element runs torch's sequence of fp32 operations through the
// round-to-nearest intrinsics, which nvcc never fuses into FMAs, so the
// result equals the CPU step element for element.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "runtime/kernels/cuda/cuda_kernels.h"
#include "runtime/kernels/cuda/device_util.cuh"
#include "runtime/optim/adamw.h"

namespace loom::runtime::cuda {
namespace {

struct AdamWScalars {
  float decay;
  float beta1;
  float beta2;
  float one_minus_beta1;
  float one_minus_beta2;
  float step_size;
  float correction2_sqrt;
  float eps;
};

__global__ void adamwKernel(AdamWScalars k, float* params, const float* grads, float* exp_avg,
                            float* exp_avg_sq, int64_t count, const float* grad_scale) {
  const float scale = grad_scale != nullptr ? *grad_scale : 1.0f;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float g = grad_scale != nullptr ? __fmul_rn(grads[i], scale) : grads[i];
    const float p = __fmul_rn(params[i], k.decay);
    const float m = __fadd_rn(__fmul_rn(exp_avg[i], k.beta1), __fmul_rn(g, k.one_minus_beta1));
    const float v =
        __fadd_rn(__fmul_rn(exp_avg_sq[i], k.beta2), __fmul_rn(__fmul_rn(g, g), k.one_minus_beta2));
    const float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(v), k.correction2_sqrt), k.eps);
    exp_avg[i] = m;
    exp_avg_sq[i] = v;
    params[i] = __fsub_rn(p, __fmul_rn(k.step_size, __fdiv_rn(m, denom)));
  }
}

}  // namespace

Status adamwStep(const optim::AdamWConfig& config, int64_t step, float* params, const float* grads,
                 float* exp_avg, float* exp_avg_sq, int64_t count, const float* grad_scale,
                 cudaStream_t stream) {
  if (step < 1) {
    return Status::invalidArgument("adamwStep: step " + std::to_string(step) +
                                   " < 1; the first step is 1 (bias correction divides by "
                                   "1 - beta^step)");
  }
  // The same double expressions as optim::adamwStep.
  const auto t = static_cast<double>(step);
  AdamWScalars k;
  k.decay = static_cast<float>(1.0 - config.lr * config.weight_decay);
  k.beta1 = static_cast<float>(config.beta1);
  k.beta2 = static_cast<float>(config.beta2);
  k.one_minus_beta1 = static_cast<float>(1.0 - config.beta1);
  k.one_minus_beta2 = static_cast<float>(1.0 - config.beta2);
  k.step_size = static_cast<float>(config.lr / (1.0 - std::pow(config.beta1, t)));
  k.correction2_sqrt = static_cast<float>(std::sqrt(1.0 - std::pow(config.beta2, t)));
  k.eps = static_cast<float>(config.eps);
  adamwKernel<<<detail::elementwiseBlocks(count), detail::kElementwiseThreads, 0, stream>>>(
      k, params, grads, exp_avg, exp_avg_sq, count, grad_scale);
  return detail::launched("adamwStep");
}

}  // namespace loom::runtime::cuda
