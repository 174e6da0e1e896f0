// AdamW over a whole flat bucket in one launch (cuda_kernels.h). The scalars
// are computed on the host in double exactly as optim::adamwStep does, and
// each element runs torch's sequence of fp32 operations through the
// round-to-nearest intrinsics, which nvcc never fuses into FMAs, so the
// result equals the CPU step element for element. Gradients may be bf16
// (read as their fp32 values); with an fp32 master copy the step updates the
// master and writes the parameters as the master rounded to nearest even.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <string>

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

// `weights` are the fp32 values the step updates (the params, or the master
// copy); `rounded`, when not null, receives them rounded to TParam.
template <typename TParam, typename TGrad>
__global__ void adamwKernel(AdamWScalars k, float* weights, TParam* rounded, const TGrad* grads,
                            float* exp_avg, float* exp_avg_sq, int64_t count,
                            const float* grad_scale) {
  // Only a coefficient below 1 scales, as the CPU's clipping: 1 (nothing to
  // clip) and a NaN norm leave the gradients as they are.
  const float scale = grad_scale != nullptr ? *grad_scale : 1.0f;
  const bool scaled = scale < 1.0f;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float raw = detail::toFloat(grads[i]);
    const float g = scaled ? __fmul_rn(raw, scale) : raw;
    const float p = __fmul_rn(weights[i], k.decay);
    const float m = __fadd_rn(__fmul_rn(exp_avg[i], k.beta1), __fmul_rn(g, k.one_minus_beta1));
    const float v =
        __fadd_rn(__fmul_rn(exp_avg_sq[i], k.beta2), __fmul_rn(__fmul_rn(g, g), k.one_minus_beta2));
    const float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(v), k.correction2_sqrt), k.eps);
    const float updated = __fsub_rn(p, __fmul_rn(k.step_size, __fdiv_rn(m, denom)));
    exp_avg[i] = m;
    exp_avg_sq[i] = v;
    weights[i] = updated;
    if (rounded != nullptr) rounded[i] = detail::fromFloat<TParam>(updated);
  }
}

// The same double expressions as optim::adamwStep.
Status adamwScalars(const optim::AdamWConfig& config, int64_t step, const char* op,
                    AdamWScalars* k) {
  if (step < 1) {
    return Status::invalidArgument(std::string(op) + ": step " + std::to_string(step) +
                                   " < 1; the first step is 1 (bias correction divides by "
                                   "1 - beta^step)");
  }
  const auto t = static_cast<double>(step);
  k->decay = static_cast<float>(1.0 - config.lr * config.weight_decay);
  k->beta1 = static_cast<float>(config.beta1);
  k->beta2 = static_cast<float>(config.beta2);
  k->one_minus_beta1 = static_cast<float>(1.0 - config.beta1);
  k->one_minus_beta2 = static_cast<float>(1.0 - config.beta2);
  k->step_size = static_cast<float>(config.lr / (1.0 - std::pow(config.beta1, t)));
  k->correction2_sqrt = static_cast<float>(std::sqrt(1.0 - std::pow(config.beta2, t)));
  k->eps = static_cast<float>(config.eps);
  return Status();
}

}  // namespace

template <typename TGrad>
Status adamwStep(const optim::AdamWConfig& config, int64_t step, float* params, const TGrad* grads,
                 float* exp_avg, float* exp_avg_sq, int64_t count, const float* grad_scale,
                 cudaStream_t stream) {
  AdamWScalars k;
  if (Status s = adamwScalars(config, step, "adamwStep", &k); !s.ok()) return s;
  adamwKernel<<<detail::elementwiseBlocks(count), detail::kElementwiseThreads, 0, stream>>>(
      k, params, static_cast<float*>(nullptr), grads, exp_avg, exp_avg_sq, count, grad_scale);
  return detail::launched("adamwStep");
}

template <typename TParam, typename TGrad>
Status adamwStepWithMaster(const optim::AdamWConfig& config, int64_t step, TParam* params,
                           const TGrad* grads, float* exp_avg, float* exp_avg_sq, float* master,
                           int64_t count, const float* grad_scale, cudaStream_t stream) {
  AdamWScalars k;
  if (Status s = adamwScalars(config, step, "adamwStepWithMaster", &k); !s.ok()) return s;
  adamwKernel<<<detail::elementwiseBlocks(count), detail::kElementwiseThreads, 0, stream>>>(
      k, master, params, grads, exp_avg, exp_avg_sq, count, grad_scale);
  return detail::launched("adamwStepWithMaster");
}

template Status adamwStep<float>(const optim::AdamWConfig&, int64_t, float*, const float*, float*,
                                 float*, int64_t, const float*, cudaStream_t);
template Status adamwStep<bf16>(const optim::AdamWConfig&, int64_t, float*, const bf16*, float*,
                                float*, int64_t, const float*, cudaStream_t);

#define LOOM_INSTANTIATE_ADAMW_MASTER(TParam, TGrad)                                              \
  template Status adamwStepWithMaster<TParam, TGrad>(const optim::AdamWConfig&, int64_t, TParam*, \
                                                     const TGrad*, float*, float*, float*,        \
                                                     int64_t, const float*, cudaStream_t);

LOOM_INSTANTIATE_ADAMW_MASTER(bf16, bf16)
LOOM_INSTANTIATE_ADAMW_MASTER(bf16, float)
LOOM_INSTANTIATE_ADAMW_MASTER(float, bf16)
LOOM_INSTANTIATE_ADAMW_MASTER(float, float)

#undef LOOM_INSTANTIATE_ADAMW_MASTER

}  // namespace loom::runtime::cuda
