// OpenBLAS's core choice: which fallbacks are replaced, by what, and the
// CPU features against what the kernel reports in /proc/cpuinfo.
#include "runtime/kernels/cpu/blas_core.h"

#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "gtest/gtest.h"

namespace loom::runtime::cpu {
namespace {

constexpr CpuFeatures kSse{.avx2 = false, .avx512 = false};
constexpr CpuFeatures kAvx2{.avx2 = true, .avx512 = false};
constexpr CpuFeatures kAvx512{.avx2 = true, .avx512 = true};

TEST(BlasCoreTest, ReplacesThePrescottFallbackByWhatTheCpuRuns) {
  EXPECT_EQ(blasCoreToSet("Prescott", kAvx512, std::nullopt), "SkylakeX");
  EXPECT_EQ(blasCoreToSet("Prescott", kAvx2, std::nullopt), "Haswell");
  EXPECT_EQ(blasCoreToSet("Prescott", kSse, std::nullopt), std::nullopt);
}

TEST(BlasCoreTest, KeepsAKnownCpusChoiceAndTheUsers) {
  for (const char* core : {"Zen", "Haswell", "SkylakeX", "Cooperlake", "Sandybridge"}) {
    EXPECT_EQ(blasCoreToSet(core, kAvx512, std::nullopt), std::nullopt) << core;
  }
  EXPECT_EQ(blasCoreToSet("Prescott", kAvx512, "Prescott"), std::nullopt);
  EXPECT_EQ(blasCoreToSet("Prescott", kAvx512, "Haswell"), std::nullopt);
}

// Linux lists a flag only when the CPU has it and the kernel enabled its
// register state, the two things detectCpuFeatures checks.
std::set<std::string> cpuinfoFlags() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("flags", 0) != 0) continue;
    std::istringstream words(line.substr(line.find(':') + 1));
    std::set<std::string> flags;
    for (std::string w; words >> w;) flags.insert(w);
    return flags;
  }
  return {};
}

TEST(BlasCoreTest, DetectsWhatTheKernelReports) {
  const std::set<std::string> flags = cpuinfoFlags();
  if (flags.empty()) GTEST_SKIP() << "no flags line in /proc/cpuinfo";
  auto has = [&](std::initializer_list<const char*> names) {
    for (const char* n : names) {
      if (!flags.contains(n)) return false;
    }
    return true;
  };
  const CpuFeatures cpu = detectCpuFeatures();
  EXPECT_EQ(cpu.avx2, has({"avx", "avx2", "fma"}));
  EXPECT_EQ(cpu.avx512, has({"avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl"}));
}

TEST(BlasCoreTest, NamesTheKernelsInUse) { EXPECT_FALSE(blasCoreName().empty()); }

}  // namespace
}  // namespace loom::runtime::cpu
