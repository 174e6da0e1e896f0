// How many OpenBLAS threads a rank uses. Ranks that share a machine must
// share its cores: OpenBLAS's default of one thread per core puts N times
// too many threads on the machine when N ranks run there.
#ifndef LOOM_RUNTIME_KERNELS_CPU_BLAS_THREADS_H_
#define LOOM_RUNTIME_KERNELS_CPU_BLAS_THREADS_H_

#include <functional>
#include <optional>
#include <string>

namespace loom::runtime::cpu {

struct BlasThreads {
  int threads = 1;  // 0: leave OpenBLAS as the environment set it
  std::string why;  // "2 cores / 2 local ranks", for the log
};

// `requested` when it is above 0; else nothing to do when the user set
// OPENBLAS_NUM_THREADS or OMP_NUM_THREADS (OpenBLAS reads them itself);
// else `cores` / `local_ranks`, at least 1. `getenv` reads the environment.
BlasThreads chooseBlasThreads(int requested, int local_ranks, int cores,
                              const std::function<std::optional<std::string>(const char*)>& getenv);

// The cores this process may run on (its CPU affinity), at least 1.
int usableCores();

// Sets OpenBLAS's thread count for this process (threads > 0).
void setBlasThreads(int threads);
// What OpenBLAS will use.
int blasThreads();

}  // namespace loom::runtime::cpu

#endif  // LOOM_RUNTIME_KERNELS_CPU_BLAS_THREADS_H_
