// Tests of the mesh search: the pruned search ranks its top rows exactly as
// exhaustive enumeration does on small cases; pins, the tp limit, the
// memory cap and the outputs (explanation, candidates.json, points).
#include "planner/cost/search.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "mesh/topology.h"
#include "planner/cost/cost_model.h"
#include "planner/cost/strategy.h"
#include "tests/testing/status_matchers.h"

namespace loom::planner::cost {
namespace {

using ::loom::testutil::StatusIs;
using ::testing::HasSubstr;

// A pricer with the shape of a real one, in closed form, so that the
// search's own logic (enumeration, pins, pruning, ranking) is tested apart
// from any pricer: compute falls with the devices, a gathered stream of
// parameters grows with fsdp (twice with resharding, more collectives with
// small buckets), the other stream with tp and dp, prefetch hides more of
// the streams behind compute, and memory holds the shards, the saved
// activations and the gathered copies. It keeps the search's assumptions:
// no variant is faster than its group's base bound, none smaller than the
// group's memory bound. With `pipeline_layers`, pipeline stages divide the
// compute and the parameters, add a bubble of (pp - 1) / virtual stages
// micro-batches and one transfer per micro-batch, and hold the
// micro-batches their schedule keeps in flight. Offload keeps 4 of the 16
// bytes of state per parameter on the device and the other 12 with a copy of
// the gradient on the host, where AdamW takes four times as long.
class ClosedFormPricer final : public StepPricer {
 public:
  ClosedFormPricer(int64_t heads, int64_t seq, int64_t pipeline_layers = 0)
      : heads_(heads), seq_(seq), pipeline_layers_(pipeline_layers) {}
  bool tpAllowed(int64_t tp) override { return heads_ % tp == 0; }
  int64_t pipelineLayers() const override { return pipeline_layers_; }
  std::string tpRule() const override {
    return absl::StrCat("tp must divide the ", heads_, " heads");
  }

  int64_t memoryLowerBound(const Strategy& s) override {
    // Recompute keeps half (selective) or a tenth (full) of the activations.
    const int64_t kept = s.recompute == Recompute::kFull        ? 10
                         : s.recompute == Recompute::kSelective ? 2
                                                                : 1;
    // Sequence parallelism shards the fifth of the activations that tp
    // replicates.
    const int64_t activations = kActivationBytesPerToken * s.micro_batch * seq_ / s.tp / kept /
                                s.pp * inFlight(s);
    return kParams * (s.offload_optimizer ? 4 : 16) / (s.fsdp * s.tp * s.pp) +
           (s.sequence_parallel ? activations * 4 / 5 : activations);
  }

  // Compute alone: every stage's share of the micro-batches, no bubble.
  double pipelineBound(const Strategy& s) override {
    return estimate(s)->compute_s - estimate(s)->optimizer_s;
  }

  // The micro-batches the first stage holds: GPipe all of them, 1F1B up to
  // the stages, interleaving a stage's more.
  static int64_t inFlight(const Strategy& s) {
    if (s.pp == 1) return 1;
    if (s.schedule == stages::PipelineSchedule::kGpipe) return s.accumulation;
    return std::min(s.accumulation, s.pp + (s.virtual_stages > 1 ? s.pp / 2 : 0));
  }

  absl::StatusOr<StepEstimate> estimate(const Strategy& s) override {
    const double a = static_cast<double>(s.accumulation);
    const double tokens = static_cast<double>(s.micro_batch * seq_);
    // ... for 2 % (selective) or a third of the forward (full) more compute.
    const double again = s.recompute == Recompute::kFull        ? 1.0 / 3
                         : s.recompute == Recompute::kSelective ? 0.02
                                                                : 0;
    // A tenth of it is memory-bound ops that tp replicates; sequence
    // parallelism shards them too.
    const double unsharded = tokens * kFlopsPerToken / (s.tp * s.pp * kFlops) *
                             (1 + 0.05 * (s.tp - 1)) * (1 + again);
    const double memoryBound =
        0.1 * unsharded / (s.sequence_parallel ? static_cast<double>(s.tp) : 1.0);
    const double compute = 0.9 * unsharded + memoryBound;
    const double optimizer =
        (s.offload_optimizer ? 4e-9 : 1e-9) * kParams / (s.fsdp * s.tp * s.pp);
    const double shard = 2.0 * kParams / (s.tp * s.pp);
    const double gathers = s.fsdp > 1 ? shard * (s.fsdp - 1) / s.fsdp / kBandwidth : 0;
    const double collectives = s.bucket_mb > 0 ? 3 * kLayers : kLayers;
    const double latency = s.fsdp > 1 ? collectives * kLatency : 0;
    const double backward = s.reshard_after_forward ? gathers + latency : 0;
    // Per step: kept gathers run once, deferred reductions once.
    const double gather = s.keep_gathered ? gathers + latency : (gathers + latency + backward) * a;
    const double reduce = (gathers + latency) * (s.defer_grad_sync ? 1 : a);
    const double fsdp = gather + reduce;
    const double dpReduce = s.dp > 1 ? shard / kBandwidth * (s.defer_grad_sync ? 1 : a) : 0;
    // tp's all-reduces, twice the collectives (and their latency) as
    // reduce-scatters and gathers under sequence parallelism.
    const double tpComm = s.tp > 1 ? (tokens * 1e-7 * s.tp +
                                      (s.sequence_parallel ? 4 : 2) * kLayers * kLatency) *
                                         a
                                   : 0;
    const double transfers = s.pp > 1 ? tokens * 1e-8 * a : 0;
    const double other = tpComm + dpReduce + transfers;
    const double overlap = s.prefetch == 0 ? 0.5 : s.prefetch == 1 ? 0.9 : 0.95;
    const double exposed = std::max(0.0, std::max(fsdp, other) - overlap * compute * a);
    StepEstimate e;
    e.optimizer_s = optimizer;
    e.compute_s = compute * a + optimizer;
    e.exposed_comm_s = exposed;
    e.comm_s = fsdp + other;
    e.bubble_s = (compute + kMicroStepOverhead) * static_cast<double>(s.pp - 1) /
                 static_cast<double>(s.virtual_stages);
    // A fixed cost per micro-step (launches, the loss read back): no two
    // splits of a batch tie.
    e.step_time_s = (compute + kMicroStepOverhead) * a + exposed + optimizer + e.bubble_s;
    e.fsdp_stream_s = fsdp;
    e.other_stream_s = other;
    e.backward_gather_s = s.keep_gathered ? 0 : backward * a;
    e.memory_bound_s = memoryBound * a;
    const int64_t gathered = s.fsdp > 1 ? static_cast<int64_t>(shard) / kLayers : 0;
    e.backward_gather_bytes = s.reshard_after_forward ? gathered * kLayers : 0;
    // Kept: the whole gathered model; deferred: the unreduced gradients.
    const int64_t whole = 2 * kParams / s.tp;
    e.peak_bytes = memoryLowerBound(s) + gathered * (s.prefetch + 1) +
                   (s.reshard_after_forward ? 0 : gathered * kLayers) +
                   (s.bucket_mb > 0 ? s.bucket_mb << 20 : 0) + (s.keep_gathered ? whole : 0) +
                   (s.defer_grad_sync ? whole : 0);
    if (s.offload_optimizer) {
      e.host_peak_bytes = kParams * 14 / (s.fsdp * s.tp * s.pp);
      e.host_optimizer_s = optimizer;
    }
    e.tokens_per_step = s.globalBatch() * seq_;
    e.tokens_per_s_per_device =
        static_cast<double>(e.tokens_per_step) / e.step_time_s / static_cast<double>(s.devices());
    return e;
  }

 private:
  static constexpr int64_t kParams = 1'000'000'000;
  static constexpr int64_t kLayers = 16;
  static constexpr int64_t kActivationBytesPerToken = 400'000;
  static constexpr double kFlopsPerToken = 6e9;
  static constexpr double kFlops = 400e12;
  static constexpr double kBandwidth = 40e9;
  static constexpr double kLatency = 20e-6;
  static constexpr double kMicroStepOverhead = 1e-4;
  int64_t heads_;
  int64_t seq_;
  int64_t pipeline_layers_;
};

// The top `rows` of two rankings name the same candidates with the same
// step times.
void expectSameTop(const SearchResult& pruned, const SearchResult& full, size_t rows) {
  ASSERT_GE(full.ranked.size(), rows);
  ASSERT_GE(pruned.ranked.size(), rows);
  for (size_t i = 0; i < rows; ++i) {
    if (!full.ranked[i].fits) break;
    EXPECT_EQ(pruned.ranked[i].label(), full.ranked[i].label()) << "row " << i;
    EXPECT_DOUBLE_EQ(pruned.ranked[i].estimate.step_time_s, full.ranked[i].estimate.step_time_s);
  }
}

TEST(SearchTest, PrunedSearchMatchesExhaustiveEnumeration) {
  struct Case {
    int64_t hosts;
    int64_t batch;
    int64_t seq;
    double cap_gib;
  };
  for (const Case& c : std::vector<Case>{{1, 8, 1024, 80},
                                         {2, 16, 2048, 80},
                                         {2, 64, 1024, 80},
                                         {4, 32, 4096, 1.0},
                                         {4, 128, 512, 1.0}}) {
    SCOPED_TRACE(testing::Message() << c.hosts << " hosts, batch " << c.batch << ", seq " << c.seq
                                    << ", cap " << c.cap_gib << " GiB");
    const Workload w{.model = "closed-form", .seq = c.seq, .dtype = Dtype::kBF16};
    const CostModel model = *CostModel::create(*mesh::Topology::dgxH100(c.hosts));
    ClosedFormPricer pricer(8, c.seq);
    // Recompute and offload are tried only where less does not fit, which
    // no bound proves safe (below); the safe pruning is compared without
    // them.
    Pins none;
    ASSERT_TRUE(parsePin("recompute=none", none).ok());
    ASSERT_TRUE(parsePin("offload=none", none).ok());
    SearchOptions options{.global_batch = c.batch,
                          .pins = none,
                          .memory_cap_bytes = static_cast<int64_t>(c.cap_gib * (1LL << 30)),
                          .top = 10};
    absl::StatusOr<SearchResult> pruned = searchMesh(model, pricer, options);
    ASSERT_TRUE(pruned.ok()) << pruned.status();
    options.exhaustive = true;
    absl::StatusOr<SearchResult> full = searchMesh(model, pricer, options);
    ASSERT_TRUE(full.ok()) << full.status();
    EXPECT_EQ(full->evaluated, full->enumerated);
    EXPECT_EQ(pruned->evaluated + pruned->pruned_memory + pruned->pruned_bound, pruned->enumerated);
    EXPECT_EQ(pruned->enumerated, full->enumerated);
    expectSameTop(*pruned, *full, 10);
  }
}

// Recompute is for memory: where a mesh and micro-batch fit without it, its
// recompute groups are skipped; where they do not, selective then full are
// tried, and the winner is the exhaustive search's.
TEST(SearchTest, TriesRecomputeWhereLessDoesNotFit) {
  const CostModel model = *CostModel::create(*mesh::Topology::dgxH100(1));
  ClosedFormPricer pricer(8, 4096);
  absl::StatusOr<SearchResult> roomy = searchMesh(model, pricer, {.global_batch = 8});
  ASSERT_TRUE(roomy.ok() && roomy->found()) << roomy.status();
  EXPECT_EQ(roomy->ranked.front().strategy.recompute, Recompute::kNone);
  EXPECT_GT(roomy->pruned_recompute, 0);
  EXPECT_EQ(roomy->evaluated + roomy->pruned_memory + roomy->pruned_bound +
                roomy->pruned_recompute + roomy->pruned_offload,
            roomy->enumerated);
  // 8 sequences of 4096 tokens on 8 devices: activations of 1.5 GiB per
  // sequence and device do not fit in 2 GiB with the shards unless
  // recomputed.
  SearchOptions tight{.global_batch = 8, .memory_cap_bytes = 2LL << 30, .top = 1};
  absl::StatusOr<SearchResult> pruned = searchMesh(model, pricer, tight);
  ASSERT_TRUE(pruned.ok() && pruned->found()) << pruned.status();
  const Candidate& winner = pruned->ranked.front();
  EXPECT_NE(winner.strategy.recompute, Recompute::kNone) << winner.label();
  EXPECT_THAT(winner.label(), HasSubstr("recompute"));
  EXPECT_THAT(explainWinner(*pruned), HasSubstr("It recomputes activations"));
  tight.exhaustive = true;
  absl::StatusOr<SearchResult> full = searchMesh(model, pricer, tight);
  ASSERT_TRUE(full.ok() && full->found());
  EXPECT_EQ(winner.label(), full->ranked.front().label());
  EXPECT_LT(pruned->evaluated, full->evaluated);
  const nlohmann::json json = candidatesJson(*pruned, {.model = "closed-form"}, model);
  EXPECT_EQ(json["candidates"][0]["recompute"], recomputeName(winner.strategy.recompute));
}

// Offload is for memory too: where the optimizer states fit on the device
// its groups are skipped; where nothing fits, even with full recompute,
// the winner offloads, says so, and is the exhaustive search's. A host
// cap too small for the states leaves nothing.
TEST(SearchTest, TriesOffloadWhereNothingElseFits) {
  const CostModel model = *CostModel::create(*mesh::Topology::dgxH100(1));
  ClosedFormPricer pricer(8, 4096);
  absl::StatusOr<SearchResult> roomy = searchMesh(model, pricer, {.global_batch = 8});
  ASSERT_TRUE(roomy.ok() && roomy->found()) << roomy.status();
  EXPECT_FALSE(roomy->ranked.front().strategy.offload_optimizer);
  EXPECT_GT(roomy->pruned_offload, 0);
  for (const Candidate& c : roomy->ranked) EXPECT_FALSE(c.strategy.offload_optimizer) << c.label();

  // 16 bytes of state per parameter over 8 devices is 1.9 GiB: over a 1
  // GiB cap on any mesh, while offload keeps 0.5 GiB of it.
  SearchOptions tight{.global_batch = 8, .memory_cap_bytes = 1LL << 30, .top = 1};
  absl::StatusOr<SearchResult> pruned = searchMesh(model, pricer, tight);
  ASSERT_TRUE(pruned.ok() && pruned->found()) << pruned.status();
  const Candidate& winner = pruned->ranked.front();
  EXPECT_TRUE(winner.strategy.offload_optimizer) << winner.label();
  EXPECT_THAT(winner.label(), HasSubstr("offload optimizer"));
  EXPECT_GT(winner.estimate.host_peak_bytes, 0);
  EXPECT_LE(winner.estimate.host_peak_bytes, pruned->host_memory_cap_bytes);
  EXPECT_THAT(explainWinner(*pruned),
              HasSubstr("No candidate fits with the optimizer states on the device"));
  tight.exhaustive = true;
  absl::StatusOr<SearchResult> full = searchMesh(model, pricer, tight);
  ASSERT_TRUE(full.ok() && full->found());
  EXPECT_EQ(winner.label(), full->ranked.front().label());
  const nlohmann::json json = candidatesJson(*pruned, {.model = "closed-form"}, model);
  EXPECT_EQ(json["candidates"][0]["offload"], "optimizer");
  EXPECT_EQ(json["candidates"][0]["host_peak_bytes"], winner.estimate.host_peak_bytes);

  // Pinned off, nothing fits; a host cap below the states' 1.6 GiB leaves
  // nothing either, and the candidates say why.
  tight.exhaustive = false;
  ASSERT_TRUE(parsePin("offload=none", tight.pins).ok());
  absl::StatusOr<SearchResult> pinned = searchMesh(model, pricer, tight);
  ASSERT_TRUE(pinned.ok());
  EXPECT_FALSE(pinned->found());
  tight.pins = {};
  tight.host_memory_cap_bytes = 1LL << 30;
  absl::StatusOr<SearchResult> hostTight = searchMesh(model, pricer, tight);
  ASSERT_TRUE(hostTight.ok());
  EXPECT_FALSE(hostTight->found());
  EXPECT_EQ(hostTight->host_memory_cap_bytes, 1LL << 30);
}

TEST(SearchTest, PruningSkipsMostOfALargeSearch) {
  const Workload w{.model = "closed-form", .seq = 2048, .dtype = Dtype::kBF16};
  const CostModel model = *CostModel::create(*mesh::Topology::dgxH100(16));
  ClosedFormPricer pricer(8, w.seq);
  absl::StatusOr<SearchResult> result = searchMesh(model, pricer, {.global_batch = 128});
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_GT(result->enumerated, 300);
  EXPECT_LT(result->evaluated, result->enumerated / 2);
  ASSERT_TRUE(result->found());
}

TEST(SearchTest, TensorParallelismStaysInsideAHostUnlessAllowed) {
  const Workload w{.model = "closed-form", .seq = 1024, .dtype = Dtype::kBF16};
  const CostModel model = *CostModel::create(*mesh::Topology::dgxH100(4));
  ClosedFormPricer pricer(8, w.seq);
  SearchOptions options{.global_batch = 32, .exhaustive = true};
  absl::StatusOr<SearchResult> result = searchMesh(model, pricer, options);
  ASSERT_TRUE(result.ok()) << result.status();
  for (const Candidate& c : result->ranked) EXPECT_LE(c.strategy.tp, 8) << c.label();
  options.max_tp = 2;
  result = searchMesh(model, pricer, options);
  for (const Candidate& c : result->ranked) EXPECT_LE(c.strategy.tp, 2) << c.label();
}

TEST(SearchTest, PinsFixTheirChoices) {
  const Workload w{.model = "closed-form", .seq = 1024, .dtype = Dtype::kBF16};
  const CostModel model = *CostModel::create(*mesh::Topology::dgxH100(2));
  ClosedFormPricer pricer(8, w.seq);
  Pins pins;
  ASSERT_TRUE(parsePin("tp=4", pins).ok());
  ASSERT_TRUE(parsePin("reshard=false", pins).ok());
  ASSERT_TRUE(parsePin("micro-batch=2", pins).ok());
  absl::StatusOr<SearchResult> result =
      searchMesh(model, pricer, {.global_batch = 16, .pins = pins, .exhaustive = true});
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_FALSE(result->ranked.empty());
  for (const Candidate& c : result->ranked) {
    EXPECT_EQ(c.strategy.tp, 4);
    EXPECT_EQ(c.strategy.micro_batch, 2);
    if (c.strategy.fsdp > 1) {
      EXPECT_FALSE(c.strategy.reshard_after_forward);
    }
  }
}

// Between micro-steps: with many micro-steps over a slow fsdp axis, keeping
// the gathers and deferring the reductions win where memory allows, and
// pins fix them. Without accumulation they are not enumerated.
TEST(SearchTest, AccumulationLeversAreSearchedAndPinned) {
  const CostModel model = *CostModel::create(*mesh::Topology::dgxH100(2));
  ClosedFormPricer pricer(8, 1024);
  Pins pins;
  ASSERT_TRUE(parsePin("fsdp=16", pins).ok());
  ASSERT_TRUE(parsePin("micro-batch=1", pins).ok());
  absl::StatusOr<SearchResult> free =
      searchMesh(model, pricer, {.global_batch = 128, .pins = pins});
  ASSERT_TRUE(free.ok()) << free.status();
  ASSERT_TRUE(free->found());
  const Strategy& winner = free->ranked.front().strategy;
  EXPECT_EQ(winner.accumulation, 8);
  EXPECT_TRUE(winner.keep_gathered) << free->ranked.front().label();
  EXPECT_TRUE(winner.defer_grad_sync) << free->ranked.front().label();
  EXPECT_FALSE(winner.reshard_after_forward);
  EXPECT_THAT(free->ranked.front().label(), HasSubstr("keep gathered, defer sync"));
  ASSERT_TRUE(parsePin("keep-gathered=false", pins).ok());
  ASSERT_TRUE(parsePin("defer-grad-sync=false", pins).ok());
  absl::StatusOr<SearchResult> pinned =
      searchMesh(model, pricer, {.global_batch = 128, .pins = pins});
  ASSERT_TRUE(pinned.ok()) << pinned.status();
  for (const Candidate& c : pinned->ranked) {
    EXPECT_FALSE(c.strategy.keep_gathered || c.strategy.defer_grad_sync) << c.label();
  }
  EXPECT_GT(pinned->ranked.front().estimate.step_time_s, free->ranked.front().estimate.step_time_s);
  absl::StatusOr<SearchResult> single =
      searchMesh(model, pricer, {.global_batch = 16, .exhaustive = true});
  ASSERT_TRUE(single.ok()) << single.status();
  for (const Candidate& c : single->ranked) {
    if (c.strategy.accumulation == 1) {
      EXPECT_FALSE(c.strategy.keep_gathered || c.strategy.defer_grad_sync) << c.label();
    }
  }
  // Pinned on, a lever leaves out the candidates it cannot apply to.
  Pins keep;
  ASSERT_TRUE(parsePin("keep-gathered=true", keep).ok());
  absl::StatusOr<SearchResult> kept =
      searchMesh(model, pricer, {.global_batch = 32, .pins = keep, .exhaustive = true});
  ASSERT_TRUE(kept.ok()) << kept.status();
  ASSERT_FALSE(kept->ranked.empty());
  for (const Candidate& c : kept->ranked) {
    EXPECT_TRUE(c.strategy.keep_gathered && c.strategy.accumulation > 1 && c.strategy.fsdp > 1)
        << c.label();
  }
  ASSERT_TRUE(parsePin("reshard=true", keep).ok());
  EXPECT_THAT(
      searchMesh(model, pricer, {.global_batch = 32, .pins = keep}).status(),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("cannot go with --pin reshard=true")));
  EXPECT_THAT(parsePin("keep-gathered=yes", pins),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("is not true or false")));
}

// Sequence parallelism is searched with tp: where the twin without it
// fits, it is priced only while its bound can enter the top rows; where
// the twin does not fit, it may fit on its own. Pinned, it applies to every
// candidate with tp (meshes without tp drop out), or to none.
TEST(SearchTest, SequenceParallelismIsSearched) {
  const CostModel model = *CostModel::create(*mesh::Topology::dgxH100(1));
  ClosedFormPricer pricer(8, 4096);
  // A cap that tp 2 without sequence parallelism misses for 4 sequences a
  // micro-step and meets with it.
  const Strategy tight{.fsdp = 4, .tp = 2, .micro_batch = 4};
  Strategy tightSp = tight;
  tightSp.sequence_parallel = true;
  const int64_t cap = (pricer.memoryLowerBound(tight) + pricer.memoryLowerBound(tightSp)) / 2;
  for (int64_t memoryCap : {int64_t{0}, cap}) {
    SCOPED_TRACE(memoryCap);
    const SearchOptions options{.global_batch = 16, .memory_cap_bytes = memoryCap, .top = 5};
    absl::StatusOr<SearchResult> free = searchMesh(model, pricer, options);
    ASSERT_TRUE(free.ok()) << free.status();
    SearchOptions all = options;
    all.exhaustive = true;
    absl::StatusOr<SearchResult> full = searchMesh(model, pricer, all);
    ASSERT_TRUE(full.ok()) << full.status();
    expectSameTop(*free, *full, 5);
    int64_t withSp = 0;
    for (const Candidate& c : full->ranked) {
      if (c.strategy.sequence_parallel) {
        EXPECT_GT(c.strategy.tp, 1) << c.label();
        ++withSp;
      }
    }
    EXPECT_GT(withSp, 0);
    ASSERT_TRUE(free->found());
    // The cheaper ops and the memory it frees win over its latency here.
    const Candidate& winner = free->ranked.front();
    EXPECT_GT(winner.strategy.tp, 1) << winner.label();
    EXPECT_TRUE(winner.strategy.sequence_parallel) << winner.label();
    EXPECT_THAT(explainWinner(*free), HasSubstr("It shards the sequence on tp"));
    // Under the tight cap the winner's own mesh does not fit without it.
    EXPECT_THAT(explainWinner(*free),
                HasSubstr(memoryCap == 0 ? "without it (" : "without it no candidate"));
  }
  for (const char* pin : {"sequence-parallel=true", "sequence-parallel=false"}) {
    SCOPED_TRACE(pin);
    const bool on = std::string(pin) == "sequence-parallel=true";
    Pins pins;
    ASSERT_TRUE(parsePin(pin, pins).ok());
    absl::StatusOr<SearchResult> pinned =
        searchMesh(model, pricer, {.global_batch = 8, .pins = pins, .exhaustive = true});
    ASSERT_TRUE(pinned.ok()) << pinned.status();
    ASSERT_FALSE(pinned->ranked.empty());
    for (const Candidate& c : pinned->ranked) {
      EXPECT_EQ(c.strategy.sequence_parallel, on) << c.label();
      if (on) {
        EXPECT_GT(c.strategy.tp, 1) << c.label();
      }
      EXPECT_EQ(c.label().find(", sp") != std::string::npos, on) << c.label();
    }
  }
}

// Pipeline stages are searched with the other axes: stage counts up to the
// layers, 1F1B, and interleaving only where the micro-batches fill groups
// of the stages; GPipe only when pinned. The pruned search ranks as the
// exhaustive one, and a pipeline wins where it saves enough memory or
// communication.
TEST(SearchTest, PipelineStagesAreSearched) {
  const CostModel model = *CostModel::create(*mesh::Topology::dgxH100(4));
  ClosedFormPricer pricer(8, 2048, /*pipeline_layers=*/16);
  Pins none;
  ASSERT_TRUE(parsePin("recompute=none", none).ok());
  SearchOptions options{.global_batch = 64, .pins = none, .top = 10};
  absl::StatusOr<SearchResult> pruned = searchMesh(model, pricer, options);
  ASSERT_TRUE(pruned.ok()) << pruned.status();
  options.exhaustive = true;
  absl::StatusOr<SearchResult> full = searchMesh(model, pricer, options);
  ASSERT_TRUE(full.ok()) << full.status();
  expectSameTop(*pruned, *full, 10);
  int64_t pipelines = 0, interleaved = 0;
  for (const Candidate& c : full->ranked) {
    const Strategy& s = c.strategy;
    if (s.pp == 1) continue;
    ++pipelines;
    EXPECT_LE(s.pp * s.virtual_stages, 16) << c.label();
    EXPECT_NE(s.schedule, stages::PipelineSchedule::kGpipe) << c.label();
    EXPECT_EQ(s.devices(), 32) << c.label();
    if (s.virtual_stages > 1) {
      ++interleaved;
      EXPECT_EQ(s.schedule, stages::PipelineSchedule::kInterleaved1F1B);
      EXPECT_EQ(s.accumulation % s.pp, 0) << c.label();
    }
    EXPECT_THAT(c.label(), HasSubstr(absl::StrCat("pp ", s.pp)));
    EXPECT_EQ(s.meshSpec().rfind(absl::StrCat("pp=", s.pp), 0), 0u) << s.meshSpec();
  }
  EXPECT_GT(pipelines, 0);
  EXPECT_GT(interleaved, 0);
  const nlohmann::json json = candidatesJson(*full, {.model = "closed-form"}, model);
  EXPECT_TRUE(json["candidates"][0].contains("pp"));
  EXPECT_TRUE(json["candidates"][0].contains("bubble_s"));

  // Pinned: only those stages and that schedule.
  Pins pins = none;
  ASSERT_TRUE(parsePin("pp=4", pins).ok());
  ASSERT_TRUE(parsePin("schedule=gpipe", pins).ok());
  absl::StatusOr<SearchResult> gpipe =
      searchMesh(model, pricer, {.global_batch = 64, .pins = pins, .exhaustive = true});
  ASSERT_TRUE(gpipe.ok()) << gpipe.status();
  ASSERT_FALSE(gpipe->ranked.empty());
  for (const Candidate& c : gpipe->ranked) {
    EXPECT_EQ(c.strategy.pp, 4);
    EXPECT_EQ(c.strategy.schedule, stages::PipelineSchedule::kGpipe);
    EXPECT_THAT(c.label(), HasSubstr("pp 4 gpipe"));
  }
  // A model that cannot be cut has no pipeline candidates, and a pin asks
  // in vain.
  ClosedFormPricer uncut(8, 2048);
  ASSERT_TRUE(parsePin("schedule=1f1b", pins).ok());
  EXPECT_THAT(searchMesh(model, uncut, {.global_batch = 64, .pins = pins}).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("the model cannot be cut into pipeline stages")));
}

// Without a data axis to shard the state over, the stages share it out:
// 16 GB of parameter state is 8 GB per rank under tp 2 (the largest tp
// allowed here), far over a 2.5 GiB cap; four stages of tp 2 fit, and the
// explanation names their bubble.
TEST(SearchTest, PipelineStagesShareOutTheState) {
  const CostModel model = *CostModel::create(*mesh::Topology::dgxH100(1));
  ClosedFormPricer pricer(8, 1024, /*pipeline_layers=*/16);
  Pins pins;
  ASSERT_TRUE(parsePin("fsdp=1", pins).ok());
  ASSERT_TRUE(parsePin("dp=1", pins).ok());
  ASSERT_TRUE(parsePin("recompute=none", pins).ok());
  const SearchOptions options{.global_batch = 16,
                              .pins = pins,
                              .max_tp = 2,
                              .memory_cap_bytes = 5LL << 29,
                              .exhaustive = true};
  absl::StatusOr<SearchResult> result = searchMesh(model, pricer, options);
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_TRUE(result->found());
  for (const Candidate& c : result->ranked) {
    if (c.strategy.pp == 1) {
      EXPECT_FALSE(c.fits) << c.label();
    }
  }
  const Candidate& winner = result->ranked.front();
  EXPECT_GE(winner.strategy.pp, 4) << winner.label();
  EXPECT_GT(winner.estimate.bubble_s, 0);
  EXPECT_THAT(explainWinner(*result), HasSubstr("pipeline bubble"));
}

TEST(SearchTest, PinErrorsNameTheKey) {
  Pins pins;
  EXPECT_THAT(parsePin("tp", pins), StatusIs(absl::StatusCode::kInvalidArgument,
                                             HasSubstr("--pin 'tp' is not key=value")));
  EXPECT_THAT(parsePin("cp=2", pins),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("unknown key 'cp'")));
  EXPECT_THAT(parsePin("schedule=zb", pins),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("--pin schedule='zb' is not gpipe, 1f1b or interleaved-1f1b")));
  ASSERT_TRUE(parsePin("schedule=gpipe", pins).ok());
  EXPECT_EQ(pins.schedule, stages::PipelineSchedule::kGpipe);
  ASSERT_TRUE(parsePin("virtual-stages=2", pins).ok());
  EXPECT_EQ(pins.virtual_stages, 2);
  EXPECT_THAT(parsePin("tp=0", pins), StatusIs(absl::StatusCode::kInvalidArgument,
                                               HasSubstr("--pin tp='0' is not an integer >= 1")));
  EXPECT_THAT(parsePin("reshard=yes", pins),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not true or false")));
  EXPECT_THAT(parsePin("recompute=some", pins),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("--pin recompute='some' is not none, selective or full")));
  ASSERT_TRUE(parsePin("recompute=full", pins).ok());
  EXPECT_EQ(pins.recompute, Recompute::kFull);
  EXPECT_THAT(parsePin("sequence-parallel=yes", pins),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("--pin sequence-parallel='yes' is not true or false")));
  EXPECT_THAT(parsePin("offload=params", pins),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("--pin offload='params' is not none or optimizer")));
  ASSERT_TRUE(parsePin("offload=optimizer", pins).ok());
  EXPECT_EQ(pins.offload_optimizer, true);
}

TEST(SearchTest, TheMemoryCapDecidesWhatFits) {
  const Workload w{.model = "closed-form", .seq = 4096, .dtype = Dtype::kBF16};
  const CostModel model = *CostModel::create(*mesh::Topology::dgxH100(1));
  ClosedFormPricer pricer(8, w.seq);
  absl::StatusOr<SearchResult> tight =
      searchMesh(model, pricer, {.global_batch = 8, .memory_cap_bytes = 1LL << 20});
  ASSERT_TRUE(tight.ok()) << tight.status();
  EXPECT_FALSE(tight->found());
  EXPECT_THAT(explainWinner(*tight), HasSubstr("No candidate fits in 0.0 GiB"));
  absl::StatusOr<SearchResult> roomy = searchMesh(model, pricer, {.global_batch = 8});
  ASSERT_TRUE(roomy->found());
  EXPECT_LE(roomy->ranked.front().estimate.peak_bytes, 80LL << 30);
}

TEST(SearchTest, ReportsTheWinnerTheRankingAndWhy) {
  const Workload w{.model = "closed-form", .seq = 2048, .dtype = Dtype::kBF16};
  const CostModel model = *CostModel::create(*mesh::Topology::dgxH100(2));
  ClosedFormPricer pricer(8, w.seq);
  absl::StatusOr<SearchResult> result = searchMesh(model, pricer, {.global_batch = 16});
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_TRUE(result->found());
  const std::string why = explainWinner(*result);
  EXPECT_THAT(why, HasSubstr("Why " + result->ranked.front().strategy.parallelism() + " won"));
  EXPECT_THAT(why, HasSubstr("decided it"));
  EXPECT_THAT(why, HasSubstr("Peak memory"));
  const std::string table = formatRanking(*result, 3);
  EXPECT_THAT(table, HasSubstr("| 1 | " + result->ranked.front().strategy.parallelism()));
  const nlohmann::json json = candidatesJson(*result, w, model);
  EXPECT_EQ(json["format"], "loom.mesh_search");
  EXPECT_EQ(json["devices"], 16);
  EXPECT_EQ(json["candidates"].size(), result->ranked.size());
  EXPECT_EQ(json["candidates"][0]["rank"], 1);
  EXPECT_EQ(json["candidates"][0]["mesh"], result->ranked.front().strategy.meshSpec());
}

}  // namespace
}  // namespace loom::planner::cost
