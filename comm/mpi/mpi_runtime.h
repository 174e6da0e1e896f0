// Process-wide Open MPI state for the mpi backend: MPI is initialised once per
// process (by the first backend) and finalised at exit, every MPI call is
// serialised when MPI granted only MPI_THREAD_SERIALIZED, and dtypes and
// reduce ops map onto MPI datatypes and ops (with user ops for f16/bf16).
#ifndef LOOM_COMM_MPI_MPI_RUNTIME_H_
#define LOOM_COMM_MPI_MPI_RUNTIME_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "comm/reduce_op.h"
#include "comm/tensor.h"
#include "mpi.h"

namespace loom::comm::mpi {

// What MPI told this process at start-up.
struct MpiProcess {
  int world_rank = 0;
  int world_size = 0;
  // MPI_THREAD_SERIALIZED or MPI_THREAD_MULTIPLE; lower levels are refused
  // because every backend calls MPI from its own worker thread.
  int thread_level = 0;
  // MPIX_Query_cuda_support() at run time: whether MPI reads and writes
  // CUDA memory itself.
  bool cuda_aware = false;
  // The largest tag a send or recv may use (MPI_TAG_UB).
  int tag_upper_bound = 0;
};

// Initialises MPI on the first call (MPI_Init_thread asking for
// MPI_THREAD_MULTIPLE, errors returned rather than fatal) and registers
// MPI_Finalize at exit; later calls return the same facts. When the program
// initialised MPI itself, its thread level is used and it finalises.
absl::StatusOr<MpiProcess> mpiProcess();

// "MPI_THREAD_MULTIPLE" and so on.
std::string_view threadLevelName(int level);

// Held around every MPI call. It locks one process-wide mutex when MPI
// granted MPI_THREAD_SERIALIZED and does nothing under MPI_THREAD_MULTIPLE.
// Nothing waits inside MPI while holding it: the backends poll.
class MpiLock {
 public:
  MpiLock();
  ~MpiLock();
  MpiLock(const MpiLock&) = delete;
  MpiLock& operator=(const MpiLock&) = delete;

 private:
  bool locked_;
};

// Runs `hook` at exit before MPI_Finalize, so that a backend still alive
// then stops its worker thread before MPI goes away. Removed by key.
void addExitHook(const void* key, std::function<void()> hook);
void removeExitHook(const void* key);

// Keeps an operation that a broken backend gave up on until exit. `request`
// shares ownership of the buffers MPI may still write. At exit MPI_Finalize
// runs only if every kept operation has completed by then (they get a second
// of grace): finalising with one pending can wait forever for a peer that
// died, so the process then exits without it and says why.
void keepUntilExit(std::shared_ptr<MPI_Request> request);

// OK for MPI_SUCCESS; otherwise a backend error "<what> failed in Open MPI:
// <MPI_Error_string>".
absl::Status mpiStatus(int code, std::string_view what);

// The MPI datatype of `dtype`: the fixed-size C types, MPI_C_BOOL, and
// MPI_UINT16_T storage for f16 and bf16 (which only the user ops of
// mpiReduceOp compute on).
MPI_Datatype mpiDatatype(DType dtype);

// The MPI op that computes `op` on `dtype`; AVG is SUM's op and the caller
// divides afterwards (divideBySize). Bool tensors use the logical ops: sum,
// max and bor are "or", product, min, band and avg are "and", bxor is "xor",
// which is what integer arithmetic on 0/1 stored back into a bool gives.
// Fails with an invalid-argument error when `op` is not defined on `dtype`.
absl::StatusOr<MPI_Op> mpiReduceOp(ReduceOp op, DType dtype);

// Whether reducing `dtype` with `op` runs code of this process on the data
// (the f16/bf16 user ops, AVG's division): such data must be in host memory.
bool reducesOnHost(ReduceOp op, DType dtype);

// AVG's second step: divides `numel` elements at `data` (host memory) by
// `size`, integer division for integer dtypes. Bool tensors are left alone
// (their AVG is already the logical "and").
void divideBySize(void* data, DType dtype, int64_t numel, int size);

}  // namespace loom::comm::mpi

#endif  // LOOM_COMM_MPI_MPI_RUNTIME_H_
