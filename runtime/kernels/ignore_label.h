// The label that marks a token without a target (PyTorch's default
// ignore_index): the data feed writes it for rows past the end of a finite
// data set, and every cross-entropy kernel, CPU and CUDA, gives such a token
// zero loss and zero gradient while still counting it in the mean's
// denominator (docs/runtime_data.md, "One pass over token files").
#ifndef LOOM_RUNTIME_KERNELS_IGNORE_LABEL_H_
#define LOOM_RUNTIME_KERNELS_IGNORE_LABEL_H_

#include <cstdint>

namespace loom::runtime {

inline constexpr int32_t kIgnoreLabel = -100;

}  // namespace loom::runtime

#endif  // LOOM_RUNTIME_KERNELS_IGNORE_LABEL_H_
