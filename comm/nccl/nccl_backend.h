// The "nccl" backend: collectives over NCCL for CUDA tensors. Each group has
// one communicator (split from a same-membership group's where possible,
// else created from a unique id exchanged through the store) and its own
// CUDA stream, ordered against the caller's current stream with events. A
// watchdog thread polls each call's end event and the communicator's async
// error, and aborts the communicator when a call outlives its timeout.
// docs/comm_backends.md describes the design and how to run the GPU tests.
#ifndef LOOM_COMM_NCCL_NCCL_BACKEND_H_
#define LOOM_COMM_NCCL_NCCL_BACKEND_H_

#include <cuda_runtime_api.h>

#include <memory>

#include "absl/status/statusor.h"
#include "comm/backend.h"

namespace loom::comm::nccl {

// Registers backend "nccl" for CUDA tensors with comm's registry.
void registerNcclBackend();

// Creates the nccl backend of one group (what the registered factory does)
// on the calling thread's current CUDA device (cudaSetDevice(local rank)
// first, as with torch.cuda.set_device). Every member calls it; a group of
// more than one rank needs context.store. Fails with the reason when no GPU
// is usable, or when the other ranks do not join within context.timeout
// (the half-made communicator is aborted).
absl::StatusOr<std::unique_ptr<Backend>> createNcclBackend(const BackendContext& context);

// The calling thread's current CUDA stream, as PyTorch's current stream:
// nccl calls start after the work queued on it so far, and
// Work::synchronize() makes it wait for a call. nullptr, the default, is the
// legacy default stream.
cudaStream_t currentCudaStream();
void setCurrentCudaStream(cudaStream_t stream);

// Makes `stream` the current stream for a scope.
class CudaStreamGuard {
 public:
  explicit CudaStreamGuard(cudaStream_t stream);
  ~CudaStreamGuard();
  CudaStreamGuard(const CudaStreamGuard&) = delete;
  CudaStreamGuard& operator=(const CudaStreamGuard&) = delete;

 private:
  cudaStream_t previous_;
};

}  // namespace loom::comm::nccl

#endif  // LOOM_COMM_NCCL_NCCL_BACKEND_H_
