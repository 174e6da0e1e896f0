// Throughput of the CPU kernels that dominate a step: linear / matmul
// (OpenBLAS) and causal attention forward and backward, reported as GFLOP/s
// with the FLOP counts of docs/planner_nn.md, over wall time (OpenBLAS runs
// its own threads, which the main thread's CPU time would miss). Attention,
// softmax and cross-entropy run beside the scalar references they replaced
// (before / after). Run with `bazel run -c opt //runtime/kernels/cpu:kernels_bench`.
#include <benchmark/benchmark.h>
#include <cblas.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/kernels/cpu/attention_reference.h"
#include "runtime/kernels/cpu/blas_core.h"
#include "runtime/kernels/cpu/cpu_kernels.h"
#include "runtime/kernels/cpu/softmax_reference.h"

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

// Runs a reference kernel and the kernel that replaced it alternately,
// timing each on its own, so that both see the same machine load however it
// drifts; reports each one's ms per call (and GFLOP/s when the FLOPs per
// call are given) and the ratio. The benchmark's own time is the pair's.
template <typename Reference, typename Replacement>
void compareWithReference(benchmark::State& state, double flops_per_call,
                          const Reference& reference, const Replacement& replacement) {
  using Clock = std::chrono::steady_clock;
  std::chrono::duration<double> reference_time{0}, new_time{0};
  for (auto _ : state) {
    const Clock::time_point start = Clock::now();
    reference();
    const Clock::time_point middle = Clock::now();
    replacement();
    reference_time += middle - start;
    new_time += Clock::now() - middle;
  }
  const double calls = static_cast<double>(state.iterations());
  state.counters["ref ms"] = reference_time.count() * 1e3 / calls;
  state.counters["new ms"] = new_time.count() * 1e3 / calls;
  if (flops_per_call > 0) {
    state.counters["ref GFLOP/s"] = flops_per_call * calls * 1e-9 / reference_time.count();
    state.counters["new GFLOP/s"] = flops_per_call * calls * 1e-9 / new_time.count();
  }
  state.counters["speedup"] = reference_time.count() / new_time.count();
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
  compareWithReference(
      state, 4.0 * attentionPairs(s),
      [&] { attentionReference(x.q.data(), x.kv.data(), x.kv.data(), x.out.data(), s); },
      [&] { attention(x.q.data(), x.kv.data(), x.kv.data(), x.out.data(), s); });
}

void BM_AttentionGrad(benchmark::State& state) {
  const AttentionShape s = attentionShape(state);
  AttentionOperands x(s);
  compareWithReference(
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

// Args: tokens, vocab. Logits in [-0.5, 0.5), labels spread over the vocab.
struct LogitOperands {
  LogitOperands(int64_t tokens, int64_t vocab)
      : logits(filled(tokens * vocab)), out(logits.size()), labels(tokens) {
    for (int64_t t = 0; t < tokens; ++t) labels[t] = static_cast<int32_t>((t * 7919) % vocab);
  }

  std::vector<float> logits, out;
  std::vector<int32_t> labels;
};

void BM_CrossEntropy(benchmark::State& state) {
  const int64_t tokens = state.range(0), vocab = state.range(1);
  LogitOperands x(tokens, vocab);
  compareWithReference(
      state, 0,
      [&] {
        benchmark::DoNotOptimize(
            crossEntropyReference(x.logits.data(), x.labels.data(), tokens, vocab));
      },
      [&] {
        benchmark::DoNotOptimize(crossEntropy(x.logits.data(), x.labels.data(), tokens, vocab));
      });
}

void BM_CrossEntropyGrad(benchmark::State& state) {
  const int64_t tokens = state.range(0), vocab = state.range(1);
  LogitOperands x(tokens, vocab);
  const float scale = 1.0f / static_cast<float>(tokens);
  compareWithReference(
      state, 0,
      [&] {
        crossEntropyGradReference(x.logits.data(), x.labels.data(), 1.0f, scale, x.out.data(),
                                  tokens, vocab);
      },
      [&] {
        crossEntropyGrad(x.logits.data(), x.labels.data(), 1.0f, scale, x.out.data(), tokens,
                         vocab);
      });
}

void BM_Softmax(benchmark::State& state) {
  const int64_t rows = state.range(0), n = state.range(1);
  LogitOperands x(rows, n);
  compareWithReference(
      state, 0, [&] { softmaxReference(x.logits.data(), x.out.data(), rows, n); },
      [&] { softmax(x.logits.data(), x.out.data(), rows, n); });
}

// The loss of tiny Llama (batch 4 x 128 tokens, vocab 2048) and of the 64M
// Llama (2 x 256 tokens, vocab 8192) of docs/fsdp2_side_by_side.md.
void logitShapes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"tokens", "vocab"});
  b->Args({512, 2048})->Args({512, 8192})->UseRealTime();
}
BENCHMARK(BM_CrossEntropy)->Apply(logitShapes);
BENCHMARK(BM_CrossEntropyGrad)->Apply(logitShapes);
BENCHMARK(BM_Softmax)->Apply(logitShapes);

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
