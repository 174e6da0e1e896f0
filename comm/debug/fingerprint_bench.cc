// Cost of the cross-rank collective checks: FingerprintChecker::check per
// call with 2 and 4 ranks as threads (beside the bare side all-gather it
// rides on, to show the checker's own share), and fingerprint encode/decode.
// Times are one rank's latency per call.
//   bazel run -c opt //comm/debug:fingerprint_bench
// Results are recorded in docs/comm_debug.md.
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "benchmark/benchmark.h"
#include "comm/debug/fingerprint.h"
#include "comm/debug/thread_backend.h"
#include "comm/gloo/gloo_backend.h"
#include "comm/hash_store.h"
#include "comm/prefix_store.h"

namespace loom::comm::debug {
namespace {

constexpr absl::Duration kTimeout = absl::Seconds(60);

CollectiveFingerprint sampleFingerprint(bool detail) {
  CollectiveFingerprint fp;
  fp.seq = 12345;
  fp.op = "all_reduce";
  fp.dtype = DType::kBFloat16;
  fp.numel = 1 << 20;
  fp.reduce_op = ReduceOp::kSum;
  if (detail) fp.shapes = {{1024, 1024}};
  return fp;
}

// Ranks 1..n-1 run `iterations` calls of `call(rank)` on their own threads
// while rank 0 runs the benchmark loop, so that the reported time is one
// rank's latency per call.
template <typename Call>
void runRanks(benchmark::State& state, int ranks, Call call) {
  std::vector<std::thread> peers;
  const benchmark::IterationCount iterations = state.max_iterations;
  for (int r = 1; r < ranks; ++r) {
    peers.emplace_back([&call, r, iterations] {
      for (benchmark::IterationCount i = 0; i < iterations; ++i) {
        if (!call(r).ok()) break;  // rank 0 reports it
      }
    });
  }
  for (auto _ : state) {
    if (const absl::Status status = call(0); !status.ok()) {
      state.SkipWithError(std::string(status.message()).c_str());
      break;
    }
  }
  for (std::thread& peer : peers) peer.join();
}

// Side backends of `ranks` ranks: in-process ThreadBackends, or Gloo over
// TCP on 127.0.0.1 (connected on one thread per rank, as Gloo needs every
// rank at once).
std::vector<std::unique_ptr<Backend>> makeBackends(bool use_gloo, int ranks,
                                                   const std::shared_ptr<Store>& store) {
  if (!use_gloo) return makeThreadBackends(ranks, "bench/checks", kTimeout);
  std::vector<std::unique_ptr<Backend>> backends(ranks);
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r) {
    threads.emplace_back([&, r] {
      BackendContext context;
      context.store = std::make_shared<PrefixStore>("bench/checks/gloo", store);
      context.rank = r;
      context.size = ranks;
      context.group_name = "bench/checks";
      for (int g = 0; g < ranks; ++g) context.global_ranks.push_back(g);
      context.timeout = kTimeout;
      absl::StatusOr<std::unique_ptr<Backend>> backend =
          gloo::createGlooBackend(context, gloo::GlooBackendOptions{});
      if (backend.ok()) backends[r] = *std::move(backend);
    });
  }
  for (std::thread& t : threads) t.join();
  for (const auto& backend : backends) {
    if (backend == nullptr) return {};
  }
  return backends;
}

// Args: gloo (0: ThreadBackend, 1: Gloo), ranks, detail (0: cheap mode, no
// shapes; 1: one shape per call).
void BM_Check(benchmark::State& state) {
  const int ranks = static_cast<int>(state.range(1));
  auto store = std::make_shared<HashStore>();
  std::vector<std::unique_ptr<Backend>> backends = makeBackends(state.range(0) != 0, ranks, store);
  if (backends.empty()) {
    state.SkipWithError("could not connect the Gloo side backends");
    return;
  }
  std::vector<std::unique_ptr<FingerprintChecker>> checkers;
  for (auto& backend : backends) {
    checkers.push_back(
        std::make_unique<FingerprintChecker>(std::move(backend), store, "bench", kTimeout));
  }
  std::vector<CollectiveFingerprint> fps(ranks, sampleFingerprint(state.range(2) != 0));
  runRanks(state, ranks, [&](int rank) {
    ++fps[rank].seq;
    return checkers[rank]->check(fps[rank]);
  });
}
BENCHMARK(BM_Check)
    ->ArgNames({"gloo", "ranks", "detail"})
    ->ArgsProduct({{0, 1}, {2, 4}, {0, 1}})
    ->UseRealTime();

// The exchange alone: one 64-byte all-gather over the same backend, what
// the checker rides on.
void BM_SideAllGather(benchmark::State& state) {
  const int ranks = static_cast<int>(state.range(1));
  std::vector<std::unique_ptr<Backend>> backends =
      makeBackends(state.range(0) != 0, ranks, std::make_shared<HashStore>());
  if (backends.empty()) {
    state.SkipWithError("could not connect the Gloo side backends");
    return;
  }
  std::vector<Bytes> inputs(ranks, Bytes(CollectiveFingerprint::kEncodedSize, 1));
  std::vector<Bytes> outputs(ranks, Bytes(CollectiveFingerprint::kEncodedSize * ranks));
  std::vector<uint64_t> seqs(ranks, 0);  // per rank: Gloo tags calls by sequence number
  runRanks(state, ranks, [&](int rank) -> absl::Status {
    auto work = backends[rank]->allGatherIntoTensor(
        Tensor(outputs[rank].data(), DType::kUInt8, {static_cast<int64_t>(outputs[rank].size())}),
        Tensor(inputs[rank].data(), DType::kUInt8, {static_cast<int64_t>(inputs[rank].size())}), {},
        CollectiveInfo{"bench/checks", rank, ranks, ++seqs[rank], "all_gather_into_tensor"});
    return work.ok() ? (*work)->wait() : work.status();
  });
}
BENCHMARK(BM_SideAllGather)
    ->ArgNames({"gloo", "ranks"})
    ->ArgsProduct({{0, 1}, {2, 4}})
    ->UseRealTime();

void BM_Encode(benchmark::State& state) {
  CollectiveFingerprint fp = sampleFingerprint(state.range(0) != 0);
  for (auto _ : state) {
    ++fp.seq;
    benchmark::DoNotOptimize(fp.encode());
  }
}
BENCHMARK(BM_Encode)->ArgName("detail")->Arg(0)->Arg(1);

void BM_Decode(benchmark::State& state) {
  const Bytes bytes = sampleFingerprint(false).encode();
  for (auto _ : state) benchmark::DoNotOptimize(CollectiveFingerprint::decode(bytes));
}
BENCHMARK(BM_Decode);

}  // namespace
}  // namespace loom::comm::debug

BENCHMARK_MAIN();
