// Test support for process-group tests: typed tensors that own their bytes,
// and a runner that starts N ranks as threads over one in-memory store.
#ifndef LOOM_COMM_TESTING_PROCESS_GROUP_TESTING_H_
#define LOOM_COMM_TESTING_PROCESS_GROUP_TESTING_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "comm/process_group.h"
#include "comm/store.h"
#include "comm/tensor.h"

namespace loom::comm::testing {

// A contiguous tensor that owns its memory, with element access through
// double (exact for every value the tests use).
class Buffer {
 public:
  Buffer(DType dtype, std::vector<int64_t> shape);
  // A 1-d buffer holding `values`.
  static Buffer of(DType dtype, const std::vector<double>& values);

  Tensor tensor() const;
  DType dtype() const { return dtype_; }
  int64_t numel() const { return numel_; }
  // Element i as a double (bool: 0 or 1).
  double at(int64_t i) const;
  // Stores `value` rounded to the dtype (to nearest even for f16 and bf16,
  // truncated for integers).
  void set(int64_t i, double value);
  std::vector<double> values() const;
  const std::vector<uint8_t>& bytes() const { return bytes_; }

 private:
  DType dtype_;
  std::vector<int64_t> shape_;
  int64_t numel_;
  // Mutable so that a const Buffer still hands out a writable view, as
  // Tensor does.
  mutable std::vector<uint8_t> bytes_;
};

// "f32[1, 2, 3]" style rendering of the values, for failure messages.
std::string describe(const Buffer& buffer);

// The value rank `rank` contributes at element `i` of test case `salt`:
// small integers that every dtype holds exactly and whose sums and
// products stay in range for i8 over 4 ranks (bool: 0 or 1, unsigned: 0..3,
// signed and floating: -3..3).
double testValue(DType dtype, int rank, int64_t i, int salt);

// Runs `body(group)` on `size` ranks, each a thread with its own
// ProcessGroup built over one shared HashStore; group creation failures are
// test failures. `options` is used by every rank.
void runRanks(int size, const std::function<void(ProcessGroup&)>& body,
              ProcessGroupOptions options = {});

// Same, with the store passed in (to share one between several runs).
void runRanks(int size, const std::shared_ptr<Store>& store,
              const std::function<void(ProcessGroup&)>& body, ProcessGroupOptions options = {});

// Same, handing the body the owning pointer (for APIs that keep the group).
void runRanksShared(int size, const std::function<void(std::shared_ptr<ProcessGroup>)>& body,
                    ProcessGroupOptions options = {});
void runRanksShared(int size, const std::function<void(std::shared_ptr<ProcessGroup>)>& body,
                    ProcessGroupOptions options, const std::shared_ptr<Store>& store);

}  // namespace loom::comm::testing

#endif  // LOOM_COMM_TESTING_PROCESS_GROUP_TESTING_H_
