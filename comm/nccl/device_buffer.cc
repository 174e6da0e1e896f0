// cudaMalloc'd staging memory with blocking copies; see device_buffer.h.
#include "comm/nccl/device_buffer.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "comm/errors.h"
#include "comm/nccl/cuda_util.h"

namespace loom::comm::nccl {

absl::StatusOr<std::unique_ptr<DeviceBuffer>> DeviceBuffer::allocate(size_t bytes) {
  if (const std::string reason = cudaUnavailableReason(); !reason.empty()) {
    return makeError(ErrorKind::kBackend, absl::StatusCode::kFailedPrecondition, reason);
  }
  int device = 0;
  if (absl::Status s = cudaStatus(cudaGetDevice(&device), "cudaGetDevice"); !s.ok()) return s;
  void* data = nullptr;
  const size_t size = std::max<size_t>(bytes, 1);
  if (absl::Status s =
          cudaStatus(cudaMalloc(&data, size), absl::StrCat("cudaMalloc of ", size, " bytes"));
      !s.ok()) {
    return s;
  }
  return std::unique_ptr<DeviceBuffer>(new DeviceBuffer(data, bytes, device));
}

DeviceBuffer::~DeviceBuffer() { cudaFree(data_); }

absl::Status DeviceBuffer::copyFromHost(const void* src) {
  if (size_ == 0) return absl::OkStatus();
  if (absl::Status s = cudaStatus(cudaMemcpy(data_, src, size_, cudaMemcpyHostToDevice),
                                  "cudaMemcpy to the device");
      !s.ok()) {
    return s;
  }
  // From pageable memory cudaMemcpy may return before the DMA lands; the
  // collective that reads the buffer runs on another (non-blocking) stream.
  return cudaStatus(cudaStreamSynchronize(cudaStreamLegacy), "cudaStreamSynchronize");
}

absl::Status DeviceBuffer::copyToHost(void* dst) const {
  if (size_ == 0) return absl::OkStatus();
  return cudaStatus(cudaMemcpy(dst, data_, size_, cudaMemcpyDeviceToHost),
                    "cudaMemcpy to the host");
}

}  // namespace loom::comm::nccl
