// One call that registers every backend this build has, so that a binary
// can name any of them in ProcessGroupOptions.
#ifndef LOOM_COMM_ALL_BACKENDS_H_
#define LOOM_COMM_ALL_BACKENDS_H_

namespace loom::comm {

// Registers "gloo" (CPU), "mpi" (CPU and CUDA) and "nccl" (CUDA). Nothing
// starts until a group creates a backend: MPI initialises on the first mpi
// group, CUDA on the first nccl group. Safe to call more than once.
void registerAllBackends();

}  // namespace loom::comm

#endif  // LOOM_COMM_ALL_BACKENDS_H_
