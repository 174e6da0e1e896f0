// The scalar attention kernels nn.attention and nn.attention_grad ran on
// before the blocked kernels of attention.cc: one query row at a time, dot
// and axpy over the [B, S, H, D] layout. Kept as the fp32 oracle the blocked
// kernels are tested against and as the baseline kernels_bench compares them
// with; the executor does not call them.
#ifndef LOOM_RUNTIME_KERNELS_CPU_ATTENTION_REFERENCE_H_
#define LOOM_RUNTIME_KERNELS_CPU_ATTENTION_REFERENCE_H_

#include "runtime/kernels/cpu/cpu_kernels.h"

namespace loom::runtime::cpu {

// Same contract as attention() in cpu_kernels.h.
void attentionReference(const float* q, const float* k, const float* v, float* out,
                        const AttentionShape& shape);
// Same contract as attentionGrad() in cpu_kernels.h.
void attentionGradReference(const float* q, const float* k, const float* v, const float* dout,
                            float* dq, float* dk, float* dv, const AttentionShape& shape);

}  // namespace loom::runtime::cpu

#endif  // LOOM_RUNTIME_KERNELS_CPU_ATTENTION_REFERENCE_H_
