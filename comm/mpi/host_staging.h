// Host memory for the mpi backend: buffers that pack tensor lists for one MPI
// call, and pinned copies of CUDA tensors for an MPI that cannot read CUDA
// memory itself. Copies work for CPU and CUDA tensors alike.
#ifndef LOOM_COMM_MPI_HOST_STAGING_H_
#define LOOM_COMM_MPI_HOST_STAGING_H_

#include <cstddef>
#include <memory>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "comm/tensor.h"

namespace loom::comm::mpi {

// A block of host memory, page-locked (cudaMallocHost) when it stages CUDA
// tensors so that the copies run at full speed and without a bounce buffer.
class HostBuffer {
 public:
  static absl::StatusOr<std::unique_ptr<HostBuffer>> allocate(size_t bytes, bool pinned);
  ~HostBuffer();

  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;

  char* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  HostBuffer(char* data, size_t size, bool pinned) : data_(data), size_(size), pinned_(pinned) {}

  char* data_;
  size_t size_;
  bool pinned_;
};

// Copies all of `src` to host memory at `dst`, and host memory at `src` into
// all of `dst`. CUDA copies use cudaMemcpy on the tensor's device, which also
// waits for work queued on that device's legacy default stream.
absl::Status copyToHost(const Tensor& src, void* dst);
absl::Status copyFromHost(const void* src, const Tensor& dst);

// The memory MPI uses for one tensor: the tensor itself when MPI can use it
// (CPU memory, or CUDA memory with a CUDA-aware MPI), otherwise a pinned host
// copy that copyIn/copyOut move to and from the tensor.
class StagedTensor {
 public:
  // `direct`: whether MPI is given the tensor's own memory; otherwise a host
  // copy (pinned for CUDA tensors) stands in for it.
  static absl::StatusOr<StagedTensor> of(const Tensor& tensor, bool direct);

  void* data() const { return host_ ? host_->data() : tensor_.data(); }
  bool staged() const { return host_ != nullptr; }
  absl::Status copyIn() const;
  absl::Status copyOut() const;

 private:
  StagedTensor(Tensor tensor, std::shared_ptr<HostBuffer> host)
      : tensor_(std::move(tensor)), host_(std::move(host)) {}

  Tensor tensor_;
  std::shared_ptr<HostBuffer> host_;
};

}  // namespace loom::comm::mpi

#endif  // LOOM_COMM_MPI_HOST_STAGING_H_
