// BLAS thread count per rank (blas_threads.h).
#include "runtime/kernels/cpu/blas_threads.h"

#include <cblas.h>
#include <sched.h>

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace loom::runtime::cpu {

BlasThreads chooseBlasThreads(
    int requested, int local_ranks, int cores,
    const std::function<std::optional<std::string>(const char*)>& getenv) {
  if (requested > 0) return {requested, "--blas_threads"};
  for (const char* name : {"OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"}) {
    if (std::optional<std::string> value = getenv(name); value && !value->empty()) {
      return {0, absl::StrCat("from ", name, "=", *value)};
    }
  }
  const int ranks = std::max(1, local_ranks);
  return {std::max(1, cores / ranks), absl::StrCat(cores, " cores / ", ranks, " local ranks")};
}

int usableCores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return 1;
  return std::max(1, CPU_COUNT(&set));
}

void setBlasThreads(int threads) { openblas_set_num_threads(threads); }

int blasThreads() { return openblas_get_num_threads(); }

}  // namespace loom::runtime::cpu
