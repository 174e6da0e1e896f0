// Device memory for bytes that live on the host: what the object
// collectives stage their byte buffers through on a group whose backend is
// nccl, as PyTorch moves an object's pickle to torch.cuda.current_device().
#ifndef LOOM_COMM_NCCL_DEVICE_BUFFER_H_
#define LOOM_COMM_NCCL_DEVICE_BUFFER_H_

#include <cstddef>
#include <memory>

#include "absl/status/statusor.h"

namespace loom::comm::nccl {

class DeviceBuffer {
 public:
  // `bytes` on the calling thread's current CUDA device (at least one byte,
  // so that an empty buffer still has an address). Fails with the reason
  // where no GPU is usable.
  static absl::StatusOr<std::unique_ptr<DeviceBuffer>> allocate(size_t bytes);
  ~DeviceBuffer();

  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* data() const { return data_; }
  size_t size() const { return size_; }
  // The device the memory is on.
  int device() const { return device_; }

  // Copies size() bytes from host memory at `src` and returns once they are
  // on the device, so that work on any stream sees them.
  absl::Status copyFromHost(const void* src);
  // Copies size() bytes to host memory at `dst`, after the work queued on
  // the device's legacy default stream; returns once they are there. The
  // caller first waits for the calls that wrote the buffer.
  absl::Status copyToHost(void* dst) const;

 private:
  DeviceBuffer(void* data, size_t size, int device) : data_(data), size_(size), device_(device) {}

  void* data_;
  size_t size_;
  int device_;
};

}  // namespace loom::comm::nccl

#endif  // LOOM_COMM_NCCL_DEVICE_BUFFER_H_
