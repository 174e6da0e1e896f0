// Which OpenBLAS kernels a process runs. OpenBLAS 0.3.21 (Debian 12) picks
// its kernels from the CPU model at load; a model it does not know (Intel's
// Emerald Rapids, family 6 model 207) gets its Prescott (SSE3) fallback, 4-5x
// slower at GEMMs than the AVX-512 kernels the CPU runs. A program fixes
// that by re-executing itself with OPENBLAS_CORETYPE set, the one way to
// reach OpenBLAS's choice, which it makes before main runs.
#ifndef LOOM_RUNTIME_KERNELS_CPU_BLAS_CORE_H_
#define LOOM_RUNTIME_KERNELS_CPU_BLAS_CORE_H_

#include <optional>
#include <string>

namespace loom::runtime::cpu {

// Instruction sets the CPU has and the OS saves the registers of (XCR0).
struct CpuFeatures {
  bool avx2 = false;    // AVX2 and FMA, YMM state enabled
  bool avx512 = false;  // AVX-512 F, CD, BW, DQ and VL, ZMM and opmask state enabled
};

// This CPU's, from cpuid and xgetbv.
CpuFeatures detectCpuFeatures();

// The OPENBLAS_CORETYPE that replaces OpenBLAS's choice `detected`, or
// nullopt to keep it. Only the Prescott fallback is replaced, only on a CPU
// with the instructions of the replacement (SkylakeX with AVX-512, else
// Haswell with AVX2), and never when the user set OPENBLAS_CORETYPE
// (`user_coretype`).
std::optional<std::string> blasCoreToSet(const std::string& detected, const CpuFeatures& cpu,
                                         const std::optional<std::string>& user_coretype);

// The kernels OpenBLAS runs ("Zen", "SkylakeX", "Prescott", ...).
std::string blasCoreName();

// Call first in main, before any other thread starts. When blasCoreToSet
// names a core for this CPU, sets OPENBLAS_CORETYPE and executes this
// program (/proc/self/exe) again with the same argv, so OpenBLAS initialises
// once, with that core; the new process keeps it (the variable is set).
// Returns when there is nothing to change, or after printing why the exec
// failed (the program then runs on the kernels it has).
void reexecWithBetterBlasCore(char** argv);

}  // namespace loom::runtime::cpu

#endif  // LOOM_RUNTIME_KERNELS_CPU_BLAS_CORE_H_
