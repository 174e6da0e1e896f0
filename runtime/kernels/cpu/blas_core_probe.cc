// Prints the OpenBLAS core this process runs after reexecWithBetterBlasCore;
// blas_core_reexec_test drives it through OpenBLAS's Prescott fallback.
#include <cstdio>

#include "runtime/kernels/cpu/blas_core.h"

int main(int, char** argv) {
  loom::runtime::cpu::reexecWithBetterBlasCore(argv);
  std::printf("%s\n", loom::runtime::cpu::blasCoreName().c_str());
  return 0;
}
