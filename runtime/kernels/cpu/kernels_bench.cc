// Throughput of the CPU kernels that dominate a step: linear / matmul
// (OpenBLAS) and causal attention forward and backward, reported as GFLOP/s
// with the FLOP counts of docs/planner_nn.md, over wall time (OpenBLAS runs
// its own threads, which the main thread's CPU time would miss). Run with
// `bazel run -c opt //runtime/kernels/cpu:kernels_bench`.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <vector>

#include "runtime/kernels/cpu/cpu_kernels.h"

namespace loom::runtime::cpu {
namespace {

std::vector<float> filled(int64_t count) {
  std::vector<float> values(count);
  for (int64_t i = 0; i < count; ++i) {
    values[i] = static_cast<float>((i * 7919) % 1000) * 1e-3f - 0.5f;
  }
  return values;
}

void setFlops(benchmark::State& state, double flops_per_iteration) {
  state.counters["GFLOP/s"] =
      benchmark::Counter(flops_per_iteration * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

// Args: tokens, in, out.
void BM_Linear(benchmark::State& state) {
  const int64_t rows = state.range(0), in = state.range(1), out = state.range(2);
  const auto x = filled(rows * in), w = filled(in * out), b = filled(out);
  std::vector<float> y(rows * out);
  for (auto _ : state) {
    linear(x.data(), w.data(), b.data(), y.data(), rows, in, out);
    benchmark::DoNotOptimize(y.data());
  }
  setFlops(state, 2.0 * rows * in * out + rows * out);
}
BENCHMARK(BM_Linear)->Args({512, 1024, 1024})->Args({2048, 1024, 4096})->UseRealTime();

// The weight gradient x^T dy: Args: tokens, in, out.
void BM_MatmulTransposeLhs(benchmark::State& state) {
  const int64_t rows = state.range(0), m = state.range(1), n = state.range(2);
  const auto x = filled(rows * m), dy = filled(rows * n);
  std::vector<float> dw(m * n);
  for (auto _ : state) {
    matmulTransposeLhs(x.data(), dy.data(), dw.data(), rows, m, n);
    benchmark::DoNotOptimize(dw.data());
  }
  setFlops(state, 2.0 * rows * m * n);
}
BENCHMARK(BM_MatmulTransposeLhs)->Args({2048, 1024, 4096})->UseRealTime();

// The input gradient dy w^T: Args: tokens, out (k), in (n).
void BM_MatmulTransposeRhs(benchmark::State& state) {
  const int64_t rows = state.range(0), k = state.range(1), n = state.range(2);
  const auto dy = filled(rows * k), w = filled(n * k);
  std::vector<float> dx(rows * n);
  for (auto _ : state) {
    matmulTransposeRhs(dy.data(), w.data(), dx.data(), rows, k, n);
    benchmark::DoNotOptimize(dx.data());
  }
  setFlops(state, 2.0 * rows * k * n);
}
BENCHMARK(BM_MatmulTransposeRhs)->Args({2048, 4096, 1024})->UseRealTime();

// Args: seq, heads, kv_heads (batch 1, head_dim 64).
AttentionShape attentionShape(const benchmark::State& state) {
  return {1, state.range(0), state.range(1), state.range(2), 64};
}

double attentionPairs(const AttentionShape& s) {
  return static_cast<double>(s.batch) * s.heads * s.head_dim * s.seq * (s.seq + 1) / 2.0;
}

void BM_Attention(benchmark::State& state) {
  const AttentionShape s = attentionShape(state);
  const auto q = filled(s.seq * s.heads * 64);
  const auto kv = filled(s.seq * s.kv_heads * 64);
  std::vector<float> out(q.size());
  for (auto _ : state) {
    attention(q.data(), kv.data(), kv.data(), out.data(), s);
    benchmark::DoNotOptimize(out.data());
  }
  setFlops(state, 4.0 * attentionPairs(s));
}
BENCHMARK(BM_Attention)->Args({512, 8, 8})->Args({512, 8, 2})->UseRealTime();

void BM_AttentionGrad(benchmark::State& state) {
  const AttentionShape s = attentionShape(state);
  const auto q = filled(s.seq * s.heads * 64);
  const auto kv = filled(s.seq * s.kv_heads * 64);
  std::vector<float> dq(q.size()), dk(kv.size()), dv(kv.size());
  for (auto _ : state) {
    attentionGrad(q.data(), kv.data(), kv.data(), q.data(), dq.data(), dk.data(), dv.data(), s);
    benchmark::DoNotOptimize(dq.data());
  }
  setFlops(state, 10.0 * attentionPairs(s));
}
BENCHMARK(BM_AttentionGrad)->Args({512, 8, 8})->Args({512, 8, 2})->UseRealTime();

}  // namespace
}  // namespace loom::runtime::cpu

BENCHMARK_MAIN();
