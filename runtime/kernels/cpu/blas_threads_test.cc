// The BLAS thread count a rank chooses: the flag, the user's environment,
// then the machine's cores shared among its ranks.
#include "runtime/kernels/cpu/blas_threads.h"

#include <map>
#include <string>

#include "gtest/gtest.h"

namespace loom::runtime::cpu {
namespace {

std::function<std::optional<std::string>(const char*)> envOf(
    std::map<std::string, std::string> vars) {
  return [vars](const char* name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

TEST(BlasThreadsTest, SharesTheCoresAmongTheLocalRanks) {
  BlasThreads t = chooseBlasThreads(0, 2, 16, envOf({}));
  EXPECT_EQ(t.threads, 8);
  EXPECT_EQ(t.why, "16 cores / 2 local ranks");
  EXPECT_EQ(chooseBlasThreads(0, 4, 2, envOf({})).threads, 1);
  EXPECT_EQ(chooseBlasThreads(0, 0, 3, envOf({})).threads, 3);
}

TEST(BlasThreadsTest, TheFlagThenTheEnvironmentWin) {
  EXPECT_EQ(chooseBlasThreads(3, 4, 2, envOf({{"OPENBLAS_NUM_THREADS", "1"}})).threads, 3);
  BlasThreads t = chooseBlasThreads(0, 4, 2, envOf({{"OMP_NUM_THREADS", "2"}}));
  EXPECT_EQ(t.threads, 0);
  EXPECT_EQ(t.why, "from OMP_NUM_THREADS=2");
}

TEST(BlasThreadsTest, SetsOpenBlas) {
  EXPECT_GE(usableCores(), 1);
  setBlasThreads(1);
  EXPECT_EQ(blasThreads(), 1);
}

}  // namespace
}  // namespace loom::runtime::cpu
