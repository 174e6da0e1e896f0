// The softmax and cross-entropy kernels as they ran before they moved onto
// the vectorised exp of simd_exp.h: libm's expf one element at a time. Kept
// as the fp32 oracle the vectorised kernels are tested against and as the
// baseline kernels_bench compares them with; the executor does not call them.
#ifndef LOOM_RUNTIME_KERNELS_CPU_SOFTMAX_REFERENCE_H_
#define LOOM_RUNTIME_KERNELS_CPU_SOFTMAX_REFERENCE_H_

#include <cstdint>

namespace loom::runtime::cpu {

// Same contracts as softmax(), crossEntropy() and crossEntropyGrad() (int32
// labels) in cpu_kernels.h.
void softmaxReference(const float* x, float* y, int64_t rows, int64_t n);
float crossEntropyReference(const float* logits, const int32_t* labels, int64_t tokens,
                            int64_t vocab);
void crossEntropyGradReference(const float* logits, const int32_t* labels, float dloss, float scale,
                               float* dlogits, int64_t tokens, int64_t vocab);

}  // namespace loom::runtime::cpu

#endif  // LOOM_RUNTIME_KERNELS_CPU_SOFTMAX_REFERENCE_H_
