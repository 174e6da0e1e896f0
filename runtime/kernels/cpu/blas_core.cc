// OpenBLAS's Prescott fallback replaced on CPUs it does not know (blas_core.h).
#include "runtime/kernels/cpu/blas_core.h"

#include <cblas.h>
#include <cpuid.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace loom::runtime::cpu {
namespace {

constexpr bool bit(unsigned value, int i) { return (value >> i) & 1u; }

// XCR0: which register states the OS saves on a context switch. Only valid
// when cpuid says OSXSAVE.
uint64_t xcr0() {
  uint32_t lo = 0, hi = 0;
  asm volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (static_cast<uint64_t>(hi) << 32) | lo;
}

}  // namespace

CpuFeatures detectCpuFeatures() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid(0, &eax, &ebx, &ecx, &edx) == 0 || eax < 7) return {};
  __get_cpuid(1, &eax, &ebx, &ecx, &edx);
  const bool fma = bit(ecx, 12), osxsave = bit(ecx, 27), avx = bit(ecx, 28);
  if (!osxsave || !avx) return {};
  const uint64_t xcr = xcr0();
  const bool ymmState = (xcr & 0x6) == 0x6;    // SSE and AVX
  const bool zmmState = (xcr & 0xe6) == 0xe6;  // and opmask, ZMM 0-15 high, ZMM 16-31
  __get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx);
  const bool avx2 = bit(ebx, 5);
  const bool avx512 = bit(ebx, 16) && bit(ebx, 17) && bit(ebx, 28) && bit(ebx, 30) && bit(ebx, 31);
  return {.avx2 = avx2 && fma && ymmState, .avx512 = avx512 && zmmState};
}

std::optional<std::string> blasCoreToSet(const std::string& detected, const CpuFeatures& cpu,
                                         const std::optional<std::string>& user_coretype) {
  if (user_coretype.has_value() || detected != "Prescott") return std::nullopt;
  if (cpu.avx512) return "SkylakeX";
  if (cpu.avx2) return "Haswell";
  return std::nullopt;
}

std::string blasCoreName() { return openblas_get_corename(); }

void reexecWithBetterBlasCore(char** argv) {
  // An empty value names no core: OpenBLAS falls back to Prescott on it.
  const char* user = std::getenv("OPENBLAS_CORETYPE");
  const std::optional<std::string> core = blasCoreToSet(
      blasCoreName(), detectCpuFeatures(),
      user == nullptr || *user == '\0' ? std::nullopt : std::optional<std::string>(user));
  if (!core.has_value()) return;
  if (setenv("OPENBLAS_CORETYPE", core->c_str(), 1) != 0) return;
  execv("/proc/self/exe", argv);
  std::fprintf(stderr,
               "warning: OpenBLAS runs its Prescott kernels on this CPU; re-executing with "
               "OPENBLAS_CORETYPE=%s failed: %s\n",
               core->c_str(), std::strerror(errno));
  unsetenv("OPENBLAS_CORETYPE");
}

}  // namespace loom::runtime::cpu
