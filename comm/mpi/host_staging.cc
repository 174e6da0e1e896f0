// Host buffers and the copies between them and CPU or CUDA tensors.
#include "comm/mpi/host_staging.h"

#include <cuda_runtime_api.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "comm/errors.h"
#include "comm/nccl/cuda_util.h"

namespace loom::comm::mpi {

using nccl::cudaStatus;

absl::StatusOr<std::unique_ptr<HostBuffer>> HostBuffer::allocate(size_t bytes, bool pinned) {
  // One byte at least, so that an empty tensor still has a valid address.
  const size_t size = bytes == 0 ? 1 : bytes;
  void* data = nullptr;
  if (pinned) {
    if (absl::Status status =
            cudaStatus(cudaMallocHost(&data, size),
                       absl::StrCat("cudaMallocHost of ", size, " bytes for staging"));
        !status.ok()) {
      return status;
    }
  } else {
    data = std::malloc(size);
    if (data == nullptr) {
      return backendError(
          absl::StrCat("out of host memory allocating ", size, " bytes for an MPI buffer"));
    }
  }
  return std::unique_ptr<HostBuffer>(new HostBuffer(static_cast<char*>(data), bytes, pinned));
}

HostBuffer::~HostBuffer() {
  if (pinned_) {
    cudaFreeHost(data_);
  } else {
    std::free(data_);
  }
}

absl::Status copyToHost(const Tensor& src, void* dst) {
  if (src.nbytes() == 0) return absl::OkStatus();
  if (!src.device().isCuda()) {
    std::memcpy(dst, src.data(), src.nbytes());
    return absl::OkStatus();
  }
  if (absl::Status status = cudaStatus(cudaSetDevice(src.device().index),
                                       absl::StrCat("cudaSetDevice(", src.device().index, ")"));
      !status.ok()) {
    return status;
  }
  return cudaStatus(cudaMemcpy(dst, src.data(), src.nbytes(), cudaMemcpyDeviceToHost),
                    absl::StrCat("copying ", src.toString(), " to host memory"));
}

absl::Status copyFromHost(const void* src, const Tensor& dst) {
  if (dst.nbytes() == 0) return absl::OkStatus();
  if (!dst.device().isCuda()) {
    std::memcpy(dst.data(), src, dst.nbytes());
    return absl::OkStatus();
  }
  if (absl::Status status = cudaStatus(cudaSetDevice(dst.device().index),
                                       absl::StrCat("cudaSetDevice(", dst.device().index, ")"));
      !status.ok()) {
    return status;
  }
  return cudaStatus(cudaMemcpy(dst.data(), src, dst.nbytes(), cudaMemcpyHostToDevice),
                    absl::StrCat("copying host memory to ", dst.toString()));
}

absl::StatusOr<StagedTensor> StagedTensor::of(const Tensor& tensor, bool direct) {
  if (direct) return StagedTensor(tensor, nullptr);
  absl::StatusOr<std::unique_ptr<HostBuffer>> host =
      HostBuffer::allocate(tensor.nbytes(), /*pinned=*/tensor.device().isCuda());
  if (!host.ok()) return host.status();
  return StagedTensor(tensor, std::move(*host));
}

absl::Status StagedTensor::copyIn() const {
  return host_ ? copyToHost(tensor_, host_->data()) : absl::OkStatus();
}

absl::Status StagedTensor::copyOut() const {
  return host_ ? copyFromHost(host_->data(), tensor_) : absl::OkStatus();
}

}  // namespace loom::comm::mpi
