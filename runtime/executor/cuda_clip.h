// The device half of gradient clipping for the CUDA executor: each rank's
// share of the squared global norm, accumulated in double on the device
// (optim::localSquaredNorm's arithmetic, in a fixed order so runs repeat),
// and the clip coefficient (optim::clipCoefficient) into device memory,
// where the AdamW kernel reads it. Nothing here synchronises.
#ifndef LOOM_RUNTIME_EXECUTOR_CUDA_CLIP_H_
#define LOOM_RUNTIME_EXECUTOR_CUDA_CLIP_H_

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace loom::runtime::cuda_clip {

// The blocks of the first pass; the caller provides that many doubles of
// device scratch.
inline constexpr int kSquaredNormBlocks = 256;

// *total += sum(grads[i]^2 in double) / copies; bf16 gradients are read as
// their exact values, as the CPU widens them.
cudaError_t addSquaredNorm(const float* grads, int64_t count, int64_t copies, double* scratch,
                           double* total, cudaStream_t stream);
cudaError_t addSquaredNorm(const __nv_bfloat16* grads, int64_t count, int64_t copies,
                           double* scratch, double* total, cudaStream_t stream);

// *coefficient = float(min(1, max_norm / (sqrt(*total) + 1e-6))).
cudaError_t clipCoefficient(const double* total, double max_norm, float* coefficient,
                            cudaStream_t stream);

}  // namespace loom::runtime::cuda_clip

#endif  // LOOM_RUNTIME_EXECUTOR_CUDA_CLIP_H_
