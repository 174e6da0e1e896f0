// Every backend this build has, registered by linking: a binary that depends
// on //comm:all_backends can name gloo, mpi and nccl in ProcessGroupOptions
// without calling anything.
#ifndef LOOM_COMM_ALL_BACKENDS_H_
#define LOOM_COMM_ALL_BACKENDS_H_

namespace loom::comm {

// Registers "gloo" (CPU), "mpi" (CPU and CUDA) and "nccl" (CUDA). Nothing
// starts until a group creates a backend: MPI initialises on the first mpi
// group, CUDA on the first nccl group. Linking already did it; calling it
// again is harmless (kept for code written before registration by linking).
void registerAllBackends();

}  // namespace loom::comm

#endif  // LOOM_COMM_ALL_BACKENDS_H_
