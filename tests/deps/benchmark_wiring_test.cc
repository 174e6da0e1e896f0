// Wiring test for Google Benchmark: registers a benchmark, runs it through the
// library's runner with a reporter that records what ran.
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "gtest/gtest.h"

namespace {

void BM_SumVector(benchmark::State& state) {
  std::vector<int> values(static_cast<size_t>(state.range(0)), 1);
  for (auto _ : state) {
    int sum = 0;
    for (int v : values) sum += v;
    benchmark::DoNotOptimize(sum);
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_SumVector)->Arg(64)->Arg(4096);

class RecordingReporter : public benchmark::BenchmarkReporter {
 public:
  bool ReportContext(const Context&) override { return true; }
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& run : runs) {
      names.push_back(run.benchmark_name());
      iterations.push_back(run.iterations);
    }
  }
  std::vector<std::string> names;
  std::vector<benchmark::IterationCount> iterations;
};

TEST(BenchmarkWiringTest, RunsRegisteredBenchmarks) {
  std::vector<char*> argv = {const_cast<char*>("test"),
                             const_cast<char*>("--benchmark_min_time=0.001")};
  int argc = static_cast<int>(argv.size());
  benchmark::Initialize(&argc, argv.data());
  RecordingReporter reporter;
  EXPECT_EQ(benchmark::RunSpecifiedBenchmarks(&reporter), 2u);
  ASSERT_EQ(reporter.names.size(), 2u);
  EXPECT_EQ(reporter.names[0], "BM_SumVector/64");
  EXPECT_EQ(reporter.names[1], "BM_SumVector/4096");
  for (auto n : reporter.iterations) EXPECT_GT(n, 0);
}

}  // namespace
