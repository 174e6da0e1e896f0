// The "mpi" backend: collectives over Open MPI for CPU tensors, and for CUDA
// tensors either directly (a CUDA-aware MPI, detected at run time) or staged
// through pinned host memory. Every call runs as an MPI-3 nonblocking
// operation that a worker thread polls against the call's deadline. The
// design, the failure behaviour and how to launch are in
// docs/comm_backends.md.
#ifndef LOOM_COMM_MPI_MPI_BACKEND_H_
#define LOOM_COMM_MPI_MPI_BACKEND_H_

#include <memory>

#include "absl/status/statusor.h"
#include "comm/backend.h"

namespace loom::comm::mpi {

// Registers backend "mpi" for CPU and CUDA tensors with comm's registry.
void registerMpiBackend();

// Creates the mpi backend of one group (what the registered factory does).
// Initialises MPI on first use. The job must be launched with mpirun: the
// context's ranks must be MPI's world ranks (context.global_ranks, or
// 0..size-1 when empty), otherwise this fails and says so. Every member of
// the group calls it; with a store in the context, members that do not
// arrive within context.timeout are named in a timeout error.
absl::StatusOr<std::unique_ptr<Backend>> createMpiBackend(const BackendContext& context);

// Whether this process's MPI reads and writes CUDA memory itself
// (MPIX_Query_cuda_support); initialises MPI.
absl::StatusOr<bool> mpiIsCudaAware();

}  // namespace loom::comm::mpi

#endif  // LOOM_COMM_MPI_MPI_BACKEND_H_
