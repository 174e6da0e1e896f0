// The KernelSet of one CUDA GPU: device memory through the caching
// allocator (cudaMalloc only when a size class has no free block), the
// CUDA kernels of //runtime/kernels/cuda and cudaMemcpy(2D)Async, all on
// one compute stream; collectives wait on it through nccl's current stream
// and it waits on them through their events (docs/runtime.md, "On CUDA").
#ifndef LOOM_RUNTIME_EXECUTOR_CUDA_KERNEL_SET_H_
#define LOOM_RUNTIME_EXECUTOR_CUDA_KERNEL_SET_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "runtime/executor/kernel_set.h"

namespace loom::runtime {

// Why GPU `device` cannot run the executor ("no usable GPU: ..." when none
// can, or a device index past the GPUs there are), or "".
std::string cudaDeviceUnavailableReason(int device);

// A compute stream, a cuBLASLt handle and scratch on GPU `device` (-1: the
// environment's LOCAL_RANK, else 0); fails with cudaDeviceUnavailableReason's
// text when it cannot run there.
absl::StatusOr<std::unique_ptr<KernelSet>> cudaKernelSet(int device);

}  // namespace loom::runtime

#endif  // LOOM_RUNTIME_EXECUTOR_CUDA_KERNEL_SET_H_
