// Throughput of the CPU kernels that dominate a step: linear / matmul
// (OpenBLAS) and causal attention forward and backward, reported as GFLOP/s
// with the FLOP counts of docs/planner_nn.md, over wall time (OpenBLAS runs
// its own threads, which the main thread's CPU time would miss). Attention
// runs the blocked kernels and the scalar reference they replaced side by
// side. Run with `bazel run -c opt //runtime/kernels/cpu:kernels_bench`.
#include <benchmark/benchmark.h>
#include <cblas.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/kernels/cpu/attention_reference.h"
#include "runtime/kernels/cpu/blas_core.h"
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

// Args: batch, seq, heads, kv_heads, head_dim.
AttentionShape attentionShape(const benchmark::State& state) {
  return {state.range(0), state.range(1), state.range(2), state.range(3), state.range(4)};
}

double attentionPairs(const AttentionShape& s) {
  return static_cast<double>(s.batch) * s.heads * s.head_dim * s.seq * (s.seq + 1) / 2.0;
}

// Runs the scalar reference and the blocked kernel alternately, timing each
// on its own, so that both see the same machine load however it drifts;
// reports each one's GFLOP/s and the ratio. The benchmark's own time is the
// pair's.
template <typename Reference, typename Blocked>
void compareAttention(benchmark::State& state, double flops_per_call, const Reference& reference,
                      const Blocked& blocked) {
  using Clock = std::chrono::steady_clock;
  std::chrono::duration<double> reference_time{0}, blocked_time{0};
  for (auto _ : state) {
    const Clock::time_point start = Clock::now();
    reference();
    const Clock::time_point middle = Clock::now();
    blocked();
    reference_time += middle - start;
    blocked_time += Clock::now() - middle;
  }
  const double flops = flops_per_call * static_cast<double>(state.iterations()) * 1e-9;
  state.counters["ref GFLOP/s"] = flops / reference_time.count();
  state.counters["new GFLOP/s"] = flops / blocked_time.count();
  state.counters["speedup"] = reference_time.count() / blocked_time.count();
}

// Operands of one attention shape: q and dout [B, S, H, D], k and v
// [B, S, Hkv, D].
struct AttentionOperands {
  explicit AttentionOperands(const AttentionShape& s)
      : q(filled(s.batch * s.seq * s.heads * s.head_dim)),
        kv(filled(s.batch * s.seq * s.kv_heads * s.head_dim)),
        out(q.size()),
        dq(q.size()),
        dk(kv.size()),
        dv(kv.size()) {}

  std::vector<float> q, kv, out, dq, dk, dv;
};

void BM_Attention(benchmark::State& state) {
  const AttentionShape s = attentionShape(state);
  AttentionOperands x(s);
  compareAttention(
      state, 4.0 * attentionPairs(s),
      [&] { attentionReference(x.q.data(), x.kv.data(), x.kv.data(), x.out.data(), s); },
      [&] { attention(x.q.data(), x.kv.data(), x.kv.data(), x.out.data(), s); });
}

void BM_AttentionGrad(benchmark::State& state) {
  const AttentionShape s = attentionShape(state);
  AttentionOperands x(s);
  compareAttention(
      state, 10.0 * attentionPairs(s),
      [&] {
        attentionGradReference(x.q.data(), x.kv.data(), x.kv.data(), x.q.data(), x.dq.data(),
                               x.dk.data(), x.dv.data(), s);
      },
      [&] {
        attentionGrad(x.q.data(), x.kv.data(), x.kv.data(), x.q.data(), x.dq.data(), x.dk.data(),
                      x.dv.data(), s);
      });
}

// Tiny Llama's layer (hidden 256 as 8 heads of 32 over 4 kv heads, and as 4
// heads of 64), batch 4 x seq 128; hidden 1024 as 16 heads of 64 at seq 256;
// and a long GQA sequence.
void attentionShapes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"B", "S", "H", "Hkv", "D"});
  b->Args({4, 128, 8, 4, 32})->Args({4, 128, 4, 4, 64})->Args({4, 256, 16, 16, 64});
  b->Args({1, 512, 8, 2, 64})->UseRealTime();
}
BENCHMARK(BM_Attention)->Apply(attentionShapes);
BENCHMARK(BM_AttentionGrad)->Apply(attentionShapes);

}  // namespace
}  // namespace loom::runtime::cpu

int main(int argc, char** argv) {
  // The GEMM figures, attention's included, depend on the kernels OpenBLAS
  // runs (OPENBLAS_CORETYPE overrides its choice; its Prescott fallback is
  // replaced as train replaces it) and on its thread count.
  loom::runtime::cpu::reexecWithBetterBlasCore(argv);
  benchmark::AddCustomContext("openblas", openblas_get_config());
  benchmark::AddCustomContext("openblas_threads", std::to_string(openblas_get_num_threads()));
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
